package pixm_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/pixm"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/test/doubles/pixmanager"
)

func consumer(t *testing.T, url string) (*pixm.Consumer, *dependencies.Tracker) {
	t.Helper()
	tr := dependencies.NewTracker()
	c, err := pixm.New(pixm.Options{Key: "resolver", Service: service(url), Domains: []string{"urn:oid:1.2"}, Tracker: tr})
	if err != nil {
		t.Fatal(err)
	}
	return c, tr
}

// A resolution whose budget was spent before it left the gateway sends nothing and
// changes nothing (docs/bindings.md, "The dependency report").
func TestABudgetSpentBeforeTheRequestLeftChangesNothing(t *testing.T) {
	p := pixmanager.Start(t, pixmanager.Options{Domains: []string{"urn:oid:1.2"}})
	c, tr := consumer(t, p.URL)
	tr.SetService("resolver", dependencies.Up, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Resolve(ctx, "", "urn:oid:1.2", "x"); err == nil {
		t.Fatal("a resolution with no budget succeeded")
	}
	if p.Requests() != 0 {
		t.Fatalf("the manager got %d requests", p.Requests())
	}
	if got := tr.Report().Services["resolver"]; got != dependencies.Up {
		t.Fatalf("resolver is %q, want it unchanged (up)", got)
	}
}

// Parse reads targetIdentifiers in any order, keeps a domain's first value, and maps
// nothing from a targetId alone; a body that is not a Parameters is an error.
func TestParse(t *testing.T) {
	m, err := pixm.Parse([]byte(`{"resourceType":"Parameters","parameter":[
		{"name":"targetId","valueReference":{"reference":"Patient/9"}},
		{"name":"targetIdentifier","valueIdentifier":{"system":"urn:b","value":"2"}},
		{"name":"targetIdentifier","valueIdentifier":{"system":"urn:a","value":"1"}},
		{"name":"targetIdentifier","valueIdentifier":{"system":"urn:a","value":"other"}},
		{"name":"targetIdentifier","valueIdentifier":{"system":"urn:c"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m["urn:a"] != "1" || m["urn:b"] != "2" {
		t.Fatalf("mapping %v", m)
	}
	for _, bad := range []string{`{"resourceType":"Bundle"}`, `not json`, `{"resourceType":"Parameters","parameter":[`} {
		if _, err := pixm.Parse([]byte(bad)); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}

// UseDomains changes the targetSystems of the next resolutions (a directory's
// registry), and a mapping cached for the domains before is not used again.
func TestUseDomains(t *testing.T) {
	p := pixmanager.Start(t, pixmanager.Options{Sets: []pixmanager.Set{{
		{ID: "m1", Identifiers: []pixmanager.Identifier{{System: "urn:oid:9", Value: "MRN-1"}}},
		{ID: "x-a", Identifiers: []pixmanager.Identifier{{System: "urn:oid:1.2", Value: "pa-1"}}},
		{ID: "x-b", Identifiers: []pixmanager.Identifier{{System: "urn:oid:1.3", Value: "pb-1"}}},
	}}})
	c, err := pixm.New(pixm.Options{Key: "resolver", Service: service(p.URL), Domains: []string{"urn:oid:1.2"}, CacheTTL: time.Minute, Tracker: dependencies.NewTracker()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Resolve(context.Background(), "", "urn:oid:9", "MRN-1")
	if err != nil || m["urn:oid:1.2"] != "pa-1" || len(m) != 1 {
		t.Fatalf("before: %v, %v", m, err)
	}
	c.UseDomains([]string{"urn:oid:1.2", "urn:oid:1.3"})
	m, err = c.Resolve(context.Background(), "", "urn:oid:9", "MRN-1")
	if err != nil || m["urn:oid:1.2"] != "pa-1" || m["urn:oid:1.3"] != "pb-1" {
		t.Fatalf("after: %v, %v", m, err)
	}
	if n := p.Requests(); n != 2 {
		t.Fatalf("the manager got %d requests, want 2 (the mapping cached for the domains before is not used)", n)
	}
	last, _ := p.Last()
	if q, _ := url.ParseQuery(last.RawQuery); len(q["targetSystem"]) != 2 {
		t.Fatalf("the targetSystems are %v", q["targetSystem"])
	}
	// Cached again for the new domains.
	if _, err := c.Resolve(context.Background(), "", "urn:oid:9", "MRN-1"); err != nil || p.Requests() != 2 {
		t.Fatalf("the mapping for the new domains was not cached: %v, %d requests", err, p.Requests())
	}
}

// service is a resolver's table as the tests write it: a 2 s budget, a 64 KiB cap.
func service(url string) config.BindingService {
	timeout, maxBody := int64(2000), int64(1<<16)
	return config.BindingService{URL: url, TimeoutMS: &timeout, MaxBodyBytes: &maxBody}
}
