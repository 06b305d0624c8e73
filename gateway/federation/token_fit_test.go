package federation_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/fhir"
)

// longCursorMember is a member whose every page has one Patient and a next link with a
// long (but valid: under 2048 bytes) query, as a server that keeps its search state in
// the link does. Its patients' birth dates are the page number's day, so that a search
// sorted by birthdate takes every member's first page before any second one (a sort by
// _id orders by the federated id, {member}.{id}: one member's whole stream first).
func longCursorMember(t *testing.T, id string) string {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page := 1
		if _, err := fmt.Sscanf(r.URL.Query().Get("page"), "%d", &page); err != nil {
			page = 1
		}
		next := fmt.Sprintf("%s/fhir/Patient?page=%d&state=%s", srv.URL, page+1, strings.Repeat("s", 1500))
		w.Header().Set("Content-Type", fhir.MediaType)
		fmt.Fprintf(w, `{"resourceType":"Bundle","type":"searchset","total":5,"link":[{"relation":"next","url":%q}],`+
			`"entry":[{"fullUrl":"%s/fhir/Patient/%d-%s","resource":{"resourceType":"Patient","id":"%d-%s","birthDate":"2000-01-%02d"},"search":{"mode":"match"}}]}`,
			next, srv.URL, page, id, page, id, page)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/fhir"
}

// A first page over more members with more to give than one continuation token can
// carry is served, linked for the members that fit, and says which were left out;
// it is never a 500 that throws away what the members answered.
func TestAPageWhoseTokenCannotCarryEveryMemberSaysWhichWereLeftOut(t *testing.T) {
	const n = 12
	var nodes []node
	for i := range n {
		id := fmt.Sprintf("m%02d", i)
		nodes = append(nodes, node{id: id, url: longCursorMember(t, id)})
	}
	h := newHarness(t, harnessOptions{}, nodes...)

	res, body := h.get(fmt.Sprintf("/fhir/Patient?_sort=birthdate&_count=%d", n))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("first page: %d %s", res.StatusCode, body)
	}
	var first searchAnswer
	if err := json.Unmarshal(body, &first); err != nil {
		t.Fatal(err)
	}
	if first.matches() != n {
		t.Fatalf("first page has %d matches, want one of each of the %d members", first.matches(), n)
	}
	next := first.link("next")
	if next == "" {
		t.Fatal("first page has no next link")
	}
	var warning string
	for _, e := range first.Entry {
		for _, is := range e.Resource.Issue {
			if is.Code == "too-costly" {
				warning = is.Diagnostics
			}
		}
	}
	if warning == "" {
		t.Fatalf("no too-costly outcome entry names the members left out: %s", body)
	}

	// The next page asks exactly the members the token carries; the warning names the
	// others, and the two together are every member.
	_, after, _ := strings.Cut(next, testBase)
	res, body = h.get(after)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("next page: %d %s", res.StatusCode, body)
	}
	var second searchAnswer
	if err := json.Unmarshal(body, &second); err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, e := range second.Entry {
		if e.Search.Mode == "match" {
			linked[strings.SplitN(e.Resource.ID, "-", 2)[1]] = true
		}
	}
	if len(linked) == 0 || len(linked) == n {
		t.Fatalf("the next page holds matches of %d members, want some but not all of %d", len(linked), n)
	}
	for i := range n {
		id := fmt.Sprintf("m%02d", i)
		named := strings.Contains(warning, id)
		if named == linked[id] {
			t.Errorf("member %s: linked=%v, named as left out=%v; want exactly one (warning: %s)", id, linked[id], named, warning)
		}
	}
}

// A member whose next link leads off its own base is not followed, and the page says
// so with a warning naming it, instead of ending its paging in silence.
func TestAnUnfollowedNextLinkIsNamedOnThePage(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", fhir.MediaType)
		fmt.Fprintf(w, `{"resourceType":"Bundle","type":"searchset","link":[{"relation":"next","url":"http://elsewhere.invalid/fhir/Patient?page=2"}],`+
			`"entry":[{"fullUrl":"%s/fhir/Patient/a","resource":{"resourceType":"Patient","id":"a"},"search":{"mode":"match"}}]}`, srv.URL)
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t, harnessOptions{}, node{id: "wanders", url: srv.URL + "/fhir"})
	res, body := h.get("/fhir/Patient")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	var page searchAnswer
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatal(err)
	}
	if page.matches() != 1 || page.link("next") != "" {
		t.Fatalf("want the member's one match and no next link: %s", body)
	}
	for _, e := range page.Entry {
		for _, is := range e.Resource.Issue {
			if is.Code == "incomplete" && is.Severity == "warning" && strings.Contains(is.Diagnostics, "wanders") {
				return
			}
		}
	}
	t.Fatalf("no incomplete warning names the member: %s", body)
}
