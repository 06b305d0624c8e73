package federation_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// secrets is what a member's own text may carry (issue 30): its backend's URL with a
// token, addresses of every form, a bearer token, credential parameters, userinfo.
const secrets = "backend http://10.11.12.13:8443/internal/fhir?token=s3cr3t-tok refused; also at 10.11.12.13:8443, " +
	"[fd00::1234]:8443, fd00::5678, fhir-db.internal:5432, backend-x:9443, HTTPS://Other.Example.COM/x, " +
	"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln, PASSWORD=hunter2 apikey=AKIA99 " +
	"Access_Token=tok-77 as svc:pw@proxy.corp"

// leaks are the parts of secrets none of which may reach a client.
var leaks = []string{"10.11.12.13", "http://10.", "HTTPS://", "s3cr3t", "fd00::", "fhir-db", "internal", "backend-x", "9443", "8443",
	"Other.Example", "eyJ", "hunter2", "AKIA99", "tok-77", "svc:pw", "proxy.corp"}

func assertNoLeak(t *testing.T, what string, body []byte) {
	t.Helper()
	for _, l := range leaks {
		if strings.Contains(string(body), l) {
			t.Errorf("%s holds %q: %s", what, l, body)
		}
	}
}

// TestAMembersSecretsNeverReachAClient runs a real member whose every OperationOutcome
// carries secrets, federated (its failure's outcome entry, its warning entry, the
// answer when no member succeeded, a strict refusal) and routed (its error answer):
// the client sees the member's words and issue codes, none of the secrets.
func TestAMembersSecretsNeverReachAClient(t *testing.T) {
	failing := members.Options{Diagnostics: secrets, Knobs: double.Knobs{Status: 500}}
	lenient := members.Options{Diagnostics: secrets}
	for _, c := range []struct {
		name   string
		nodes  []node
		path   string
		header http.Header
		status int
	}{
		{"a failed member's outcome entry", []node{{id: "node-a", opts: failing}, {id: "node-b"}}, "/fhir/Patient", nil, 200},
		{"a member's warning entry", []node{{id: "node-a", opts: lenient}}, "/fhir/Patient?unknown-param=1", nil, 200},
		{"no member succeeded", []node{{id: "node-a", opts: failing}}, "/fhir/Patient", nil, 502},
		{"a strict refusal", []node{{id: "node-a", opts: lenient}, {id: "node-b"}}, "/fhir/Patient?unknown-param=1",
			http.Header{"Prefer": {"handling=strict"}}, 400},
		{"a routed error", []node{{id: "node-a", opts: failing}}, "/nodes/node-a/fhir/Patient/1", nil, 500},
		{"a routed search's error", []node{{id: "node-a", opts: lenient}}, "/nodes/node-a/fhir/Patient?unknown-param=1",
			http.Header{"Prefer": {"handling=strict"}}, 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{}, c.nodes...)
			res, body, err := h.do(context.Background(), http.MethodGet, c.path, "", c.header)
			if err != nil || res.StatusCode != c.status {
				t.Fatalf("%v: %d %s", err, res.StatusCode, body)
			}
			assertNoLeak(t, c.name, body)
			h.assertNoMemberAddress(body)
			// The member's own words are kept, with its marker, scrubbed.
			if !strings.Contains(string(body), "backend [url] refused") || !strings.Contains(string(body), "PASSWORD=[redacted]") ||
				!strings.Contains(string(body), "MEMBER-BODY-node-a") {
				t.Errorf("the member's message is not passed on scrubbed: %s", body)
			}
			if res.Header.Get("Content-Type") != fhir.MediaType {
				t.Errorf("Content-Type %q", res.Header.Get("Content-Type"))
			}
		})
	}
}

// TestARoutedErrorThatIsNoOperationOutcomeIsTheGateways: a member's error page (HTML,
// plain text, compressed) is replaced by the gateway's outcome, its status kept.
func TestARoutedErrorThatIsNoOperationOutcomeIsTheGateways(t *testing.T) {
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", secrets)
		w.Header().Set("Www-Authenticate", `Bearer realm="https://auth.internal:8443/realms/x"`)
		switch r.URL.Query().Get("as") {
		case "html":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html><body>nginx: " + secrets + "</body></html>"))
		case "gzip":
			w.Header().Set("Content-Type", fhir.MediaType)
			w.Header().Set("Content-Encoding", "gzip")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(secrets))
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(secrets))
		}
	}))
	defer member.Close()
	h := newHarness(t, harnessOptions{}, node{id: "node-x", url: member.URL + "/fhir"})
	for as, want := range map[string]struct {
		status int
		code   string
	}{"html": {502, "transient"}, "gzip": {404, "not-found"}, "text": {403, "forbidden"}} {
		res, body, err := h.do(context.Background(), http.MethodGet, "/nodes/node-x/fhir/Patient/1?as="+as, "", nil)
		if err != nil || res.StatusCode != want.status {
			t.Fatalf("%s: %v %d %s", as, err, res.StatusCode, body)
		}
		oo := outcomeOf(t, body)
		if len(oo.Issue) != 1 || oo.Issue[0].Code != want.code || oo.Issue[0].Diagnostics != fmt.Sprintf("member node-x answered HTTP %d", want.status) {
			t.Errorf("%s: %s", as, body)
		}
		if res.Header.Get("Content-Encoding") != "" || res.Header.Get("Content-Type") != fhir.MediaType ||
			res.Header.Get("Www-Authenticate") != `Bearer realm="[url]"` || !strings.HasPrefix(res.Header.Get("X-Backend"), "backend [url] refused") {
			t.Errorf("%s: headers %v", as, res.Header)
		}
		for _, vs := range res.Header {
			assertNoLeak(t, as+" headers", []byte(strings.Join(vs, "\n")))
		}
		assertNoLeak(t, as, body)
	}
}
