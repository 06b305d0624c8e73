package federation_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/server"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

// The surface's methods are the hooks of its server registration, reloads included.
var _ = func(s *federation.Surface) server.Registration {
	return server.Registration{DataPlane: s.RegisterDataPlane, Operator: s.RegisterOperator, Checks: s.Checks(), Stop: s.Stop, Reload: s.PrepareReload}
}

func TestTheSurfaceServesInsideTheServer(t *testing.T) {
	if err := fhirschema.Warm(); err != nil { // not within the timed search below
		t.Fatal(err)
	}
	ok := members.Start(t, members.Options{ID: "node-a", Entries: 2})
	hang := members.Start(t, members.Options{ID: "node-b", Knobs: double.Knobs{Fault: double.FaultHang}})

	const requestTimeout = 500 * time.Millisecond
	g := gatewaytest.Start(t, fmt.Sprintf(`
[[registry.members]]
id = "node-a"
query_endpoint = %q

[[registry.members]]
id = "node-b"
query_endpoint = %q
`, ok.URL, hang.URL), gatewaytest.WithServer(fmt.Sprintf("base_path = \"/api\"\nrequest_timeout_ms = %d\n", requestTimeout.Milliseconds())))

	get := func(method, path, token string) (int, string) {
		t.Helper()
		res, body := g.Request(method, path, token, nil)
		// Every FHIR answer of the gateway is valid R4 but for meta.federation.
		if res.Header.Get("Content-Type") == fhir.MediaType {
			if err := fhirschema.ValidateFederated(body); err != nil {
				t.Errorf("%s %s: not valid R4: %v", method, path, err)
			}
		}
		return res.StatusCode, string(body)
	}

	if status, body := get(http.MethodGet, "/health/readiness", ""); status != 200 ||
		!strings.Contains(body, `"registry":"ok"`) || !strings.Contains(body, `"clients":"ok"`) || strings.Contains(body, `"members"`) {
		t.Fatalf("readiness %d %s", status, body)
	}

	start := time.Now()
	status, body := get(http.MethodGet, "/fhir/Patient?name=x", "")
	if status != 200 || time.Since(start) > requestTimeout+time.Second {
		t.Fatalf("search: %d after %v: %s", status, time.Since(start), body)
	}
	for _, want := range []string{`{"id":"node-a","outcome":"ok","status":200,"entries":2`, `{"id":"node-b","outcome":"timeout","entries":0`} {
		if !strings.Contains(body, want) {
			t.Fatalf("search answer lacks %s: %s", want, body)
		}
	}
	if status, body := get(http.MethodGet, "/nodes/node-a/fhir/Patient/node-a-1", ""); status != 200 || !strings.Contains(body, `"id":"node-a-1"`) {
		t.Fatalf("routed: %d %s", status, body)
	}
	if status, _ := get(http.MethodGet, "/operator/dependencies", ""); status != 401 {
		t.Fatalf("the report without a token answered %d", status)
	}
	token := g.Token
	if status, body := get(http.MethodGet, "/operator/dependencies", token); status != 200 || body != `{"endpoints":{"node-a-query":"up","node-b-query":"down"}}` {
		t.Fatalf("report: %d %s", status, body)
	}
	if _, body := get(http.MethodGet, "/metrics", ""); !strings.Contains(body, `ferrofed_dependency_state{dependency="member",endpoint="node-b-query",state="down"} 1`) {
		t.Fatalf("the metric is not served")
	}
	// A member's outage never made the gateway unready.
	if status, body := get(http.MethodGet, "/health/readiness", ""); status != 200 {
		t.Fatalf("readiness after a member outage: %d %s", status, body)
	}
}
