package patient_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/bindings/xcpd"
	"github.com/ferrofed/ferrofed/test/doubles/consentpdp"
	"github.com/ferrofed/ferrofed/test/doubles/pdqsupplier"
	"github.com/ferrofed/ferrofed/test/doubles/pixmanager"
	"github.com/ferrofed/ferrofed/test/doubles/respondinggateway"
)

// BenchmarkPatientScopedQuery is the figure of issue 13: one patient-scoped search
// through all four bindings (demographics, resolver, consent, localizer over XCPD,
// each a double answering at once on loopback) against the same search with no
// binding configured. Both ask the same three members (every binding lets every
// member through), so that the difference of the two is the bindings' own cost: four
// exchanges, their parsing and the plan. The doubles run in the benchmark's process,
// so their own work is in the four-bindings figure too. Compare the two in one run.
func BenchmarkPatientScopedQuery(b *testing.B) {
	const search = "Observation?patient.identifier=" + mpi + "|MRN-1&code=1234-5"
	b.Run("no bindings", func(b *testing.B) {
		benchSearch(b, newGateway(b, gatewayOptions{}), search)
	})
	b.Run("four bindings", func(b *testing.B) {
		sup := pdqsupplier.Start(b, supplier())
		set := alice()
		set.Sets[0] = append(set.Sets[0], pixmanager.Record{ID: "x-c", Identifiers: []pixmanager.Identifier{{System: domainC, Value: "pc-1"}}})
		set.Domains = nil
		pix := pixmanager.Start(b, set)
		pdp := consentpdp.Start(b, consentpdp.Options{Rules: []consentpdp.Rule{{Permit: true}}})
		x := respondinggateway.Start(b, respondinggateway.Options{Entries: []respondinggateway.Entry{{IDs: []respondinggateway.II{{Root: mpiOID, Extension: "MRN-1"}}, Records: []respondinggateway.Record{
			{HomeCommunityID: memberCommunities["a"]}, {HomeCommunityID: memberCommunities["b"]}, {HomeCommunityID: memberCommunities["c"]},
		}}}})
		tables := fmt.Sprintf("[pdqm]\nurl = %q\n[resolver]\nurl = %q\n[consent]\nurl = %q\n[localizer]\nurl = %q\nprotocol = \"xcpd\"\n", sup.URL, pix.URL, pdp.URL, x.URL)
		g := newGateway(b, gatewayOptions{tables: tables})
		benchSearch(b, g, search)
		if pix.Requests() < b.N || x.Requests() < b.N {
			b.Fatalf("the bindings were not asked on every search: resolver %d, localizer %d, searches %d", pix.Requests(), x.Requests(), b.N)
		}
	})
}

// BenchmarkTheFourDoublesAlone is the doubles' share of the four-bindings figure: the
// four exchanges of one search sent by a plain client, one after the other, to the same
// doubles in the same process. It counts the client side of each exchange as well,
// which the gateway pays too, so that four bindings − no bindings − this is a lower
// bound of the bindings' own cost.
func BenchmarkTheFourDoublesAlone(b *testing.B) {
	sup := pdqsupplier.Start(b, supplier())
	set := alice()
	set.Sets[0] = append(set.Sets[0], pixmanager.Record{ID: "x-c", Identifiers: []pixmanager.Identifier{{System: domainC, Value: "pc-1"}}})
	set.Domains = nil
	pix := pixmanager.Start(b, set)
	pdp := consentpdp.Start(b, consentpdp.Options{Rules: []consentpdp.Rule{{Permit: true}}})
	x := respondinggateway.Start(b, respondinggateway.Options{Entries: []respondinggateway.Entry{{IDs: []respondinggateway.II{{Root: mpiOID, Extension: "MRN-1"}}, Records: []respondinggateway.Record{
		{HomeCommunityID: memberCommunities["a"]}, {HomeCommunityID: memberCommunities["b"]}, {HomeCommunityID: memberCommunities["c"]},
	}}}})
	id := url.QueryEscape(mpi + "|MRN-1")
	question := `{"subject":{"type":"client","id":"anonymous"},"action":{"name":"query"},"context":{"patient":{"system":"` + mpi +
		`","value":"MRN-1"},"resourceType":"Observation"},"evaluations":[{"resource":{"type":"member","id":"a"}},{"resource":{"type":"member","id":"b"}},{"resource":{"type":"member","id":"c"}}]}`
	soap := xcpd.Request("urn:uuid:00000000-0000-4000-8000-000000000000", x.URL, mpiOID, "MRN-1")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	exchange := func(method, u, contentType string, body []byte) {
		var r io.Reader
		if body != nil {
			r = bytes.NewReader(body)
		}
		req, _ := http.NewRequest(method, u, r)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		req.Header.Set("Accept", "application/fhir+json")
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body) //nolint:errcheck // a benchmark of the doubles.
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("%s %s answered %d", method, u, res.StatusCode)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		exchange(http.MethodGet, sup.URL+"/Patient?_count=5&identifier="+id, "", nil)
		exchange(http.MethodGet, pix.URL+"/Patient/$ihe-pix?sourceIdentifier="+id+"&targetSystem="+url.QueryEscape(domainA)+
			"&targetSystem="+url.QueryEscape(domainB)+"&targetSystem="+url.QueryEscape(domainC), "", nil)
		exchange(http.MethodPost, pdp.URL+consentpdp.EvaluationsPath, "application/json", []byte(question))
		exchange(http.MethodPost, x.URL, `application/soap+xml; charset=utf-8; action="`+xcpd.RequestAction+`"`, soap)
	}
}

func benchSearch(b *testing.B, g *gateway, search string) {
	b.Helper()
	// Every member must be asked and answer, in both configurations.
	a := g.search(search)
	if a.status != http.StatusOK || len(a.Bundle.Meta.Federation) != 3 {
		b.Fatalf("answered %d: %s", a.status, a.raw)
	}
	for _, r := range a.Bundle.Meta.Federation {
		if r.Outcome != "ok" {
			b.Fatalf("member %s: %+v", r.ID, r)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if a := g.search(search); a.status != http.StatusOK {
			b.Fatalf("answered %d", a.status)
		}
	}
}
