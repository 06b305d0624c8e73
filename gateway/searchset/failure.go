package searchset

import (
	"net/http"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/outbound"
)

// Failure is what a page tells of a member whose part did not come to ok
// (docs/data-plane.md, "A federated search"): named by its id, never its address.
type Failure struct {
	Member  string
	Outcome outbound.Outcome
	// Status is the member's HTTP status, 0 when it did not answer.
	Status int
	// Reason, when not empty, says which limit its answer passed (its code is then
	// too-costly).
	Reason string
	// Issues are the member's own issues, scrubbed, at most a few.
	Issues []fhir.Issue
	// Remaining is how many of its matches the walk cannot reach, -1 when unknown.
	Remaining int
}

// describe says what happened: the reason when it names a limit, else the outcome.
func (f Failure) describe() string {
	if f.Reason != "" {
		return f.Reason
	}
	return outbound.Describe(f.Member, f.Outcome, f.Status)
}

// code is the issue code of the failure: too-costly for an answer past a limit.
func (f Failure) code() string {
	if f.Reason != "" && f.Status >= 200 {
		return "too-costly"
	}
	return outbound.IssueCode(f.Outcome)
}

// Entry is the page's warning OperationOutcome entry of the failure, the member's
// own issues carried.
func (f Failure) Entry() []byte {
	oo := fhir.OperationOutcome{ResourceType: "OperationOutcome", Issue: []fhir.Issue{{
		Severity: "warning", Code: f.code(), Diagnostics: f.describe() + "; its results are missing from this page" + UnreachedNote(f.Remaining),
	}}}
	oo.Issue = append(oo.Issue, f.Issues...)
	return fhir.OutcomeEntry(oo)
}

// Refusal is the answer when the client asked for strict handling and the member
// refused the search: its 400, its own issues carried.
func (f Failure) Refusal() fhir.OperationOutcome {
	oo := fhir.OperationOutcome{ResourceType: "OperationOutcome", Issue: []fhir.Issue{{
		Severity: "error", Code: "processing", Diagnostics: outbound.Describe(f.Member, f.Outcome, f.Status) + " and the client asked for Prefer: handling=strict",
	}}}
	oo.Issue = append(oo.Issue, f.Issues...)
	return oo
}

// NoneSucceeded is the answer when no member asked succeeded: 504 when every one
// timed out, 400 when every one refused the request (4xx), 502 otherwise; one issue
// per member, with its own first issue's text when no limit was passed.
func NoneSucceeded(failed []Failure) (int, fhir.OperationOutcome) {
	allTimeout, allRefused := true, true
	oo := fhir.OperationOutcome{ResourceType: "OperationOutcome"}
	for _, f := range failed {
		allTimeout = allTimeout && f.Outcome == outbound.Timeout
		allRefused = allRefused && f.Outcome == outbound.NodeError && f.Status >= 400 && f.Status < 500
		diag := f.describe()
		if f.Reason == "" && len(f.Issues) > 0 && f.Issues[0].Diagnostics != "" {
			diag += ": " + f.Issues[0].Diagnostics
		}
		oo.Issue = append(oo.Issue, fhir.Issue{Severity: "error", Code: f.code(), Diagnostics: diag})
	}
	switch {
	case allTimeout:
		return http.StatusGatewayTimeout, oo
	case allRefused:
		return http.StatusBadRequest, oo
	}
	return http.StatusBadGateway, oo
}

// MemberNote is a member's own OperationOutcome entry (a lenient server's warning) as
// the page passes it on: the member named, its issues (scrubbed) carried.
func MemberNote(member string, issues []fhir.Issue) []byte {
	oo := fhir.OperationOutcome{ResourceType: "OperationOutcome", Issue: []fhir.Issue{{
		Severity: "information", Code: "informational", Diagnostics: "member " + member + " reported on the search",
	}}}
	oo.Issue = append(oo.Issue, issues...)
	return fhir.OutcomeEntry(oo)
}
