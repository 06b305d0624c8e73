package federation_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/doubles/issuer"
)

// firstNext is the next link of a first page asked with authorization ("" for the
// client token), as a path under the base.
func (h *harness) firstNext(path, authorization string) string {
	h.t.Helper()
	res, body, err := h.do(context.Background(), http.MethodGet, path, authorization, nil)
	if err != nil || res.StatusCode != 200 {
		h.t.Fatalf("GET %s: %v %v %s", path, res, err, body)
	}
	var b searchAnswer
	if err := json.Unmarshal(body, &b); err != nil {
		h.t.Fatal(err)
	}
	_, next, ok := strings.Cut(b.link("next"), testBase)
	if !ok {
		h.t.Fatalf("no next link under the base: %s", body)
	}
	return next
}

// requests is how many requests the members have had, in all.
func (h *harness) requests() int {
	n := 0
	for _, m := range h.members {
		n += m.Requests()
	}
	return n
}

// refusedPage asks next with authorization and checks the refusal: status, an
// OperationOutcome naming _page whose issue code is code, and no member asked.
func refusedPage(t *testing.T, h *harness, next, authorization string, status int, code string) *reply {
	t.Helper()
	before := h.requests()
	res, body, err := h.do(context.Background(), http.MethodGet, next, authorization, nil)
	if err != nil || res.StatusCode != status {
		t.Fatalf("the next link answered %v %v %s, want %d", res, err, body, status)
	}
	if oo := outcomeOf(t, body); oo.Issue[0].Code != code || !strings.Contains(string(body), "_page") {
		t.Fatalf("the refusal is %s, want an issue %s naming _page", body, code)
	}
	if n := h.requests() - before; n != 0 {
		t.Fatalf("a refused next link asked the members %d times", n)
	}
	return res
}

// A next link is its caller's (docs/data-plane.md, "Paging and the continuation
// token"): the same subject of the same issuer follows it with any token it holds;
// another subject is refused 401 before any member is asked, the page token key's
// hash of the caller being all the link carries of it.
func TestANextLinkIsItsCallersOnly(t *testing.T) {
	h := newHarness(t, harnessOptions{}, sixtySeven()...)
	next := h.firstNext("/fhir/Patient?_count=10", "")
	if strings.Contains(next, "app") {
		t.Fatalf("the next link names its caller: %s", next)
	}
	again, err := h.Issuer.Token(map[string]any{"sub": "app", "scope": issuer.ClientScope, "jti": "another token of the same caller"})
	if err != nil {
		t.Fatal(err)
	}
	res, body, err := h.do(context.Background(), http.MethodGet, next, "Bearer "+again, nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("the caller's own next link, with another of its tokens: %v %v %s", res, err, body)
	}
	mallory := h.Issuer.Sign(t, "mallory", issuer.ClientScope)
	res = refusedPage(t, h, next, "Bearer "+mallory, http.StatusUnauthorized, "security")
	if !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer ") {
		t.Fatalf("a 401 without its challenge: %v", res.Header)
	}
	// The refusal leaves the link its caller's.
	if res, _, err := h.do(context.Background(), http.MethodGet, next, "", nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("after another caller's attempt, the caller's next link: %v %v", res, err)
	}
}

// On an open data plane a caller without a token that verifies is "anonymous": its
// links are every anonymous caller's, and no verified caller's.
func TestAnOpenDataPlaneBindsAnAnonymousCallersLinks(t *testing.T) {
	h := newHarness(t, harnessOptions{tables: "[auth]\ndata_plane = \"open\"\n"}, sixtySeven()...)
	const anonymous = "Bearer not-a-token"
	next := h.firstNext("/fhir/Patient?_count=10", anonymous)
	if res, body, err := h.do(context.Background(), http.MethodGet, next, anonymous, nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("an anonymous next link, anonymously: %v %v %s", res, err, body)
	}
	refusedPage(t, h, next, "", http.StatusUnauthorized, "security")
	// And the other way: a verified caller's link is not an anonymous one's.
	refusedPage(t, h, h.firstNext("/fhir/Patient?_count=10", ""), anonymous, http.StatusUnauthorized, "security")
}

// A next link expires federation.page_token_ttl_ms after the page that gave it: past
// that it is a 400 whose issue code is expired, and no member is asked.
func TestANextLinkExpires(t *testing.T) {
	const ttl = 2 * time.Second
	h := newHarness(t, harnessOptions{federation: "page_token_ttl_ms = 2000"}, sixtySeven()...)
	next := h.firstNext("/fhir/Patient?_count=10", "")
	given := time.Now() // the link expires at most ttl from now
	if res, body, err := h.do(context.Background(), http.MethodGet, next, "", nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("a fresh next link: %v %v %s", res, err, body)
	}
	time.Sleep(time.Until(given.Add(ttl + 50*time.Millisecond)))
	refusedPage(t, h, next, "", http.StatusBadRequest, "expired")
}
