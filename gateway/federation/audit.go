package federation

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/gateway/fhir"
)

// auditRefused is the answer to a request whose audit record could not be stored
// under audit.on_failure = "refuse".
var auditRefused = fhir.Outcome("transient", "the audit record of this request could not be stored, so it was not made: retry later")

// auditing starts recording the access the request makes (Options.Audit; nothing
// without [audit]) and returns the wait for it: stored reports whether the request may
// be answered, and is false when it answered the request itself, a 503
// OperationOutcome, the record not stored and on_failure "refuse". Under "serve" the
// request is answered anyway and the missing record logged.
//
// The record is stored while the members are asked, not before: a request costs the
// longer of the two, not their sum. No answer leaves the gateway before its record is
// stored; a member may have been asked for a request whose record could then not be
// stored, and that request is refused with nothing of the members' answers in it. The
// record is kept whatever the client does meanwhile (a client that leaves does not
// cancel it), within the request's budget.
func (s *Surface) auditing(c *gin.Context, st *settings, kind audit.Kind, resourceType, query string, members []string) (stored func() bool) {
	t := s.opts.Audit
	if t == nil {
		return func() bool { return true }
	}
	r := c.Request
	a := audit.Access{Kind: kind, Method: r.Method, Path: r.URL.Path, Query: query, ResourceType: resourceType, Members: members}
	// The address the connection came from, never a forwarded header a client writes.
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		a.ClientAddress = host
	}
	// The requester is the verified token's (gateway/access); anyone else is anonymous.
	if p := auth.PrincipalOf(c); p != nil {
		a.Issuer, a.Subject, a.FHIRUser, a.ClientID, a.Scopes = p.Issuer, p.Subject, p.FHIRUser, p.ClientID, p.Scopes
	}
	// The record is queued now, and written while the members are asked; the wait
	// for its sync is bounded by the request's budget, counted from now.
	deadline := time.Now().Add(st.requestTimeout)
	wait := t.Begin(a)
	return func() bool {
		ctx, cancel := context.WithDeadline(context.WithoutCancel(r.Context()), deadline)
		err := wait(ctx)
		cancel()
		if err == nil {
			return true
		}
		if t.Refuses() {
			s.log.Error(err, "Refused a request: its audit record could not be stored", "path", r.URL.Path)
			c.Header("Retry-After", "5")
			fhir.Write(c.Writer, http.StatusServiceUnavailable, auditRefused)
			return false
		}
		s.log.Error(err, "Served a request without its audit record (audit.on_failure = \"serve\")", "path", r.URL.Path)
		return true
	}
}

// positionIDs are the ids of the members a search page asks.
func positionIDs(ps []*position) []string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.m.id
	}
	return ids
}
