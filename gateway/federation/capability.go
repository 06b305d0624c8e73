package federation

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"
)

// The gateway's own CapabilityStatement (GET {base}/fhir/metadata): what a client can
// search through it, which is what every member that describes itself has in common.
// The members' statements are asked when a client asks for the gateway's and by the
// ask-all probe, never on a timer of the gateway's own, and kept for
// federation.capability_ttl_ms. Each of those calls records the member's endpoint
// state, as a federated query does.

// memberCapability is what the gateway reads of a member's CapabilityStatement.
type memberCapability struct {
	ResourceType string `json:"resourceType"`
	Rest         []struct {
		Mode     string `json:"mode"`
		Resource []struct {
			Type        string `json:"type"`
			Interaction []struct {
				Code string `json:"code"`
			} `json:"interaction"`
			SearchParam []capParam `json:"searchParam"`
		} `json:"resource"`
	} `json:"rest"`
}

type capParam struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// capResource is one resource type the gateway can search, and its parameters.
type capResource struct {
	Type   string
	Params []capParam
}

// capabilities caches the common part of the members' statements.
type capabilities struct {
	mu       sync.Mutex
	at       time.Time
	reg      *registry
	common   []capResource
	answered int
}

// searchParamTypes is R4's SearchParamType value set.
var searchParamTypes = map[string]bool{"number": true, "date": true, "string": true, "token": true, "reference": true, "composite": true, "quantity": true, "uri": true, "special": true}

// maxCapResources bounds what is kept of one member's statement.
const maxCapResources = 500

// commonCapabilities is the types (and, per type, the search parameters of the same
// name and type) that every statement has; a type only counts where the member can
// search it (search-type, or no interactions listed).
func commonCapabilities(statements []*memberCapability) []capResource {
	var common map[string]map[capParam]bool
	for _, st := range statements {
		mine := map[string]map[capParam]bool{}
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
				ps := map[capParam]bool{}
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
	out := make([]capResource, 0, len(common))
	for t, ps := range common {
		r := capResource{Type: t}
		for p := range ps {
			r.Params = append(r.Params, p)
		}
		sort.Slice(r.Params, func(i, j int) bool { return r.Params[i].Name < r.Params[j].Name })
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// metadata asks every member's /metadata in parallel within budget (and its own
// timeout_ms), as many at once as cs's limits allow, records each one's state, and
// returns the probe records and the statements of the members that answered one.
func (c *caller) metadata(ctx context.Context, cs *calls, reg *registry, budget time.Duration) ([]ProbeRecord, []*memberCapability) {
	rctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	members := reg.members
	exchanges := make([]exchange, len(members))
	records := make([]ProbeRecord, len(members))
	statements := make([]*memberCapability, len(members))
	absorb := func(i int) {
		m, ex := members[i], exchanges[i]
		exchanges[i] = exchange{}
		if !ex.call.Broken && !ex.call.Unusable && ex.call.Status >= 200 && ex.call.Status < 300 {
			var st memberCapability
			if err := json.Unmarshal(ex.body, &st); err != nil || st.ResourceType != "CapabilityStatement" {
				ex.call.Unusable = true
			} else {
				statements[i] = &st
			}
		}
		records[i] = ProbeRecord{ID: m.id, Outcome: c.observe(m, ex.call), Status: ex.call.Status, DurationMS: millis(ex.duration)}
	}
	cs.fanOut(rctx, len(members), func(i int) {
		m := members[i]
		mctx, cancel := m.within(rctx)
		defer cancel()
		exchanges[i] = c.get(mctx, ctx, m, m.url("/metadata", ""), cs, nil)
	}, absorb, func(i int) {
		exchanges[i] = notSent(rctx, ctx)
		absorb(i)
	})
	return records, statements
}

// store keeps the common part of a round of statements.
func (cp *capabilities) store(reg *registry, statements []*memberCapability, now time.Time) {
	var got []*memberCapability
	for _, s := range statements {
		if s != nil {
			got = append(got, s)
		}
	}
	common := commonCapabilities(got)
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.at, cp.reg, cp.common, cp.answered = now, reg, common, len(got)
}

// cached is the common part, when it is younger than ttl and of this registry.
func (cp *capabilities) cached(reg *registry, ttl time.Duration, now time.Time) ([]capResource, int, bool) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.reg != reg || ttl <= 0 || now.Sub(cp.at) >= ttl {
		return nil, 0, false
	}
	return cp.common, cp.answered, true
}

// capabilityStatement is the gateway's statement, for the gateway's base gw.
func capabilityStatement(gw string, common []capResource, answered, members int, now time.Time) any {
	type interaction struct {
		Code string `json:"code"`
	}
	type resource struct {
		Type        string        `json:"type"`
		Interaction []interaction `json:"interaction"`
		SearchParam []capParam    `json:"searchParam,omitempty"`
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
		Format:      []string{"json", FHIRJSON},
		Rest: []rest{{
			Mode: "server",
			Documentation: fmt.Sprintf("A search runs on every member; the types and search parameters listed are those all %d of %d members that described themselves have in common. "+
				"Read one member's resource at %s/nodes/{member}/fhir/{type}/{id}. _count, _sort (%s) and _summary=count are the gateway's own.",
				answered, members, gw, sortKeyDocAll()),
			Resource: resources,
		}},
	}
}

func sortKeyDocAll() string {
	s := ""
	for i, k := range SortKeys() {
		if i > 0 {
			s += ", "
		}
		s += k
	}
	return s
}
