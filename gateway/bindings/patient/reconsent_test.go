package patient_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/test/doubles/consentpdp"
)

// nextOf is the path under {base}/fhir/ of an answer's next link, "" for none.
func nextOf(t *testing.T, a answer) string {
	t.Helper()
	var b struct {
		Link []struct{ Relation, URL string }
	}
	if err := json.Unmarshal(a.raw, &b); err != nil {
		t.Fatal(err)
	}
	for _, l := range b.Link {
		if l.Relation == "next" {
			_, rest, _ := strings.Cut(l.URL, "/fhir/")
			return rest
		}
	}
	return ""
}

// A next page asks consent again once the decision its first page relied on may no
// longer be relied on (at once without consent.cache_ttl_ms; past it with one): a
// member whose consent was withdrawn meanwhile is not asked for the next page, and the
// page says so to the operator; within the cache's time the page asks nothing again.
func TestANextPageAsksConsentAgainOnceTheDecisionExpired(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cached %v", cached), func(t *testing.T) {
			pdp := consentpdp.Start(t, consentpdp.Options{Rules: []consentpdp.Rule{{Permit: true}}})
			ttl := ""
			if cached {
				ttl = "cache_ttl_ms = 30000\n"
			}
			g := newGateway(t, gatewayOptions{tables: fmt.Sprintf("[consent]\nurl = %q\n%s", pdp.URL, ttl)})
			first := g.search("Observation?_count=1&patient.identifier=" + aliceByID)
			if first.status != http.StatusOK || pdp.Requests() != 1 {
				t.Fatalf("first page answered %d, the PDP asked %d times: %s", first.status, pdp.Requests(), first.raw)
			}
			next := nextOf(t, first)
			if next == "" {
				t.Fatalf("no next link: %s", first.raw)
			}
			// The directive changes: member a is no longer permitted.
			pdp.SetRules([]consentpdp.Rule{{Resource: "a", Permit: false}, {Permit: true}})
			before := g.members["a"].Requests()
			second := g.searchAs(next, g.operator)
			if second.status != http.StatusOK {
				t.Fatalf("next page answered %d: %s", second.status, second.raw)
			}
			asked := g.members["a"].Requests() > before
			switch {
			case !cached && (pdp.Requests() != 2 || asked):
				t.Fatalf("the PDP was asked %d times, member a asked again: %v", pdp.Requests(), asked)
			case !cached:
				if r, _ := second.record("a"); r.Outcome != "excluded" || r.ExcludedBy != "consent" {
					t.Fatalf("member a's record is %+v, want excluded by consent", r)
				}
			case cached && pdp.Requests() != 1:
				t.Fatalf("within the cache's time the PDP was asked %d times", pdp.Requests())
			}
		})
	}
}
