package process

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/test/doubles/consentpdp"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/pdqsupplier"
	"github.com/ferrofed/ferrofed/test/doubles/pixmanager"
	"github.com/ferrofed/ferrofed/test/doubles/respondinggateway"
)

// The shipped binary runs the patient-scoped flow with all four bindings: a search
// for Alice by the supplier's id is sent to the one member that the resolver maps,
// consent permits and the localizer finds, with that member's own id; the others are
// excluded and never contacted; each binding's exchanges are in its metrics (which,
// without [audit], the flow's own surface registers).
func TestTheBinaryRunsThePatientScopedFlow(t *testing.T) {
	const (
		mpi = "urn:oid:1.2.3.9000"
		dA  = "urn:oid:1.2.3.1"
		dB  = "urn:oid:1.2.3.2"
		dC  = "urn:oid:1.2.3.3"
	)
	sup := pdqsupplier.Start(t, pdqsupplier.Options{Patients: []pdqsupplier.Patient{{ID: "m1", Identifiers: []pdqsupplier.Identifier{{System: mpi, Value: "MRN-1"}}, Family: "Mohr"}}})
	pix := pixmanager.Start(t, pixmanager.Options{Sets: []pixmanager.Set{{
		{ID: "m1", Identifiers: []pixmanager.Identifier{{System: mpi, Value: "MRN-1"}}},
		{ID: "xa", Identifiers: []pixmanager.Identifier{{System: dA, Value: "pa-1"}}},
		{ID: "xb", Identifiers: []pixmanager.Identifier{{System: dB, Value: "pb-1"}}},
		{ID: "xc", Identifiers: []pixmanager.Identifier{{System: dC, Value: "pc-1"}}},
	}}})
	pdp := consentpdp.Start(t, consentpdp.Options{Rules: []consentpdp.Rule{{Resource: "node-c", Permit: false}, {Permit: true}}})
	gw := respondinggateway.Start(t, respondinggateway.Options{Entries: []respondinggateway.Entry{{IDs: []respondinggateway.II{{Root: "1.2.3.9000", Extension: "MRN-1"}},
		Records: []respondinggateway.Record{{HomeCommunityID: "1.2.3.101"}, {HomeCommunityID: "1.2.3.103"}}}}})
	var doc strings.Builder
	port := freePort(t)
	fmt.Fprintf(&doc, "[server]\nlisten = \"127.0.0.1:%d\"\nbase_path = \"/gw\"\ntermination_message_path = \"\"\n", port)
	ms := map[string]*members.Server{}
	for i, id := range []string{"node-a", "node-b", "node-c"} {
		m := members.Start(t, members.Options{ID: id})
		ms[id] = m
		fmt.Fprintf(&doc, "[[registry.members]]\nid = %q\nquery_endpoint = %q\nidentifier_system = \"urn:oid:1.2.3.%d\"\nhome_community_id = \"urn:oid:1.2.3.10%d\"\n", id, m.URL, i+1, i+1)
	}
	fmt.Fprintf(&doc, "[pdqm]\nurl = %q\n[resolver]\nurl = %q\n[consent]\nurl = %q\n[localizer]\nurl = %q\nprotocol = \"xcpd\"\n", sup.URL, pix.URL, pdp.URL, gw.URL)
	path := filepath.Join(t.TempDir(), "ferrofed.toml")
	writeFile(t, path, doc.String())
	serve(t, path)
	base := fmt.Sprintf("http://127.0.0.1:%d/gw", port)
	waitReady(t, base)

	var page struct {
		Meta struct {
			Federation []struct {
				ID, Outcome string
				ExcludedBy  string `json:"excluded_by"`
			}
		}
	}
	// The operator is told which step excluded each member (docs/security.md, "What a
	// caller is told of the members").
	operator, err := clients.Token(map[string]any{"sub": "app", "scope": issuer.ClientScope + " " + issuer.OperatorScope})
	if err != nil {
		t.Fatal(err)
	}
	getAs(t, base+"/fhir/Observation?patient=Patient/m1", operator, &page)
	got := map[string]string{}
	for _, r := range page.Meta.Federation {
		got[r.ID] = r.Outcome + "/" + r.ExcludedBy
	}
	// b is not held (localizer), c is denied (consent) before the localizer is asked.
	want := map[string]string{"node-a": "ok/", "node-b": "excluded/localizer", "node-c": "excluded/consent"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("meta.federation %v, want %v", got, want)
	}
	if ms["node-b"].Requests() != 0 || ms["node-c"].Requests() != 0 {
		t.Fatal("an excluded member was contacted")
	}
	if q := ms["node-a"].LastRequest().RawQuery; !strings.Contains(q, "patient=Patient/pa-1") {
		t.Fatalf("node-a was asked %q", q)
	}
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	metrics, _ := io.ReadAll(res.Body)
	for _, key := range []string{"demographics", "resolver", "consent", "localizer"} {
		if !strings.Contains(string(metrics), `ferrofed_binding_requests_total{binding="`+key+`",outcome="success"} 1`) {
			t.Errorf("no successful exchange of %s in the metrics", key)
		}
	}
	// A client is shown the member asked only (the same search again, after the
	// metrics were read).
	page.Meta.Federation = nil
	get(t, base+"/fhir/Observation?patient=Patient/m1", &page)
	if len(page.Meta.Federation) != 1 || page.Meta.Federation[0].ID != "node-a" || page.Meta.Federation[0].ExcludedBy != "" {
		t.Fatalf("a client is shown meta.federation %+v", page.Meta.Federation)
	}
}
