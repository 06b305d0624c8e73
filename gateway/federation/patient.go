package federation

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/gateway/scrub"
	"github.com/ferrofed/ferrofed/gateway/searchquery"
)

// PatientFlow is the flow of patient-scoped searches: *patient.Flow.
type PatientFlow interface {
	// Plan plans the first page of a search; scoped is false when it names no patient.
	Plan(ctx context.Context, q patient.Query) (plan patient.Plan, scoped bool, err error)
	// UseMembers makes members' keys the ones the flow maps and localizes by.
	UseMembers(members []config.Member)
}

// planPatient runs the patient-scoped flow (Options.Patient, gateway/bindings/patient)
// for the first page of a search whose positions ask every member: when the search
// names a patient, the positions become the members the flow asks, each with its own
// query, and the members it dropped become excluded records. answered is true when it
// answered the request itself: a refused patient parameter (400), or a step that
// failed closed (its status, no member asked).
func (s *Surface) planPatient(ctx context.Context, c *gin.Context, st *settings, srch *search, q searchquery.Query, resourceType string) (answered bool) {
	pq := patient.Query{ResourceType: resourceType, Params: q.Kept, Members: positionIDs(srch.positions)}
	// The requester, as the audit trail names it: the verified token's (gateway/access).
	if v, ok := c.Get(auth.PrincipalKey); ok {
		pq.Issuer, pq.Subject = v.(*auth.Principal).Issuer, v.(*auth.Principal).Subject
	}
	plan, scoped, err := s.opts.Patient.Plan(ctx, pq)
	var refusal *patient.Refusal
	switch {
	case errors.As(err, &refusal):
		fhir.Write(c.Writer, http.StatusBadRequest, fhir.ParamOutcome("invalid", refusal.Param, refusal.Diagnostics))
		return true
	case err != nil:
		fhir.Write(c.Writer, http.StatusBadGateway, fhir.Outcome("exception", "the patient-scoped search could not be planned"))
		return true
	case !scoped:
		return false
	case plan.Fail != nil:
		if plan.Fail.Status == http.StatusServiceUnavailable {
			c.Header("Retry-After", "5")
		}
		fhir.Write(c.Writer, plan.Fail.Status, fhir.Outcome(plan.Fail.Code, scrub.Text(plan.Fail.Diagnostics)))
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
		kept := append([]string(nil), q.Kept...)
		kept[plan.Scope.Index] = a.Param
		p.cursor = "/" + resourceType + "?" + searchquery.Query{Kept: kept, Count: q.Count, SummaryCount: q.SummaryCount, SortRaw: q.SortRaw}.MemberQuery()
		srch.positions = append(srch.positions, p)
	}
	for _, e := range plan.Excluded {
		srch.excluded = append(srch.excluded, Record{ID: e.Member, Outcome: outbound.Excluded, ExcludedBy: e.By})
	}
	if nm := plan.NoMatch; nm != nil {
		srch.flowEntries = append(srch.flowEntries, fhir.OutcomeEntry(fhir.OperationOutcome{ResourceType: "OperationOutcome", Issue: []fhir.Issue{{
			Severity: "warning", Code: nm.Code, Diagnostics: scrub.Text(nm.Diagnostics)}}}))
	}
	return false
}
