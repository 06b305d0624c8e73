package patient_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
	"github.com/ferrofed/ferrofed/test/doubles/pixmanager"
)

// alice is one person known to the cross-reference manager: in the master patient
// index as MRN-1, at member a as pa-1, at member b as pb-1, and not at member c (whose
// domain the manager knows).
func alice() pixmanager.Options {
	return pixmanager.Options{
		Sets: []pixmanager.Set{{
			{ID: "m1", Identifiers: []pixmanager.Identifier{{System: mpi, Value: "MRN-1"}}},
			{ID: "x-a", Identifiers: []pixmanager.Identifier{{System: domainA, Value: "pa-1"}}},
			{ID: "x-b", Identifiers: []pixmanager.Identifier{{System: domainB, Value: "pb-1"}}},
		}},
		Domains: []string{domainC},
	}
}

const aliceSearch = "Observation?patient.identifier=" + mpi + "|MRN-1&code=1234-5"

func resolverTable(p *pixmanager.Server, extra string) string {
	return fmt.Sprintf("[resolver]\nurl = %q\n%s", p.URL, extra)
}

// Every row of the resolver's state table (docs/bindings.md, "Resolver", and the
// README's table of the patient-scoped keys) drives the PIXm double and is read
// through GET {base}/operator/dependencies, with what the client got and which members
// were asked.
func TestTheResolverStatesThroughTheDependencyReport(t *testing.T) {
	cases := []struct {
		name string
		// opts shape the manager; knobs are set before the search.
		opts  func() pixmanager.Options
		knobs double.Knobs
		// extra are more keys of [resolver]; audited adds an [audit] spool that
		// refuses appends.
		extra   string
		audited bool
		search  string
		// want is the resolver's state ("" for the key's absence, with no [resolver]).
		want       string
		wantStatus int
		// wantAsked are the members asked (each once).
		wantAsked []string
		// wantWhy is in the client's OperationOutcome and in the flow's log line.
		wantWhy string
	}{
		{name: "a resolution with a mapping is up and asks the mapped members", opts: alice, search: aliceSearch,
			want: "up", wantStatus: 200, wantAsked: []string{"a", "b"}},
		{name: "an unknown patient (404) is up and asks no member", opts: alice, search: "Observation?patient.identifier=" + mpi + "|MRN-404",
			want: "up", wantStatus: 200},
		{name: "OpenCR's 200 with an empty Parameters is the same as the 404", opts: func() pixmanager.Options { o := alice(); o.OpenCR = true; return o },
			search: "Observation?patient.identifier=" + mpi + "|MRN-404", want: "up", wantStatus: 200},
		{name: "OpenCR's mapping (targetId a bare string) is read", opts: func() pixmanager.Options { o := alice(); o.OpenCR = true; return o },
			search: aliceSearch, want: "up", wantStatus: 200, wantAsked: []string{"a", "b"}},
		{name: "an unknown source domain (400) is up and fails closed", opts: alice, search: "Observation?patient.identifier=urn:oid:9.9|X",
			want: "up", wantStatus: 502, wantWhy: "does not know the sourceIdentifier's domain"},
		{name: "an unknown target domain (403) is up and fails closed, naming the member key at fault", opts: func() pixmanager.Options { o := alice(); o.Domains = nil; return o },
			search: aliceSearch, want: "up", wantStatus: 502, wantWhy: "registry.members[].identifier_system"},
		{name: "a 403 is up and fails closed", opts: alice, knobs: double.Knobs{Status: 403}, search: aliceSearch, want: "up", wantStatus: 502},
		{name: "a 401 is up and fails closed", opts: alice, knobs: double.Knobs{Status: 401}, search: aliceSearch, want: "up", wantStatus: 502},
		{name: "a 200 that is no Parameters is up and fails closed", opts: alice, knobs: double.Knobs{Fault: double.FaultMalformed}, search: aliceSearch,
			want: "up", wantStatus: 502},
		{name: "an answer past max_body_bytes is up and fails closed", opts: alice, extra: "max_body_bytes = 16\n", search: aliceSearch,
			want: "up", wantStatus: 502},
		{name: "a 500 is failing and fails closed", opts: alice, knobs: double.Knobs{Status: 500}, search: aliceSearch, want: "failing", wantStatus: 502},
		{name: "a 503 is failing and fails closed", opts: alice, knobs: double.Knobs{Status: 503}, search: aliceSearch, want: "failing", wantStatus: 502},
		{name: "a refused connection is down and fails closed", opts: alice, knobs: double.Knobs{Fault: double.FaultRefused}, search: aliceSearch,
			want: "down", wantStatus: 502},
		{name: "a reset mid-answer is down and fails closed", opts: alice, knobs: double.Knobs{Fault: double.FaultReset}, search: aliceSearch,
			want: "down", wantStatus: 502},
		{name: "a silent resolver past its budget is down and answers 504", opts: alice, knobs: double.Knobs{Fault: double.FaultHang},
			extra: "timeout_ms = 200\n", search: aliceSearch, want: "down", wantStatus: 504},
		{name: "an exchange whose audit record could not be stored is failing, its answer unused", opts: alice, audited: true,
			search: aliceSearch, want: "failing", wantStatus: 503},
		{name: "a search that names no patient asks no resolver", opts: alice, search: "Observation?code=1234-5",
			want: "unknown", wantStatus: 200, wantAsked: []string{"a", "b", "c"}},
		{name: "a patient named by id, which the resolver cannot map, never leaves the gateway", opts: alice, search: "Observation?patient=Patient/123",
			want: "unknown", wantStatus: 400},
		{name: "without [resolver] the key is absent and every member gets the client's query", search: aliceSearch,
			want: "", wantStatus: 200, wantAsked: []string{"a", "b", "c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var p *pixmanager.Server
			tables := ""
			if tc.opts != nil {
				p = pixmanager.Start(t, tc.opts())
				tables = resolverTable(p, tc.extra)
			}
			g := newGateway(t, gatewayOptions{tables: tables, audited: tc.audited})
			if p != nil {
				if err := p.SetKnobs(tc.knobs); err != nil {
					t.Fatal(err)
				}
			}
			g.refuse(tc.audited)
			a := g.search(tc.search)
			if a.status != tc.wantStatus {
				t.Fatalf("answered %d, want %d: %s", a.status, tc.wantStatus, a.raw)
			}
			report, raw := g.States()
			got, present := report["resolver"]
			switch {
			case tc.want == "" && present:
				t.Fatalf("resolver is %q without [resolver]: %s", got, raw)
			case tc.want != "" && got != tc.want:
				t.Fatalf("resolver is %q, want %q: %s", got, tc.want, raw)
			}
			// The service's body reaches neither the client nor the log.
			if strings.Contains(string(a.raw), "PIXM-BODY") || strings.Contains(g.log.String(), "PIXM-BODY") {
				t.Fatalf("the service's body leaked: %s\n%s", a.raw, g.log.String())
			}
			if strings.Contains(string(raw), "PIXM-BODY") || strings.Contains(string(raw), "127.0.0.1") {
				t.Fatalf("the report carries a body or an address: %s", raw)
			}
			asked := g.asked()
			for _, id := range []string{"a", "b", "c"} {
				want := int64(0)
				for _, w := range tc.wantAsked {
					if w == id {
						want = 1
					}
				}
				if asked[id] != want {
					t.Errorf("member %s was asked %d times, want %d (%s)", id, asked[id], want, a.raw)
				}
				// A member never asked keeps its state: nothing left the gateway for it.
				if state := report["endpoints."+id+"-query"]; want == 0 && state != "unknown" {
					t.Errorf("member %s, never asked, is %q", id, state)
				}
			}
			if tc.wantWhy != "" && (!strings.Contains(string(a.raw), tc.wantWhy) || !strings.Contains(g.log.String(), tc.wantWhy) ||
				!strings.Contains(g.log.String(), "failed closed")) {
				t.Errorf("neither the answer nor the log say %q: %s\n%s", tc.wantWhy, a.raw, g.log.String())
			}
			if tc.wantStatus >= 500 && (len(a.Bundle.Issue) == 0 || a.Bundle.Issue[0].Code == "") {
				t.Errorf("a failure without an OperationOutcome issue: %s", a.raw)
			}
		})
	}
}

// A resolution asks once, with every member's domain as a targetSystem, and each
// mapped member is asked with its own local reference; the unmapped member is
// excluded by the resolver in meta.federation and the extension, and never contacted.
func TestTheResolverAsksEachMemberByItsOwnID(t *testing.T) {
	p := pixmanager.Start(t, alice())
	g := newGateway(t, gatewayOptions{tables: resolverTable(p, "")})
	a := g.search(aliceSearch)
	if a.status != http.StatusOK {
		t.Fatalf("answered %d: %s", a.status, a.raw)
	}
	if n := p.Requests(); n != 1 {
		t.Fatalf("the manager was asked %d times, want once", n)
	}
	last, _ := p.Last()
	if got := last.Query["targetSystem"]; strings.Join(got, " ") != domainA+" "+domainB+" "+domainC {
		t.Errorf("targetSystem = %v, want every member's domain", got)
	}
	if got := last.Query.Get("sourceIdentifier"); got != mpi+"|MRN-1" {
		t.Errorf("sourceIdentifier = %q", got)
	}
	for id, want := range map[string]string{"a": "Patient/pa-1", "b": "Patient/pb-1"} {
		q := g.lastQuery(id)
		if q.Get("patient") != want || q.Get("code") != "1234-5" || q.Has("patient.identifier") {
			t.Errorf("member %s was asked %v, want patient=%s and the rest of the query", id, q, want)
		}
		if r, ok := a.record(id); !ok || r.Outcome != "ok" {
			t.Errorf("member %s's record: %+v", id, r)
		}
	}
	r, ok := a.record("c")
	if !ok || r.Outcome != "excluded" || r.ExcludedBy != "resolver" {
		t.Fatalf("member c's record is %+v, want excluded by the resolver: %s", r, a.raw)
	}
	if by := a.extensionExcludedBy("c"); by != "resolver" {
		t.Errorf("the extension says c was excluded by %q", by)
	}
	if g.members["c"].Requests() != 0 {
		t.Error("the excluded member was contacted")
	}
	report, raw := g.States()
	if report["endpoints.c-query"] != "unknown" || report["endpoints.a-query"] != "up" || report["resolver"] != "up" {
		t.Errorf("report %s", raw)
	}

}

// The resolution's exchange is audited through the trail as BALP PatientQuery with
// the ITI-83 subtype, its query and its patient, valid R4, and reaches the repository.
func TestTheResolutionIsAudited(t *testing.T) {
	p := pixmanager.Start(t, alice())
	g := newGateway(t, gatewayOptions{tables: resolverTable(p, ""), audited: true})
	if a := g.search(aliceSearch); a.status != http.StatusOK {
		t.Fatalf("answered %d: %s", a.status, a.raw)
	}
	double.Eventually(t, "an ITI-83 event reached the repository", func() bool {
		for _, ev := range g.arr.Received() {
			body := string(ev.Body)
			if !strings.Contains(body, `"code":"ITI-83"`) {
				continue
			}
			if len(ev.Queries) != 1 || !strings.Contains(ev.Queries[0], "sourceIdentifier=") || !strings.Contains(ev.Queries[0], "targetSystem=") {
				t.Fatalf("the event's query is %q", ev.Queries)
			}
			if !strings.Contains(body, `"value":"MRN-1"`) || !strings.Contains(body, bindings.ProfilePatientQuery) {
				t.Fatalf("the event names no patient or no profile: %s", body)
			}
			if err := fhirschema.Validate(ev.Body); err != nil {
				t.Fatalf("the event is not valid R4: %v\n%s", err, body)
			}
			return true
		}
		return false
	}, func() string { return fmt.Sprintf("it has %d events", len(g.arr.Received())) })
}

// A member the flow does not know (one a reload added: the flow keeps the members'
// domains of the start until a restart) is excluded by the resolver, never asked with
// the client's identifier or another member's id.
func TestAMemberTheFlowDoesNotKnowIsExcludedByTheResolver(t *testing.T) {
	p := pixmanager.Start(t, alice())
	doc := fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a.example/fhir\"\nidentifier_system = %q\n"+
		"[[registry.members]]\nid = \"b\"\nquery_endpoint = \"http://b.example/fhir\"\nidentifier_system = %q\n[resolver]\nurl = %q\n"+
		"[auth]\ndata_plane = \"open\"\n", domainA, domainB, p.URL) // the flow alone: no data plane in front
	cfg, err := config.Parse([]byte(doc), "t.toml", config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	flow, err := patient.New(cfg, patient.Options{Tracker: dependencies.NewTracker()})
	if err != nil {
		t.Fatal(err)
	}
	plan, scoped, err := flow.Plan(context.Background(), patient.Query{ResourceType: "Observation",
		Params: []string{"patient.identifier=" + url.QueryEscape(mpi+"|MRN-1")}, Members: []string{"a", "z", "b"}})
	if err != nil || !scoped || plan.Fail != nil {
		t.Fatalf("Plan = %+v, %v, %v", plan, scoped, err)
	}
	want := []patient.Ask{{Member: "a", Param: "patient=Patient/pa-1"}, {Member: "b", Param: "patient=Patient/pb-1"}}
	if fmt.Sprint(plan.Asks) != fmt.Sprint(want) || fmt.Sprint(plan.Excluded) != fmt.Sprint([]patient.Excluded{{Member: "z", By: patient.ByResolver}}) {
		t.Fatalf("asks %v, excluded %v", plan.Asks, plan.Excluded)
	}
}

// A patient named by its federated id ({member}.{id}, docs/data-plane.md), by the
// client or by a patient-level token's launch context, is the same person at every
// member: the flow asks the resolver by that member's identifier system, and each
// mapped member is asked with its own id, never with the other member's.
func TestAFederatedPatientIsResolvedAtEveryMember(t *testing.T) {
	for _, c := range []struct{ name, path, claim string }{
		{"named by the client", "Observation?patient=Patient/a.pa-1&code=1234-5", ""},
		{"named by the bare federated id", "Observation?subject=a.pa-1&code=1234-5", ""},
		{"the token's patient", "Observation?code=1234-5", "a.pa-1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := pixmanager.Start(t, alice())
			g := newGateway(t, gatewayOptions{tables: resolverTable(p, "")})
			token := g.operator
			if c.claim != "" {
				tok, err := g.Issuer.Token(map[string]any{"sub": "pat", "scope": "patient/*.rs", "patient": c.claim})
				if err != nil {
					t.Fatal(err)
				}
				token = tok
			}
			a := g.searchAs(c.path, token)
			if a.status != http.StatusOK {
				t.Fatalf("answered %d: %s", a.status, a.raw)
			}
			last, _ := p.Last()
			if got := last.Query.Get("sourceIdentifier"); got != domainA+"|pa-1" {
				t.Errorf("the resolver was asked for %q, want member a's pa-1 by its domain", got)
			}
			for id, want := range map[string]string{"a": "Patient/pa-1", "b": "Patient/pb-1"} {
				if q := g.lastQuery(id); q.Get("patient") != want || q.Get("code") != "1234-5" {
					t.Errorf("member %s was asked %v, want patient=%s", id, q, want)
				}
			}
			if g.members["c"].Requests() != 0 {
				t.Error("a member the resolver does not map was asked")
			}
		})
	}
}
