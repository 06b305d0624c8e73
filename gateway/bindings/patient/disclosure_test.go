package patient_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/test/doubles/consentpdp"
	"github.com/ferrofed/ferrofed/test/doubles/pixmanager"
)

// volatile are what two answers to the same search differ by whatever the gateway
// decides: when they were made, how long each member took, and the patient each
// names (its identifier in the master patient index and at each member).
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`"lastUpdated":"[^"]*"`), `"lastUpdated":"T"`},
	{regexp.MustCompile(`"duration_ms":\d+`), `"duration_ms":0`},
	{regexp.MustCompile(`"valueQuantity":\{"value":\d+,`), `"valueQuantity":{"value":0,`},
	{regexp.MustCompile(`_page=[A-Za-z0-9_.-]+`), `_page=TOKEN`},
	{regexp.MustCompile(`MRN-\d`), `MRN-N`},
}

func normalised(raw []byte) string {
	s := string(raw)
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return s
}

// A client without the operator scope never learns why a member was left out
// (docs/security.md, "What a caller is told of the members"): the answer for a patient
// whose consent directive denies member c and the answer for a patient member c does
// not hold (the resolver excludes it) are the same, byte for byte, but for the
// patient's identifiers, the times and the durations. In both, c has no record (as a
// member not asked) and the Bundle no total. An operator is told each step.
func TestAClientCannotTellAConsentExclusionFromAnyOther(t *testing.T) {
	pix := pixmanager.Start(t, pixmanager.Options{Sets: []pixmanager.Set{
		{
			{ID: "m1", Identifiers: []pixmanager.Identifier{{System: mpi, Value: "MRN-1"}}},
			{ID: "x-a", Identifiers: []pixmanager.Identifier{{System: domainA, Value: "pa-1"}}},
			{ID: "x-b", Identifiers: []pixmanager.Identifier{{System: domainB, Value: "pb-1"}}},
			{ID: "x-c", Identifiers: []pixmanager.Identifier{{System: domainC, Value: "pc-1"}}},
		},
		{
			{ID: "m2", Identifiers: []pixmanager.Identifier{{System: mpi, Value: "MRN-2"}}},
			{ID: "y-a", Identifiers: []pixmanager.Identifier{{System: domainA, Value: "qa-2"}}},
			{ID: "y-b", Identifiers: []pixmanager.Identifier{{System: domainB, Value: "qb-2"}}},
		},
	}, Domains: []string{domainC}})
	pdp := consentpdp.Start(t, consentpdp.Options{Rules: []consentpdp.Rule{
		{Resource: "c", Patient: mpi + "|MRN-1", Permit: false},
		{Permit: true},
	}})
	g := newGateway(t, gatewayOptions{tables: fmt.Sprintf("[resolver]\nurl = %q\n[consent]\nurl = %q\n", pix.URL, pdp.URL)})
	denied := "Observation?patient.identifier=" + mpi + "|MRN-1&code=1234-5"
	unheld := "Observation?patient.identifier=" + mpi + "|MRN-2&code=1234-5"

	byConsent, byResolver := g.searchAs(denied, g.Client), g.searchAs(unheld, g.Client)
	if byConsent.status != http.StatusOK || byResolver.status != http.StatusOK {
		t.Fatalf("answered %d and %d: %s\n%s", byConsent.status, byResolver.status, byConsent.raw, byResolver.raw)
	}
	if g.members["c"].Requests() != 0 || g.members["a"].Requests() != 2 || g.members["b"].Requests() != 2 {
		t.Fatalf("members asked a %d, b %d, c %d times; want a and b twice, c never",
			g.members["a"].Requests(), g.members["b"].Requests(), g.members["c"].Requests())
	}
	if a, b := normalised(byConsent.raw), normalised(byResolver.raw); a != b {
		t.Fatalf("a client tells the two apart:\nconsent  %s\nresolver %s", a, b)
	}
	for _, a := range []answer{byConsent, byResolver} {
		if _, ok := a.record("c"); ok || a.extensionExcludedBy("c") != "" || strings.Contains(string(a.raw), `"c"`) {
			t.Fatalf("the client is shown member c: %s", a.raw)
		}
		if strings.Contains(string(a.raw), "excluded") || strings.Contains(string(a.raw), "consent") {
			t.Fatalf("the client is told of an exclusion: %s", a.raw)
		}
		if a.Bundle.Total != nil {
			t.Fatalf("a page with an excluded member has a total: %s", a.raw)
		}
		if r, ok := a.record("a"); !ok || r.Outcome != "ok" || r.Entries == 0 {
			t.Fatalf("member a's record is %+v: %s", r, a.raw)
		}
	}

	// The operator is told which step left c out, and the flow asked the same members.
	for search, by := range map[string]string{denied: "consent", unheld: "resolver"} {
		a := g.search(search)
		if r, ok := a.record("c"); !ok || r.Outcome != "excluded" || r.ExcludedBy != by || a.extensionExcludedBy("c") != by {
			t.Fatalf("the operator is shown c as %+v, want excluded by %s: %s", r, by, a.raw)
		}
		if a.Bundle.Total != nil {
			t.Fatalf("the operator's page with an excluded member has a total: %s", a.raw)
		}
	}
	if g.members["c"].Requests() != 0 {
		t.Fatal("member c was asked")
	}
}
