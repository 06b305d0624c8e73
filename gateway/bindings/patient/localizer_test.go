package patient_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/xcpd"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/pixmanager"
	"github.com/ferrofed/ferrofed/test/doubles/respondinggateway"
)

var mpiOID = strings.TrimPrefix(mpi, "urn:oid:")

// responding is a gateway that knows Alice (MRN-1) at communities a and b (b written
// with its urn:oid: prefix, as some gateways do), and Bob (MRN-3) in case 3.
func responding() respondinggateway.Options {
	return respondinggateway.Options{Entries: []respondinggateway.Entry{
		{IDs: []respondinggateway.II{{Root: mpiOID, Extension: "MRN-1"}}, Records: []respondinggateway.Record{
			{HomeCommunityID: memberCommunities["a"], Patient: respondinggateway.II{Root: "1.2.3.1", Extension: "pa-1"}},
			{HomeCommunityID: "urn:oid:" + memberCommunities["b"], Patient: respondinggateway.II{Root: "1.2.3.2", Extension: "pb-1"}},
		}},
		{IDs: []respondinggateway.II{{Root: mpiOID, Extension: "MRN-3"}}, Case: respondinggateway.CaseMoreAttributes},
		{IDs: []respondinggateway.II{{Root: mpiOID, Extension: "MRN-5"}}, Case: respondinggateway.CaseError},
		{IDs: []respondinggateway.II{{Root: mpiOID, Extension: "MRN-6"}}, Case: respondinggateway.CaseReceiverFault},
		{IDs: []respondinggateway.II{{Root: mpiOID, Extension: "MRN-7"}}, Case: respondinggateway.CaseSenderFault},
	}}
}

// Every row of the localizer's state table (docs/bindings.md, "Localizer", and the
// README's table of the patient-scoped keys) drives the XCPD double, read through GET
// {base}/operator/dependencies. The localizer fails open: whatever goes wrong, every
// permitted member is asked, within the request's budget; the hostile answers are
// refused with no panic.
func TestTheLocalizerStatesThroughTheDependencyReport(t *testing.T) {
	all := []string{"a", "b", "c"}
	cases := []struct {
		name       string
		configured bool
		hostile    respondinggateway.Hostile
		knobs      double.Knobs
		extra      string
		auditOnce  bool
		patient    string
		want       string
		wantAsked  []string
		// wantLog is what the flow logs of why the localizer failed open.
		wantLog string
	}{
		{name: "a candidate set (cases 1 and 2) is up and asks the members that hold the patient", configured: true, patient: "MRN-1",
			want: "up", wantAsked: []string{"a", "b"}},
		{name: "more attributes requested (case 3) is up: no member holds the patient", configured: true, patient: "MRN-3", want: "up"},
		{name: "no match (case 4) is up: no member holds the patient", configured: true, patient: "MRN-404", want: "up"},
		{name: "an application error (case 5) is up and fails open", configured: true, patient: "MRN-5", want: "up", wantAsked: all, wantLog: "case 5"},
		{name: "a Sender fault (400) is up and fails open", configured: true, patient: "MRN-7", want: "up", wantAsked: all},
		{name: "a Receiver fault (500) is failing and fails open", configured: true, patient: "MRN-6", want: "failing", wantAsked: all},
		{name: "a 503 is failing and fails open", configured: true, knobs: double.Knobs{Status: 503}, patient: "MRN-1", want: "failing", wantAsked: all},
		{name: "a malformed answer is up and fails open", configured: true, knobs: double.Knobs{Fault: double.FaultMalformed}, patient: "MRN-1", want: "up", wantAsked: all},
		{name: "a refused connection is down and fails open", configured: true, knobs: double.Knobs{Fault: double.FaultRefused}, patient: "MRN-1", want: "down", wantAsked: all},
		{name: "a reset mid-answer is down and fails open", configured: true, knobs: double.Knobs{Fault: double.FaultReset}, patient: "MRN-1", want: "down", wantAsked: all},
		{name: "a 404 is up and fails open", configured: true, knobs: double.Knobs{Status: 404}, patient: "MRN-1", want: "up", wantAsked: all},
		{name: "an answer past max_body_bytes is up and fails open", configured: true, extra: "max_body_bytes = 64\n", patient: "MRN-1", want: "up", wantAsked: all},
		{name: "a silent localizer is down and every permitted member is asked within the request's budget", configured: true,
			knobs: double.Knobs{Fault: double.FaultHang}, patient: "MRN-1", want: "down", wantAsked: all},
		{name: "an exchange whose audit record could not be stored is failing, its answer unused", configured: true, auditOnce: true,
			patient: "MRN-1", want: "failing", wantAsked: all},
		{name: "an entity expansion bomb is refused, up, and fails open", configured: true, hostile: respondinggateway.HostileEntityBomb, patient: "MRN-1",
			want: "up", wantAsked: all, wantLog: "DOCTYPE"},
		{name: "10,000 nested elements are refused, up, and fail open", configured: true, hostile: respondinggateway.HostileDeep, patient: "MRN-1",
			want: "up", wantAsked: all, wantLog: "nested deeper than 64"},
		{name: "without [localizer] the key is absent", patient: "MRN-1", wantAsked: all},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var x *respondinggateway.Server
			tables := ""
			if tc.configured {
				o := responding()
				o.Hostile = tc.hostile
				x = respondinggateway.Start(t, o)
				// The localizer's own budget is as long as the silent row's request
				// budget: the flow still keeps half of what is left for the fan-out.
				tables = fmt.Sprintf("[localizer]\nurl = %q\nprotocol = \"xcpd\"\ntimeout_ms = 2000\n%s", x.URL, tc.extra)
			}
			// A short request budget where the localizer is silent, to show that the
			// answer still comes within it; room elsewhere, so that a loaded machine
			// does not spend the budget before the localizer is asked.
			budget := 10 * time.Second
			if tc.knobs.Fault == double.FaultHang {
				budget = 2 * time.Second
			}
			g := newGateway(t, gatewayOptions{tables: tables, audited: tc.auditOnce, requestTimeout: budget})
			if x != nil {
				if err := x.SetKnobs(tc.knobs); err != nil {
					t.Fatal(err)
				}
			}
			if tc.auditOnce {
				g.refuseOnce()
			}
			start := time.Now()
			a := g.search("Observation?patient.identifier=" + mpi + "|" + tc.patient)
			if a.status != http.StatusOK {
				t.Fatalf("answered %d: %s", a.status, a.raw)
			}
			// Whatever the localizer does, the answer comes within the request's budget
			// (the localizer's own, 2 s, is cut to half of what is left).
			if took := time.Since(start); took >= budget {
				t.Fatalf("the search took %s, past the request's budget of %s", took, budget)
			}
			report, raw := g.States()
			got, present := report["localizer"]
			switch {
			case tc.want == "" && present:
				t.Fatalf("localizer is %q without [localizer]: %s", got, raw)
			case tc.want != "" && got != tc.want:
				t.Fatalf("localizer is %q, want %q: %s", got, tc.want, raw)
			}
			if logs := g.log.String(); tc.wantLog != "" && (!strings.Contains(logs, tc.wantLog) || !strings.Contains(logs, "failed open")) {
				t.Errorf("the flow logged %q, want why the localizer failed open (%q)", logs, tc.wantLog)
			}
			// The service's body reaches neither the client nor the log.
			if strings.Contains(string(a.raw), "XCPD-BODY") || strings.Contains(g.log.String(), "XCPD-BODY") {
				t.Fatalf("the service's body leaked: %s\n%s", a.raw, g.log.String())
			}
			if strings.Contains(string(raw), "XCPD-BODY") || strings.Contains(g.log.String(), "XCPD-BODY") {
				t.Fatalf("the report carries the gateway's body: %s", raw)
			}
			for _, id := range all {
				want := int64(0)
				for _, w := range tc.wantAsked {
					if w == id {
						want = 1
					}
				}
				if n := int64(g.members[id].Requests()); n != want {
					t.Errorf("member %s was asked %d times, want %d", id, n, want)
				}
				r, _ := a.record(id)
				switch {
				case want == 1 && r.Outcome != "ok":
					// Asked within the request's budget: the member answered in time.
					t.Errorf("member %s's record is %+v, want ok", id, r)
				case want == 0 && (r.Outcome != "excluded" || r.ExcludedBy != "localizer"):
					t.Errorf("member %s's record is %+v, want excluded by the localizer", id, r)
				}
			}
			if x != nil && x.Requests() > 0 {
				last, _ := x.Last()
				body := string(last.Body)
				if !strings.Contains(last.Header.Get("Content-Type"), "application/soap+xml") || !strings.Contains(body, xcpd.RequestAction) ||
					!strings.Contains(body, `root="`+mpiOID+`" extension="`+tc.patient+`"`) {
					t.Errorf("the localizer was asked %s\n%s", last.Header.Get("Content-Type"), body)
				}
			}
		})
	}
}

// With protocol = "pixm", a member holds the patient when the manager knows the
// patient in its domain.
func TestThePIXmLocalizer(t *testing.T) {
	p := pixmanager.Start(t, pixmanager.Options{Sets: []pixmanager.Set{{
		{ID: "m1", Identifiers: []pixmanager.Identifier{{System: mpi, Value: "MRN-1"}}},
		{ID: "x-a", Identifiers: []pixmanager.Identifier{{System: domainA, Value: "pa-1"}}},
	}}, Domains: []string{domainB, domainC}})
	g := newGateway(t, gatewayOptions{tables: fmt.Sprintf("[localizer]\nurl = %q\nprotocol = \"pixm\"\n", p.URL)})
	a := g.search("Observation?patient.identifier=" + mpi + "|MRN-1")
	if a.status != http.StatusOK {
		t.Fatalf("answered %d: %s", a.status, a.raw)
	}
	if g.members["a"].Requests() != 1 || g.members["b"].Requests() != 0 || g.members["c"].Requests() != 0 {
		t.Fatalf("asked %v", g.asked())
	}
	// The localizer does not rewrite the query: a holds the patient under the client's identifier.
	if q := g.lastQuery("a"); q.Get("patient.identifier") != mpi+"|MRN-1" {
		t.Errorf("member a was asked %v", q)
	}
	for _, id := range []string{"b", "c"} {
		if r, _ := a.record(id); r.ExcludedBy != "localizer" {
			t.Errorf("member %s: %+v", id, r)
		}
	}
	if report, raw := g.States(); report["localizer"] != "up" {
		t.Errorf("report %s", raw)
	}
}

// The PIXm localizer keeps the localizer's state rule and fails open like the XCPD
// one: whatever goes wrong, every permitted member is asked.
func TestThePIXmLocalizerFailsOpen(t *testing.T) {
	cases := []struct {
		name      string
		knobs     double.Knobs
		patient   string
		want      string
		wantAsked int
	}{
		{"an unknown patient (404) is up: no member holds it", double.Knobs{}, "MRN-404", "up", 0},
		{"a 500 is failing and fails open", double.Knobs{Status: 500}, "MRN-1", "failing", 3},
		{"a malformed answer is up and fails open", double.Knobs{Fault: double.FaultMalformed}, "MRN-1", "up", 3},
		{"a refused connection is down and fails open", double.Knobs{Fault: double.FaultRefused}, "MRN-1", "down", 3},
		{"a silent manager is down and fails open within the request's budget", double.Knobs{Fault: double.FaultHang}, "MRN-1", "down", 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := pixmanager.Start(t, pixmanager.Options{Sets: []pixmanager.Set{{
				{ID: "m1", Identifiers: []pixmanager.Identifier{{System: mpi, Value: "MRN-1"}}},
				{ID: "x-a", Identifiers: []pixmanager.Identifier{{System: domainA, Value: "pa-1"}}},
			}}, Domains: []string{domainB, domainC}})
			g := newGateway(t, gatewayOptions{tables: fmt.Sprintf("[localizer]\nurl = %q\nprotocol = \"pixm\"\ntimeout_ms = 2000\n", p.URL),
				requestTimeout: 2 * time.Second})
			if err := p.SetKnobs(tc.knobs); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			a := g.search("Observation?patient.identifier=" + mpi + "|" + tc.patient)
			if a.status != http.StatusOK || time.Since(start) >= 2*time.Second {
				t.Fatalf("answered %d after %s: %s", a.status, time.Since(start), a.raw)
			}
			asked := 0
			for _, n := range g.asked() {
				asked += int(n)
			}
			if asked != tc.wantAsked {
				t.Errorf("%d members asked, want %d", asked, tc.wantAsked)
			}
			if report, raw := g.States(); report["localizer"] != tc.want || strings.Contains(string(raw), "PIXM-BODY") {
				t.Errorf("localizer is %q, want %q: %s", report["localizer"], tc.want, raw)
			}
		})
	}
}
