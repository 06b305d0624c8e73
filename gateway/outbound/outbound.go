// Package outbound is the one rule of what a call the gateway sent (to a member, or
// to a binding's service) came to: whether the request left the gateway at all
// (TraceSent), whether its answer's head was refused for its size (HeadTooLarge), and
// the classification of a member call into its outcome and the state it observed
// (Classify). A call that never left says nothing of the other side.
package outbound

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ferrofed/ferrofed/gateway/dependencies"
)

// Outcome is the result of one member's part in a federated request, as
// meta.federation and the probe report it.
type Outcome string

const (
	// OK: the member answered 2xx with a body the gateway could use.
	OK Outcome = "ok"
	// NodeError: the member answered, but not with something usable: 4xx or 5xx, a
	// redirect, a body over the cap or one that is not the expected FHIR resource.
	NodeError Outcome = "node-error"
	// Timeout: the member did not answer (or finish its body) within the budget.
	Timeout Outcome = "timeout"
	// Unreachable: no answer: refused, reset, or a broken body.
	Unreachable Outcome = "unreachable"
	// Excluded: a step of a patient-scoped search dropped the member (Record.ExcludedBy
	// says which); it was never contacted.
	Excluded Outcome = "excluded"
	// Cancelled: the client went away first. Never sent to anyone (there is no one to
	// send it to); it marks a call whose result must not be recorded.
	Cancelled Outcome = "cancelled"
)

// Call is what the gateway saw of one request it sent to a member.
type Call struct {
	// Status is the member's HTTP status, 0 when no status line came back.
	Status int
	// Broken is true when the exchange failed: no answer at all, or a body broken off
	// (reset, or still arriving when the budget ran out).
	Broken bool
	// Expired is true when the member's budget ran out (the request budget, or the
	// client's own deadline).
	Expired bool
	// ClientGone is true when the client cancelled its request (disconnected).
	ClientGone bool
	// Unusable is true when the member answered 2xx with a body the gateway refused
	// (over the size cap, not a Bundle).
	Unusable bool
	// NotSent is true when the request never left the gateway: its budget was spent
	// before a name was looked up or a connection was sought or reused.
	NotSent bool
}

// Classify maps one call to its outcome and to the state it observed of the member's
// endpoint. record is false when the call says nothing about the member: the client
// went away and took the request with it, so the member is neither up nor down.
//
// The outcome speaks of the request (a 400 is a node-error); the state speaks of the
// member (a member that answers 400 is up).
func Classify(c Call) (outcome Outcome, state dependencies.State, record bool) {
	switch {
	case c.Broken && c.ClientGone && !c.Expired:
		return Cancelled, "", false
	case c.Broken && c.NotSent:
		// Nothing reached the member: its outcome is the budget's, its state is
		// whatever it was.
		if c.Expired {
			return Timeout, "", false
		}
		return Unreachable, "", false
	case c.Broken && c.Expired:
		return Timeout, dependencies.Down, true
	case c.Broken:
		return Unreachable, dependencies.Down, true
	case c.Status < http.StatusOK || c.Status >= http.StatusMultipleChoices:
		return NodeError, dependencies.FromHTTP(true, c.Status), true
	case c.Unusable:
		return NodeError, dependencies.Up, true
	default:
		return OK, dependencies.Up, true
	}
}

// TraceSent returns ctx with a trace that reports whether a request sent with it left
// the gateway: a name was looked up, or a connection was sought or reused. A request
// whose budget ran out before any of that never reached the other side, and says
// nothing of it.
func TraceSent(ctx context.Context) (context.Context, *atomic.Bool) {
	// One allocation for the flag and the trace; the three hooks share it.
	t := new(sentTrace)
	t.trace = httptrace.ClientTrace{
		DNSStart:     func(httptrace.DNSStartInfo) { t.sent.Store(true) },
		ConnectStart: func(string, string) { t.sent.Store(true) },
		GotConn:      func(httptrace.GotConnInfo) { t.sent.Store(true) },
	}
	return httptrace.WithClientTrace(ctx, &t.trace), &t.sent
}

type sentTrace struct {
	sent  atomic.Bool
	trace httptrace.ClientTrace
}

// HeadTooLarge reports whether err is the transport's refusal of an answer head past
// its MaxResponseHeaderBytes. net/http has no value for it, only its text.
func HeadTooLarge(err error) bool {
	return err != nil && strings.Contains(err.Error(), "server response headers exceeded")
}

// NewTransport is the one connection pool every member call shares. Its limits are
// about the gateway's own safety: a member that accepts connections and then says
// nothing must not hold a dial or a TLS handshake past a few seconds, and keep-alive
// connections are kept so that a fan-out does not pay a handshake per member per query.
func NewTransport(maxHeaderBytes int64) *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
		// A routed answer goes back byte for byte as the member sent it, headers
		// included; members sit on cluster networks where compression buys little.
		DisableCompression: true,
		// A member's answer head is bounded as its body is: Go's default is 10 MiB,
		// held per call in flight (issue 30's header bomb).
		MaxResponseHeaderBytes: maxHeaderBytes,
	}
}

// NewClient wraps the transport. Redirects are not followed: a member that redirects
// is answering, and following it could take a client's query to a host that is not a
// member. The budget is carried by each request's context, not by Client.Timeout.
func NewClient(rt http.RoundTripper) *http.Client {
	return &http.Client{
		Transport:     rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// IssueCode is the FHIR IssueType of a member call's outcome.
func IssueCode(o Outcome) string {
	switch o {
	case Timeout:
		return "timeout"
	case Unreachable:
		return "transient"
	}
	return "processing"
}

// Describe says what a member call came to (its outcome, its status, 0 for none),
// naming the member by id only.
func Describe(id string, o Outcome, status int) string {
	switch o {
	case Timeout:
		return fmt.Sprintf("member %s did not answer within the request budget", id)
	case Unreachable:
		if status != 0 {
			return fmt.Sprintf("member %s broke its answer off (HTTP %d)", id, status)
		}
		return fmt.Sprintf("member %s is unreachable", id)
	}
	if status >= 200 && status < 300 {
		return fmt.Sprintf("member %s answered HTTP %d with a body that is not a searchset Bundle", id, status)
	}
	return fmt.Sprintf("member %s answered HTTP %d", id, status)
}

// HeadBytes is about what res's head took on the wire: its status line and headers.
func HeadBytes(res *http.Response, max int64) int64 {
	n := int64(len(res.Proto) + len(res.Status) + 4)
	for k, vs := range res.Header {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4)
		}
	}
	return min(n, max)
}
