package patient_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/ferrofed/ferrofed/test/doubles/consentpdp"
	"github.com/ferrofed/ferrofed/test/doubles/pixmanager"
)

// With both caches on, a second search for the same patient by the same caller asks
// neither the resolver nor the PDP again; another patient, or another caller, does.
// With them off (the default), every search asks.
func TestTheCachesNeverCrossPatientsOrCallers(t *testing.T) {
	set := alice()
	set.Sets = append(set.Sets, pixmanager.Set{
		{ID: "m2", Identifiers: []pixmanager.Identifier{{System: mpi, Value: "MRN-2"}}},
		{ID: "y-a", Identifiers: []pixmanager.Identifier{{System: domainA, Value: "qa-2"}}},
	})
	for _, cached := range []bool{true, false} {
		t.Run(fmt.Sprintf("cached %v", cached), func(t *testing.T) {
			p := pixmanager.Start(t, set)
			pdp := consentpdp.Start(t, consentpdp.Options{Rules: []consentpdp.Rule{{Permit: true}}})
			ttl := ""
			if cached {
				ttl = "cache_ttl_ms = 30000\n"
			}
			g := newGateway(t, gatewayOptions{tables: fmt.Sprintf("[resolver]\nurl = %q\n%s[consent]\nurl = %q\n%s", p.URL, ttl, pdp.URL, ttl)})
			steps := []struct {
				what, search, token string
				// asks is how many times each binding has been asked after the step, cached.
				asks int
			}{
				{"the first search", "Observation?patient.identifier=" + mpi + "|MRN-1", g.Client, 1},
				{"the same patient by the same caller", "Observation?patient.identifier=" + mpi + "|MRN-1", g.Client, 1},
				{"another patient", "Observation?patient.identifier=" + mpi + "|MRN-2", g.Client, 2},
				{"the first patient by another caller", "Observation?patient.identifier=" + mpi + "|MRN-1", g.token, 3},
				{"that caller again", "Observation?patient.identifier=" + mpi + "|MRN-1", g.token, 3},
			}
			for i, s := range steps {
				a := g.searchAs(s.search, s.token)
				if a.status != http.StatusOK {
					t.Fatalf("%s answered %d: %s", s.what, a.status, a.raw)
				}
				want := s.asks
				if !cached {
					want = i + 1
				}
				if p.Requests() != want || pdp.Requests() != want {
					t.Fatalf("after %s: the resolver was asked %d times, the PDP %d, want %d each", s.what, p.Requests(), pdp.Requests(), want)
				}
			}
			// The answers from the cache are the same plan: MRN-2 is at member a only.
			a := g.search("Observation?patient.identifier=" + mpi + "|MRN-2")
			if r, _ := a.record("b"); r.ExcludedBy != "resolver" {
				t.Fatalf("member b for MRN-2: %+v", r)
			}
			if q := g.lastQuery("a"); q.Get("patient") != "Patient/qa-2" {
				t.Fatalf("member a was asked %v", q)
			}
		})
	}
}
