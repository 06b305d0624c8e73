// Package calllimit bounds what the gateway's calls to its members may take: the
// calls in flight (limits.max_member_calls, in total and per member), the queue that
// admits a request by its whole fan-out (limits.max_queued_member_calls), how long a
// call waits for its slots, the bytes one request may read of its members' answers,
// and the fan-out that runs a request's calls within those bounds
// (docs/data-plane.md). It sends nothing itself.
package calllimit

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/proxy"
)

// Limiter bounds the member calls in flight: limits.max_member_calls in total and
// limits.max_member_calls_per_member to one member. A call waits for its slots
// (Calls.Slots) at most as long as leaves it its least useful budget
// (limits.min_member_call_ms), a routed one at most limits.member_call_wait_ms, and
// a routed one only once its body is in (route); one that gets none in time is never
// sent, and says nothing of the member (its state unchanged). See docs/data-plane.md.
//
// A reload that keeps both limits keeps the limiter; one that changes them makes a
// new one, and the calls still in flight give their slots back to the old one.
//
// It also admits requests by their fan-out: queued counts the calls the requests
// being served have yet to make, at most maxQueued (limits.max_queued_member_calls).
type Limiter struct {
	total     chan struct{}
	perMember int
	mu        sync.Mutex
	members   map[string]chan struct{}
	queued    atomic.Int64
	maxQueued int64
}

func NewLimiter(l config.Limits) *Limiter {
	return &Limiter{total: make(chan struct{}, l.MaxMemberCalls), perMember: l.MaxMemberCallsPerMember, members: map[string]chan struct{}{},
		maxQueued: int64(l.MaxQueuedMemberCalls)}
}

// Same reports whether the limiter enforces l's call limits.
func (l *Limiter) Same(lim config.Limits) bool {
	return cap(l.total) == lim.MaxMemberCalls && l.perMember == lim.MaxMemberCallsPerMember && l.maxQueued == int64(lim.MaxQueuedMemberCalls)
}

// Admit reserves n calls of the queue for one request, or refuses it when they would
// Take the queue past its limit; a request's first call is always admitted on an
// empty queue. Give them back with the returned function.
func (l *Limiter) Admit(n int) (func(), bool) {
	if q := l.queued.Add(int64(n)); q > l.maxQueued && q != int64(n) {
		l.queued.Add(-int64(n))
		return nil, false
	}
	return func() { l.queued.Add(-int64(n)) }, true
}

// Keep gives back what a request admitted for held calls no longer needs, keeping n
// (n <= held), and returns what gives back the n.
func (l *Limiter) Keep(held, n int) func() {
	if d := held - n; d > 0 {
		l.queued.Add(-int64(d))
	}
	return func() { l.queued.Add(-int64(n)) }
}

// ShedRetryAfter is the Retry-After of a request refused because its fan-out would
// Take the member calls past limits.max_queued_member_calls.
const ShedRetryAfter = "1"

// Shed answers a request refused by admit: 503 with Retry-After, before any member
// was asked.
func Shed(w http.ResponseWriter, calls int, l *Limiter) {
	w.Header().Set("Retry-After", ShedRetryAfter)
	fhir.Write(w, http.StatusServiceUnavailable, fhir.Outcome("throttled", fmt.Sprintf(
		"the gateway has as many member calls to make as limits.max_queued_member_calls allows (%d); this request would add %d: retry after %s s",
		l.maxQueued, calls, ShedRetryAfter)))
}

// Acquire takes one of the total slots, waiting until ctx ends.
func (l *Limiter) Acquire(ctx context.Context) bool {
	select {
	case l.total <- struct{}{}:
		return true
	default:
	}
	select {
	case l.total <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (l *Limiter) Release() { <-l.total }

// AcquireMember takes one of m's slots, waiting until ctx ends; release with the
// returned function.
func (l *Limiter) AcquireMember(ctx context.Context, id string) (func(), bool) {
	l.mu.Lock()
	ch, ok := l.members[id]
	if !ok {
		ch = make(chan struct{}, l.perMember)
		l.members[id] = ch
	}
	l.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, true
	default:
	}
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, true
	case <-ctx.Done():
		return nil, false
	}
}

// Slots takes the slots of one call to member id whose budget ends at deadline: a
// total one first when total is set (a routed call; a fan-out holds its own), then one
// of id's. It waits at most wait (0: no bound but the budget's), and never so long that
// less than the call's least useful budget would be left once it has them (usefulLeft);
// a call that would be left with less is not sent. Release with the returned function.
func (cs *Calls) Slots(ctx context.Context, id string, deadline time.Time, total bool, wait time.Duration) (func(), bool) {
	now := time.Now()
	end := deadline.Add(-cs.UsefulLeft(deadline.Sub(now)))
	if wait > 0 && now.Add(wait).Before(end) {
		end = now.Add(wait)
	}
	if !end.After(now) {
		return nil, false
	}
	wctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	if total && !cs.Lim.Acquire(wctx) {
		return nil, false
	}
	release, ok := cs.Lim.AcquireMember(wctx, id)
	if !ok {
		if total {
			cs.Lim.Release()
		}
		return nil, false
	}
	if total {
		return func() { release(); cs.Lim.Release() }, true
	}
	return release, true
}

// UsefulLeft is the least of a call's budget worth sending it with, for a call whose
// budget is b: limits.min_member_call_ms, or half of b when that is less (a call whose
// whole budget is short is still sent when it did not wait).
func (cs *Calls) UsefulLeft(b time.Duration) time.Duration {
	return max(0, min(cs.MinCall, b/2))
}

// TooCostly is a member answer that would take the request past one of its
// limits; the message names the limit.
type TooCostly struct{ Msg string }

func (e TooCostly) Error() string { return e.Msg }

// BytesBudget is what one client request may read of its members' answers, all
// members and rounds together (limits.max_search_bytes). Bytes are taken before they
// are read: an answer of announced length is taken whole before its buffer is made.
type BytesBudget struct{ left atomic.Int64 }

func NewBytesBudget(n int64) *BytesBudget {
	b := &BytesBudget{}
	b.left.Store(n)
	return b
}

func (b *BytesBudget) Take(n int64) bool {
	if b == nil {
		return true
	}
	if b.left.Add(-n) < 0 {
		b.left.Add(n)
		return false
	}
	return true
}

var ErrSearchBytes = TooCostly{Msg: "its answer would take the request past limits.max_search_bytes"}

// Calls is what the member calls of one client request share: the limits they wait
// on and the bytes they may read, the Via they send.
type Calls struct {
	Lim     *Limiter
	Bytes   *BytesBudget
	MaxBody int64
	// maxEntries is limits.max_member_entries.
	MaxEntries int
	// via are the Via values every member request carries: the client's, then the
	// gateway's own.
	Via []string
	// bodyBuffer is limits.max_routed_body_buffer_bytes: what is read of a routed
	// request's body before its call takes a slot.
	BodyBuffer int64
	// wait is limits.member_call_wait_ms: the longest a routed call waits for its
	// slots. minCall is limits.min_member_call_ms (see usefulLeft).
	Wait, MinCall time.Duration
}

// FanOut runs call(i) for every i below n in parallel, at most as many at once as the
// limiter's total allows, and hands each finished i to done on this goroutine, as it
// comes in. A call whose turn has not come when ctx ends is handed to skipped
// instead, never started: no goroutine waits for a slot, so a fan-out of thousands
// of members holds at most limits.max_member_calls goroutines.
func (cs *Calls) FanOut(ctx context.Context, n int, call func(i int), done, skipped func(i int)) {
	finished := make(chan int, n)
	next, running := 0, 0
	for next < n || running > 0 {
		if next < n && ctx.Err() != nil {
			for ; next < n; next++ {
				skipped(next)
			}
			continue
		}
		if next < n {
			select {
			case cs.Lim.total <- struct{}{}:
				i := next
				next++
				running++
				go func() {
					defer func() { cs.Lim.Release(); finished <- i }()
					call(i)
				}()
			case i := <-finished:
				running--
				done(i)
			case <-ctx.Done():
				for ; next < n; next++ {
					skipped(next)
				}
			}
			continue
		}
		i := <-finished
		running--
		done(i)
	}
}

// Queued is how many calls the requests being served have yet to make.
func (l *Limiter) Queued() int64 { return l.queued.Load() }

// MaxQueued is limits.max_queued_member_calls as the limiter enforces it.
func (l *Limiter) MaxQueued() int64 { return l.maxQueued }

// Budget is how long the members of one request may take: the request timeout,
// bounded by the client request's own deadline (the server sets one), less a small
// reserve so that the merged answer is written before that deadline and not after.
func Budget(ctx context.Context, requestTimeout time.Duration) time.Duration {
	d := requestTimeout
	if dl, ok := ctx.Deadline(); ok {
		if rem := time.Until(dl); rem < d {
			d = rem
		}
	}
	return d - min(d/10, 100*time.Millisecond)
}

var ErrMemberBody = TooCostly{Msg: "its answer is larger than registry.max_member_body_bytes"}

// ReadCapped reads res's body when it is at most max bytes and fits what is left of
// budget, taken before it is read: an announced length is taken whole before its
// buffer is made, an unknown one as it arrives. Past either bound it returns an
// TooCostly naming the limit.
func ReadCapped(res *http.Response, max int64, budget *BytesBudget) ([]byte, error) {
	if n := res.ContentLength; n >= 0 {
		if n > max {
			return nil, ErrMemberBody
		}
		if !budget.Take(n) {
			return nil, ErrSearchBytes
		}
		body, err := proxy.ReadBody(res, max)
		if err == nil && int64(len(body)) > max {
			return nil, ErrMemberBody
		}
		return body, err
	}
	br := &budgetReader{r: res.Body, b: budget}
	body, err := io.ReadAll(io.LimitReader(br, max+1))
	if err == nil && int64(len(body)) > max {
		return nil, ErrMemberBody
	}
	return body, err
}

// budgetReader takes every byte it reads from b; past it, it fails.
type budgetReader struct {
	r io.Reader
	b *BytesBudget
}

func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	if n > 0 && !br.b.Take(int64(n)) {
		return 0, ErrSearchBytes
	}
	return n, err
}
