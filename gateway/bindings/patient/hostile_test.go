package patient_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/test/doubles/consentpdp"
	"github.com/ferrofed/ferrofed/test/doubles/pixmanager"
)

// Hostile patient parameters are refused before any binding or member is asked, with
// a clear OperationOutcome, and change no state.
func TestHostilePatientParametersAreRefused(t *testing.T) {
	huge := strings.Repeat("9", 100<<10)
	cases := []struct {
		name, search, limits string
		wantStatus           int
		wantIn               string
		// surfaceOnly: a whole gateway's listener refuses this request head itself (431,
		// gateway/server's HeaderRoom) before the flow sees it.
		surfaceOnly bool
	}{
		{"an identifier of 100 KB, past limits.max_query_bytes", "Observation?patient.identifier=" + mpi + "|" + huge, "", http.StatusBadRequest, "the query is longer than", true},
		{"an identifier of 100 KB within a raised limits.max_query_bytes", "Observation?patient.identifier=" + mpi + "|" + huge,
			"[limits]\nmax_query_bytes = 524288\n", http.StatusBadRequest, "at most 256 bytes", false},
		{"a patient URL of another host", "Observation?patient=https://evil.example/fhir/Patient/1", "", http.StatusBadRequest, "never by a URL", false},
		{"a subject URL of another host, escaped", "Observation?subject=https%3A%2F%2Fevil.example%2FPatient%2F1", "", http.StatusBadRequest, "never by a URL", false},
		{"two patients", "Observation?patient.identifier=" + mpi + "|1&subject=Patient/2", "", http.StatusBadRequest, "names its patient twice", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := pixmanager.Start(t, alice())
			pdp := consentpdp.Start(t, consentpdp.Options{Rules: []consentpdp.Rule{{Permit: true}}})
			g := newGateway(t, gatewayOptions{tables: fmt.Sprintf("%s[resolver]\nurl = %q\n[consent]\nurl = %q\n", tc.limits, p.URL, pdp.URL),
				surfaceOnly: tc.surfaceOnly})
			a := g.search(tc.search)
			if a.status != tc.wantStatus {
				t.Fatalf("answered %d, want %d: %.300s", a.status, tc.wantStatus, a.raw)
			}
			if tc.wantIn != "" && !strings.Contains(string(a.raw), tc.wantIn) {
				t.Fatalf("the refusal does not say %q: %s", tc.wantIn, a.raw)
			}
			if p.Requests() != 0 || pdp.Requests() != 0 {
				t.Fatalf("a binding was asked: resolver %d, consent %d", p.Requests(), pdp.Requests())
			}
			for id, n := range g.asked() {
				if n != 0 {
					t.Errorf("member %s was asked", id)
				}
			}
			if report, raw := g.States(); report["resolver"] != "unknown" || report["consent"] != "unknown" {
				t.Errorf("a refused request changed a state: %s", raw)
			}
		})
	}
}
