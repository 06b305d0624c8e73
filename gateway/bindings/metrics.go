package bindings

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// Metrics are the exchanges of every binding, one set per gateway. It is a
// prometheus.Collector; register it once where the metrics are served.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// Tracer, when set ([tracing]), is the provider a binding's exchange that no
	// request made (no span in its context: the directory's refresh, the audit
	// delivery, the PMIR subscription) starts a trace of its own from. Set before the
	// bindings' clients are built.
	Tracer trace.TracerProvider
}

// NewMetrics makes the set.
func NewMetrics() *Metrics {
	return &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ferrofed_binding_requests_total",
			Help: "Exchanges of each binding with its service, by outcome (success, redirect, client_error, server_error, no_answer).",
		}, []string{"binding", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ferrofed_binding_request_duration_seconds",
			Help:    "How long each exchange of a binding took until its answer's headers (or until it failed).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"binding"}),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.duration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.duration.Collect(ch)
}
