package federation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/ferrofed/ferrofed/gateway/calllimit"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/gateway/tracing"
)

// Member calls for the gateway's other parts (the stored queries, the access guard):
// sent to one member with the surface's client and Via, and recorded in the dependency
// report as a federated query's call is (Classify): every request that reaches a
// member updates its endpoint's state, one that never left the gateway nothing.

// QueryExpander turns a search that names a stored query (`_query={name}`) into the
// plain search the query stands for. The surface asks it before it parses a first
// page; it is nil when no store is configured ([stored_queries] absent), and `_query`
// then goes to the members as any other parameter.
type QueryExpander interface {
	// Expand returns raw itself when it names no _query. Else it returns the search
	// the named query stands for, the client's parameters substituted; or status
	// (400, 404) and a message saying why it is refused.
	Expand(resourceType, raw string) (expanded string, status int, msg string)
}

// Members are the ids of the registry's members, in document order.
func (s *Surface) Members() []string {
	st := s.state.Load()
	ids := make([]string, len(st.reg.members))
	for i, m := range st.reg.members {
		ids[i] = m.id
	}
	return ids
}

// MemberExchange is what CallMember saw of one call.
type MemberExchange struct {
	Call    outbound.Call
	Outcome outbound.Outcome
	// Body is the member's answer, nil when there was none or it was over the cap
	// (Call.Unusable).
	Body []byte
}

// ErrNoMember is the error for an id no member has (its NoMember method says so).
var ErrNoMember error = noMember{}

type noMember struct{}

func (noMember) Error() string  { return "no member has this id" }
func (noMember) NoMember() bool { return true }

// Get sends GET {path}?{rawQuery} (path under the member's FHIR base) to member id as
// one member of a federated search is asked (budget, call slots, limits; its state
// recorded), and returns its status and body, or an error naming only the member when
// there was none to read.
func (s *Surface) Get(ctx context.Context, id, path, rawQuery string) (int, []byte, error) {
	st := s.state.Load()
	m, ok := st.reg.byID[id]
	if !ok {
		return 0, nil, ErrNoMember
	}
	cs := s.newCalls(st, nil)
	rctx, cancel := context.WithTimeout(ctx, calllimit.Budget(ctx, st.requestTimeout))
	defer cancel()
	ex := notSent(rctx, ctx)
	cs.FanOut(rctx, 1, func(int) {
		mctx, cancel := m.within(rctx)
		defer cancel()
		ex = s.caller.get(mctx, ctx, m, m.url(path, rawQuery), cs, nil)
	}, func(int) {}, func(int) {})
	if s.caller.observe(m, ex.call); ex.call.Broken || ex.call.Unusable || ex.reason != "" {
		return 0, nil, fmt.Errorf("member %s gave no answer the gateway could read", m.id)
	}
	return ex.call.Status, ex.body, nil
}

// CallMember sends method path (under the member's FHIR base; body, when not nil, as
// FHIR JSON) to member id within ctx, reads at most maxBody bytes of its answer, and
// records the state the call observed of the member's endpoint.
func (s *Surface) CallMember(ctx context.Context, id, method, path string, body []byte, maxBody int64) (MemberExchange, error) {
	st := s.state.Load()
	m, ok := st.reg.byID[id]
	if !ok {
		return MemberExchange{}, ErrNoMember
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	ctx, span := outbound.MemberSpan(ctx, m.id) // under an operator's request's span
	tctx, sent := outbound.TraceSent(ctx)
	req, err := http.NewRequestWithContext(tctx, method, m.url(path, ""), rd)
	if err != nil {
		outbound.EndMemberSpan(span, outbound.Call{Broken: true, NotSent: true}, -1)
		return MemberExchange{}, err
	}
	req.Header.Set("Accept", fhir.MediaType)
	if body != nil {
		req.Header.Set("Content-Type", fhir.MediaType)
	}
	req.Header["Via"] = []string{"1.1 " + s.viaID(st)}
	tracing.Inject(ctx, req.Header)
	var ex MemberExchange
	res, err := s.caller.client.Do(req)
	if err == nil {
		ex.Call.Status = res.StatusCode
		ex.Body, err = io.ReadAll(io.LimitReader(res.Body, maxBody+1))
		if err == nil && int64(len(ex.Body)) > maxBody {
			ex.Body, ex.Call.Unusable = nil, true
		}
		res.Body.Close()
	}
	if err != nil {
		ex.Body = nil
		ex.Call.Broken = true
		ex.Call.Expired = errors.Is(ctx.Err(), context.DeadlineExceeded)
		ex.Call.ClientGone = errors.Is(ctx.Err(), context.Canceled)
		ex.Call.NotSent = !sent.Load()
	}
	ex.Outcome = s.caller.observe(m, ex.Call)
	outbound.EndMemberSpan(span, ex.Call, int64(len(ex.Body)))
	return ex, nil
}
