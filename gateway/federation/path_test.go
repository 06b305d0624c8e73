package federation_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/searchquery"
)

func TestDotSegmentsNeverReachAMember(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a"})
	for _, path := range []string{
		"/nodes/node-a/fhir/..;/..;/admin",
		"/nodes/node-a/fhir/%2e%2e%3b/%2e%2e%3b/admin",
		"/nodes/node-a/fhir/Patient/..;jsessionid=x/admin",
		"/nodes/node-a/fhir/.;/admin",
		"/nodes/node-a/fhir/%252e%252e/admin",
		"/nodes/node-a/fhir/Patient%2F..%2F..%2Fadmin",
		"/fhir/..;/nodes/node-a/fhir/metadata",
		"/fhir/Patient/%2e%2e%3b",
		"/fhir/%252e%252e/Patient",
	} {
		res, body := h.get(path)
		if res.StatusCode != http.StatusBadRequest || res.Header.Get("Content-Type") != fhir.MediaType ||
			!strings.Contains(string(body), `"resourceType":"OperationOutcome"`) || !strings.Contains(string(body), "segment") {
			t.Errorf("GET %s: %d %s", path, res.StatusCode, body)
		}
	}
	if n := h.members["node-a"].Requests(); n != 0 {
		t.Fatalf("the member got %d requests: %+v", n, h.members["node-a"].Log())
	}
	h.wantStates(map[string]string{"node-a-query": "unknown"})

	// A ";" that hides nothing, and dots inside a name, are passed on as they are.
	res, body := h.get("/nodes/node-a/fhir/Patient;v=1/a..b")
	if res.StatusCode == http.StatusBadRequest {
		t.Fatalf("a path without a dot segment was refused: %s", body)
	}
	if got := h.members["node-a"].LastRequest().Path; got != "/fhir/Patient;v=1/a..b" {
		t.Fatalf("the member got %q", got)
	}
}

// A member's next link becomes a cursor the gateway later sends to that member: the
// same rule holds for it.
func TestACursorFollowsTheMemberPathRule(t *testing.T) {
	for _, c := range []string{"/fhir/..;/admin", "/fhir/%2e%2e%3b/admin", "/fhir/%252e%252e/admin", "/fhir/.;/x?a=1", "/fhir/..", "/fhir/%2e%2e/x"} {
		if searchquery.ValidCursor(c) {
			t.Errorf("validCursor(%q) accepted", c)
		}
	}
	for _, c := range []string{"/fhir/Patient?_page=2", "/fhir/Patient;v=1?x=..;", "/fhir/a..b/c"} {
		if !searchquery.ValidCursor(c) {
			t.Errorf("validCursor(%q) refused", c)
		}
	}
}
