package gatewaytest_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

// Start gives a ready gateway built by assemble: it answers a search through its
// member, its report needs the operator token it hands out, and a second Stop after
// the drain does nothing.
func TestStartGivesAReadyGatewayAsServeRunsIt(t *testing.T) {
	m := members.Start(t, members.Options{ID: "a"})
	log := &gatewaytest.Log{}
	g := gatewaytest.Start(t, fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n", m.URL),
		gatewaytest.WithServer("base_path = \"/gw\"\n"), gatewaytest.WithLog(log.Logger()))
	if !strings.HasSuffix(g.URL, "/gw") || g.Assembled == nil || g.Assembled.Queries() != nil || g.Assembled.Directory() != nil {
		t.Fatalf("URL %s, parts %+v", g.URL, g.Assembled)
	}
	if status, body := g.Do(http.MethodGet, "/fhir/Patient", g.Client, nil); status != http.StatusOK {
		t.Fatalf("search: %d %s", status, body)
	}
	if status, _ := g.Do(http.MethodGet, "/operator/dependencies", "", nil); status != http.StatusUnauthorized {
		t.Fatalf("the report without a token answered %d", status)
	}
	double.Eventually(t, "member a is up", func() bool { return g.Endpoints()["a-query"] == "up" })
	if states, raw := g.States(); states["endpoints.a-query"] != "up" {
		t.Fatalf("states %v of %s", states, raw)
	}
	g.Stop()
	g.Stop()
	if log.Find(`"msg"="Drained"`) == "" {
		t.Fatalf("no drain logged:\n%s", log)
	}
}

// The recorder keeps events, and refuses them while Fail is set.
func TestTheRecorderRefusesWhileFailIsSet(t *testing.T) {
	var r gatewaytest.Recorder
	if err := r.Record(t.Context(), []byte(`{"code":"read"}`)); err != nil {
		t.Fatal(err)
	}
	r.Fail.Store(true)
	if err := r.Record(t.Context(), []byte(`{"code":"read"}`)); err == nil {
		t.Fatal("a refusing recorder kept an event")
	}
	if r.Count(`"read"`) != 1 || len(r.Events()) != 1 {
		t.Fatalf("events %q", r.Events())
	}
}
