package federation

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/identity"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/gateway/searchquery"
)

// narrow applies the reference rule to a first page (docs/data-plane.md, "References
// in a search"): a search whose references name federated ids asks only the members
// that hold them, each in its own ids, the others recorded as not asked; one that
// gives a member's own id is refused, unless the patient-scoped flow asks about it.
// With the flow, a patient named by a federated id is asked about by the member's
// identifier system (patient.identifier), so that the flow finds the patient wherever
// it is held. It returns the query the flow reads; answered is true when it refused.
func (s *Surface) narrow(c *gin.Context, st *settings, srch *search, q searchquery.Query, resourceType string) (searchquery.Query, bool) {
	isMember := func(id string) bool { return st.reg.byID[id] != nil }
	if s.opts.Patient != nil {
		q.Kept = identity.PatientByIdentifier(resourceType, q.Kept, srch.gw, func(id string) string {
			if m := st.reg.byID[id]; m != nil {
				return m.domain
			}
			return ""
		})
	}
	tr := identity.Translate(q.Kept, srch.gw, isMember)
	if tr.Ambiguous != "" && (s.opts.Patient == nil || !identity.PatientParam(resourceType, tr.Ambiguous)) {
		fhir.Write(c.Writer, http.StatusBadRequest, fhir.ParamOutcome("invalid", tr.Ambiguous, "a member's own id names a different resource at every member: "+
			"name it by its federated id ({member}.{id}, as a search's entries give it), by an identifier (system|value), or ask that member at {base}/nodes/{member}/fhir"))
		return q, true
	}
	if tr.Only == nil {
		return q, false
	}
	if _, named, _ := patient.Find(resourceType, q.Kept); named && s.opts.Patient != nil {
		// The flow asks every member it keeps with the one query: it cannot carry each
		// member's own ids.
		fhir.Write(c.Writer, http.StatusBadRequest, fhir.ParamOutcome("invalid", "(query)", "a search that names its patient cannot also name "+
			"other resources by federated id: name them by identifier, or ask the member at {base}/nodes/{member}/fhir"))
		return q, true
	}
	kept := srch.positions[:0]
	for _, p := range srch.positions {
		params, ok := tr.Only[p.m.id]
		if !ok {
			srch.notAsked = append(srch.notAsked, Record{ID: p.m.id, Outcome: outbound.Excluded, ExcludedBy: "reference"})
			continue
		}
		p.cursor = "/" + resourceType + "?" + searchquery.Query{Kept: params, Count: q.Count, SummaryCount: q.SummaryCount, SortRaw: q.SortRaw}.MemberQuery()
		kept = append(kept, p)
	}
	srch.positions = kept
	return q, false
}
