package searchset

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/outbound"
)

// A page with no member that succeeded is 504 when every one timed out, 400 when every
// one refused the search, 502 otherwise; each member has its issue, with the code of
// what happened and its own first issue when no limit was passed.
func TestNoneSucceeded(t *testing.T) {
	timeout := Failure{Member: "a", Outcome: outbound.Timeout, Remaining: -1}
	refused := Failure{Member: "b", Outcome: outbound.NodeError, Status: 400, Remaining: -1, Issues: []fhir.Issue{{Diagnostics: "unknown parameter colour"}}}
	tooBig := Failure{Member: "c", Outcome: outbound.NodeError, Status: 200, Reason: "member c answered HTTP 200, but its answer is larger than registry.max_member_body_bytes", Remaining: 7}
	for _, tc := range []struct {
		name   string
		failed []Failure
		status int
	}{
		{"every one timed out", []Failure{timeout, timeout}, http.StatusGatewayTimeout},
		{"every one refused", []Failure{refused}, http.StatusBadRequest},
		{"mixed", []Failure{timeout, refused}, http.StatusBadGateway},
		{"past a limit", []Failure{tooBig}, http.StatusBadGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, oo := NoneSucceeded(tc.failed)
			if status != tc.status || len(oo.Issue) != len(tc.failed) {
				t.Fatalf("%d %+v, want %d with one issue a member", status, oo, tc.status)
			}
		})
	}
	_, oo := NoneSucceeded([]Failure{refused, tooBig})
	if !strings.HasSuffix(oo.Issue[0].Diagnostics, ": unknown parameter colour") || oo.Issue[1].Code != "too-costly" {
		t.Fatalf("issues %+v", oo.Issue)
	}
	if e := string(tooBig.Entry()); !strings.Contains(e, `"too-costly"`) || !strings.Contains(e, "7 of its matches") {
		t.Fatalf("entry %s", e)
	}
}
