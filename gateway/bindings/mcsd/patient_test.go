package mcsd_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/mcsdsupplier"
	"github.com/ferrofed/ferrofed/test/doubles/pixmanager"
	"github.com/ferrofed/ferrofed/test/doubles/respondinggateway"
)

// mpi is the master patient index's identifier domain: the domain a client names
// the patient in.
const mpi = "urn:oid:1.3.6.1.4.1.21367.13.20.9000"

// patientTables are [resolver] and the XCPD [localizer] at p and x, and the
// [registry.mcsd] key that names where each member's patient identifier domain is.
func patientOptions(p *pixmanager.Server, x *respondinggateway.Server) gatewayOptions {
	return gatewayOptions{
		mcsd:   fmt.Sprintf("patient_domain_identifier_system = %q\n", domainSystem),
		tables: fmt.Sprintf("[resolver]\nurl = %q\n[localizer]\nurl = %q\nprotocol = \"xcpd\"\n", p.URL, x.URL),
	}
}

// A directory registry with [resolver] and the XCPD localizer configured is accepted:
// each member's identifier_system is its Organization identifier of
// patient_domain_identifier_system, its home_community_id its Endpoint identifier
// typed HCID (a bare OID written urn:oid:). A patient-scoped search asks each
// member the patient is mapped to and held at by its own local id, excludes the one
// the resolver maps nowhere and the one the localizer says holds nothing; a member
// a later refresh adds is asked by its own id too.
func TestPatientFlowOverTheDirectorysRegistry(t *testing.T) {
	// The patient is MRN-1 in the index, pa-1 at a, pb-1 at b, pd-1 at d and pe-1 at
	// e; c's domain is known but has no record of the patient.
	set := pixmanager.Set{{ID: "m1", Identifiers: []pixmanager.Identifier{{System: mpi, Value: "MRN-1"}}}}
	for _, id := range []string{"a", "b", "d", "e"} {
		set = append(set, pixmanager.Record{ID: "x-" + id, Identifiers: []pixmanager.Identifier{{System: domainOf(id), Value: "p" + id + "-1"}}})
	}
	p := pixmanager.Start(t, pixmanager.Options{Sets: []pixmanager.Set{set}, Domains: []string{domainOf("c")}})
	// The responding gateway knows the patient at communities a, b and e, not d.
	var records []respondinggateway.Record
	for _, id := range []string{"a", "b", "e"} {
		records = append(records, respondinggateway.Record{HomeCommunityID: communityOf(id), Patient: respondinggateway.II{Root: "1.2.3." + oidArc(id), Extension: "p" + id + "-1"}})
	}
	x := respondinggateway.Start(t, respondinggateway.Options{Entries: []respondinggateway.Entry{{
		IDs: []respondinggateway.II{{Root: strings.TrimPrefix(mpi, "urn:oid:"), Extension: "MRN-1"}}, Records: records}}})

	g := newGateway(t, patientOptions(p, x))
	for _, id := range []string{"a", "b", "c", "d"} {
		g.member(id)
	}
	if o := g.refresh(); o.State != dependencies.Up || !o.Swapped {
		t.Fatalf("the directory's registry was not accepted with [resolver] and the XCPD localizer: %+v", o)
	}
	g.wantDirectory("up", "")
	g.wantPatientSearch(map[string]string{"a": "Patient/pa-1", "b": "Patient/pb-1"}, map[string]string{"c": "resolver", "d": "localizer"})

	// A member added to the directory is asked by its own id after the refresh.
	g.member("e")
	if o := g.refresh(); o.State != dependencies.Up || !o.Swapped {
		t.Fatalf("the refresh that adds e: %+v", o)
	}
	g.wantPatientSearch(map[string]string{"a": "Patient/pa-1", "b": "Patient/pb-1", "e": "Patient/pe-1"}, map[string]string{"c": "resolver", "d": "localizer"})
	// The resolver asked for every member's domain, the ones e brought included.
	last, _ := p.Last()
	q, _ := url.ParseQuery(last.RawQuery)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		found := false
		for _, ts := range q["targetSystem"] {
			found = found || ts == domainOf(id)
		}
		if !found {
			t.Errorf("the resolver was not asked for %s's domain: %v", id, q["targetSystem"])
		}
	}
}

// wantPatientSearch runs a patient-scoped search and checks which members were asked,
// each with its own patient reference, and which were excluded, by which step. It
// asks as a client holding the operator scope too, the one shown the excluded members
// (docs/security.md, "What a caller is told of the members").
func (g *gateway) wantPatientSearch(asked, excluded map[string]string) {
	g.t.Helper()
	before := map[string]int64{}
	for id, m := range g.members {
		before[id] = int64(m.Requests())
	}
	operator := g.Issuer.Sign(g.t, "app", issuer.ClientScope+" "+issuer.OperatorScope)
	res, raw := g.Request(http.MethodGet, "/fhir/Observation?patient.identifier="+url.QueryEscape(mpi+"|MRN-1"), operator, nil)
	var b struct {
		Meta struct {
			Federation []federation.Record `json:"federation"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(raw, &b); err != nil || res.StatusCode != 200 {
		g.t.Fatalf("the patient search answered %d: %s", res.StatusCode, raw)
	}
	records := map[string]federation.Record{}
	for _, r := range b.Meta.Federation {
		records[r.ID] = r
	}
	for id, m := range g.members {
		r, ok := records[id]
		if !ok {
			g.t.Errorf("no record of member %s: %s", id, raw)
			continue
		}
		if ref, want := asked[id]; want {
			if r.Outcome != outbound.OK || int64(m.Requests()) != before[id]+1 {
				g.t.Errorf("member %s: outcome %q, asked %d times, want asked once", id, r.Outcome, int64(m.Requests())-before[id])
				continue
			}
			got, _ := url.ParseQuery(m.LastRequest().RawQuery)
			if got.Get("patient") != ref {
				g.t.Errorf("member %s was asked patient=%q, want its own %q", id, got.Get("patient"), ref)
			}
			continue
		}
		if int64(m.Requests()) != before[id] {
			g.t.Errorf("member %s was asked, want it excluded by %s", id, excluded[id])
		}
		if r.Outcome != outbound.Excluded || r.ExcludedBy != excluded[id] {
			g.t.Errorf("member %s: outcome %q excluded_by %q, want excluded by %q", id, r.Outcome, r.ExcludedBy, excluded[id])
		}
	}
}

// The cache file keeps each member's identifier_system and home_community_id: a
// restart with the directory down serves the patient flow from it, each member
// asked by its own local id.
func TestPatientFlowFromTheCache(t *testing.T) {
	set := pixmanager.Set{{ID: "m1", Identifiers: []pixmanager.Identifier{{System: mpi, Value: "MRN-1"}}}}
	var records []respondinggateway.Record
	for _, id := range []string{"a", "b"} {
		set = append(set, pixmanager.Record{ID: "x-" + id, Identifiers: []pixmanager.Identifier{{System: domainOf(id), Value: "p" + id + "-1"}}})
		records = append(records, respondinggateway.Record{HomeCommunityID: communityOf(id), Patient: respondinggateway.II{Root: "1.2.3." + oidArc(id), Extension: "p" + id + "-1"}})
	}
	p := pixmanager.Start(t, pixmanager.Options{Sets: []pixmanager.Set{set}})
	x := respondinggateway.Start(t, respondinggateway.Options{Entries: []respondinggateway.Entry{{
		IDs: []respondinggateway.II{{Root: strings.TrimPrefix(mpi, "urn:oid:"), Extension: "MRN-1"}}, Records: records}}})
	cache := filepath.Join(t.TempDir(), "registry.json")
	dir := mcsdsupplier.Start(t, mcsdsupplier.Options{})
	o := patientOptions(p, x)
	o.double = dir
	o.mcsd += "cache_file = " + quote(cache) + "\n"
	first := newGateway(t, o)
	first.member("a")
	first.member("b")
	if out := first.refresh(); !out.Swapped {
		t.Fatalf("%+v", out)
	}
	raw, err := os.ReadFile(cache)
	if err != nil || !strings.Contains(string(raw), domainOf("b")) || !strings.Contains(string(raw), "urn:oid:"+communityOf("a")) {
		t.Fatalf("the cache file holds %s (%v)", raw, err)
	}

	if err := dir.SetKnobs(double.Knobs{Fault: double.FaultRefused}); err != nil {
		t.Fatal(err)
	}
	o.start = true
	second := newGateway(t, o)
	second.members = first.members
	if err := second.registryReady(); err != nil {
		t.Fatalf("not ready from the cache: %v", err)
	}
	second.wantPatientSearch(map[string]string{"a": "Patient/pa-1", "b": "Patient/pb-1"}, nil)
}
