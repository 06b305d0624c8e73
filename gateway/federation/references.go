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

// narrow applies the reference rule to a first page (identity.Narrow): only the
// members that hold what its references name are asked, each in its own ids, the
// others recorded as not asked. It returns the query the patient-scoped flow reads;
// refused is true when it answered a 400.
func (s *Surface) narrow(c *gin.Context, st *settings, srch *search, q searchquery.Query, resourceType string) (_ searchquery.Query, refused bool) {
	plan := identity.Narrow(resourceType, q.Kept, srch.gw, st.reg, s.opts.Patient != nil, func(params []string) bool {
		_, named, _ := patient.Find(resourceType, params)
		return named
	})
	if q.Kept = plan.Params; plan.Refusal != "" {
		fhir.Write(c.Writer, http.StatusBadRequest, fhir.ParamOutcome("invalid", plan.Param, plan.Refusal))
		return q, true
	}
	kept := srch.positions[:0]
	for _, p := range srch.positions {
		params, ok := plan.Only[p.m.id]
		if plan.Only == nil {
			kept = append(kept, p)
			continue
		} else if !ok {
			srch.notAsked = append(srch.notAsked, Record{ID: p.m.id, Outcome: outbound.Excluded, ExcludedBy: "reference"})
			continue
		}
		p.cursor = "/" + resourceType + "?" + searchquery.Query{Kept: params, Count: q.Count, SummaryCount: q.SummaryCount, SortRaw: q.SortRaw}.MemberQuery()
		kept = append(kept, p)
	}
	srch.positions = kept
	return q, false
}

// IsMember and Domain are the registry as identity.Narrow reads it.
func (r *registry) IsMember(id string) bool { return r.byID[id] != nil }

func (r *registry) Domain(id string) string {
	if m := r.byID[id]; m != nil {
		return m.domain
	}
	return ""
}
