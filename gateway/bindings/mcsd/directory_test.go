package mcsd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/bindings/mcsd"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/mcsdsupplier"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

func want(t *testing.T, got []string, ids ...string) {
	t.Helper()
	if !slices.Equal(got, ids) {
		t.Fatalf("the search asked %v, want %v", got, ids)
	}
}

// A member added, changed and deleted in the directory is what the gateway asks
// after one refresh each; the report's directory is up throughout, with no fault.
func TestAddChangeDelete(t *testing.T) {
	g := newGateway(t, gatewayOptions{})
	g.member("a")
	g.member("b")
	g.wantDirectory("unknown", "")
	if err := g.registryReady(); err == nil {
		t.Fatal("the registry check passes before any registry was accepted")
	}
	if o := g.refresh(); o.State != dependencies.Up || !o.Swapped || o.Members != 2 {
		t.Fatalf("the initial load: %+v", o)
	}
	if err := g.registryReady(); err != nil {
		t.Fatal(err)
	}
	g.wantDirectory("up", "")
	want(t, g.asked(), "a", "b")
	if q := g.double.Log()[0]; q.Path != "/fhir/Organization" || q.Query.Get("active") != "true" || q.Query.Get("_include") != "Organization:endpoint" {
		t.Fatalf("the initial load is not ITI-90: %+v", q)
	}

	g.member("c")
	if o := g.refresh(); !o.Swapped || o.Members != 3 {
		t.Fatalf("after the add: %+v", o)
	}
	want(t, g.asked(), "a", "b", "c")
	last, _ := g.double.Last()
	if !strings.HasSuffix(last.Path, "/_history") || last.Query.Get("_since") == "" {
		t.Fatalf("a refresh is not ITI-91: %+v", last)
	}

	// b moves to another server: its endpoint changes.
	b2 := g.member("b2")
	g.double.MustPut(t, mcsdsupplier.Endpoint("ep-b", b2.URL))
	if err := g.double.Delete("Organization", "org-b2"); err != nil {
		t.Fatal(err)
	}
	before := g.members["b2"].Requests()
	if o := g.refresh(); !o.Swapped {
		t.Fatalf("after the change: %+v", o)
	}
	want(t, g.asked(), "a", "b", "c")
	if g.members["b2"].Requests() == before {
		t.Fatal("member b is not asked at its new endpoint")
	}

	if err := g.double.Delete("Organization", "org-c"); err != nil {
		t.Fatal(err)
	}
	if o := g.refresh(); !o.Swapped || o.Members != 2 {
		t.Fatalf("after the delete: %+v", o)
	}
	want(t, g.asked(), "a", "b")
	m, _ := g.Report()
	if eps := m["endpoints"].(map[string]any); len(eps) != 2 || eps["c-query"] != nil {
		t.Fatalf("a deleted member leaves the report: %v", eps)
	}
	// An Organization turned inactive is no member either.
	org := mcsdsupplier.Organization("org-b", system, "b", "ep-b")
	org["active"] = false
	g.double.MustPut(t, org)
	g.refresh()
	want(t, g.asked(), "a")
	// No change: up, nothing swapped.
	if o := g.refresh(); o.Swapped || o.State != dependencies.Up {
		t.Fatalf("a refresh with no change: %+v", o)
	}
	g.wantDirectory("up", "")

	// Every exchange was audited as a BALP Query of ITI-90 or ITI-91.
	evs := g.rec.Events()
	if len(evs) != g.double.Requests() {
		t.Fatalf("%d events for %d exchanges", len(evs), g.double.Requests())
	}
	for _, ev := range evs {
		iti := bytes.Contains(ev, []byte(`"ITI-90"`)) || bytes.Contains(ev, []byte(`"ITI-91"`))
		if !bytes.Contains(ev, []byte(mcsd.ProfileQuery)) || !iti {
			t.Fatalf("not a BALP Query of ITI-90/91: %s", ev)
		}
	}
}

// Each row of the state table, through GET /operator/dependencies: the registry
// last accepted keeps serving while the directory is not up, and the next accepted
// refresh returns it to up without a fault.
func TestStateTable(t *testing.T) {
	for _, tc := range []struct {
		name         string
		mcsd, tables string
		limits       mcsd.Limits
		// breakIt makes the next refresh come to the row; fixIt undoes it.
		breakIt, fixIt func(g *gateway)
		state, fault   string
	}{
		{name: "an Endpoint address that is not http(s) is registry-invalid",
			breakIt: func(g *gateway) { g.double.MustPut(g.t, mcsdsupplier.Endpoint("ep-b", "mllp://b.example:2575")) },
			fixIt:   func(g *gateway) { g.double.MustPut(g.t, mcsdsupplier.Endpoint("ep-b", g.members["b"].URL)) },
			state:   "degraded", fault: mcsd.FaultRegistryInvalid},
		{name: "two Organizations with one member id are registry-invalid",
			breakIt: func(g *gateway) {
				g.double.MustPut(g.t, mcsdsupplier.Organization("org-twin", system, "a", "ep-b"))
			},
			fixIt: func(g *gateway) {
				if err := g.double.Delete("Organization", "org-twin"); err != nil {
					g.t.Fatal(err)
				}
			},
			state: "degraded", fault: mcsd.FaultRegistryInvalid},
		{name: "a directory with no member left is registry-invalid",
			breakIt: func(g *gateway) {
				for _, id := range []string{"org-a", "org-b"} {
					if err := g.double.Delete("Organization", id); err != nil {
						g.t.Fatal(err)
					}
				}
			},
			fixIt: func(g *gateway) {
				g.double.MustPut(g.t, mcsdsupplier.Organization("org-a", system, "a", "ep-a"), mcsdsupplier.Organization("org-b", system, "b", "ep-b"))
			},
			state: "degraded", fault: mcsd.FaultRegistryInvalid},
		{name: "more members than limits.max_registry_members is configuration-mismatch",
			tables:  "[limits]\nmax_registry_members = 2\n",
			breakIt: func(g *gateway) { g.member("c") },
			fixIt: func(g *gateway) {
				if err := g.double.Delete("Organization", "org-c"); err != nil {
					g.t.Fatal(err)
				}
			},
			state: "degraded", fault: mcsd.FaultConfigurationMismatch},
		{name: "a member whose Endpoints give two home community ids is registry-invalid", mcsd: flowKeys, tables: flowTables,
			breakIt: func(g *gateway) {
				g.double.MustPut(g.t, mcsdsupplier.WithHCID(g.endpoint("a", g.members["a"].URL), "urn:oid:1.3.6.1.4.1.21367.13.70.999"))
			},
			fixIt: func(g *gateway) { g.double.MustPut(g.t, g.endpoint("a", g.members["a"].URL)) },
			state: "degraded", fault: mcsd.FaultRegistryInvalid},
		{name: "a second Endpoint of a member with another home community id is registry-invalid", mcsd: flowKeys, tables: flowTables,
			breakIt: func(g *gateway) {
				xcpdEP := mcsdsupplier.WithHCID(mcsdsupplier.Endpoint("ep-a-xcpd", "https://a.example/xcpd"), "1.3.6.1.4.1.21367.13.70.999")
				xcpdEP["connectionType"] = map[string]any{"system": "http://terminology.hl7.org/CodeSystem/endpoint-connection-type", "code": "ihe-xcpd"}
				org := g.organization("a", "a")
				org["endpoint"] = append(org["endpoint"].([]any), map[string]any{"reference": "Endpoint/ep-a-xcpd"})
				g.double.MustPut(g.t, xcpdEP, org)
			},
			fixIt: func(g *gateway) { g.double.MustPut(g.t, g.organization("a", "a")) },
			state: "degraded", fault: mcsd.FaultRegistryInvalid},
		{name: "one home community id on two members is registry-invalid", mcsd: flowKeys, tables: flowTables,
			breakIt: func(g *gateway) {
				g.double.MustPut(g.t, mcsdsupplier.WithHCID(mcsdsupplier.Endpoint("ep-b", g.members["b"].URL), "urn:oid:"+communityOf("a")))
			},
			fixIt: func(g *gateway) { g.double.MustPut(g.t, g.endpoint("b", g.members["b"].URL)) },
			state: "degraded", fault: mcsd.FaultRegistryInvalid},
		{name: "a home community id that is no OID is registry-invalid", mcsd: flowKeys, tables: flowTables,
			breakIt: func(g *gateway) {
				g.double.MustPut(g.t, mcsdsupplier.WithHCID(mcsdsupplier.Endpoint("ep-b", g.members["b"].URL), "urn:uuid:cadbf8d0-5493-11ec-bf63-0242ac130002"))
			},
			fixIt: func(g *gateway) { g.double.MustPut(g.t, g.endpoint("b", g.members["b"].URL)) },
			state: "degraded", fault: mcsd.FaultRegistryInvalid},
		{name: "one patient identifier domain on two members is registry-invalid", mcsd: flowKeys, tables: flowTables,
			breakIt: func(g *gateway) {
				g.double.MustPut(g.t, mcsdsupplier.WithIdentifier(mcsdsupplier.Organization("org-b", system, "b", "ep-b"), domainSystem, domainOf("a")))
			},
			fixIt: func(g *gateway) { g.double.MustPut(g.t, g.organization("b", "b")) },
			state: "degraded", fault: mcsd.FaultRegistryInvalid},
		{name: "a member with two patient identifier domains is registry-invalid", mcsd: flowKeys, tables: flowTables,
			breakIt: func(g *gateway) {
				g.double.MustPut(g.t, mcsdsupplier.WithIdentifier(g.organization("b", "b"), domainSystem, "urn:oid:1.3.6.1.4.1.21367.13.20.999"))
			},
			fixIt: func(g *gateway) { g.double.MustPut(g.t, g.organization("b", "b")) },
			state: "degraded", fault: mcsd.FaultRegistryInvalid},
		{name: "a member without its patient identifier domain, with [resolver], is configuration-mismatch", mcsd: flowKeys, tables: flowTables,
			breakIt: func(g *gateway) { g.double.MustPut(g.t, mcsdsupplier.Organization("org-b", system, "b", "ep-b")) },
			fixIt:   func(g *gateway) { g.double.MustPut(g.t, g.organization("b", "b")) },
			state:   "degraded", fault: mcsd.FaultConfigurationMismatch},
		{name: "a member without its home community id, with the XCPD localizer, is configuration-mismatch", mcsd: flowKeys, tables: flowTables,
			breakIt: func(g *gateway) { g.double.MustPut(g.t, mcsdsupplier.Endpoint("ep-b", g.members["b"].URL)) },
			fixIt:   func(g *gateway) { g.double.MustPut(g.t, g.endpoint("b", g.members["b"].URL)) },
			state:   "degraded", fault: mcsd.FaultConfigurationMismatch},
		{name: "401 is failing refused-credentials", breakIt: status(401), fixIt: status(0), state: "failing", fault: mcsd.FaultRefusedCredentials},
		{name: "403 is failing refused-credentials", breakIt: status(403), fixIt: status(0), state: "failing", fault: mcsd.FaultRefusedCredentials},
		{name: "404 is failing", breakIt: status(404), fixIt: status(0), state: "failing"},
		{name: "500 is failing", breakIt: status(500), fixIt: status(0), state: "failing"},
		{name: "503 is failing", breakIt: status(503), fixIt: status(0), state: "failing"},
		{name: "a 302 is failing, never followed", breakIt: status(302), fixIt: status(0), state: "failing"},
		{name: "a body that ends in the middle is failing", breakIt: fault(double.FaultMalformed), fixIt: fault(""), state: "failing"},
		{name: "a 200 that is not a Bundle is failing", breakIt: dirKnobs(mcsdsupplier.Pages{NonBundle: true}), fixIt: dirKnobs(mcsdsupplier.Pages{}), state: "failing"},
		{name: "a next link to another origin is failing", breakIt: dirKnobs(mcsdsupplier.Pages{ForeignNext: true}), fixIt: dirKnobs(mcsdsupplier.Pages{}), state: "failing"},
		{name: "a history page that links to itself is failing", breakIt: dirKnobs(mcsdsupplier.Pages{SelfNext: true}), fixIt: dirKnobs(mcsdsupplier.Pages{}), state: "failing"},
		{name: "paging that never ends is failing", breakIt: dirKnobs(mcsdsupplier.Pages{EndlessPaging: true}), fixIt: dirKnobs(mcsdsupplier.Pages{}), state: "failing"},
		{name: "a page past 4 MiB is failing", breakIt: dirKnobs(mcsdsupplier.Pages{PadBytes: 5 << 20}), fixIt: dirKnobs(mcsdsupplier.Pages{}), state: "failing"},
		{name: "more resources than the cap is failing", limits: mcsd.Limits{MaxResources: 5, Lookback: -1},
			breakIt: func(g *gateway) { g.member("c") },
			fixIt: func(g *gateway) {
				if err := g.double.Delete("Organization", "org-c"); err != nil {
					g.t.Fatal(err)
				}
				if err := g.double.Delete("Endpoint", "ep-c"); err != nil {
					g.t.Fatal(err)
				}
			},
			state: "failing"},
		{name: "a directory that hangs past timeout_ms is down", mcsd: "refresh_interval_ms = 1000\ntimeout_ms = 300",
			breakIt: fault(double.FaultHang), fixIt: fault(""), state: "down"},
		{name: "a directory that refuses connections is down", breakIt: fault(double.FaultRefused), fixIt: fault(""), state: "down"},
		{name: "a reset in the middle of the answer is down", breakIt: fault(double.FaultReset), fixIt: fault(""), state: "down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateway(t, gatewayOptions{mcsd: tc.mcsd, tables: tc.tables, limits: tc.limits})
			g.member("a")
			g.member("b")
			if o := g.refresh(); o.State != dependencies.Up {
				t.Fatalf("the initial load: %+v", o)
			}
			want(t, g.asked(), "a", "b")
			tc.breakIt(g)
			o := g.refresh()
			g.wantDirectory(tc.state, tc.fault)
			if o.Why == "" {
				t.Error("the outcome says nothing of why")
			}
			// The registry last accepted keeps serving, and stays ready.
			want(t, g.asked(), "a", "b")
			if err := g.registryReady(); err != nil {
				t.Fatalf("a directory outage made the gateway unready: %v", err)
			}
			// Still so at the next refresh that changes nothing.
			if tc.state == "degraded" {
				g.refresh()
				g.wantDirectory(tc.state, tc.fault)
			}
			tc.fixIt(g)
			if o := g.refresh(); o.State != dependencies.Up {
				t.Fatalf("the refresh after the fix: %+v", o)
			}
			g.wantDirectory("up", "")
			want(t, g.asked(), "a", "b")
		})
	}
}

// flowKeys and flowTables configure [resolver] and the XCPD localizer (never asked by
// the state table's searches, which name no patient) and where a member's patient
// identifier domain is.
const (
	flowKeys   = "patient_domain_identifier_system = \"" + domainSystem + "\"\n"
	flowTables = "[resolver]\nurl = \"http://127.0.0.1:9/pix\"\n[localizer]\nurl = \"http://127.0.0.1:9/xcpd\"\nprotocol = \"xcpd\"\n"
)

func status(code int) func(*gateway) {
	return func(g *gateway) {
		if err := g.double.SetKnobs(double.Knobs{Status: code}); err != nil {
			g.t.Fatal(err)
		}
	}
}

func fault(f double.Fault) func(*gateway) {
	return func(g *gateway) {
		if err := g.double.SetKnobs(double.Knobs{Fault: f}); err != nil {
			g.t.Fatal(err)
		}
	}
}

func dirKnobs(k mcsdsupplier.Pages) func(*gateway) {
	return func(g *gateway) { g.double.SetPages(k) }
}

// An exchange whose audit record could not be stored is failing, and its answer is
// not used.
func TestAuditNotStored(t *testing.T) {
	g := newGateway(t, gatewayOptions{})
	g.member("a")
	g.refresh()
	g.member("b")
	g.rec.Fail.Store(true)
	if o := g.refresh(); o.State != dependencies.Failing || o.Swapped {
		t.Fatalf("%+v", o)
	}
	want(t, g.asked(), "a")
	g.rec.Fail.Store(false)
	g.refresh()
	want(t, g.asked(), "a", "b")
}

// The initial load reads every page (and the history too), at _count.
func TestPagingThroughEveryPage(t *testing.T) {
	g := newGateway(t, gatewayOptions{limits: mcsd.Limits{Count: 2}})
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		g.member(id)
	}
	if o := g.refresh(); o.Members != 5 {
		t.Fatalf("%+v", o)
	}
	if n := g.double.Requests(); n != 3 {
		t.Fatalf("%d requests for 5 Organizations at _count=2", n)
	}
	for _, id := range []string{"f", "g", "h"} {
		g.member(id)
	}
	if o := g.refresh(); o.Members != 8 {
		t.Fatalf("%+v", o)
	}
}

// A restart with the directory down becomes ready from the cache file, serving the
// registry last accepted; the directory shows down until it answers again.
func TestRestartFromCache(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "registry.json")
	dir := mcsdsupplier.Start(t, mcsdsupplier.Options{})
	first := newGateway(t, gatewayOptions{double: dir, mcsd: "cache_file = " + quote(cache)})
	first.member("a")
	first.member("b")
	if o := first.refresh(); !o.Swapped {
		t.Fatalf("%+v", o)
	}
	raw, err := os.ReadFile(cache)
	if err != nil || !strings.Contains(string(raw), `"a-query"`) {
		t.Fatalf("the cache file holds %s (%v)", raw, err)
	}

	if err := dir.SetKnobs(double.Knobs{Fault: double.FaultRefused}); err != nil {
		t.Fatal(err)
	}
	second := newGateway(t, gatewayOptions{double: dir, mcsd: "cache_file = " + quote(cache) + "\nrefresh_interval_ms = 200\ntimeout_ms = 200", start: true})
	second.members = first.members
	if err := second.registryReady(); err != nil {
		t.Fatalf("not ready from the cache: %v", err)
	}
	want(t, second.asked(), "a", "b")
	double.Eventually(t, "the directory is down", func() bool { m, _ := second.Report(); return m["directory"] == "down" })
	if err := second.registryReady(); err != nil {
		t.Fatal(err)
	}
	if err := dir.SetKnobs(double.Knobs{}); err != nil {
		t.Fatal(err)
	}
	double.Eventually(t, "the directory is up", func() bool { m, _ := second.Report(); return m["directory"] == "up" })
	second.wantDirectory("up", "")
}

// A cache file that is not a registry the configuration accepts is ignored: the
// gateway waits for the directory.
func TestCacheRefused(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(cache, []byte(`{"version":1,"members":[{"id":"a","query_endpoint":"ftp://a","endpoint_id":"a-query"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := mcsdsupplier.Start(t, mcsdsupplier.Options{Knobs: double.Knobs{Fault: double.FaultRefused}})
	g := newGateway(t, gatewayOptions{double: dir, mcsd: "cache_file = " + quote(cache), start: true})
	if err := g.registryReady(); err == nil {
		t.Fatal("ready from a cache the rules refuse")
	}
}

func quote(s string) string { return `"` + s + `"` }

// Hostile directories: an answer of 100,000 resources and a history page that links
// to itself are refused (failing), without a panic and within bounded memory.
func TestHostileDirectory(t *testing.T) {
	for _, tc := range []struct {
		name   string
		knobs  mcsdsupplier.Pages
		limits mcsd.Limits
	}{
		{name: "100,000 resources in one answer (past the page cap)", knobs: mcsdsupplier.Pages{ExtraEndpoints: 100000}},
		{name: "100,000 resources in one answer (under a page cap of 64 MiB: past the resource cap)", knobs: mcsdsupplier.Pages{ExtraEndpoints: 100000}, limits: mcsd.Limits{MaxPageBytes: 64 << 20}},
		{name: "a history page that links to itself", knobs: mcsdsupplier.Pages{SelfNext: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateway(t, gatewayOptions{limits: tc.limits})
			g.member("a")
			history := tc.knobs.SelfNext
			if history {
				g.refresh()
			}
			g.double.SetPages(tc.knobs)
			// The double runs in this process: what it allocates to answer is
			// measured alone first, and taken off.
			var before, mid, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			page := g.double.URL + "/Organization?_count=100&_include=Organization%3Aendpoint&active=true"
			if history {
				page = g.double.URL + "/Organization/_history?_count=100&_since=2000-01-01T00%3A00%3A00Z"
			}
			if res, err := http.Get(page); err == nil {
				io.Copy(io.Discard, res.Body) //nolint:errcheck // a measure only.
				res.Body.Close()
			}
			runtime.ReadMemStats(&mid)
			o := g.refresh()
			runtime.ReadMemStats(&after)
			doubleCost := mid.TotalAlloc - before.TotalAlloc
			if history {
				doubleCost *= 2
			}
			if o.State != dependencies.Failing {
				t.Fatalf("%+v", o)
			}
			// What the refresh allocated in all is bounded by the page cap and a
			// decoding overhead, never by what the directory sends.
			grew := int64(after.TotalAlloc-mid.TotalAlloc) - int64(doubleCost)
			if limit := 8 * max(tc.limits.MaxPageBytes, 4<<20); grew > limit {
				t.Fatalf("the refresh allocated %d MiB beyond the double's %d MiB, more than %d MiB", grew>>20, doubleCost>>20, limit>>20)
			}
			t.Logf("the refresh allocated %d KiB beyond the double's %d MiB", grew>>10, doubleCost>>20)
			g.double.SetPages(mcsdsupplier.Pages{})
			if o := g.refresh(); o.State != dependencies.Up {
				t.Fatalf("after the fix: %+v", o)
			}
			want(t, g.asked(), "a")
		})
	}
}

// A reload (SIGHUP) of a configuration with [registry.mcsd] keeps serving the
// directory's registry, and later candidates are checked against the reloaded
// configuration.
func TestReloadKeepsTheDirectorysRegistry(t *testing.T) {
	g := newGateway(t, gatewayOptions{})
	g.member("a")
	g.member("b")
	g.refresh()
	if err := g.Reload(g.cfg); err != nil {
		t.Fatal(err)
	}
	want(t, g.asked(), "a", "b")
	if err := g.registryReady(); err != nil {
		t.Fatal(err)
	}
	// The reloaded configuration allows 2 members: a third is refused.
	limited := *g.cfg
	limited.Limits.MaxRegistryMembers = 2
	apply, _ := g.dir.PrepareReload(&limited)
	apply()
	g.member("c")
	if o := g.refresh(); o.Fault != mcsd.FaultConfigurationMismatch {
		t.Fatalf("%+v", o)
	}
	want(t, g.asked(), "a", "b")
}

// Searches running while refreshes swap registries see one registry or the other,
// whole (run with -race).
func TestSearchesDuringSwaps(t *testing.T) {
	g := newGateway(t, gatewayOptions{})
	g.member("a")
	g.member("b")
	b2 := members.Start(t, members.Options{ID: "b2"})
	g.refresh()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			addr := g.members["b"].URL
			if i%2 == 0 {
				addr = b2.URL
			}
			if err := g.double.Put(mcsdsupplier.Endpoint("ep-b", addr)); err != nil {
				t.Error(err)
				return
			}
			g.dir.Refresh(context.Background())
		}
	}()
	for {
		select {
		case <-done:
			want(t, g.asked(), "a", "b")
			return
		default:
			want(t, g.asked(), "a", "b")
		}
	}
}

// IHE's published examples in a directory: Organizations without the member
// identifier and an XCA Endpoint are no members; alone they leave no member (refused,
// registry-invalid), beside a member the registry is that member.
func TestPublishedExamplesAreNoMembers(t *testing.T) {
	g := newGateway(t, gatewayOptions{})
	files, _ := filepath.Glob("../../../test/doubles/mcsdsupplier/testdata/ihe/*.json")
	if len(files) != 4 {
		t.Fatalf("the published examples: %v", files)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r map[string]any
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		g.double.MustPut(t, r)
	}
	if o := g.refresh(); o.State != dependencies.Degraded || o.Fault != mcsd.FaultRegistryInvalid {
		t.Fatalf("%+v", o)
	}
	g.member("a")
	if o := g.refresh(); o.State != dependencies.Up || o.Members != 1 {
		t.Fatalf("%+v", o)
	}
	want(t, g.asked(), "a")
}
