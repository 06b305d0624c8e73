package patient_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/ferrofed/ferrofed/test/doubles/pdqsupplier"
	"github.com/ferrofed/ferrofed/test/doubles/pixmanager"
)

// The four ways a search names its patient (patient=, subject=, patient.identifier=,
// Patient?identifier=) each run the flow through the gateway: member a is asked with
// its own id of Alice in place of the client's parameter, c (not mapped) is excluded
// by the resolver. A search that names no patient (an identifier of another type)
// asks no binding.
func TestTheFourTriggersRunTheFlow(t *testing.T) {
	cases := []struct {
		name, search string
		// param and want are the parameter member a is asked with, and its value.
		param, want string
		scoped      bool
	}{
		{"patient= by the supplier's id", "Observation?patient=Patient/m1&code=1234-5", "patient", "Patient/pa-1", true},
		{"subject= by the supplier's bare id", "Encounter?subject=m1", "subject", "Patient/pa-1", true},
		{"patient.identifier=", "Observation?patient.identifier=" + mpi + "|MRN-1", "patient", "Patient/pa-1", true},
		{"Patient?identifier=", "Patient?identifier=" + mpi + "|MRN-1", "_id", "pa-1", true},
		{"identifier= of another type names no patient", "Observation?identifier=" + mpi + "|MRN-1", "identifier", mpi + "|MRN-1", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sup := pdqsupplier.Start(t, supplier())
			pix := pixmanager.Start(t, alice())
			g := newGateway(t, gatewayOptions{tables: fmt.Sprintf("[pdqm]\nurl = %q\n[resolver]\nurl = %q\n", sup.URL, pix.URL)})
			a := g.search(tc.search)
			if a.status != http.StatusOK {
				t.Fatalf("answered %d: %s", a.status, a.raw)
			}
			if q := g.lastQuery("a"); q.Get(tc.param) != tc.want || len(q[tc.param]) != 1 {
				t.Fatalf("member a was asked %v, want %s=%s", q, tc.param, tc.want)
			}
			asked := int64(1)
			if tc.scoped {
				asked = 0
				if r, _ := a.record("c"); r.Outcome != "excluded" || r.ExcludedBy != "resolver" {
					t.Errorf("member c's record is %+v, want excluded by the resolver", r)
				}
			}
			if n := int64(g.members["c"].Requests()); n != asked {
				t.Errorf("member c was asked %d times, want %d", n, asked)
			}
			want := 0
			if tc.scoped {
				want = 1
			}
			if sup.Requests() != want || pix.Requests() != want {
				t.Errorf("demographics asked %d times, resolver %d, want %d each", sup.Requests(), pix.Requests(), want)
			}
		})
	}
}
