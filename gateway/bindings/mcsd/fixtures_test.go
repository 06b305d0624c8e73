package mcsd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/ferrofed/ferrofed/gateway/bindings/mcsd"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/test/doubles/mcsdsupplier"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// domainOf is member id's patient identifier domain, as the directory gives it.
func domainOf(id string) string { return "urn:oid:1.3.6.1.4.1.21367.13.20." + oidArc(id) }

// communityOf is member id's home community id, as an OID (XCPD's root).
func communityOf(id string) string { return "1.3.6.1.4.1.21367.13.70." + oidArc(id) }

// oidArc is an OID arc of a member id: its bytes in decimal.
func oidArc(id string) string {
	var b strings.Builder
	for _, c := range []byte(id) {
		fmt.Fprintf(&b, "%d", c)
	}
	return b.String()
}

// member starts a member and puts it in the directory: an Organization with the
// member identifier id, and its FHIR REST Endpoint.
func (g *gateway) member(id string) *members.Server {
	g.t.Helper()
	m := members.Start(g.t, members.Options{ID: id, Marker: "MEMBER-BODY-" + id})
	g.members[id] = m
	g.double.MustPut(g.t, g.endpoint(id, m.URL), g.organization(id, id))
	return m
}

// endpoint is member id's FHIR REST Endpoint at address, with its home community id
// typed HCID (member a's a bare OID, as some directories write it; the others'
// urn:oid:).
func (g *gateway) endpoint(id, address string) map[string]any {
	hcid := "urn:oid:" + communityOf(id)
	if id == "a" {
		hcid = communityOf(id)
	}
	return mcsdsupplier.WithHCID(mcsdsupplier.Endpoint("ep-"+id, address), hcid)
}

// organization is member id's Organization, with its member identifier value and
// its patient identifier domain (an identifier of domainSystem), referencing its
// Endpoint ep-<id>.
func (g *gateway) organization(id, value string) map[string]any {
	return mcsdsupplier.WithIdentifier(mcsdsupplier.Organization("org-"+id, system, value, "ep-"+id), domainSystem, domainOf(id))
}

// refresh runs one refresh now.
func (g *gateway) refresh() mcsd.Outcome {
	g.t.Helper()
	return g.dir.Refresh(context.Background())
}

// wantDirectory checks the report's directory and directory_fault ("" for absent),
// and that the report names no URL and no body of the directory.
func (g *gateway) wantDirectory(state, fault string) {
	g.t.Helper()
	m, raw := g.Report()
	if m["directory"] != state {
		g.t.Errorf("directory is %v, want %s (%s)", m["directory"], state, raw)
	}
	got, has := m["directory_fault"]
	if fault == "" && has || fault != "" && got != fault {
		g.t.Errorf("directory_fault is %v, want %q (%s)", got, fault, raw)
	}
	for _, leak := range []string{"MCSD-BODY", "http://", "127.0.0.1", "org-"} {
		if strings.Contains(raw, leak) {
			g.t.Errorf("the report carries %q: %s", leak, raw)
		}
	}
}

// asked is the ids of the members a federated search asked (outcome ok), sorted.
func (g *gateway) asked() []string {
	g.t.Helper()
	res, raw := g.Request(http.MethodGet, "/fhir/Observation", g.Client, nil)
	var b struct {
		Meta struct {
			Federation []federation.Record `json:"federation"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		g.t.Fatalf("search answered %d: %s", res.StatusCode, raw)
	}
	var ids []string
	for _, r := range b.Meta.Federation {
		if r.Outcome == outbound.OK {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// registryReady is the federation's readiness check "registry".
func (g *gateway) registryReady() error { return g.Check("registry") }
