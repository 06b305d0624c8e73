package federation

import (
	"context"
	"errors"

	"github.com/ferrofed/ferrofed/gateway/calllimit"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/outbound"
)

// calls is what the member calls of one client request share (calllimit.Calls).
type calls = calllimit.Calls

// limiter bounds the member calls in flight (calllimit.Limiter); the surface holds
// the one in force.
type limiter = calllimit.Limiter

// ShedRetryAfter is the Retry-After of a request refused because its fan-out would
// take the member calls past limits.max_queued_member_calls.
const ShedRetryAfter = calllimit.ShedRetryAfter

// newCalls is the calls of one client request, whose own Via values are via, under st.
func (s *Surface) newCalls(st *settings, via []string) *calls {
	return &calls{Lim: s.lim.Load(), Bytes: calllimit.NewBytesBudget(st.limits.MaxSearchBytes), MaxBody: st.reg.maxBody, MaxEntries: st.limits.MaxMemberEntries,
		Via:        append(via[:len(via):len(via)], "1.1 "+s.viaID(st)),
		BodyBuffer: st.limits.MaxRoutedBodyBufferBytes,
		Wait:       st.limits.MemberCallWait(),
		MinCall:    st.limits.MinMemberCall()}
}

// useLimits makes the limiter enforce l's call limits, keeping the one in place when
// it does already.
func (s *Surface) useLimits(l config.Limits) {
	if cur := s.lim.Load(); cur == nil || !cur.Same(l) {
		s.lim.Store(calllimit.NewLimiter(l))
	}
}

// viaID is the gateway's name in Via: forwarding.via_id, else the process's own.
func (s *Surface) viaID(st *settings) string {
	if id := st.cfg.Forwarding.ViaID; id != "" {
		return id
	}
	return s.ownVia
}

// notSent is the exchange of a call that was never started: ctx (its budget) ended
// while it waited for a slot. client tells a client that left.
func notSent(ctx, client context.Context) exchange {
	return exchange{call: outbound.Call{Broken: true, NotSent: true, Expired: errors.Is(ctx.Err(), context.DeadlineExceeded),
		ClientGone: errors.Is(client.Err(), context.Canceled)}}
}
