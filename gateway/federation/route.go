package federation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/gateway/proxy"
)

// routedBase is where the client reached a member through the gateway, and what the
// routed call shares with the request.
type routedBase struct {
	// gateway is the gateway's base URL (scheme, host, server.base_path).
	gateway string
	// prefix is the member's FHIR API's path on the gateway: {base_path}/nodes/{id}/fhir.
	prefix string
	// calls are the request's call limits and Via.
	calls *calls
	// trusted are forwarding.trusted_proxies.
	trusted []netip.Prefix
}

// route sends the client's request to m and streams the answer back: status,
// headers (without hop-by-hop ones) and body, flushed as it arrives, so a large
// answer is neither held in memory nor delayed. It never answers the client itself
// once the member's status is known: a body that breaks off aborts the client's
// connection, so a truncated answer can never pass for a whole one.
//
// The member is told where the client reached it (X-Forwarded-Proto, -Host, -Prefix,
// -For and Forwarded), so that a member that builds its URLs from them builds the
// gateway's. For one that does not, URLs under the member's base in Location,
// Content-Location and a JSON body are rewritten to the gateway's /nodes/{id}/fhir.
func (c *caller) route(w http.ResponseWriter, r *http.Request, m *member, path string, budget time.Duration, rb routedBase) {
	deadline := time.Now().Add(budget)
	outBody, body, length, ok := routedBody(w, r, rb.calls.BodyBuffer)
	if !ok {
		return
	}
	// The member's budget starts once the body is in, within the request's.
	if m.timeout > 0 && time.Now().Add(m.timeout).Before(deadline) {
		deadline = time.Now().Add(m.timeout)
	}
	// The call waits for its slots (limits.max_member_calls, _per_member) at most
	// limits.member_call_wait_ms, and never so long that less than its least useful
	// budget (limits.min_member_call_ms) would be left: one that never gets them is
	// never sent and says nothing of the member.
	release, ok := rb.calls.Slots(r.Context(), m.id, deadline, true, rb.calls.Wait)
	if !ok {
		c.routeNotSent(w, r, m, rb.calls)
		return
	}
	defer release()
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	// The trace goes on the context before the request is built: adding it to a built
	// request would copy the request.
	tctx, sent := outbound.TraceSent(ctx)
	start := time.Now()
	out, err := http.NewRequestWithContext(tctx, r.Method, m.url(path, r.URL.RawQuery), outBody)
	if err != nil {
		fhir.Write(w, http.StatusBadGateway, fhir.Outcome("exception", "the request cannot be sent to member "+m.id))
		return
	}
	proxy.RoutedHeaders(out, r, rb.prefix, rb.trusted, rb.calls.Via[len(rb.calls.Via)-1], length)
	span := outbound.MemberSpanOn(out, m.id) // the member's traceparent in place of the client's
	res, err := c.client.Do(out)
	if err != nil {
		outbound.EndMemberSpan(span, outbound.Call{Broken: true, Expired: errors.Is(ctx.Err(), context.DeadlineExceeded),
			ClientGone: errors.Is(r.Context().Err(), context.Canceled), NotSent: !sent.Load()}, -1)
		c.routeFailed(w, r, ctx, m, body, time.Since(start), !sent.Load(), err)
		return
	}
	defer res.Body.Close()
	defer outbound.EndMemberSpan(span, outbound.Call{Status: res.StatusCode}, res.ContentLength)
	c.passAnswer(w, r, ctx, m, res, rb)
}

// routedBody reads the client's body before the call takes its slots
// (limits.max_routed_body_buffer_bytes): a body that fits is read whole, a longer one
// up to the buffer, so that a client that sends its body slowly, or never, holds none
// of the member's calls. One that does not arrive in time, or breaks off, is the
// client's 408 or 400 (ok false, answered); the member was never asked. body is the
// rest still to come from the client (nil when it was read whole), length what the
// member is told.
func routedBody(w http.ResponseWriter, r *http.Request, limit int64) (outBody io.Reader, body *proxy.ClientBody, length int64, ok bool) {
	length = r.ContentLength
	if r.ContentLength == 0 {
		return nil, nil, length, true
	}
	prefix, whole, err := proxy.ReadPrefix(r.Body, r.ContentLength, limit)
	if err != nil {
		// A client that half-closed its side cancels the request's context: it
		// may still read the answer.
		proxy.BodyFault(w, r.Context(), err)
		return nil, nil, 0, false
	}
	switch {
	case whole && len(prefix) == 0:
		return nil, nil, 0, true
	case whole:
		return bytes.NewReader(prefix), nil, int64(len(prefix)), true
	}
	body = proxy.NewClientBody(r.Body)
	return io.MultiReader(bytes.NewReader(prefix), body), body, length, true
}

// routeFailed answers a routed call that got no answer (err) after elapsed: the
// client's fault when its body broke or was held up, else the member's outcome.
func (c *caller) routeFailed(w http.ResponseWriter, r *http.Request, ctx context.Context, m *member, body *proxy.ClientBody, elapsed time.Duration, notSent bool, err error) {
	if body != nil && body.ClientsFault(ctx, elapsed) {
		// The client broke its upload or held it past the deadline: the member
		// did nothing wrong, its state stays; the member's connection went with
		// the failed request.
		proxy.ClientFault(w, ctx, body)
		return
	}
	call := outbound.Call{
		Broken:     true,
		Expired:    errors.Is(ctx.Err(), context.DeadlineExceeded),
		ClientGone: errors.Is(r.Context().Err(), context.Canceled),
		NotSent:    notSent,
	}
	switch c.observe(m, call) {
	case outbound.Cancelled:
		// Nobody is listening; nothing to write.
	case outbound.Unreachable:
		if outbound.HeadTooLarge(err) {
			fhir.Write(w, http.StatusBadGateway, fhir.Outcome("transient", fmt.Sprintf("member %s answered with headers longer than %d KiB", m.id, MaxMemberHeaderBytes>>10)))
			break
		}
		fhir.Write(w, http.StatusBadGateway, fhir.Outcome("transient", "member "+m.id+" is unreachable"))
	case outbound.Timeout:
		fhir.Write(w, http.StatusGatewayTimeout, fhir.Outcome("timeout", "member "+m.id+" did not answer within the request budget"))
	default:
		fhir.Write(w, http.StatusBadGateway, fhir.Outcome("transient", "member "+m.id+" is unreachable"))
	}
}

// passAnswer passes the member's answer res on to the client (proxy.PassAnswer): its
// status recorded first, a 1xx refused, and a body that breaks off recorded and
// aborting the client's connection.
func (c *caller) passAnswer(w http.ResponseWriter, r *http.Request, ctx context.Context, m *member, res *http.Response, rb routedBase) {
	// The status line is the member's answer: record it before the body is passed
	// on, so the report is never behind what the client already saw. A body that
	// then breaks off is recorded again, as down.
	call := outbound.Call{Status: res.StatusCode}
	c.observe(m, call)
	if res.StatusCode < http.StatusOK {
		// Go's client passes on 101 Switching Protocols alone of the 1xx (100 and
		// 103 are read past). No client asked to switch: Upgrade is hop-by-hop and
		// never sent on, so a member's switch would hand the client a raw connection
		// it cannot read.
		fhir.Write(w, http.StatusBadGateway, fhir.Outcome("processing", fmt.Sprintf(
			"member %s answered HTTP %d, an interim answer to a request that asked for none", m.id, res.StatusCode)))
		return
	}
	var t proxy.StreamTimes
	abort, readErr := proxy.PassAnswer(w, r, res, proxy.Backend{Name: "member " + m.id, Base: strings.TrimSuffix(m.base.String(), "/"),
		Route: rb.gateway + "/nodes/" + m.id + "/fhir", MaxBody: rb.calls.MaxBody,
		Scrub:  func(text string) string { return scrubMember(m, rb.gateway, text) },
		Issues: func(body []byte) []fhir.Issue { return memberIssues(m, rb.gateway, body) }}, &t)
	if readErr != nil {
		call.Broken = true
		call.Expired = errors.Is(ctx.Err(), context.DeadlineExceeded)
		call.ClientGone = errors.Is(r.Context().Err(), context.Canceled)
		// A budget spent mostly waiting for the client to take the bytes is the
		// client's: the member kept its state.
		if !call.Expired || t.Writing < t.Reading {
			c.observe(m, call)
		}
	}
	if abort {
		proxy.Abort(w)
	}
}

// routeNotSent answers a routed request whose call never got its slots in time: 503
// with Retry-After, the member never asked and its state unchanged.
func (c *caller) routeNotSent(w http.ResponseWriter, r *http.Request, m *member, cs *calls) {
	if errors.Is(r.Context().Err(), context.Canceled) {
		return // the client left
	}
	w.Header().Set("Retry-After", ShedRetryAfter)
	fhir.Write(w, http.StatusServiceUnavailable, fhir.Outcome("throttled", fmt.Sprintf(
		"member %s was not asked: the gateway's calls to it (limits.max_member_calls, limits.max_member_calls_per_member) stayed busy for limits.member_call_wait_ms (%d ms), or for as long as leaves the call limits.min_member_call_ms (%d ms): retry after %s s",
		m.id, cs.Wait.Milliseconds(), cs.MinCall.Milliseconds(), ShedRetryAfter)))
}
