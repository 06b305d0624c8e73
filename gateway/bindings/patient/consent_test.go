package patient_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/consentpdp"
	"github.com/ferrofed/ferrofed/test/doubles/pdqsupplier"
	"github.com/ferrofed/ferrofed/test/doubles/pixmanager"
)

const aliceByID = mpi + "|MRN-1"

// Every row of the consent pre-filter's state table (docs/bindings.md, "Consent", and
// the README's table of the patient-scoped keys) drives the AuthZEN double, read
// through GET {base}/operator/dependencies.
func TestTheConsentStatesThroughTheDependencyReport(t *testing.T) {
	permitA := []consentpdp.Rule{{Resource: "a", Patient: aliceByID, Permit: true}}
	permitAll := []consentpdp.Rule{{Patient: aliceByID, Permit: true}}
	cases := []struct {
		name       string
		opts       *consentpdp.Options
		knobs      double.Knobs
		extra      string
		audited    bool
		want       string
		wantStatus int
		wantAsked  []string
		// wantDenied are the members excluded by consent.
		wantDenied []string
	}{
		{name: "decisions are up and only the permitted members are asked", opts: &consentpdp.Options{Rules: permitA},
			want: "up", wantStatus: 200, wantAsked: []string{"a"}, wantDenied: []string{"b", "c"}},
		{name: "a missing decision is a denial", opts: &consentpdp.Options{Rules: permitAll, Omit: 1},
			want: "up", wantStatus: 200, wantAsked: []string{"a", "b"}, wantDenied: []string{"c"}},
		{name: "the earlier draft's decisions key is read", opts: &consentpdp.Options{Rules: permitAll, LegacyKey: true},
			want: "up", wantStatus: 200, wantAsked: []string{"a", "b", "c"}},
		{name: "a 401 is up and fails closed", opts: &consentpdp.Options{Rules: permitAll, Token: "secret"}, want: "up", wantStatus: 503},
		{name: "a 403 is up and fails closed", opts: &consentpdp.Options{Rules: permitAll}, knobs: double.Knobs{Status: 403}, want: "up", wantStatus: 503},
		{name: "a 400 is up and fails closed", opts: &consentpdp.Options{Rules: permitAll}, knobs: double.Knobs{Status: 400}, want: "up", wantStatus: 503},
		{name: "a malformed answer is up and fails closed", opts: &consentpdp.Options{Rules: permitAll}, knobs: double.Knobs{Fault: double.FaultMalformed},
			want: "up", wantStatus: 503},
		{name: "a 5xx is failing, asks no member and answers 503", opts: &consentpdp.Options{Rules: permitAll}, knobs: double.Knobs{Status: 500},
			want: "failing", wantStatus: 503},
		{name: "a refused connection is down and fails closed", opts: &consentpdp.Options{Rules: permitAll}, knobs: double.Knobs{Fault: double.FaultRefused},
			want: "down", wantStatus: 503},
		{name: "a reset mid-answer is down and fails closed", opts: &consentpdp.Options{Rules: permitAll}, knobs: double.Knobs{Fault: double.FaultReset},
			want: "down", wantStatus: 503},
		{name: "an answer past max_body_bytes is up and fails closed", opts: &consentpdp.Options{Rules: permitAll}, extra: "max_body_bytes = 8\n",
			want: "up", wantStatus: 503},
		{name: "a silent PDP past its budget is down and fails closed", opts: &consentpdp.Options{Rules: permitAll}, knobs: double.Knobs{Fault: double.FaultHang},
			extra: "timeout_ms = 200\n", want: "down", wantStatus: 503},
		{name: "an exchange whose audit record could not be stored is failing, its answer unused", opts: &consentpdp.Options{Rules: permitAll}, audited: true,
			want: "failing", wantStatus: 503},
		{name: "without [consent] the key is absent", wantStatus: 200, wantAsked: []string{"a", "b", "c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var pdp *consentpdp.Server
			tables := ""
			if tc.opts != nil {
				pdp = consentpdp.Start(t, *tc.opts)
				tables = fmt.Sprintf("[consent]\nurl = %q\n%s", pdp.URL, tc.extra)
			}
			g := newGateway(t, gatewayOptions{tables: tables, audited: tc.audited})
			if pdp != nil {
				if err := pdp.SetKnobs(tc.knobs); err != nil {
					t.Fatal(err)
				}
			}
			g.refuse(tc.audited)
			a := g.search("Observation?patient.identifier=" + aliceByID)
			if a.status != tc.wantStatus {
				t.Fatalf("answered %d, want %d: %s", a.status, tc.wantStatus, a.raw)
			}
			report, raw := g.States()
			got, present := report["consent"]
			switch {
			case tc.want == "" && present:
				t.Fatalf("consent is %q without [consent]: %s", got, raw)
			case tc.want != "" && got != tc.want:
				t.Fatalf("consent is %q, want %q: %s", got, tc.want, raw)
			}
			// The service's body reaches neither the client nor the log.
			if strings.Contains(string(a.raw), "AUTHZEN-BODY") || strings.Contains(g.log.String(), "AUTHZEN-BODY") {
				t.Fatalf("the service's body leaked: %s\n%s", a.raw, g.log.String())
			}
			if strings.Contains(string(raw), "AUTHZEN-BODY") {
				t.Fatalf("the report carries the PDP's body: %s", raw)
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
					t.Errorf("member %s was asked %d times, want %d", id, asked[id], want)
				}
			}
			for _, id := range tc.wantDenied {
				if r, _ := a.record(id); r.Outcome != "excluded" || r.ExcludedBy != "consent" {
					t.Errorf("member %s's record is %+v, want excluded by consent", id, r)
				}
			}
			if tc.wantStatus == 503 && (len(a.Bundle.Issue) == 0 || a.Bundle.Issue[0].Code == "") {
				t.Errorf("a failure without an OperationOutcome issue: %s", a.raw)
			}
		})
	}
}

// The evaluations request: the requester as subject, the default purpose of use, the
// patient and the type as context, one evaluation per candidate member.
func TestTheConsentQuestion(t *testing.T) {
	pdp := consentpdp.Start(t, consentpdp.Options{Rules: []consentpdp.Rule{{Permit: true}}})
	g := newGateway(t, gatewayOptions{tables: fmt.Sprintf("[consent]\nurl = %q\n", pdp.URL)})
	if a := g.search("Observation?patient.identifier=" + aliceByID); a.status != http.StatusOK {
		t.Fatalf("answered %d: %s", a.status, a.raw)
	}
	last, ok := pdp.Last()
	if !ok || last.Path != consentpdp.EvaluationsPath || last.Method != http.MethodPost {
		t.Fatalf("the PDP was asked %+v", last)
	}
	var body struct {
		Subject struct{ Type, ID string }
		Action  struct {
			Name       string
			Properties map[string]string
		}
		Context struct {
			Patient      struct{ System, Value string }
			ResourceType string
		}
		Evaluations []struct {
			Resource struct{ Type, ID string }
		}
	}
	if err := json.Unmarshal(last.Body, &body); err != nil {
		t.Fatal(err)
	}
	// The PDP is asked about the token's subject (the harness's client, "app").
	if body.Subject.ID != "app" || body.Action.Properties["purposeOfUse"] != config.DefaultPurposeOfUse ||
		body.Context.Patient.System != mpi || body.Context.Patient.Value != "MRN-1" || body.Context.ResourceType != "Observation" || len(body.Evaluations) != 3 {
		t.Fatalf("the question was %s", last.Body)
	}
	for i, id := range []string{"a", "b", "c"} {
		if body.Evaluations[i].Resource.Type != "member" || body.Evaluations[i].Resource.ID != id {
			t.Fatalf("evaluation %d is %+v", i, body.Evaluations[i])
		}
	}
}

// The flow of the issue: demographics matches the patient named by the supplier's id,
// the resolver maps two of the three members, consent denies one of those: exactly
// one member is asked, with its own local id; the other two are excluded by the right
// step and never contacted, and only the asked member's endpoint state changed.
func TestTheWholeFlowAsksOneMemberByItsOwnID(t *testing.T) {
	sup := pdqsupplier.Start(t, supplier())
	pix := pixmanager.Start(t, alice())
	pdp := consentpdp.Start(t, consentpdp.Options{Rules: []consentpdp.Rule{{Resource: "a", Patient: aliceByID, Permit: true}}})
	tables := fmt.Sprintf("[pdqm]\nurl = %q\n[resolver]\nurl = %q\n[consent]\nurl = %q\n", sup.URL, pix.URL, pdp.URL)
	g := newGateway(t, gatewayOptions{tables: tables})
	before, _ := g.States()
	a := g.search("Observation?patient=Patient/m1&code=1234-5")
	if a.status != http.StatusOK {
		t.Fatalf("answered %d: %s", a.status, a.raw)
	}
	if n := g.members["a"].Requests(); n != 1 {
		t.Fatalf("member a was asked %d times", n)
	}
	if q := g.lastQuery("a"); q.Get("patient") != "Patient/pa-1" || q.Get("code") != "1234-5" {
		t.Fatalf("member a was asked %v, want its own id pa-1", q)
	}
	for id, by := range map[string]string{"b": "consent", "c": "resolver"} {
		if g.members[id].Requests() != 0 {
			t.Errorf("member %s was contacted", id)
		}
		r, ok := a.record(id)
		if !ok || r.Outcome != "excluded" || r.ExcludedBy != by || a.extensionExcludedBy(id) != by {
			t.Errorf("member %s's record is %+v, want excluded by %s", id, r, by)
		}
	}
	if r, _ := a.record("a"); r.Outcome != "ok" {
		t.Errorf("member a's record is %+v", r)
	}
	// The resolver was asked with the identifier demographics found, once; the PDP
	// about the two members the resolver mapped.
	if last, _ := pix.Last(); last.Query.Get("sourceIdentifier") != aliceByID || pix.Requests() != 1 {
		t.Errorf("the resolver was asked %d times, last %v", pix.Requests(), last.Query)
	}
	if last, _ := pdp.Last(); strings.Count(string(last.Body), `"type":"member"`) != 2 {
		t.Errorf("the PDP was asked about %s", last.Body)
	}
	after, raw := g.States()
	for key, want := range map[string]string{"demographics": "up", "resolver": "up", "consent": "up",
		"endpoints.a-query": "up", "endpoints.b-query": before["endpoints.b-query"], "endpoints.c-query": before["endpoints.c-query"]} {
		if after[key] != want {
			t.Errorf("%s is %q, want %q: %s", key, after[key], want, raw)
		}
	}
	if before["endpoints.b-query"] != "unknown" || before["demographics"] != "unknown" {
		t.Errorf("before the search: %v", before)
	}
}
