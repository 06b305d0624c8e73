package patient_test

import (
	"fmt"

	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/pdqsupplier"
)

const shared = "urn:oid:1.3.6.1.4.1.21367.13.20.9999"

// suppliers holds Alice (MRN-1), two people sharing one identifier of another domain
// (DUP: ambiguous), and a merged pair (MRN-7: the inactive record replaced by the
// active one, one person).
func supplier() pdqsupplier.Options {
	return pdqsupplier.Options{Patients: []pdqsupplier.Patient{
		{ID: "m1", Identifiers: []pdqsupplier.Identifier{{System: mpi, Value: "MRN-1"}}, Family: "Mohr", Given: []string{"Alice"}, Gender: "female", BirthDate: "1958-01-30"},
		{ID: "d1", Identifiers: []pdqsupplier.Identifier{{System: shared, Value: "DUP"}}, Family: "Smith"},
		{ID: "d2", Identifiers: []pdqsupplier.Identifier{{System: shared, Value: "DUP"}}, Family: "Smyth"},
		{ID: "old", Identifiers: []pdqsupplier.Identifier{{System: mpi, Value: "MRN-7"}}, Family: "Jones", ReplacedBy: "new"},
		{ID: "new", Identifiers: []pdqsupplier.Identifier{{System: mpi, Value: "MRN-7"}}, Family: "Jones"},
	}}
}

// Every row of the demographics state table (docs/bindings.md, "Demographics", and the
// README's table of the patient-scoped keys) drives the PDQm double, read through GET
// {base}/operator/dependencies, with what the client got and which members were asked.
func TestTheDemographicsStatesThroughTheDependencyReport(t *testing.T) {
	all := []string{"a", "b", "c"}
	cases := []struct {
		name       string
		configured bool
		knobs      double.Knobs
		extra      string
		audited    bool
		search     string
		want       string
		wantStatus int
		wantAsked  []string
		// wantIssue is the code of the OperationOutcome entry of a Bundle no member
		// was asked for (every member then excluded by demographics).
		wantIssue string
	}{
		{name: "one match is up and asks every member", configured: true, search: "Observation?patient.identifier=" + mpi + "|MRN-1",
			want: "up", wantStatus: 200, wantAsked: all},
		{name: "a patient named by the supplier's id is looked up by _id", configured: true, search: "Observation?patient=Patient/m1",
			want: "up", wantStatus: 200, wantAsked: all},
		{name: "a merged pair is one match", configured: true, search: "Observation?patient.identifier=" + mpi + "|MRN-7",
			want: "up", wantStatus: 200, wantAsked: all},
		{name: "no match is up, asks no member and says not-found", configured: true, search: "Observation?patient.identifier=" + mpi + "|NOBODY",
			want: "up", wantStatus: 200, wantIssue: "not-found"},
		{name: "an ambiguous match is up, asks no member and says multiple-matches", configured: true, search: "Observation?patient.identifier=" + shared + "|DUP",
			want: "up", wantStatus: 200, wantIssue: "multiple-matches"},
		{name: "an unknown domain (Case 4, 404) is no match", configured: true, search: "Observation?patient.identifier=urn:oid:7.7|X",
			want: "up", wantStatus: 200, wantIssue: "not-found"},
		{name: "a 400 is up and fails closed", configured: true, knobs: double.Knobs{Status: 400}, search: "Observation?patient.identifier=" + mpi + "|MRN-1",
			want: "up", wantStatus: 502},
		{name: "a 401 is up and fails closed", configured: true, knobs: double.Knobs{Status: 401}, search: "Observation?patient.identifier=" + mpi + "|MRN-1",
			want: "up", wantStatus: 502},
		{name: "a 403 is up and fails closed", configured: true, knobs: double.Knobs{Status: 403}, search: "Observation?patient.identifier=" + mpi + "|MRN-1",
			want: "up", wantStatus: 502},
		{name: "a 406 (Case 5, format) is up and fails closed", configured: true, knobs: double.Knobs{Status: 406}, search: "Observation?patient.identifier=" + mpi + "|MRN-1",
			want: "up", wantStatus: 502},
		{name: "an answer past max_body_bytes is up and fails closed", configured: true, extra: "max_body_bytes = 16\n",
			search: "Observation?patient.identifier=" + mpi + "|MRN-1", want: "up", wantStatus: 502},
		{name: "a 200 that is no searchset is up and fails closed", configured: true, knobs: double.Knobs{Fault: double.FaultMalformed},
			search: "Observation?patient.identifier=" + mpi + "|MRN-1", want: "up", wantStatus: 502},
		{name: "a 500 is failing and fails closed", configured: true, knobs: double.Knobs{Status: 500}, search: "Observation?patient.identifier=" + mpi + "|MRN-1",
			want: "failing", wantStatus: 502},
		{name: "a refused connection is down and fails closed", configured: true, knobs: double.Knobs{Fault: double.FaultRefused},
			search: "Observation?patient.identifier=" + mpi + "|MRN-1", want: "down", wantStatus: 502},
		{name: "a reset mid-answer is down and fails closed", configured: true, knobs: double.Knobs{Fault: double.FaultReset},
			search: "Observation?patient.identifier=" + mpi + "|MRN-1", want: "down", wantStatus: 502},
		{name: "a silent supplier past its budget is down and answers 504", configured: true, knobs: double.Knobs{Fault: double.FaultHang}, extra: "timeout_ms = 200\n",
			search: "Observation?patient.identifier=" + mpi + "|MRN-1", want: "down", wantStatus: 504},
		{name: "an exchange whose audit record could not be stored is failing, its answer unused", configured: true, audited: true,
			search: "Observation?patient.identifier=" + mpi + "|MRN-1", want: "failing", wantStatus: 503},
		{name: "without [pdqm] the key is absent", search: "Observation?patient.identifier=" + mpi + "|MRN-1", wantStatus: 200, wantAsked: all},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s *pdqsupplier.Server
			tables := ""
			if tc.configured {
				s = pdqsupplier.Start(t, supplier())
				tables = fmt.Sprintf("[pdqm]\nurl = %q\n%s", s.URL, tc.extra)
			}
			g := newGateway(t, gatewayOptions{tables: tables, audited: tc.audited})
			if s != nil {
				if err := s.SetKnobs(tc.knobs); err != nil {
					t.Fatal(err)
				}
			}
			g.refuse(tc.audited)
			a := g.search(tc.search)
			if a.status != tc.wantStatus {
				t.Fatalf("answered %d, want %d: %s", a.status, tc.wantStatus, a.raw)
			}
			report, raw := g.States()
			got, present := report["demographics"]
			switch {
			case tc.want == "" && present:
				t.Fatalf("demographics is %q without [pdqm]: %s", got, raw)
			case tc.want != "" && got != tc.want:
				t.Fatalf("demographics is %q, want %q: %s", got, tc.want, raw)
			}
			// The service's body reaches neither the client nor the log.
			if strings.Contains(string(a.raw), "PDQM-BODY") || strings.Contains(g.log.String(), "PDQM-BODY") {
				t.Fatalf("the service's body leaked: %s\n%s", a.raw, g.log.String())
			}
			if strings.Contains(string(raw), "PDQM-BODY") {
				t.Fatalf("the report carries the supplier's body: %s", raw)
			}
			asked := g.asked()
			for _, id := range all {
				want := int64(0)
				for _, w := range tc.wantAsked {
					if w == id {
						want = 1
					}
				}
				if asked[id] != want {
					t.Errorf("member %s was asked %d times, want %d", id, asked[id], want)
				}
				if state := report["endpoints."+id+"-query"]; want == 0 && state != "unknown" {
					t.Errorf("member %s, never asked, is %q", id, state)
				}
			}
			if tc.wantIssue != "" {
				found := false
				for _, e := range a.Bundle.Entry {
					if e.Resource.ResourceType == "OperationOutcome" && len(e.Resource.Issue) > 0 && e.Resource.Issue[0].Code == tc.wantIssue {
						found = true
					}
				}
				if !found || a.Bundle.Total == nil || *a.Bundle.Total != 0 {
					t.Fatalf("want a Bundle of total 0 with a %s outcome entry: %s", tc.wantIssue, a.raw)
				}
				for _, id := range all {
					if r, ok := a.record(id); !ok || r.Outcome != "excluded" || r.ExcludedBy != "demographics" || a.extensionExcludedBy(id) != "demographics" {
						t.Errorf("member %s's record is %+v, want excluded by demographics", id, r)
					}
				}
			}
			if s != nil && tc.wantStatus != 400 && s.Requests() > 0 {
				last, _ := s.Last()
				if last.Query.Get("_count") != "5" || last.Path != "/fhir/Patient" {
					t.Errorf("the supplier was asked %s?%s, want Patient?…&_count=5", last.Path, last.RawQuery)
				}
			}
		})
	}
}
