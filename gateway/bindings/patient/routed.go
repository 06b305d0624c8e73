package patient

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/scrub"
	"github.com/ferrofed/ferrofed/gateway/smart"
)

// Routed is a request routed to one member ({base}/nodes/{member}/fhir/...), as the
// flow decides it: the same questions as a federated search's (Plan), asked of that
// one member (docs/bindings.md, "Every door asks the same questions").
type Routed struct {
	Member string
	// Method is the HTTP method; Segs the path's segments under the member's FHIR
	// base, normalised; RawQuery the query as the client sent it (a POST _search's: the
	// URL's query, then its form).
	Method   string
	Segs     []string
	RawQuery string
	// Issuer and Subject are the requester's, as Query's.
	Issuer, Subject string
}

// RoutedVerdict is the flow's decision on a Routed request. With Answer nil the
// request goes on, with RawQuery in place of the client's query (a POST _search's form)
// when it is not empty: the patient named by the member's own id; otherwise Answer
// answers it and no member is asked.
type RoutedVerdict struct {
	RawQuery string
	Answer   func(w http.ResponseWriter)
}

// PlanRouted decides a routed request that names a patient: a read (vread, history) of
// Patient/{id}, a compartment search (Patient/{id}/{type}), or a search whose
// parameters name one (Find). A patient named by the member's own id is asked about by
// the member's identifier_system. A member a step excludes answers nothing: a read is
// a 404 and a search an empty searchset, the same as for a patient it does not hold,
// so that no client learns why. A read by id of another type of the patient
// compartment is refused while consent is configured: the flow cannot see whose it is.
func (f *Flow) PlanRouted(ctx context.Context, r Routed) RoutedVerdict {
	if k := f.keys.Load(); k == nil || !k.known[r.Member] {
		return RoutedVerdict{} // no such member: the route's 404
	}
	q, read, v := f.routedQuery(r)
	if v != nil || q == nil {
		return verdictOr(v)
	}
	q.Members, q.Issuer, q.Subject = []string{r.Member}, r.Issuer, r.Subject
	plan, scoped, err := f.Plan(ctx, q.Query)
	var refusal *Refusal
	switch {
	case errors.As(err, &refusal):
		return answer(http.StatusBadRequest, fhir.ParamOutcome("invalid", refusal.Param, refusal.Diagnostics))
	case err != nil:
		return answer(http.StatusBadGateway, fhir.Outcome("exception", "the patient-scoped request could not be planned"))
	case !scoped:
		return RoutedVerdict{}
	case plan.Fail != nil:
		return answer(plan.Fail.Status, fhir.Outcome(plan.Fail.Code, scrub.Text(plan.Fail.Diagnostics)))
	case len(plan.Asks) == 0:
		if read {
			return answer(http.StatusNotFound, fhir.Outcome("not-found", "no such resource"))
		}
		return answer(http.StatusOK, emptySearchset)
	}
	if read || !isSearch(r.Method, r.Segs) || q.ownID {
		return RoutedVerdict{} // the member's own id, as the client named it
	}
	params := strings.Split(r.RawQuery, "&")
	params[plan.Scope.Index] = plan.Asks[0].Param
	return RoutedVerdict{RawQuery: strings.Join(params, "&")}
}

// routedQuery is the search a routed request is planned as, nil when it names no
// patient; read reports a read of the patient (its answer is the resource, not a
// Bundle). v, when not nil, answers the request at once.
func (f *Flow) routedQuery(r Routed) (q *routedSearch, read bool, v *RoutedVerdict) {
	segs := r.Segs
	switch {
	case len(segs) >= 2 && segs[0] == "Patient" && fhir.ValidID(segs[1]) && (len(segs) == 2 || segs[2] == "_history"):
		return f.byMemberID(r.Member, "Patient", segs[1]), true, nil
	case len(segs) == 3 && segs[0] == "Patient" && fhir.ValidID(segs[1]) && fhir.ValidResourceType(segs[2]):
		return f.byMemberID(r.Member, segs[2], segs[1]), false, nil
	case isSearch(r.Method, segs):
		params := strings.Split(r.RawQuery, "&")
		s, ok, err := Find(segs[0], params)
		if err != nil || !ok {
			return &routedSearch{Query: Query{ResourceType: segs[0], Params: params}}, false, nil // Plan answers the refusal, or nothing
		}
		if !s.Identified() {
			// The member's own id, by the member's identifier system.
			asked := f.byMemberID(r.Member, segs[0], s.ID)
			asked.Params = append(append(append([]string(nil), params[:s.Index]...), asked.Params[0]), params[s.Index+1:]...)
			return asked, false, nil
		}
		return &routedSearch{Query: Query{ResourceType: segs[0], Params: params}}, false, nil
	case len(segs) >= 2 && smart.InCompartment(segs[0]) && f.consent != nil:
		v := answer(http.StatusForbidden, fhir.Outcome("forbidden", "consent is asked per patient: read "+segs[0]+
			" through a search that names the patient, not by its id"))
		return nil, false, &v
	}
	return nil, false, nil
}

// isSearch reports whether a routed request is a search of one type: GET (or HEAD)
// [type], or POST [type]/_search (its RawQuery then the URL's query and the form's).
func isSearch(method string, segs []string) bool {
	switch {
	case len(segs) == 0 || !fhir.ValidResourceType(segs[0]):
		return false
	case len(segs) == 1:
		return method == http.MethodGet || method == http.MethodHead
	}
	return len(segs) == 2 && segs[1] == "_search" && method == http.MethodPost
}

// routedSearch is the search a routed request is planned as; ownID reports a patient
// named by the member's own id, which the member is then asked by as the client named
// it.
type routedSearch struct {
	Query
	ownID bool
}

// byMemberID is the search for the patient id of member, by the member's
// identifier system (the bindings know patients by identifier); without one, by the
// id itself, which the flow refuses when its steps need an identifier.
func (f *Flow) byMemberID(member, resourceType, id string) *routedSearch {
	if domain := f.domainOf(member); domain != "" {
		return &routedSearch{Query: Query{ResourceType: resourceType, Params: []string{"patient.identifier=" + url.QueryEscape(domain+"|"+id)}}, ownID: true}
	}
	return &routedSearch{Query: Query{ResourceType: resourceType, Params: []string{"patient=" + url.QueryEscape("Patient/"+id)}}, ownID: true}
}

func (f *Flow) domainOf(member string) string {
	if k := f.keys.Load(); k != nil {
		return k.domain[member]
	}
	return ""
}

var emptySearchset = map[string]any{"resourceType": "Bundle", "type": "searchset"}

func answer(status int, v any) RoutedVerdict {
	return RoutedVerdict{Answer: func(w http.ResponseWriter) { fhir.Write(w, status, v) }}
}

func verdictOr(v *RoutedVerdict) RoutedVerdict {
	if v == nil {
		return RoutedVerdict{}
	}
	return *v
}
