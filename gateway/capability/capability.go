// Package capability is what the gateway says of itself to a FHIR client: its own
// CapabilityStatement (GET {base}/fhir/metadata), made from what every member that
// describes itself has in common and kept for federation.capability_ttl_ms
// (docs/data-plane.md, "The CapabilityStatement"), with how to authorize (its
// security), and SMART on FHIR discovery (GET {base}/fhir/.well-known/smart-configuration,
// smart.go). The members' statements are asked by gateway/federation, which records
// each call's endpoint state; this package only keeps and writes what they had in common.
package capability

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/searchquery"
)

// Cache keeps the common part of a round of the members' statements.
type Cache struct {
	mu sync.Mutex
	at time.Time
	// of is what the statements are of (the federation's registry): a statement of
	// another registry is never served.
	of       any
	common   []fhir.SearchType
	answered int
}

// Store keeps the common part of statements (nil for a member that answered none),
// made of of at now, and returns it with how many members answered.
func (c *Cache) Store(of any, statements []*fhir.MemberCapability, now time.Time) ([]fhir.SearchType, int) {
	var got []*fhir.MemberCapability
	for _, s := range statements {
		if s != nil {
			got = append(got, s)
		}
	}
	common := fhir.CommonCapabilities(got)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.of, c.common, c.answered = now, of, common, len(got)
	return common, len(got)
}

// Cached is the common part kept, when it is younger than ttl and of of.
func (c *Cache) Cached(of any, ttl time.Duration, now time.Time) ([]fhir.SearchType, int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.of != of || ttl <= 0 || now.Sub(c.at) >= ttl {
		return nil, 0, false
	}
	return c.common, c.answered, true
}

// Gateway is what the gateway's statement says besides the members' common part.
type Gateway struct {
	// Base is the gateway's base URL as the client reached it.
	Base string
	// Members is how many members the registry holds, Answered how many described
	// themselves.
	Members, Answered int
	// Auth is the [auth] table in force: the statement's security (smart.go).
	Auth config.Auth
}

// Statement is the gateway's CapabilityStatement at now: the types and search
// parameters of common, each type with the search-type interaction.
func Statement(g Gateway, common []fhir.SearchType, now time.Time) any {
	type interaction struct {
		Code string `json:"code"`
	}
	type resource struct {
		Type        string             `json:"type"`
		Interaction []interaction      `json:"interaction"`
		SearchParam []fhir.SearchParam `json:"searchParam,omitempty"`
	}
	resources := make([]resource, 0, len(common))
	for _, r := range common {
		resources = append(resources, resource{Type: r.Type, Interaction: []interaction{{Code: "search-type"}}, SearchParam: r.Params})
	}
	type rest struct {
		Mode          string        `json:"mode"`
		Documentation string        `json:"documentation"`
		Security      *restSecurity `json:"security,omitempty"`
		Resource      []resource    `json:"resource,omitempty"`
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
			"url":         g.Base + "/fhir",
		},
		FHIRVersion: "4.0.1",
		Format:      []string{"json", fhir.MediaType},
		Rest: []rest{{
			Mode: "server",
			Documentation: fmt.Sprintf("A search runs on every member; the types and search parameters listed are those all %d of %d members that described themselves have in common. "+
				"Read one member's resource at %s/nodes/{member}/fhir/{type}/{id}. _count, _sort (%s) and _summary=count are the gateway's own.",
				g.Answered, g.Members, g.Base, strings.Join(searchquery.SortKeys(), ", ")),
			Security: security(g.Auth, g.Base),
			Resource: resources,
		}},
	}
}
