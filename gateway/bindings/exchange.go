package bindings

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/gateway/scrub"
)

// Recorder stores one AuditEvent and returns once it is stored; *audit.Trail is one,
// NoRecorder the one of a gateway without [audit].
type Recorder interface {
	Record(ctx context.Context, event []byte) error
}

// NoRecorder stores nothing and never fails: the recorder of a gateway without
// [audit].
type NoRecorder struct{}

// Record stores nothing.
func (NoRecorder) Record(context.Context, []byte) error { return nil }

// Exchange is what one request of a patient-scoped binding to its service came to.
type Exchange struct {
	// Sent is true when the request left the gateway: a name was looked up, or a
	// connection was sought or reused. An exchange not sent says nothing of the service.
	Sent bool
	// Answered is true when a status line came back and the body was read to its end
	// or to the cap; a body broken off (reset, past the budget) is no answer.
	Answered bool
	// Status is the service's status, 0 without an answer.
	Status int
	// Header is the answer's header (a create's Location), nil without an answer.
	Header http.Header
	// Body is what was read of the answer, at most the binding's cap.
	Body []byte
	// TooLarge is true when the body went past the cap: answered, but unusable.
	TooLarge bool
	// HeadTooLarge is true when the answer's head went past MaxResponseHeaderBytes:
	// answered and TooLarge too (no status, no body), and the service's state is
	// failing.
	HeadTooLarge bool
	// Expired is true when the budget (the binding's, or the request's) ran out first.
	Expired bool
	// Err is the transport's or the body read's error, nil when answered.
	Err error
}

// Do sends r with the binding's credentials within ctx (the request's budget; the
// client's own timeout bounds it further) and reads the answer up to the cap. A
// context already spent sends nothing.
func (c *Client) Do(ctx context.Context, r *http.Request) Exchange {
	if ctx.Err() != nil {
		return Exchange{Expired: true, Err: ctx.Err()}
	}
	if err := c.Authorize(r); err != nil {
		return Exchange{Err: err}
	}
	tctx, sent := outbound.TraceSent(ctx)
	resp, err := c.HTTP.Do(r.WithContext(tctx))
	if err != nil {
		if outbound.HeadTooLarge(err) {
			return Exchange{Sent: true, Answered: true, TooLarge: true, HeadTooLarge: true}
		}
		return Exchange{Sent: sent.Load(), Expired: expired(ctx, err), Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	switch {
	case errors.Is(err, ErrResponseTooLarge):
		return Exchange{Sent: true, Answered: true, Status: resp.StatusCode, Header: resp.Header, Body: body, TooLarge: true}
	case err != nil:
		return Exchange{Sent: true, Status: resp.StatusCode, Expired: expired(ctx, err), Err: err}
	}
	return Exchange{Sent: true, Answered: true, Status: resp.StatusCode, Header: resp.Header, Body: body}
}

func expired(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// State is the state the exchange observed of its service under the common rule of the
// patient-scoped bindings (docs/bindings.md, "The dependency report"): an answer below
// 500 is up (whatever it said), a 5xx is failing, no answer (refused, reset, past the
// budget) is down, and an exchange whose audit record could not be stored (stored
// false) is failing. ok is false for an exchange that never left the gateway: it
// changes nothing.
func (e Exchange) State(stored bool) (s dependencies.State, ok bool) {
	switch {
	case !e.Sent:
		return "", false
	case !stored, e.HeadTooLarge:
		return dependencies.Failing, true
	}
	return dependencies.FromHTTP(e.Answered, e.Status), true
}

// Observe puts the exchange's state under key in tracker.
func (e Exchange) Observe(tracker *dependencies.Tracker, key string, stored bool) {
	if s, ok := e.State(stored); ok {
		tracker.SetService(key, s, "")
	}
}

// Failure is a step of a patient-scoped search that could not give its answer; a
// step that fails closed answers the client with it and asks no member.
type Failure struct {
	// Status is the client's status: 502 (answered badly), 504 (no answer in time),
	// 503 (refused by policy, or the exchange's audit record not stored).
	Status int
	// Code is the OperationOutcome issue code (transient, timeout, forbidden).
	Code string
	// Diagnostics says which step and why, never the service's URL or its body; what
	// FailureOf makes of an answer's fault went through gateway/scrub.
	Diagnostics string
}

func (f *Failure) Error() string { return f.Diagnostics }

// FailureOf is the failure of an exchange that did not give a usable answer, for the
// step named step; why says what was wrong with an answer that came back.
func (e Exchange) FailureOf(step, why string) *Failure {
	switch {
	case e.HeadTooLarge:
		return &Failure{Status: http.StatusBadGateway, Code: "transient", Diagnostics: fmt.Sprintf("the %s answered with headers longer than %d KiB", step, MaxResponseHeaderBytes>>10)}
	case e.Expired:
		return &Failure{Status: http.StatusGatewayTimeout, Code: "timeout", Diagnostics: "the " + step + " did not answer within its budget"}
	case !e.Answered:
		return &Failure{Status: http.StatusBadGateway, Code: "transient", Diagnostics: "the " + step + " could not be reached"}
	case e.TooLarge:
		return &Failure{Status: http.StatusBadGateway, Code: "transient", Diagnostics: "the " + step + "'s answer is larger than its max_body_bytes"}
	}
	// why may quote the answer (a parser's error): the rule of gateway/scrub applies.
	return &Failure{Status: http.StatusBadGateway, Code: "transient", Diagnostics: scrub.Text("the " + step + " " + why)}
}

// AuditFailure is the failure of an exchange whose audit record could not be stored:
// its answer is not used.
func AuditFailure(step string) *Failure {
	return &Failure{Status: http.StatusServiceUnavailable, Code: "transient",
		Diagnostics: "the audit record of the " + step + "'s exchange could not be stored, so its answer was not used: retry later"}
}

// Finish ends one exchange of a patient-scoped binding: it records the exchange
// (RecordExchange), then sets ev.Key's state in tracker. stored is false when the
// record could not be stored: the exchange is failing and its answer must not be used.
func Finish(ctx context.Context, ex Exchange, ev QueryEvent, rec Recorder, timeout time.Duration, tracker *dependencies.Tracker) (stored bool) {
	stored = RecordExchange(ctx, ex, ev, rec, timeout)
	ex.Observe(tracker, ev.Key, stored)
	return stored
}

// RecordExchange records, when the request left the gateway, the exchange's AuditEvent
// (ev, with its outcome from ex) through rec within timeout, whatever the client does
// meanwhile; stored is false when the record could not be stored. The directory
// records its exchanges with it alone: it sets its state once a whole refresh is done.
func RecordExchange(ctx context.Context, ex Exchange, ev QueryEvent, rec Recorder, timeout time.Duration) (stored bool) {
	stored = true
	if ex.Sent {
		ev.Outcome = ex.AuditOutcome()
		body, err := ev.Event()
		if err == nil && rec != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
			err = rec.Record(rctx, body)
			cancel()
		}
		stored = err == nil
	}
	return stored
}
