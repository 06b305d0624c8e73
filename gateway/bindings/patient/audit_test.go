package patient_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/consentpdp"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
	"github.com/ferrofed/ferrofed/test/doubles/pdqsupplier"
	"github.com/ferrofed/ferrofed/test/doubles/pixmanager"
	"github.com/ferrofed/ferrofed/test/doubles/respondinggateway"
)

// allFour starts the four doubles, each letting every member through, and returns
// their tables.
func allFour(t testing.TB) string {
	t.Helper()
	sup := pdqsupplier.Start(t, supplier())
	set := alice()
	set.Sets[0] = append(set.Sets[0], pixmanager.Record{ID: "x-c", Identifiers: []pixmanager.Identifier{{System: domainC, Value: "pc-1"}}})
	set.Domains = nil
	pix := pixmanager.Start(t, set)
	pdp := consentpdp.Start(t, consentpdp.Options{Rules: []consentpdp.Rule{{Permit: true}}})
	x := respondinggateway.Start(t, respondinggateway.Options{Entries: []respondinggateway.Entry{{IDs: []respondinggateway.II{{Root: mpiOID, Extension: "MRN-1"}}, Records: []respondinggateway.Record{
		{HomeCommunityID: memberCommunities["a"]}, {HomeCommunityID: memberCommunities["b"]}, {HomeCommunityID: memberCommunities["c"]},
	}}}})
	return fmt.Sprintf("[pdqm]\nurl = %q\n[resolver]\nurl = %q\n[consent]\nurl = %q\n[localizer]\nurl = %q\nprotocol = \"xcpd\"\n", sup.URL, pix.URL, pdp.URL, x.URL)
}

// Each exchange of a patient-scoped search emits its BALP AuditEvent through the
// audit trail: one per binding, PatientQuery, with its IHE transaction as a second
// subtype (none for AuthZEN), its query as sent and the patient as entities, the
// binding as destination, outcome 0; each valid R4, each reaching the repository.
func TestEachExchangeIsAudited(t *testing.T) {
	g := newGateway(t, gatewayOptions{tables: allFour(t), audited: true})
	if a := g.search(aliceSearch); a.status != http.StatusOK || len(a.Bundle.Meta.Federation) != 3 {
		t.Fatalf("answered %d: %s", a.status, a.raw)
	}
	want := map[string]struct{ transaction, query string }{
		"demographics": {"ITI-78", "_count=5"},
		"resolver":     {"ITI-83", "sourceIdentifier="},
		"consent":      {"", `"evaluations":[`},
		"localizer":    {"ITI-55", "PRPA_IN201305UV02"},
	}
	type coding struct{ System, Code string }
	var got map[string]bool
	double.Eventually(t, "one event of each of the four bindings reached the repository", func() bool {
		got = map[string]bool{}
		for _, ev := range g.arr.Received() {
			var e struct {
				Meta    struct{ Profile []string }
				Subtype []coding
				Outcome string
				Agent   []struct {
					Who struct {
						Identifier *struct{ System, Value string }
					}
				}
				Entity []struct {
					What *struct {
						Identifier *struct{ System, Value string }
					}
				}
			}
			if err := json.Unmarshal(ev.Body, &e); err != nil {
				t.Fatal(err)
			}
			key := ""
			for _, a := range e.Agent {
				if a.Who.Identifier != nil && a.Who.Identifier.System == bindings.ServiceSystem {
					key = a.Who.Identifier.Value
				}
			}
			w, ok := want[key]
			if !ok {
				continue // the data plane's own event
			}
			if got[key] {
				t.Fatalf("two events of the %s exchange", key)
			}
			got[key] = true
			if len(e.Meta.Profile) != 1 || e.Meta.Profile[0] != bindings.ProfilePatientQuery || e.Outcome != "0" {
				t.Errorf("%s: profile %v, outcome %q", key, e.Meta.Profile, e.Outcome)
			}
			var transaction string
			for _, c := range e.Subtype {
				if c.System == bindings.TransactionSystem {
					transaction = c.Code
				}
			}
			if transaction != w.transaction {
				t.Errorf("%s: transaction %q, want %q", key, transaction, w.transaction)
			}
			if len(ev.Queries) != 1 || !strings.Contains(ev.Queries[0], w.query) {
				t.Errorf("%s: the event's query is %.200q, want one with %q", key, ev.Queries, w.query)
			}
			patient := false
			for _, en := range e.Entity {
				if en.What != nil && en.What.Identifier != nil && en.What.Identifier.System == mpi && en.What.Identifier.Value == "MRN-1" {
					patient = true
				}
			}
			if !patient {
				t.Errorf("%s: the event names no patient: %s", key, ev.Body)
			}
			if err := fhirschema.Validate(ev.Body); err != nil {
				t.Errorf("%s: the event is not valid R4: %v\n%s", key, err, ev.Body)
			}
		}
		return len(got) == len(want)
	}, func() string { return fmt.Sprintf("events of %v reached it", got) })
}
