package federation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/calllimit"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/gateway/tracing"
)

// caller sends the gateway's requests to members and records what each one observed.
type caller struct {
	client  *http.Client
	tracker *dependencies.Tracker
	log     logr.Logger
}

// exchange is one finished member call: what the gateway saw, and the body it read.
type exchange struct {
	call     outbound.Call
	body     []byte
	duration time.Duration
	// reason, when set, says why a 2xx answer is unusable (a limit it would pass):
	// the member's outcome entry says it instead of "not a searchset".
	reason string
}

// get sends GET url to m within ctx (already carrying the member budget) and reads at
// most cs.maxBody bytes of the answer (a larger answer is Unusable), taken from the
// request's cs.bytes. client is the client's own request context, used only to tell a
// client that left from a member that did not answer.
//
// The call waits for one of m's slots (limits.max_member_calls_per_member) within
// ctx, and never so long that less than its least useful budget would be left
// (limits.min_member_call_ms, calllimit.Calls.UsefulLeft): such a call is never sent, its outcome
// a timeout, the member's state unchanged. The caller holds a total slot already
// (calllimit.Calls.FanOut). It carries cs.Via.
//
// prefer is the client's Prefer header, sent on (nil for none).
//
// Under a recording span (docs/tracing.md) the call is a client span of its own,
// "member call", with the member's id, its outcome, status and the bytes read, never
// its URL; the member gets the span's traceparent. Without one it costs nothing.
func (c *caller) get(ctx, client context.Context, m *member, url string, cs *calls, prefer []string) exchange {
	ctx, span := outbound.MemberSpan(ctx, m.id)
	ex := c.send(ctx, client, m, url, cs, prefer)
	outbound.EndMemberSpan(span, ex.call, int64(len(ex.body)))
	return ex
}

// send is get's call itself.
func (c *caller) send(ctx, client context.Context, m *member, url string, cs *calls, prefer []string) exchange {
	start := time.Now()
	var release func()
	ok := false
	if deadline, has := ctx.Deadline(); has {
		release, ok = cs.Slots(ctx, m.id, deadline, false, 0)
	} else {
		release, ok = cs.Lim.AcquireMember(ctx, m.id)
	}
	if !ok {
		ex := notSent(ctx, client)
		// Stopped short of the deadline: the budget's all the same.
		ex.call.Expired = ex.call.Expired || client.Err() == nil
		ex.duration = time.Since(start)
		return ex
	}
	defer release()
	ex := exchange{}
	tctx, sent := outbound.TraceSent(ctx)
	req, err := http.NewRequestWithContext(tctx, http.MethodGet, url, nil)
	if err != nil {
		// A URL built from a validated registry does not fail to parse; were it to,
		// nothing left the gateway and nothing is recorded.
		ex.call = outbound.Call{Broken: true, ClientGone: true}
		return ex
	}
	req.Header.Set("Accept", fhir.MediaType)
	req.Header["Via"] = cs.Via
	tracing.Inject(ctx, req.Header)
	if len(prefer) > 0 {
		req.Header["Prefer"] = prefer
	}
	res, err := c.client.Do(req)
	if err == nil {
		ex.call.Status = res.StatusCode
		switch {
		case !cs.Bytes.Take(outbound.HeadBytes(res, MaxMemberHeaderBytes)):
			// The head counts in the request's bytes as the body does (it is read
			// whole before the gateway sees it: at most MaxMemberHeaderBytes).
			ex.call.Unusable = true
			ex.reason = fmt.Sprintf("member %s answered HTTP %d, but %s", m.id, res.StatusCode, calllimit.ErrSearchBytes.Msg)
		case res.StatusCode < http.StatusOK:
			// An interim answer the gateway never asked for (101 Switching Protocols):
			// the member answered, with nothing a client can use; its body is a raw
			// connection, not read.
			ex.reason = fmt.Sprintf("member %s answered HTTP %d, an interim answer to a request that asked for none", m.id, res.StatusCode)
		default:
			ex.body, err = calllimit.ReadCapped(res, cs.MaxBody, cs.Bytes)
			var costly calllimit.TooCostly
			if errors.As(err, &costly) {
				ex.body, err = nil, nil
				ex.call.Unusable = true
				ex.reason = fmt.Sprintf("member %s answered HTTP %d, but %s", m.id, res.StatusCode, costly.Msg)
			}
		}
		res.Body.Close()
	}
	if err != nil {
		if res == nil && outbound.HeadTooLarge(err) {
			ex.reason = fmt.Sprintf("member %s answered with headers longer than %d KiB", m.id, MaxMemberHeaderBytes>>10)
		}
		ex.body = nil
		ex.call.Broken = true
		ex.call.Expired = errors.Is(ctx.Err(), context.DeadlineExceeded)
		ex.call.ClientGone = errors.Is(client.Err(), context.Canceled)
		ex.call.NotSent = !sent.Load()
	}
	ex.duration = time.Since(start)
	return ex
}

// observe records the state a call observed of m's endpoint, unless the call says
// nothing about the member (the client left first). It returns the call's outcome.
func (c *caller) observe(m *member, call outbound.Call) outbound.Outcome {
	outcome, state, record := outbound.Classify(call)
	if record {
		// A change of state is what an operator wants in the log; the same state
		// again, on every query, is not.
		if prev, changed := c.tracker.ObserveEndpoint(m.endpointID, state); changed {
			c.log.Info("Member endpoint changed state", "member", m.id, "endpoint", m.endpointID, "from", prev, "to", state, "status", call.Status)
		}
	}
	return outcome
}
