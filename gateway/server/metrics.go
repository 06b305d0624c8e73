package server

import (
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ferrofed/ferrofed/gateway/health"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// Surfaces as they appear in the requests_total metric.
const (
	surfaceHealth    = "health"
	surfaceOperator  = "operator"
	surfaceDataPlane = "data_plane"
	surfaceMetrics   = "metrics"
	surfaceNone      = "none" // no route: the 404s
)

// Outcomes of a drain in the drain_total metric, the log and the termination message.
const (
	OutcomeCompleted = lifecycle.DrainCompleted
	OutcomeCut       = lifecycle.DrainCut
)

// Metrics are the gateway's Prometheus metrics, in a registry of their own (never the
// global one) so that two servers in one test process do not collide.
type Metrics struct {
	Registry *prometheus.Registry

	ready       prometheus.Gauge
	readyChange prometheus.Counter
	lastReady   atomic.Bool // the value ferrofed_readiness was last set to
	phase       *prometheus.GaugeVec
	inFlight    prometheus.Gauge
	requests    *prometheus.CounterVec
	drains      *prometheus.CounterVec
	cutConns    prometheus.Counter
	abandoned   *prometheus.CounterVec
	evaluations *prometheus.CounterVec
	checkFailed *prometheus.CounterVec
	shed        prometheus.Counter
}

func newMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ferrofed_readiness", Help: "1 when the last readiness answer was ready, else 0.",
		}),
		readyChange: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ferrofed_readiness_changes_total", Help: "Changes of ferrofed_readiness either way, each counted even when no scrape saw it.",
		}),
		phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ferrofed_phase", Help: "1 for the process's current phase (booting, serving, draining), 0 for the others.",
		}, []string{"phase"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ferrofed_http_requests_in_flight", Help: "Requests being served now.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ferrofed_http_requests_total", Help: "Requests served, by surface (health, operator, data_plane, metrics, none) and status code.",
		}, []string{"surface", "code"}),
		drains: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ferrofed_drain_total", Help: "Drains by outcome: completed (every in-flight request finished) or cut (connections were dropped at the shutdown timeout).",
		}, []string{"outcome"}),
		cutConns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ferrofed_drain_cut_connections_total", Help: "Connections still open at the shutdown timeout and closed by force.",
		}),
		abandoned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ferrofed_drain_bindings_abandoned_total", Help: "Surfaces whose Stop outlasted server.bindings_drain_timeout_ms and were abandoned.",
		}, []string{"surface"}),
		evaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ferrofed_readiness_check_evaluations_total", Help: "Readiness check evaluations (not cached answers), by check.",
		}, []string{"check"}),
		checkFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ferrofed_readiness_check_failures_total", Help: "Readiness check evaluations that failed, by check and reason.",
		}, []string{"check", "reason"}),
		shed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ferrofed_data_plane_shed_total", Help: "Data-plane requests answered 503 because limits.max_in_flight_requests were being served.",
		}),
	}
	m.Registry.MustRegister(m.ready, m.readyChange, m.phase, m.inFlight, m.requests, m.drains, m.cutConns, m.abandoned,
		m.evaluations, m.checkFailed, m.shed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.setPhase(lifecycle.PhaseBooting)
	for _, o := range []string{OutcomeCompleted, OutcomeCut} {
		m.drains.WithLabelValues(o) // present at 0 before the first drain
	}
	return m
}

func (m *Metrics) setPhase(p lifecycle.Phase) {
	for _, q := range []lifecycle.Phase{lifecycle.PhaseBooting, lifecycle.PhaseServing, lifecycle.PhaseDraining} {
		v := 0.0
		if q == p {
			v = 1
		}
		m.phase.WithLabelValues(string(q)).Set(v)
	}
	if p == lifecycle.PhaseDraining {
		m.setReady(false)
	}
}

// setReady sets ferrofed_readiness and counts a change of it in
// ferrofed_readiness_changes_total: a readiness that flaps faster than the scrapes is
// still seen. The gauge starts at 0, so the first ready answer is a change.
func (m *Metrics) setReady(ready bool) {
	if m.lastReady.Swap(ready) != ready {
		m.readyChange.Inc()
	}
	v := 0.0
	if ready {
		v = 1
	}
	m.ready.Set(v)
}

func (m *Metrics) observeReport(r *health.Report) {
	for _, res := range r.Results {
		m.evaluations.WithLabelValues(res.Name).Inc()
		if !res.OK() {
			m.checkFailed.WithLabelValues(res.Name, res.Reason).Inc()
		}
	}
}

func (m *Metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}
