package federation

import (
	"net/http"
	"strings"
	"testing"
)

func TestMemberPathRefusesEveryDotSegmentHowsoeverHidden(t *testing.T) {
	refused := map[string]string{
		"/..":                    `".." segment`,
		"/a/../b":                `".." segment`,
		"/./a":                   `"." segment`,
		"/a/..":                  `".." segment`,
		"/..;/..;/admin":         `behind a ";" parameter`,
		"/..;jsessionid=x/admin": `behind a ";" parameter`,
		"/.;/admin":              `"." segment behind a ";" parameter`,
		"/Patient/..;":           `behind a ";" parameter`,
		// What net/http left of %25 2e: one more decoding makes it a dot.
		"/%2e%2e/admin":     "once percent-decoded once more",
		"/%2E%2e%3b/admin":  `once percent-decoded once more, behind a ";" parameter`,
		"/%252e%252e/admin": "once percent-decoded 2 more times",
		"/.%2e;x/admin":     "once percent-decoded once more",
		"/a%2f..%2fb":       "once percent-decoded once more",
		"/a%5c..%5cb":       "once percent-decoded once more",
		"/%2e%2e;%zz/x":     `once percent-decoded once more, behind a ";" parameter`,
		"/a\\..\\b":         `with "\" as a separator`,
		// Past maxPathDecodings, whatever it hides.
		"/%2525252525252e": "percent-encoded more than 4 times over",
		"/no-slash":        "",
	}
	for in, want := range refused {
		got, err := memberPath(in)
		if in == "/no-slash" {
			in, want = "no-slash", "must start with /"
			got, err = memberPath(in)
		}
		if err == nil {
			t.Errorf("memberPath(%q) accepted: %q", in, got)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("memberPath(%q): %q, want it to say %q", in, err, want)
		}
	}
	accepted := map[string]string{
		"/Patient/1": "/Patient/1", "/": "", "": "", "/a..b/c": "/a..b/c",
		"/Patient//1": "/Patient/1", "//Patient/": "/Patient/", "/Patient;v=1/1": "/Patient;v=1/1",
		"/...": "/...", "/.a/b.": "/.a/b.", "/%2e%2ex": "/%2e%2ex", "/%25": "/%25",
		"/Patient/_history;x": "/Patient/_history;x", "/;../x": "/;../x",
	}
	for in, want := range accepted {
		if got, err := memberPath(in); err != nil || got != want {
			t.Errorf("memberPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

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
		if res.StatusCode != http.StatusBadRequest || res.Header.Get("Content-Type") != FHIRJSON ||
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
		if validCursor(c) {
			t.Errorf("validCursor(%q) accepted", c)
		}
	}
	for _, c := range []string{"/fhir/Patient?_page=2", "/fhir/Patient;v=1?x=..;", "/fhir/a..b/c"} {
		if !validCursor(c) {
			t.Errorf("validCursor(%q) refused", c)
		}
	}
}
