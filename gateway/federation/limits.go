package federation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// limiter bounds the member calls in flight: limits.max_member_calls in total and
// limits.max_member_calls_per_member to one member. A call waits for its slots
// (calls.slots) at most as long as leaves it its least useful budget
// (limits.min_member_call_ms), a routed one at most limits.member_call_wait_ms, and
// a routed one only once its body is in (route); one that gets none in time is never
// sent, and says nothing of the member (its state unchanged). See docs/data-plane.md.
//
// A reload that keeps both limits keeps the limiter; one that changes them makes a
// new one, and the calls still in flight give their slots back to the old one.
//
// It also admits requests by their fan-out: queued counts the calls the requests
// being served have yet to make, at most maxQueued (limits.max_queued_member_calls).
type limiter struct {
	total     chan struct{}
	perMember int
	mu        sync.Mutex
	members   map[string]chan struct{}
	queued    atomic.Int64
	maxQueued int64
}

func newLimiter(l config.Limits) *limiter {
	return &limiter{total: make(chan struct{}, l.MaxMemberCalls), perMember: l.MaxMemberCallsPerMember, members: map[string]chan struct{}{},
		maxQueued: int64(l.MaxQueuedMemberCalls)}
}

// same reports whether the limiter enforces l's call limits.
func (l *limiter) same(lim config.Limits) bool {
	return cap(l.total) == lim.MaxMemberCalls && l.perMember == lim.MaxMemberCallsPerMember && l.maxQueued == int64(lim.MaxQueuedMemberCalls)
}

// admit reserves n calls of the queue for one request, or refuses it when they would
// take the queue past its limit; a request's first call is always admitted on an
// empty queue. Give them back with the returned function.
func (l *limiter) admit(n int) (func(), bool) {
	if q := l.queued.Add(int64(n)); q > l.maxQueued && q != int64(n) {
		l.queued.Add(-int64(n))
		return nil, false
	}
	return func() { l.queued.Add(-int64(n)) }, true
}

// keep gives back what a request admitted for held calls no longer needs, keeping n
// (n <= held), and returns what gives back the n.
func (l *limiter) keep(held, n int) func() {
	if d := held - n; d > 0 {
		l.queued.Add(-int64(d))
	}
	return func() { l.queued.Add(-int64(n)) }
}

// ShedRetryAfter is the Retry-After of a request refused because its fan-out would
// take the member calls past limits.max_queued_member_calls.
const ShedRetryAfter = "1"

// shed answers a request refused by admit: 503 with Retry-After, before any member
// was asked.
func shed(w http.ResponseWriter, calls int, l *limiter) {
	w.Header().Set("Retry-After", ShedRetryAfter)
	writeFHIR(w, http.StatusServiceUnavailable, operationOutcome("throttled", fmt.Sprintf(
		"the gateway has as many member calls to make as limits.max_queued_member_calls allows (%d); this request would add %d: retry after %s s",
		l.maxQueued, calls, ShedRetryAfter)))
}

// acquire takes one of the total slots, waiting until ctx ends.
func (l *limiter) acquire(ctx context.Context) bool {
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

func (l *limiter) release() { <-l.total }

// acquireMember takes one of m's slots, waiting until ctx ends; release with the
// returned function.
func (l *limiter) acquireMember(ctx context.Context, id string) (func(), bool) {
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

// slots takes the slots of one call to member id whose budget ends at deadline: a
// total one first when total is set (a routed call; a fan-out holds its own), then one
// of id's. It waits at most wait (0: no bound but the budget's), and never so long that
// less than the call's least useful budget would be left once it has them (usefulLeft);
// a call that would be left with less is not sent. Release with the returned function.
func (cs *calls) slots(ctx context.Context, id string, deadline time.Time, total bool, wait time.Duration) (func(), bool) {
	now := time.Now()
	end := deadline.Add(-cs.usefulLeft(deadline.Sub(now)))
	if wait > 0 && now.Add(wait).Before(end) {
		end = now.Add(wait)
	}
	if !end.After(now) {
		return nil, false
	}
	wctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	if total && !cs.lim.acquire(wctx) {
		return nil, false
	}
	release, ok := cs.lim.acquireMember(wctx, id)
	if !ok {
		if total {
			cs.lim.release()
		}
		return nil, false
	}
	if total {
		return func() { release(); cs.lim.release() }, true
	}
	return release, true
}

// usefulLeft is the least of a call's budget worth sending it with, for a call whose
// budget is b: limits.min_member_call_ms, or half of b when that is less (a call whose
// whole budget is short is still sent when it did not wait).
func (cs *calls) usefulLeft(b time.Duration) time.Duration {
	return max(0, min(cs.minCall, b/2))
}

// errTooCostly is a member answer that would take the request past one of its
// limits; the message names the limit.
type errTooCostly struct{ msg string }

func (e errTooCostly) Error() string { return e.msg }

// bytesBudget is what one client request may read of its members' answers, all
// members and rounds together (limits.max_search_bytes). Bytes are taken before they
// are read: an answer of announced length is taken whole before its buffer is made.
type bytesBudget struct{ left atomic.Int64 }

func newBytesBudget(n int64) *bytesBudget {
	b := &bytesBudget{}
	b.left.Store(n)
	return b
}

func (b *bytesBudget) take(n int64) bool {
	if b == nil {
		return true
	}
	if b.left.Add(-n) < 0 {
		b.left.Add(n)
		return false
	}
	return true
}

var errSearchBytes = errTooCostly{"its answer would take the request past limits.max_search_bytes"}

// calls is what the member calls of one client request share: the limits they wait
// on and the bytes they may read, the Via they send.
type calls struct {
	lim     *limiter
	bytes   *bytesBudget
	maxBody int64
	// maxEntries is limits.max_member_entries.
	maxEntries int
	// via are the Via values every member request carries: the client's, then the
	// gateway's own.
	via []string
	// bodyBuffer is limits.max_routed_body_buffer_bytes: what is read of a routed
	// request's body before its call takes a slot.
	bodyBuffer int64
	// wait is limits.member_call_wait_ms: the longest a routed call waits for its
	// slots. minCall is limits.min_member_call_ms (see usefulLeft).
	wait, minCall time.Duration
}

// newCalls is the calls of one client request, whose own Via values are via, under st.
func (s *Surface) newCalls(st *settings, via []string) *calls {
	return &calls{lim: s.lim.Load(), bytes: newBytesBudget(st.limits.MaxSearchBytes), maxBody: st.reg.maxBody, maxEntries: st.limits.MaxMemberEntries,
		via:        append(via[:len(via):len(via)], "1.1 "+s.viaID(st)),
		bodyBuffer: st.limits.MaxRoutedBodyBufferBytes,
		wait:       st.limits.MemberCallWait(),
		minCall:    st.limits.MinMemberCall()}
}

// useLimits makes the limiter enforce l's call limits, keeping the one in place when
// it does already.
func (s *Surface) useLimits(l config.Limits) {
	if cur := s.lim.Load(); cur == nil || !cur.same(l) {
		s.lim.Store(newLimiter(l))
	}
}

// viaID is the gateway's name in Via: forwarding.via_id, else the process's own.
func (s *Surface) viaID(st *settings) string {
	if id := st.cfg.Forwarding.ViaID; id != "" {
		return id
	}
	return s.ownVia
}

// newViaID is a process's own Via id: "ferrofed-" and 12 random hex digits. Random,
// not the hostname: two gateways on one host (or in one test) must not take each
// other for themselves.
func newViaID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "ferrofed-" + hex.EncodeToString(b)
}

// fanOut runs call(i) for every i below n in parallel, at most as many at once as the
// limiter's total allows, and hands each finished i to done on this goroutine, as it
// comes in. A call whose turn has not come when ctx ends is handed to skipped
// instead, never started: no goroutine waits for a slot, so a fan-out of thousands
// of members holds at most limits.max_member_calls goroutines.
func (cs *calls) fanOut(ctx context.Context, n int, call func(i int), done, skipped func(i int)) {
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
			case cs.lim.total <- struct{}{}:
				i := next
				next++
				running++
				go func() {
					defer func() { cs.lim.release(); finished <- i }()
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

// notSent is the exchange of a call that was never started: ctx (its budget) ended
// while it waited for a slot. client tells a client that left.
func notSent(ctx, client context.Context) exchange {
	return exchange{call: Call{Broken: true, NotSent: true, Expired: errors.Is(ctx.Err(), context.DeadlineExceeded),
		ClientGone: errors.Is(client.Err(), context.Canceled)}}
}

// viaCarries reports whether any of a request's Via values names id as a recipient
// (received-by), that is, whether the request has been through this gateway already.
func viaCarries(values []string, id string) bool {
	for _, v := range values {
		for entry := range strings.SplitSeq(v, ",") {
			f := strings.Fields(entry)
			if len(f) >= 2 && f[1] == id {
				return true
			}
		}
	}
	return false
}
