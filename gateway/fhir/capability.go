package fhir

import (
	"fmt"
	"sort"
	"time"
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

// GatewayCapabilityStatement is the gateway's statement, for the gateway's base gw.
func GatewayCapabilityStatement(gw string, common []SearchType, answered, members int, sortKeys string, now time.Time) any {
	type interaction struct {
		Code string `json:"code"`
	}
	type resource struct {
		Type        string        `json:"type"`
		Interaction []interaction `json:"interaction"`
		SearchParam []SearchParam `json:"searchParam,omitempty"`
	}
	resources := make([]resource, 0, len(common))
	for _, r := range common {
		resources = append(resources, resource{Type: r.Type, Interaction: []interaction{{Code: "search-type"}}, SearchParam: r.Params})
	}
	type rest struct {
		Mode          string     `json:"mode"`
		Documentation string     `json:"documentation"`
		Resource      []resource `json:"resource,omitempty"`
	}
	return struct {
		ResourceType   string            `json:"resourceType"`
		Status         string            `json:"status"`
		Date           string            `json:"date"`
		Publisher      string            `json:"publisher"`
		Kind           string            `json:"kind"`
		Software       map[string]string `json:"software"`
		Implementation map[string]string `json:"implementation"`
		FHIRVersion    string            `json:"fhirVersion"`
		Format         []string          `json:"format"`
		Rest           []rest            `json:"rest"`
	}{
		ResourceType: "CapabilityStatement",
		Status:       "active",
		Date:         now.UTC().Format(time.RFC3339),
		Publisher:    "ferrofed",
		Kind:         "instance",
		Software:     map[string]string{"name": "ferrofed"},
		Implementation: map[string]string{
			"description": "ferrofed federation gateway: one FHIR search across its members",
			"url":         gw + "/fhir",
		},
		FHIRVersion: "4.0.1",
		Format:      []string{"json", MediaType},
		Rest: []rest{{
			Mode: "server",
			Documentation: fmt.Sprintf("A search runs on every member; the types and search parameters listed are those all %d of %d members that described themselves have in common. "+
				"Read one member's resource at %s/nodes/{member}/fhir/{type}/{id}. _count, _sort (%s) and _summary=count are the gateway's own.",
				answered, members, gw, sortKeys),
			Resource: resources,
		}},
	}
}
