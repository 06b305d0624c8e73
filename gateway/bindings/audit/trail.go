package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit/deliver"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/tracing"
)

// The report keys of the destinations, also their binding names.
const (
	KeyRepository = "audit_repository"
	KeyFeed       = "audit_feed"
)

// ErrNotStored wraps every reason Record could not store an event.
var ErrNotStored = errors.New("audit record not stored")

// Options tune a Trail; the zero value is production's.
type Options struct {
	// Logger receives the trail's logs, and the events with destination = "log".
	Logger logr.Logger
	// Metrics count the delivery exchanges (the binding metrics every binding shares,
	// registered by the composition root); default a set of the trail's own.
	Metrics *bindings.Metrics
	// Tracker is the dependency report the destinations' states go into, read from
	// their spools at each report; required.
	Tracker *dependencies.Tracker
	// Authorize is the operator-token check of the quarantine routes; required.
	Authorize gin.HandlerFunc
	// Observer names this gateway in its events; default the host name.
	Observer string
	// Now is the clock of the events; default time.Now.
	Now func() time.Time
	// FS is the spools' file system; default spool.OS.
	FS spool.FS
	// WaitAfter, BackoffBase and BackoffMax tune the spools and the delivery loops;
	// zero keeps their defaults (5 s; 1 s doubling to 60 s). Tests shorten them.
	WaitAfter, BackoffBase, BackoffMax time.Duration
}

// Trail is the audit trail of one gateway: Record stores an event, Start opens the
// spools and starts their deliveries, and its stoppers stop them in drain
// step 4. A gateway without [audit] has none.
type Trail struct {
	log     logr.Logger
	cfg     config.Audit
	opts    Options
	dests   []*destination
	metrics *bindings.Metrics
	// undelivered is ferrofed_audit_undelivered_at_exit{destination}.
	undelivered *prometheus.GaugeVec
	// failed counts the events that could not be stored.
	failed    prometheus.Counter
	authorize gin.HandlerFunc
}

// destination is one spool and its delivery loop.
type destination struct {
	key    string // audit_repository, audit_feed
	short  string // repository, feed: the spool's directory and the quarantine routes'
	dir    string
	url    string
	client *bindings.Client

	sp     atomic.Pointer[spool.Spool]
	cancel context.CancelFunc
	done   chan struct{}
	// leftAtExit is the count of undelivered records at Stop, -1 before.
	leftAtExit atomic.Int64
	// left is what the spool held when Stop closed it (undelivered and quarantined),
	// nil before; quarantinedAtOpen counts the quarantine right after Open.
	left              atomic.Pointer[closedSpool]
	quarantinedAtOpen int
	stopOnce          sync.Once
	stopErr           error
}

// New builds the trail [audit] describes, reading its credential files; nothing is
// opened or sent (`config check` calls it too). It returns nil without [audit].
func New(cfg *config.Config, o Options) (*Trail, error) {
	if cfg == nil || cfg.Audit == nil {
		return nil, nil
	}
	if o.Tracker == nil || o.Authorize == nil {
		return nil, errors.New("audit: no dependency tracker or operator-token check")
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	if o.Metrics == nil {
		o.Metrics = bindings.NewMetrics()
	}
	if o.Observer == "" {
		o.Observer, _ = os.Hostname()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	t := &Trail{
		log: o.Logger, cfg: *cfg.Audit, opts: o, metrics: o.Metrics, authorize: o.Authorize,
		undelivered: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ferrofed_audit_undelivered_at_exit",
			Help: "Audit records still undelivered in a destination's spool when drain step 4 closed it (they are delivered after the next start on the same spool).",
		}, []string{"destination"}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ferrofed_audit_records_failed_total",
			Help: "Audit events that could not be stored (spool full, storage failed, closed): each made its exchange failing.",
		}),
	}
	if t.cfg.Destination != config.AuditToRepository {
		return t, nil
	}
	add := func(key, short, dir, url string, cr config.Credentials) error {
		table := "audit"
		if short == "feed" {
			table = "audit.feed"
		}
		c, err := bindings.NewClient(bindings.ClientOptions{
			Name: key, Table: table, Timeout: t.cfg.Timeout(), MaxResponseBytes: deliver.DefaultMaxResponseBytes,
			Credentials: cr, Metrics: o.Metrics,
		})
		if err != nil {
			return err
		}
		d := &destination{key: key, short: short, dir: filepath.Join(dir, short), url: url, client: c, done: make(chan struct{})}
		d.leftAtExit.Store(-1)
		t.dests = append(t.dests, d)
		return nil
	}
	if err := add(KeyRepository, "repository", t.cfg.SpoolDir, t.cfg.URL, t.cfg.Credentials); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if f := t.cfg.Feed; f != nil {
		if err := add(KeyFeed, "feed", f.SpoolDir, f.URL, f.Credentials); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
	}
	// The destinations' report keys are read from their spools at each report.
	for _, d := range t.dests {
		o.Tracker.SetServiceFaultFunc(d.key, d.state)
	}
	return t, nil
}

// Refuses reports whether a request whose event could not be stored is refused
// (audit.on_failure = "refuse").
func (t *Trail) Refuses() bool { return t.cfg.Refuses() }

// state is the destination's report state now, and its fault class while its spool
// cannot store: unknown until its spool is open.
func (d *destination) state() (dependencies.State, string) {
	sp := d.sp.Load()
	if sp == nil {
		return dependencies.Unknown, ""
	}
	snap := sp.Snapshot()
	return spool.State(snap), snap.Fault
}

// Start opens every spool (recovering whatever it finds) and starts its delivery.
// An error means a spool directory cannot be made, read or locked: the gateway
// refuses to start rather than serve without its audit trail, and no delivery began.
func (t *Trail) Start() error {
	loops, err := t.open()
	if err != nil {
		return err
	}
	t.run(loops)
	return nil
}

// open opens every destination's spool and makes its delivery loop, starting
// none: when one spool cannot be opened (a directory another process holds), the
// ones opened before it are closed again, untouched.
func (t *Trail) open() ([]*deliver.Loop, error) {
	var loops []*deliver.Loop
	for _, d := range t.dests {
		loop, err := t.openOne(d)
		if err != nil {
			for _, o := range t.dests {
				if sp := o.sp.Swap(nil); sp != nil {
					_ = sp.Close(context.Background())
				}
			}
			return nil, err
		}
		loops = append(loops, loop)
	}
	return loops, nil
}

func (t *Trail) openOne(d *destination) (*deliver.Loop, error) {
	so := spool.Options{Dir: d.dir, FS: t.opts.FS, MaxBytes: t.cfg.SpoolBytes(), WaitAfter: t.opts.WaitAfter}
	so.SegmentBytes = spool.SegmentBytesFor(so.MaxBytes)
	sp, err := spool.Open(so)
	if err != nil {
		return nil, fmt.Errorf("audit: open the spool of %s in %s: %w", d.key, d.dir, err)
	}
	r := sp.Report()
	t.log.Info("Opened the audit spool", "destination", d.key, "dir", d.dir, "pending", r.Pending,
		"truncated", r.Truncated, "quarantined", r.Quarantined, "problems", r.Problems)
	loop, err := deliver.New(sp, deliver.Options{
		BaseURL: d.url, Client: d.client.HTTP, Batch: true, Linger: t.linger(), Timeout: t.cfg.Timeout(), Authorize: d.client.Authorize,
		BackoffBase: t.opts.BackoffBase, BackoffMax: t.opts.BackoffMax,
		// Begin appends events Event built, Record only events EventID parsed: JSON.
		KeptIsJSON: true,
		Logf: func(format string, args ...any) {
			t.log.Info("Audit delivery: "+fmt.Sprintf(format, args...), "destination", d.key)
		},
	})
	if err != nil {
		_ = sp.Close(context.Background())
		return nil, fmt.Errorf("audit: %s: %w", d.key, err)
	}
	d.quarantinedAtOpen = sp.Snapshot().Quarantined
	d.sp.Store(sp)
	return loop, nil
}

// run starts the delivery loops open made, one per destination, in its order.
func (t *Trail) run(loops []*deliver.Loop) {
	for i, d := range t.dests {
		loop := loops[i]
		ctx, cancel := context.WithCancel(context.Background())
		d.cancel = cancel
		go func() {
			defer close(d.done)
			if err := loop.Run(ctx); err != nil {
				t.log.Error(err, "Audit delivery stopped", "destination", d.key)
			}
		}()
	}
}

// deliveryLinger is how long a delivery batch waits to fill: under load, fewer and
// fuller exchanges (and cursor writes); at most a tenth of the delivery interval, so
// that a record never waits because of it.
const deliveryLinger = 50 * time.Millisecond

func (t *Trail) linger() time.Duration {
	wait := t.opts.WaitAfter
	if wait == 0 {
		wait = spool.DefaultWaitAfter
	}
	return min(deliveryLinger, wait/10)
}

// Access builds the event of a and stores it (Record).
func (t *Trail) Access(ctx context.Context, a Access) error {
	return t.Begin(a)(ctx)
}

// Begin builds the event of a and queues it for every destination's spool, and
// returns the wait for it: wait returns once the event is stored (as Access), and the
// caller may do its work meanwhile. The event is stored whether or not wait is
// called, or its ctx ends.
func (t *Trail) Begin(a Access) (wait func(ctx context.Context) error) {
	if a.Time.IsZero() {
		a.Time = t.opts.Now()
	}
	ev, err := Event(a, Source{Observer: t.opts.Observer}, deliver.NewEventID())
	if err != nil {
		return func(context.Context) error { return fmt.Errorf("%w: %w", ErrNotStored, err) }
	}
	// Event stamped the id: Record's check of it would only parse the event again.
	if t.cfg.Destination != config.AuditToRepository {
		err := t.store(context.Background(), ev) // the log line is written at once
		return func(context.Context) error { return err }
	}
	tickets := make([]spool.Ticket, len(t.dests))
	errs := make([]error, len(t.dests))
	for i, d := range t.dests {
		tickets[i], errs[i] = d.enqueue(ev)
	}
	return func(ctx context.Context) error {
		for i, d := range t.dests {
			if errs[i] == nil {
				errs[i] = d.wait(ctx, tickets[i])
			}
		}
		if err := errors.Join(errs...); err != nil {
			t.failed.Inc()
			return fmt.Errorf("%w: %w", ErrNotStored, err)
		}
		return nil
	}
}

// Record stores one AuditEvent (FHIR R4 JSON) and returns once it is stored: written
// to the log, or synced to every destination's spool. An event without the stable
// event id tag gets one. The error wraps ErrNotStored and the spool's reason
// (spool.ErrFull, spool.ErrStorage, spool.ErrClosed); the exchange it records is then
// failing. Every binding records its outbound exchanges through it.
func (t *Trail) Record(ctx context.Context, event []byte) error {
	if _, ok := deliver.EventID(event); !ok {
		stamped, err := deliver.StampEventID(event, deliver.NewEventID())
		if err != nil {
			t.failed.Inc()
			return fmt.Errorf("%w: %w", ErrNotStored, err)
		}
		event = stamped
	}
	return t.store(ctx, event)
}

// store is Record for an event that carries its event id.
func (t *Trail) store(ctx context.Context, event []byte) error {
	if t.cfg.Destination != config.AuditToRepository {
		// The event as one string value: every log sink writes it as the JSON it is,
		// where a raw JSON value would be written as bytes by some.
		t.log.Info("Audit event", "auditEvent", string(event))
		return nil
	}
	errs := make([]error, len(t.dests))
	if len(t.dests) == 1 {
		errs[0] = t.dests[0].append(ctx, event)
	} else {
		var wg sync.WaitGroup
		for i, d := range t.dests {
			wg.Go(func() { errs[i] = d.append(ctx, event) })
		}
		wg.Wait()
	}
	if err := errors.Join(errs...); err != nil {
		t.failed.Inc()
		return fmt.Errorf("%w: %w", ErrNotStored, err)
	}
	return nil
}

func (d *destination) append(ctx context.Context, event []byte) error {
	sp := d.sp.Load()
	if sp == nil {
		return fmt.Errorf("%s: %w", d.key, spool.ErrClosed)
	}
	// The append (its write and sync) is a short internal span of the request's, with
	// the destination's key and whether the event was stored: never the event.
	if !tracing.Recording(ctx) {
		if _, err := sp.Append(ctx, event); err != nil {
			return fmt.Errorf("%s: %w", d.key, err)
		}
		return nil
	}
	sctx, span := tracing.Internal(ctx, tracing.SpanSpoolAppend, tracing.AttrBinding.String(d.key))
	defer span.End()
	if _, err := sp.Append(sctx, event); err != nil {
		span.SetAttributes(tracing.AttrBindingOutcome.String("failed"))
		span.SetStatus(codes.Error, "")
		return fmt.Errorf("%s: %w", d.key, err)
	}
	span.SetAttributes(tracing.AttrBindingOutcome.String("stored"))
	return nil
}

// wait waits for the ticket of an event queued for d's spool: the append's internal
// span (as append's) when ctx's span records.
func (d *destination) wait(ctx context.Context, tk spool.Ticket) error {
	if !tracing.Recording(ctx) {
		if _, err := tk.Wait(ctx); err != nil {
			return fmt.Errorf("%s: %w", d.key, err)
		}
		return nil
	}
	sctx, span := tracing.Internal(ctx, tracing.SpanSpoolAppend, tracing.AttrBinding.String(d.key))
	defer span.End()
	if _, err := tk.Wait(sctx); err != nil {
		span.SetAttributes(tracing.AttrBindingOutcome.String("failed"))
		span.SetStatus(codes.Error, "")
		return fmt.Errorf("%s: %w", d.key, err)
	}
	span.SetAttributes(tracing.AttrBindingOutcome.String("stored"))
	return nil
}

func (d *destination) enqueue(event []byte) (spool.Ticket, error) {
	sp := d.sp.Load()
	if sp == nil {
		return spool.Ticket{}, fmt.Errorf("%s: %w", d.key, spool.ErrClosed)
	}
	tk, err := sp.Enqueue(event)
	if err != nil {
		return spool.Ticket{}, fmt.Errorf("%s: %w", d.key, err)
	}
	return tk, nil
}

// Syncs counts the data syncs of every spool since Start (the benchmark's fsyncs).
func (t *Trail) Syncs() uint64 {
	var n uint64
	for _, d := range t.dests {
		if sp := d.sp.Load(); sp != nil {
			n += sp.Syncs()
		}
	}
	return n
}

// stop is drain step 4 for one destination: delivery stops at once (what it had in
// flight stays in the spool and is delivered again after the next start), the spool
// is synced and closed, nothing is deleted. It returns once the spool's writer has
// finished, whatever ctx says, so that a writer stuck in a sync past the bindings
// budget is abandoned by the server under the destination's name.
func (t *Trail) stop(ctx context.Context, d *destination) error {
	d.stopOnce.Do(func() {
		sp := d.sp.Load()
		if sp == nil {
			return
		}
		// Deliveries under way end with the loop's context, and the loop with them.
		d.cancel()
		<-d.done
		snap := sp.Snapshot()
		left := snap.Pending
		d.leftAtExit.Store(int64(left))
		d.left.Store(&closedSpool{snap: snap, delivered: delivered(snap, d.quarantinedAtOpen)})
		t.undelivered.WithLabelValues(d.key).Set(float64(left))
		d.stopErr = sp.Close(context.WithoutCancel(ctx))
		t.log.Info("Stopped audit delivery and closed its spool: what is undelivered stays in the spool",
			"destination", d.key, "undelivered", left, "dir", d.dir)
	})
	return d.stopErr
}

// Collector exports the trail's own metrics; the binding metrics of its destinations
// are the composition root's to register, once for every binding.
func (t *Trail) Collector() prometheus.Collector { return collector{t} }

type collector struct{ t *Trail }

// The live backlog of each open spool, read at every scrape: what the operator reads
// from a retiring pod before it deletes it (docs/audit-spool.md, "The live backlog").
var (
	backlogRecordsDesc = prometheus.NewDesc("ferrofed_audit_spool_undelivered_records",
		"Audit records in a destination's open spool that were never delivered: pending above the watermark plus the quarantine's entries.",
		[]string{"destination"}, nil)
	backlogBytesDesc = prometheus.NewDesc("ferrofed_audit_spool_undelivered_bytes",
		"Bytes on disk of the records ferrofed_audit_spool_undelivered_records counts.",
		[]string{"destination"}, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	c.t.undelivered.Describe(ch)
	c.t.failed.Describe(ch)
	ch <- backlogRecordsDesc
	ch <- backlogBytesDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.t.undelivered.Collect(ch)
	c.t.failed.Collect(ch)
	for _, d := range c.t.dests {
		sp := d.sp.Load()
		if sp == nil {
			continue // not opened yet, or closed by drain step 4: no live figure
		}
		l := spoolLeft(d.short, sp.Snapshot())
		ch <- prometheus.MustNewConstMetric(backlogRecordsDesc, prometheus.GaugeValue, float64(l.Records), d.key)
		ch <- prometheus.MustNewConstMetric(backlogBytesDesc, prometheus.GaugeValue, float64(l.Bytes), d.key)
	}
}

// Stoppers are the destinations' processes, each stopped in drain step 4 under its
// report key; its report counts the records it left undelivered.
func (t *Trail) Stoppers() []bindings.Stopper {
	var out []bindings.Stopper
	for _, d := range t.dests {
		out = append(out, bindings.Stopper{
			Name: d.key,
			Stop: func(ctx context.Context) error { return t.stop(ctx, d) },
			Report: func() []any {
				if n := d.leftAtExit.Load(); n >= 0 {
					return []any{d.key + "_undelivered", n}
				}
				return nil
			},
		})
	}
	return out
}
