package patient_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/test/doubles/consentpdp"
)

// Consent on every door: with a consent service that denies everything, no routed
// read or search that names the patient reaches a member, and the client learns
// nothing of why (a 404, an empty searchset); with one that permits, the same requests
// go through, a search asking with the member's own id.
func TestConsentIsAskedAtEveryDoor(t *testing.T) {
	doors := []struct {
		name, path string
		search     bool
	}{
		{"a read of the patient", "/nodes/a/fhir/Patient/pa-1", false},
		{"a vread of the patient", "/nodes/a/fhir/Patient/pa-1/_history/1", false},
		{"a history of the patient", "/nodes/a/fhir/Patient/pa-1/_history", false},
		{"a compartment search", "/nodes/a/fhir/Patient/pa-1/Observation", true},
		{"a search by reference", "/nodes/a/fhir/Observation?patient=Patient/pa-1", true},
		{"a search by subject", "/nodes/a/fhir/Observation?subject=pa-1&code=x", true},
		{"a search by identifier", "/nodes/a/fhir/Observation?patient.identifier=" + url.QueryEscape(aliceByID), true},
	}
	for _, permit := range []bool{false, true} {
		pdp := consentpdp.Start(t, consentpdp.Options{Rules: []consentpdp.Rule{{Permit: permit}}})
		g := newGateway(t, gatewayOptions{tables: fmt.Sprintf("[consent]\nurl = %q\n", pdp.URL)})
		for _, d := range doors {
			t.Run(fmt.Sprintf("permit %v: %s", permit, d.name), func(t *testing.T) {
				before, asks := g.members["a"].Requests(), pdp.Requests()
				res, err := g.Get(d.path)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if pdp.Requests() == asks {
					t.Fatalf("consent was not asked (%d %s)", res.StatusCode, body)
				}
				asked := g.members["a"].Requests() > before
				switch {
				case permit && !asked:
					t.Fatalf("permitted, but the member was not asked: %d %s", res.StatusCode, body)
				case !permit && asked:
					t.Fatalf("denied, but the member was asked: %d %s", res.StatusCode, body)
				case !permit && d.search && (res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"searchset"`) || strings.Contains(string(body), `"entry"`)):
					t.Fatalf("denied search answered %d %s, want an empty searchset", res.StatusCode, body)
				case !permit && !d.search && res.StatusCode != http.StatusNotFound:
					t.Fatalf("denied read answered %d %s, want 404", res.StatusCode, body)
				case !permit && strings.Contains(string(body), "consent"):
					t.Fatalf("the answer says why: %s", body)
				}
			})
		}
		// A routed POST _search names the patient in its form.
		t.Run(fmt.Sprintf("permit %v: a POST search", permit), func(t *testing.T) {
			before, asks := g.members["a"].Requests(), pdp.Requests()
			req, _ := http.NewRequest(http.MethodPost, g.URL+"/nodes/a/fhir/Observation/_search", strings.NewReader("code=x&subject=Patient/pa-1"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			res, err := g.Send(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			asked := g.members["a"].Requests() > before
			if pdp.Requests() == asks || asked != permit || (!permit && (res.StatusCode != http.StatusOK || strings.Contains(string(body), `"entry"`))) {
				t.Fatalf("answered %d (consent asked: %v, the member asked: %v): %s", res.StatusCode, pdp.Requests() > asks, asked, body)
			}
		})
		if permit { // the last GET door named the patient by identifier: asked as the client named it (no resolver)
			q := g.members["a"].Log()[len(g.members["a"].Log())-2] // before the POST search
			if got, _ := url.ParseQuery(q.RawQuery); got.Get("patient.identifier") != aliceByID {
				t.Fatalf("the member was asked %s?%s", q.Path, q.RawQuery)
			}
		}
	}
	// A read by id of another compartment type cannot be decided before the member
	// answers: refused while consent is configured.
	pdp := consentpdp.Start(t, consentpdp.Options{Rules: []consentpdp.Rule{{Permit: true}}})
	g := newGateway(t, gatewayOptions{tables: fmt.Sprintf("[consent]\nurl = %q\n", pdp.URL)})
	if status, body := g.Do(http.MethodGet, "/nodes/a/fhir/Observation/o-1", "", nil); status != http.StatusForbidden || g.members["a"].Requests() != 0 {
		t.Fatalf("answered %d (the member asked %d times): %s", status, g.members["a"].Requests(), body)
	}
}
