package fhir

import (
	"sort"
)

// MemberCapability is what the gateway reads of a member's CapabilityStatement.
type MemberCapability struct {
	ResourceType string `json:"resourceType"`
	Rest         []struct {
		Mode     string `json:"mode"`
		Resource []struct {
			Type        string `json:"type"`
			Interaction []struct {
				Code string `json:"code"`
			} `json:"interaction"`
			SearchParam []SearchParam `json:"searchParam"`
		} `json:"resource"`
	} `json:"rest"`
}

// SearchParam is one search parameter of a CapabilityStatement.
type SearchParam struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// SearchType is one resource type the gateway can search, and its parameters.
type SearchType struct {
	Type   string
	Params []SearchParam
}

// searchParamTypes is R4's SearchParamType value set.
var searchParamTypes = map[string]bool{"number": true, "date": true, "string": true, "token": true, "reference": true, "composite": true, "quantity": true, "uri": true, "special": true}

// maxCapResources bounds what is kept of one member's statement.
const maxCapResources = 500

// CommonCapabilities is the types (and, per type, the search parameters of the same
// name and type) that every statement has; a type only counts where the member can
// search it (search-type, or no interactions listed).
func CommonCapabilities(statements []*MemberCapability) []SearchType {
	var common map[string]map[SearchParam]bool
	for _, st := range statements {
		mine := map[string]map[SearchParam]bool{}
		for _, rest := range st.Rest {
			if rest.Mode != "" && rest.Mode != "server" {
				continue
			}
			for i, r := range rest.Resource {
				if i == maxCapResources || !ValidResourceType(r.Type) {
					break
				}
				searchable := len(r.Interaction) == 0
				for _, in := range r.Interaction {
					searchable = searchable || in.Code == "search-type"
				}
				if !searchable {
					continue
				}
				ps := map[SearchParam]bool{}
				for _, p := range r.SearchParam {
					if p.Name != "" && len(p.Name) <= 64 && searchParamTypes[p.Type] {
						ps[p] = true
					}
				}
				mine[r.Type] = ps
			}
		}
		if common == nil {
			common = mine
			continue
		}
		for t, ps := range common {
			theirs, ok := mine[t]
			if !ok {
				delete(common, t)
				continue
			}
			for p := range ps {
				if !theirs[p] {
					delete(ps, p)
				}
			}
		}
	}
	out := make([]SearchType, 0, len(common))
	for t, ps := range common {
		r := SearchType{Type: t}
		for p := range ps {
			r.Params = append(r.Params, p)
		}
		sort.Slice(r.Params, func(i, j int) bool { return r.Params[i].Name < r.Params[j].Name })
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}
