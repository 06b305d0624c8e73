package federation

import (
	"net"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
)

// auditRefused is the answer to a request whose audit record could not be stored
// under audit.on_failure = "refuse": no member was asked.
var auditRefused = operationOutcome("transient", "the audit record of this request could not be stored, so it was not made: retry later")

// audited records the access the request is about to make, before any member is
// asked (Options.Audit; nothing without [audit]). It reports false when it answered
// the request itself: a 503 OperationOutcome, the record not stored and on_failure
// "refuse". Under "serve" the request goes on and the missing record is logged.
func (s *Surface) audited(c *gin.Context, st *settings, kind audit.Kind, resourceType, query string, members []string) bool {
	t := s.opts.Audit
	if t == nil {
		return true
	}
	r := c.Request
	a := audit.Access{Kind: kind, Method: r.Method, Path: r.URL.Path, Query: query, ResourceType: resourceType, Members: members}
	// The address the connection came from, never a forwarded header a client writes.
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		a.ClientAddress = host
	}
	// The requester is the operator token's subject when the request carries one that
	// verifies; anyone else is anonymous (the data plane takes no token of its own).
	if r.Header.Get("Authorization") != "" && st.verifier.Configured() {
		if p, e := st.verifier.Authorize(r); e == nil {
			a.Issuer, a.Subject = p.Issuer, p.Subject
		}
	}
	err := t.Access(r.Context(), a)
	if err == nil {
		return true
	}
	if t.Refuses() {
		s.log.Error(err, "Refused a request: its audit record could not be stored", "path", r.URL.Path)
		c.Header("Retry-After", "5")
		writeFHIR(c.Writer, http.StatusServiceUnavailable, auditRefused)
		return false
	}
	s.log.Error(err, "Served a request without its audit record (audit.on_failure = \"serve\")", "path", r.URL.Path)
	return true
}

// positionIDs are the ids of the members a search page asks.
func positionIDs(ps []*position) []string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.m.id
	}
	return ids
}
