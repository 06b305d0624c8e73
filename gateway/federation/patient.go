package federation

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/scrub"
)

// planPatient runs the patient-scoped flow (Options.Patient, gateway/bindings/patient)
// for the first page of a search whose positions ask every member: when the search
// names a patient, the positions become the members the flow asks, each with its own
// query, and the members it dropped become excluded records. answered is true when it
// answered the request itself: a refused patient parameter (400), or a step that
// failed closed (its status, no member asked).
func (s *Surface) planPatient(ctx context.Context, c *gin.Context, st *settings, srch *search, q searchQuery, resourceType string) (answered bool) {
	pq := patient.Query{ResourceType: resourceType, Params: q.kept, Members: positionIDs(srch.positions)}
	// The requester, as the audit trail names it: the operator token's subject when
	// the request carries one that verifies.
	if r := c.Request; r.Header.Get("Authorization") != "" && st.verifier.Configured() {
		if p, e := st.verifier.Authorize(r); e == nil {
			pq.Issuer, pq.Subject = p.Issuer, p.Subject
		}
	}
	plan, scoped, err := s.opts.Patient.Plan(ctx, pq)
	var refusal *patient.Refusal
	switch {
	case errors.As(err, &refusal):
		writeFHIR(c.Writer, http.StatusBadRequest, paramOutcome("invalid", refusal.Param, refusal.Diagnostics))
		return true
	case err != nil:
		writeFHIR(c.Writer, http.StatusBadGateway, operationOutcome("exception", "the patient-scoped search could not be planned"))
		return true
	case !scoped:
		return false
	case plan.Fail != nil:
		if plan.Fail.Status == http.StatusServiceUnavailable {
			c.Header("Retry-After", "5")
		}
		writeFHIR(c.Writer, plan.Fail.Status, operationOutcome(plan.Fail.Code, scrub.Text(plan.Fail.Diagnostics)))
		return true
	}
	byID := make(map[string]*position, len(srch.positions))
	for _, p := range srch.positions {
		byID[p.m.id] = p
	}
	srch.positions = srch.positions[:0]
	for _, a := range plan.Asks {
		p, ok := byID[a.Member]
		if !ok {
			continue
		}
		kept := append([]string(nil), q.kept...)
		kept[plan.Scope.Index] = a.Param
		p.cursor = "/" + resourceType + "?" + searchQuery{kept: kept, count: q.count, summaryCount: q.summaryCount, sortRaw: q.sortRaw}.memberQuery()
		srch.positions = append(srch.positions, p)
	}
	for _, e := range plan.Excluded {
		srch.excluded = append(srch.excluded, Record{ID: e.Member, Outcome: Excluded, ExcludedBy: e.By})
	}
	if nm := plan.NoMatch; nm != nil {
		srch.flowEntries = append(srch.flowEntries, outcomeEntry(OperationOutcome{ResourceType: "OperationOutcome", Issue: []Issue{{
			Severity: "warning", Code: nm.Code, Diagnostics: scrub.Text(nm.Diagnostics)}}}))
	}
	return false
}
