// Package tracing is the gateway's OpenTelemetry traces ([tracing], docs/tracing.md):
// the tracer provider, its bounded queue and OTLP/HTTP exporter, the one allow-list of
// what a span may carry (allow.go), the server spans of the data-plane and operator
// routes (Middleware), the drain as a span (Drained), and the API the member calls and
// the bindings make their client spans with (Client, Inject). W3C tracecontext is the
// only propagation: baggage is neither read nor sent.
//
// Without [tracing] the part is not built: no middleware is installed, and Client
// returns the caller's context as it is.
package tracing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// scope is the instrumentation scope of every span the gateway makes.
const scope = "github.com/ferrofed/ferrofed/gateway"

// MaxReloadFlush bounds the flush of the queue to the old endpoint when a reload
// changes [tracing]: it runs after the reload applied, never holding it.
const MaxReloadFlush = 2 * time.Second

// propagator is the one propagation: W3C trace context (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// Options tune New.
type Options struct {
	Logger logr.Logger
	// Exporter makes the exporter (default OTLP); tests give an in-memory one.
	Exporter Exporter
}

// Tracing is the [tracing] part: its provider lives as long as the process; a reload
// swaps where its queue exports and the sampling ratio.
type Tracing struct {
	log      logr.Logger
	exporter Exporter
	queue    *queue
	sampler  *sampler
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	routes   *Routes

	// swapMu orders the reloads' swaps; gen is the last reload applied, so that a
	// swap overtaken by a later reload's is dropped rather than applied after it.
	swapMu sync.Mutex
	gen    atomic.Uint64
}

// New builds the part of cfg's [tracing] table, or returns nil when it is absent: its
// files read, nothing sent and no goroutine started (Start does).
func New(cfg *config.Config, opts Options) (*Tracing, error) {
	if cfg.Tracing == nil {
		return nil, nil
	}
	if opts.Exporter == nil {
		opts.Exporter = OTLP
	}
	s, err := newSink(cfg.Tracing, opts.Exporter)
	if err != nil {
		return nil, err
	}
	routes := &Routes{}
	t := &Tracing{log: opts.Logger, exporter: opts.Exporter, queue: newQueue(opts.Logger, s, routes), routes: routes,
		sampler: newSampler(cfg.Tracing.Ratio())}
	t.provider = sdktrace.NewTracerProvider(sdktrace.WithSampler(t.sampler), sdktrace.WithSpanProcessor(t.queue),
		sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{AttributeValueLengthLimit: 1024, AttributeCountLimit: 32,
			EventCountLimit: 32, LinkCountLimit: 0, AttributePerEventCountLimit: 8, AttributePerLinkCountLimit: 0}))
	t.tracer = t.provider.Tracer(scope)
	return t, nil
}

// Start starts the export worker (serve, once the listener is bound).
func (t *Tracing) Start() error {
	t.queue.start()
	return nil
}

// Collectors are the part's metrics: ferrofed_tracing_spans_dropped_total{reason}.
func (t *Tracing) Collectors() []prometheus.Collector {
	return []prometheus.Collector{t.queue.dropped}
}

// Provider is the tracer provider (tests, and the parts that make spans of their own).
func (t *Tracing) Provider() trace.TracerProvider { return t.provider }

// PrepareReload builds the exporter of the reloaded [tracing] table (its ca_file read
// again; an error refuses the reload, the running exporter kept). The apply swaps the
// sampling ratio at once, and the sink once what was queued before went to the old
// endpoint (within MaxReloadFlush, in the background). A table removed needs a
// restart (server.RestartKeys): the running one is kept.
func (t *Tracing) PrepareReload(cfg *config.Config) (func(), error) {
	if cfg.Tracing == nil {
		return func() {}, nil
	}
	// Built again even when the table did not change: a rotated ca_file is read now,
	// as every credential file is at a reload.
	next, err := newSink(cfg.Tracing, t.exporter)
	if err != nil {
		return nil, err
	}
	tc := cfg.Tracing
	return func() {
		t.sampler.set(tc.Ratio())
		gen := t.gen.Add(1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), MaxReloadFlush)
			defer cancel()
			t.swapMu.Lock()
			defer t.swapMu.Unlock()
			if t.gen.Load() != gen {
				_ = next.exporter.Shutdown(ctx) // a later reload's sink is the one to use
				return
			}
			t.queue.swap(ctx, next)
		}()
		t.log.Info("Tracing: exporting with the reloaded [tracing]", "endpoint", tc.Endpoint, "samplingRatio", tc.Ratio())
	}, nil
}

// sampler is parent-based on tracing.sampling_ratio (a reload swaps it), except the
// drain's span, always kept: it is the one record of how the process stopped.
type sampler struct {
	cur atomic.Pointer[sdktrace.Sampler]
}

func newSampler(ratio float64) *sampler {
	s := &sampler{}
	s.set(ratio)
	return s
}

func (s *sampler) set(ratio float64) {
	inner := sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
	s.cur.Store(&inner)
}

func (s *sampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.Name == SpanDrain {
		return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample,
			Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
	}
	return (*s.cur.Load()).ShouldSample(p)
}

func (s *sampler) Description() string { return "ferrofed: parent-based ratio, the drain always" }
