package federation

import (
	"context"
	"errors"
	"net/http"
	"time"

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
	// Reconsent asks consent again for a next page (patient.Flow.Reconsent).
	Reconsent(ctx context.Context, issuer, subject string, c patient.Consented, members []string) (map[string]bool, patient.Consented, error)
}

// reconsent asks consent again for a next page whose first page's decision is past
// the time it may be relied on (docs/bindings.md, "Every door asks the same
// questions"): the members it no longer permits are dropped, as excluded by consent;
// a failure fails closed. It reports whether the page goes on.
func (s *Surface) reconsent(c *gin.Context, srch *search) bool {
	tc := srch.consent
	if tc == nil || s.opts.Patient == nil || time.Now().UnixMilli() < tc.Until {
		return true
	}
	issuer, subject := auth.PrincipalOf(c).Requester()
	permitted, again, err := s.opts.Patient.Reconsent(c.Request.Context(), issuer, subject,
		patient.Consented{ResourceType: tc.Type, System: tc.System, Value: tc.Value}, positionIDs(srch.positions))
	if err != nil {
		c.Header("Retry-After", "5")
		fhir.Write(c.Writer, http.StatusServiceUnavailable, fhir.Outcome("transient", "the consent pre-filter could not be asked again for this page"))
		return false
	}
	kept := srch.positions[:0]
	for _, p := range srch.positions {
		if permitted[p.m.id] {
			kept = append(kept, p)
		} else {
			srch.excluded = append(srch.excluded, Record{ID: p.m.id, Outcome: outbound.Excluded, ExcludedBy: patient.ByConsent})
		}
	}
	srch.positions = kept
	srch.consent = &searchquery.TokenConsent{Type: again.ResourceType, System: again.System, Value: again.Value, Until: again.Until.UnixMilli()}
	return true
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
	pq.Issuer, pq.Subject = auth.PrincipalOf(c).Requester()
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
	if pc := plan.Consent; pc != nil {
		srch.consent = &searchquery.TokenConsent{Type: pc.ResourceType, System: pc.System, Value: pc.Value, Until: pc.Until.UnixMilli()}
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
