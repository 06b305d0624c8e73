package tracing

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The queue's bounds: what spans may hold in memory whatever the collector does.
const (
	// QueueSize is how many ended spans wait to be exported; past it a span is dropped
	// (queue_full).
	QueueSize = 2048
	// MaxBatch is the most spans one export carries.
	MaxBatch = 512
	// BatchInterval is the longest a span waits for its batch to fill.
	BatchInterval = time.Second
)

// Reasons a span is dropped, the label of ferrofed_tracing_spans_dropped_total.
const (
	DroppedQueueFull    = "queue_full"
	DroppedExportFailed = "export_failed"
	DroppedShutdown     = "shutdown"
)

// sink is where the queue exports: an exporter, the resource its spans carry and the
// bound of one export. A reload swaps it whole.
type sink struct {
	exporter sdktrace.SpanExporter
	resource *resource.Resource
	timeout  time.Duration
}

// queue is the gateway's span processor: a bounded queue and one worker that exports
// it in batches through the allow-list (Filter). Unlike the SDK's BatchSpanProcessor,
// which drops silently, every span it cannot export is counted, by reason.
type queue struct {
	log     logr.Logger
	ch      chan sdktrace.ReadOnlySpan
	ctl     chan control
	routes  *Routes
	dropped *prometheus.CounterVec
	started atomic.Bool
	closed  atomic.Bool
	// sink is the sink before Start and while no worker runs; the worker owns its own.
	sink atomic.Pointer[sink]
	// failing is whether the last export failed, so that a failure is logged when it
	// starts and when it ends, not on every batch.
	failing bool
}

// control is a request to the worker: export everything queued now (within ctx),
// then swap to next when set, then stop when stop is set; reply gets how many spans
// could not be exported in time.
type control struct {
	ctx   context.Context
	next  *sink
	stop  bool
	reply chan int
}

func newQueue(log logr.Logger, s *sink, routes *Routes) *queue {
	q := &queue{log: log, ch: make(chan sdktrace.ReadOnlySpan, QueueSize), ctl: make(chan control), routes: routes,
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ferrofed_tracing_spans_dropped_total",
			Help: "Spans ended but never exported: the queue was full, an export failed, or the process stopped before they were pushed.",
		}, []string{"reason"})}
	for _, r := range []string{DroppedQueueFull, DroppedExportFailed, DroppedShutdown} {
		q.dropped.WithLabelValues(r)
	}
	q.sink.Store(s)
	return q
}

// OnStart does nothing: a span is queued when it ends.
func (q *queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues a sampled span, or counts it dropped when the queue is full or closed.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if q.closed.Load() {
		q.dropped.WithLabelValues(DroppedShutdown).Inc()
		return
	}
	select {
	case q.ch <- s:
	default:
		q.dropped.WithLabelValues(DroppedQueueFull).Inc()
	}
}

// ForceFlush exports everything queued now, within ctx.
func (q *queue) ForceFlush(ctx context.Context) error {
	if left := q.request(control{ctx: ctx}); left > 0 {
		return errors.New("tracing: spans left unexported")
	}
	return nil
}

// Shutdown is the provider's: the gateway shuts the queue down with close.
func (q *queue) Shutdown(ctx context.Context) error { _, err := q.close(ctx); return err }

// start starts the worker, once.
func (q *queue) start() {
	if q.started.CompareAndSwap(false, true) {
		go q.run(q.sink.Load())
	}
}

// swap makes next the sink once what is queued now went to the old one (within ctx),
// whose exporter is then shut down.
func (q *queue) swap(ctx context.Context, next *sink) {
	if !q.started.Load() {
		old := q.sink.Swap(next)
		_ = old.exporter.Shutdown(ctx)
		return
	}
	q.request(control{ctx: ctx, next: next})
}

// close exports what is queued (within ctx), stops the worker and shuts the exporter
// down; it returns how many spans could not be pushed, counted dropped (shutdown).
// Spans ending later are counted dropped too.
func (q *queue) close(ctx context.Context) (int, error) {
	if !q.closed.CompareAndSwap(false, true) {
		return 0, nil
	}
	var left int
	if q.started.Load() {
		left = q.request(control{ctx: ctx, stop: true})
	} else {
		left = len(q.ch)
		_ = q.sink.Load().exporter.Shutdown(ctx)
	}
	q.dropped.WithLabelValues(DroppedShutdown).Add(float64(left))
	return left, nil
}

// request hands c to the worker and waits for its reply; without a worker, nothing
// is exported and what is queued is left.
func (q *queue) request(c control) int {
	if !q.started.Load() {
		return len(q.ch)
	}
	c.reply = make(chan int, 1)
	select {
	case q.ctl <- c:
	case <-c.ctx.Done():
		return len(q.ch)
	}
	return <-c.reply
}

// run is the worker: it batches the queue and exports each batch when it is full or
// BatchInterval passed, and answers the control requests.
func (q *queue) run(cur *sink) {
	batch := make([]sdktrace.ReadOnlySpan, 0, MaxBatch)
	tick := time.NewTicker(BatchInterval)
	defer tick.Stop()
	for {
		select {
		case s := <-q.ch:
			if batch = append(batch, s); len(batch) == MaxBatch {
				batch = q.export(context.Background(), cur, batch)
			}
		case <-tick.C:
			batch = q.export(context.Background(), cur, batch)
		case c := <-q.ctl:
			left := q.flush(c.ctx, cur, &batch)
			if c.next != nil {
				old := cur
				cur = c.next
				q.sink.Store(cur)
				_ = old.exporter.Shutdown(c.ctx)
			}
			if c.stop {
				_ = cur.exporter.Shutdown(c.ctx)
				c.reply <- left
				return
			}
			c.reply <- left
		}
	}
}

// flush exports the batch and every span queued when it began, within ctx, and
// returns how many it could not (left in batch, or in the queue, for the next).
func (q *queue) flush(ctx context.Context, cur *sink, batch *[]sdktrace.ReadOnlySpan) int {
	for n := len(q.ch); ; {
		for ; n > 0 && len(*batch) < MaxBatch; n-- {
			*batch = append(*batch, <-q.ch)
		}
		if len(*batch) == 0 {
			return 0
		}
		if ctx.Err() != nil {
			return len(*batch) + n
		}
		*batch = q.export(ctx, cur, *batch)
	}
}

// export sends one batch through the allow-list within the sink's timeout (and ctx);
// a batch that failed is counted dropped. It returns the emptied batch.
func (q *queue) export(ctx context.Context, cur *sink, batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	if len(batch) == 0 {
		return batch
	}
	ctx, cancel := context.WithTimeout(ctx, cur.timeout)
	defer cancel()
	err := cur.exporter.ExportSpans(ctx, Filter(batch, cur.resource, q.routes))
	switch {
	case err != nil:
		q.dropped.WithLabelValues(DroppedExportFailed).Add(float64(len(batch)))
		if !q.failing {
			q.log.Error(err, "Could not export spans: dropped them, counted in ferrofed_tracing_spans_dropped_total", "spans", len(batch))
		}
		q.failing = true
	case q.failing:
		q.log.Info("Exporting spans again", "spans", len(batch))
		q.failing = false
	}
	clear(batch)
	return batch[:0]
}
