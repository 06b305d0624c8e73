package health

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Result is the outcome of one check in one evaluation.
type Result struct {
	// Name is the check's name.
	Name string
	// Status is CheckOK, CheckFailed or CheckTimedOut.
	Status CheckStatus
	// Reason is the public reason code: "" when ok, "<name>_timeout" or "<name>_failed".
	Reason string
	// Err is the full error, for the log only: it never goes into a response body.
	Err error
	// Took is how long the check ran (up to the budget).
	Took time.Duration
}

// OK reports whether the check passed.
func (r Result) OK() bool { return r.Status == CheckOK }

// Report is one evaluation of every readiness check, in the order the checks were given.
type Report struct {
	Results []Result
	// At is when the evaluation finished; a cached report keeps its time.
	At time.Time
}

// Ready is the AND of every check. A report without checks is not ready: the absence
// of a result never means success.
func (r *Report) Ready() bool {
	if r == nil || len(r.Results) == 0 {
		return false
	}
	for _, res := range r.Results {
		if !res.OK() {
			return false
		}
	}
	return true
}

// Reasons are the public reason codes of every failing check, in check order.
func (r *Report) Reasons() []string {
	if r == nil {
		return nil
	}
	var out []string
	for _, res := range r.Results {
		if !res.OK() {
			out = append(out, res.Reason)
		}
	}
	return out
}

// Result returns the result of the check named name.
func (r *Report) Result(name string) (Result, bool) {
	if r == nil {
		return Result{}, false
	}
	for _, res := range r.Results {
		if res.Name == name {
			return res, true
		}
	}
	return Result{}, false
}

// Settings are the [health] values an Evaluator applies; a reload may change them.
type Settings struct {
	// CheckTimeout is the budget of each check (health.check_timeout_ms).
	CheckTimeout time.Duration
	// CacheTTL is how long a report is reused (health.cache_ttl_ms); 0 reuses nothing
	// but still coalesces concurrent probes into one evaluation.
	CacheTTL time.Duration
}

// Evaluator runs the readiness checks within their budget and caches the report, so
// that a flood of probes costs at most one evaluation per TTL: concurrent callers that
// find no fresh report share the one evaluation in flight instead of starting their own.
type Evaluator struct {
	checks []Check
	// onReport, when set, is called once per evaluation (metrics, logs).
	onReport func(*Report)
	now      func() time.Time

	mu       sync.Mutex
	settings Settings
	last     *Report
	inflight *evaluation

	// fresh is last and ttl settings.CacheTTL, for Evaluate to answer a probe from the
	// cache without taking mu: every probe of every client asks, and within the TTL
	// they all get the same report.
	fresh atomic.Pointer[Report]
	ttl   atomic.Int64
}

type evaluation struct {
	done   chan struct{}
	report *Report
}

// EvaluatorOption tunes an Evaluator.
type EvaluatorOption func(*Evaluator)

// OnReport registers a function called with the report of every evaluation (not of
// every cached answer): the place to count evaluations and log failures in full.
func OnReport(f func(*Report)) EvaluatorOption { return func(e *Evaluator) { e.onReport = f } }

// WithClock replaces time.Now, for tests of the cache.
func WithClock(now func() time.Time) EvaluatorOption { return func(e *Evaluator) { e.now = now } }

// NewEvaluator evaluates checks in the given order. Names must be unique and non-empty.
func NewEvaluator(checks []Check, s Settings, opts ...EvaluatorOption) (*Evaluator, error) {
	seen := map[string]bool{}
	for _, c := range checks {
		n := c.Name()
		switch {
		case n == "" || strings.ContainsAny(n, "/ \t"):
			return nil, errors.New("health: a check needs a name without '/' or spaces")
		case seen[n]:
			return nil, errors.New("health: two checks are named " + n)
		}
		seen[n] = true
	}
	e := &Evaluator{settings: s, now: time.Now}
	e.ttl.Store(int64(s.CacheTTL))
	for _, c := range checks {
		e.checks = append(e.checks, &guarded{check: c})
	}
	for _, o := range opts {
		o(e)
	}
	return e, nil
}

// Names are the checks' names, in order.
func (e *Evaluator) Names() []string {
	out := make([]string, len(e.checks))
	for i, c := range e.checks {
		out[i] = c.Name()
	}
	return out
}

// Has reports whether a check is named name.
func (e *Evaluator) Has(name string) bool {
	for _, c := range e.checks {
		if c.Name() == name {
			return true
		}
	}
	return false
}

// SetSettings applies new budgets; the cached report is dropped so that the next probe
// sees the new budget at work.
func (e *Evaluator) SetSettings(s Settings) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settings = s
	e.last = nil
	e.fresh.Store(nil)
	e.ttl.Store(int64(s.CacheTTL))
}

// Last is the latest report without evaluating anything, or nil before the first.
func (e *Evaluator) Last() *Report {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// Evaluate returns a report no older than the cache TTL: the cached one, the one another
// caller is computing, or a new one. ctx bounds only the wait of this caller: the
// evaluation itself runs within the check budget whoever asked first, so that one
// impatient prober cannot fail the report every other prober shares.
func (e *Evaluator) Evaluate(ctx context.Context) *Report {
	if r := e.fresh.Load(); r != nil && e.now().Sub(r.At) < time.Duration(e.ttl.Load()) {
		return r
	}
	e.mu.Lock()
	if e.last != nil && e.now().Sub(e.last.At) < e.settings.CacheTTL {
		r := e.last
		e.mu.Unlock()
		return r
	}
	ev := e.inflight
	if ev == nil {
		ev = &evaluation{done: make(chan struct{})}
		e.inflight = ev
		timeout := e.settings.CheckTimeout
		go e.run(ev, timeout)
	}
	e.mu.Unlock()

	select {
	case <-ev.done:
		return ev.report
	case <-ctx.Done():
		return e.abandoned(ctx)
	}
}

// abandoned is the report of a caller that stopped waiting: every check fails closed.
func (e *Evaluator) abandoned(ctx context.Context) *Report {
	r := &Report{At: e.now()}
	for _, c := range e.checks {
		r.Results = append(r.Results, timeoutResult(c.Name(), ctx.Err(), 0))
	}
	return r
}

func (e *Evaluator) run(ev *evaluation, timeout time.Duration) {
	report := &Report{Results: RunChecks(context.Background(), e.checks, timeout)}
	report.At = e.now()
	if e.onReport != nil {
		e.onReport(report)
	}
	e.mu.Lock()
	e.last = report
	e.fresh.Store(report)
	e.inflight = nil
	ev.report = report
	e.mu.Unlock()
	close(ev.done)
}

// RunChecks runs every check in parallel, each within timeout, and returns their results
// in the order of checks. A check that has not answered by its deadline fails closed
// with the reason "<name>_timeout" even when it ignores its context: its goroutine is
// left to finish on its own and its late answer is dropped.
func RunChecks(ctx context.Context, checks []Check, timeout time.Duration) []Result {
	out := make([]Result, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = runOne(ctx, c, timeout)
		}()
	}
	wg.Wait()
	return out
}

func runOne(parent context.Context, c Check, timeout time.Duration) Result {
	name := c.Name()
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	start := time.Now()
	answer := make(chan error, 1) // buffered: a late answer must not block the check forever
	go func() {
		defer func() {
			if p := recover(); p != nil {
				answer <- panicError{p}
			}
		}()
		answer <- c.Check(ctx)
	}()
	select {
	case err := <-answer:
		took := time.Since(start)
		switch {
		case err == nil:
			return Result{Name: name, Status: CheckOK, Took: took}
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil, errors.Is(err, errStillRunning):
			// The check honoured its context and gave up at the deadline, or it has
			// not returned from an earlier evaluation's deadline yet.
			return timeoutResult(name, err, took)
		default:
			return Result{Name: name, Status: CheckFailed, Reason: name + "_failed", Err: err, Took: took}
		}
	case <-ctx.Done():
		return timeoutResult(name, ctx.Err(), time.Since(start))
	}
}

func timeoutResult(name string, err error, took time.Duration) Result {
	return Result{Name: name, Status: CheckTimedOut, Reason: name + "_timeout", Err: err, Took: took}
}

type panicError struct{ v any }

func (p panicError) Error() string { return fmt.Sprintf("check panicked: %v", p.v) }

// errStillRunning is the answer of a check whose previous run has not returned.
var errStillRunning = errors.New("the previous run of this check has not returned yet")

// guarded runs at most one instance of its check at a time. A check that ignores its
// context keeps its goroutine after the deadline; without the guard every evaluation
// would start one more, and a hung dependency would leak one goroutine per TTL.
type guarded struct {
	check Check
	busy  atomic.Bool
}

func (g *guarded) Name() string { return g.check.Name() }

func (g *guarded) Check(ctx context.Context) error {
	if !g.busy.CompareAndSwap(false, true) {
		return errStillRunning
	}
	defer g.busy.Store(false)
	return g.check.Check(ctx)
}
