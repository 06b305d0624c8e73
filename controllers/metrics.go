package controllers

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The operator's own metrics, on controller-runtime's registry (its /metrics).
var (
	drainsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferrofed_operator_drains_total",
		Help: "Drains of gateway pods the operator saw end, by outcome (completed, cut, killed, unknown).",
	}, []string{"outcome"})
	drainSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ferrofed_operator_drain_seconds",
		Help:    "How long the drains of gateway pods took, from SIGTERM, in seconds.",
		Buckets: []float64{1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 300, 600, 1800, 3600},
	})
	// webhookSeconds times the validating webhook, from a review's arrival at its
	// handler to the answer written, in buckets fine enough for a millisecond budget
	// (controller-runtime's controller_runtime_webhook_latency_seconds has one bucket
	// per power of ten: 1 ms, then 10 ms).
	webhookSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ferrofed_operator_webhook_duration_seconds",
		Help:    "How long the operator took to answer each admission review of its validating webhook, in seconds.",
		Buckets: []float64{0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
	})
	// auditUndelivered is status.audit.undeliveredRecords of each Gateway with spool
	// claims: records that wait in a claim, as the last drain or hand-over reported.
	auditUndelivered = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ferrofed_operator_audit_undelivered",
		Help: "Audit records the spool claims of a Gateway (namespace/name) hold undelivered, as the last drain or hand-over of each reported them.",
	}, []string{"gateway"})
	// applyFailures counts the applies of a Gateway's objects the apiserver refused
	// (applyFailed): each is also a FailedApply Event on the Gateway.
	applyFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferrofed_operator_apply_failures_total",
		Help: "Applies of the objects a Gateway owns that the API server refused, by kind of object.",
	}, []string{"kind"})
	registered sync.Once
)

// drainOutcomes are the outcomes of ferrofed_operator_drains_total, each exported at 0
// from the start: an alert's increase() then sees the first cut or kill too
// (docs/operator.md, "Monitoring").
var drainOutcomes = []string{lifecycle.DrainCompleted, lifecycle.DrainCut, "killed", "unknown"}

// registerMetrics registers them once, whatever number of managers a process sets up.
func registerMetrics() {
	registered.Do(func() {
		metrics.Registry.MustRegister(drainsTotal, drainSeconds, webhookSeconds, auditUndelivered, applyFailures)
		for _, o := range drainOutcomes {
			drainsTotal.WithLabelValues(o)
		}
	})
}

// setAuditMetric sets auditUndelivered of gw from its status.audit; a Gateway without
// claims has no series.
func setAuditMetric(gw client.Object, st *ferrofedv1alpha1.AuditStatus) {
	label := gw.GetNamespace() + "/" + gw.GetName()
	if st == nil {
		auditUndelivered.DeleteLabelValues(label)
		return
	}
	auditUndelivered.WithLabelValues(label).Set(float64(st.UndeliveredRecords))
}

// pollCollector exposes the polls at each scrape, from the poller's memory:
// ferrofed_operator_dependency_state{namespace,gateway,key,state} is how many replicas
// report the key in that state (states no replica reports have no series), and
// ferrofed_operator_dependency_polls_total counts the polls.
type pollCollector struct{ p *DependencyPoller }

var (
	dependencyStateDesc = prometheus.NewDesc("ferrofed_operator_dependency_state",
		"Replicas of a Gateway whose last dependency report has the key in the state.", []string{"namespace", "gateway", "key", "state"}, nil)
	dependencyPollsDesc = prometheus.NewDesc("ferrofed_operator_dependency_polls_total",
		"Polls of the gateway pods' readiness and dependency report.", nil, nil)
)

func (c pollCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- dependencyStateDesc
	ch <- dependencyPollsDesc
}

func (c pollCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(dependencyPollsDesc, prometheus.CounterValue, float64(c.p.Polls()))
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	for key, g := range c.p.gateways {
		counts := map[[2]string]int{}
		for _, r := range g.pods {
			for _, ks := range r.states {
				counts[[2]string{ks.Key(), ks.State()}]++
			}
		}
		for ks, n := range counts {
			ch <- prometheus.MustNewConstMetric(dependencyStateDesc, prometheus.GaugeValue, float64(n), key.Namespace, key.Name, ks[0], ks[1])
		}
	}
}

var pollRegistered sync.Once

// registerPollMetrics registers the poll collector of the first poller (one per process).
func registerPollMetrics(p *DependencyPoller) {
	pollRegistered.Do(func() { metrics.Registry.MustRegister(pollCollector{p}) })
}
