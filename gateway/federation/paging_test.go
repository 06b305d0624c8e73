package federation_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/searchquery"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// sixtySeven is three members with 67 matches between them, one with more than 60,
// their ids numeric and colliding (each has a Patient/1).
func sixtySeven() []node {
	return []node{
		{id: "node-a", opts: members.Options{Entries: 62, NumericIDs: true}},
		{id: "node-b", opts: members.Options{Entries: 3, NumericIDs: true}},
		{id: "node-c", opts: members.Options{Entries: 2, NumericIDs: true}},
	}
}

// walk follows next links from first until there is none (at most 20 pages), each
// page asked of the gateway at i % len(gws); it returns the pages.
func walk(t *testing.T, first string, gws ...*harness) []searchAnswer {
	t.Helper()
	var pages []searchAnswer
	path := first
	for i := 0; path != "" && i < 20; i++ {
		h := gws[i%len(gws)]
		res, body := h.get(path)
		if res.StatusCode != 200 {
			t.Fatalf("page %d (%s): %d %s", i+1, path, res.StatusCode, body)
		}
		var b searchAnswer
		if err := json.Unmarshal(body, &b); err != nil {
			t.Fatal(err)
		}
		pages = append(pages, b)
		path = ""
		if next := b.link("next"); next != "" {
			_, rest, ok := strings.Cut(next, testBase+"/fhir/")
			if !ok {
				t.Fatalf("next link %s is not the gateway's", next)
			}
			path = "/fhir/" + rest
		}
	}
	return pages
}

// matchURLs are the pages' matches as {member}/fhir/Patient/{member's id}, read from
// their federated fullUrls ({gateway}/fhir/Patient/{member}.{id}, the gateway's host
// left out: two gateways have two), each checked against its resource's id.
func matchURLs(t *testing.T, pages []searchAnswer) []string {
	t.Helper()
	var out []string
	for _, p := range pages {
		for _, e := range p.Entry {
			if e.Search.Mode != "match" {
				continue
			}
			_, fid, ok := strings.Cut(e.FullURL, testBase+"/fhir/Patient/")
			member, id, split := strings.Cut(fid, ".")
			if !ok || !split || fid != e.Resource.ID {
				t.Fatalf("fullUrl %s of Patient/%s", e.FullURL, e.Resource.ID)
			}
			out = append(out, member+"/fhir/Patient/"+id)
		}
	}
	return out
}

func assertEveryMatchOnce(t *testing.T, pages []searchAnswer, wantPages, wantMatches, count int) []string {
	t.Helper()
	urls := matchURLs(t, pages)
	seen := map[string]bool{}
	for _, u := range urls {
		if seen[u] {
			t.Fatalf("%s was answered twice", u)
		}
		seen[u] = true
	}
	if len(pages) != wantPages || len(urls) != wantMatches {
		t.Fatalf("%d pages, %d matches; want %d and %d", len(pages), len(urls), wantPages, wantMatches)
	}
	for i, p := range pages {
		if p.matches() > count {
			t.Fatalf("page %d holds %d matches, _count is %d", i+1, p.matches(), count)
		}
		if p.Total == nil || *p.Total != wantMatches {
			t.Fatalf("page %d total %v, want %d", i+1, p.Total, wantMatches)
		}
		if p.link("self") == "" {
			t.Fatalf("page %d has no self link", i+1)
		}
	}
	if pages[len(pages)-1].link("next") != "" {
		t.Fatal("the last page links a next")
	}
	return urls
}

func TestFollowingNextReturnsEveryMatchExactlyOnce(t *testing.T) {
	h := newHarness(t, harnessOptions{}, sixtySeven()...)
	pages := walk(t, "/fhir/Patient?gender=female&_count=10", h)
	urls := assertEveryMatchOnce(t, pages, 7, 67, 10)
	if self := pages[0].link("self"); self != h.URL+"/fhir/Patient?gender=female&_count=10" {
		t.Fatalf("self link %s", self)
	}
	for _, u := range []string{"node-a/fhir/Patient/1", "node-b/fhir/Patient/1", "node-c/fhir/Patient/1", "node-a/fhir/Patient/62"} {
		if !slices.Contains(urls, u) {
			t.Fatalf("%s is missing", u)
		}
	}
	// The first page asks every member; a later one only the member(s) it needs: A's
	// pages 2 to 7, and on the last page B and C once more (3 + 5 + 3 requests).
	asked := 0
	for _, m := range h.members {
		asked += len(m.Log())
	}
	if asked != 11 {
		t.Fatalf("the walk sent %d member requests, want 11", asked)
	}
	// Every member request stayed under the member's base and kept the search.
	for id, m := range h.members {
		for _, r := range m.Log() {
			if !strings.HasPrefix(r.Path, "/fhir/Patient") || !strings.Contains(r.RawQuery, "gender=female") {
				t.Fatalf("%s was asked %s?%s", id, r.Path, r.RawQuery)
			}
		}
	}
}

func TestSortedPagesAreOneMergedOrder(t *testing.T) {
	h := newHarness(t, harnessOptions{}, sixtySeven()...)
	for _, c := range []struct {
		sort  string
		value func(e entryView) string
		desc  bool
	}{
		{"birthdate", func(e entryView) string { return e.BirthDate }, false},
		{"-birthdate", func(e entryView) string { return e.BirthDate }, true},
		{"-_lastUpdated", func(e entryView) string { return e.LastUpdated }, true},
		{"family", func(e entryView) string { return strings.ToLower(e.Family) }, false},
		{"_id", func(e entryView) string { return e.ID }, false},
	} {
		t.Run(c.sort, func(t *testing.T) {
			pages := walk(t, "/fhir/Patient?_count=10&_sort="+c.sort, h)
			assertEveryMatchOnce(t, pages, 7, 67, 10)
			var prev string
			n := 0
			for _, p := range pages {
				for _, e := range entries(p) {
					v := c.value(e)
					if n > 0 && ((!c.desc && v < prev) || (c.desc && v > prev)) {
						t.Fatalf("match %d (%s) = %q after %q: not in _sort=%s order", n, e.ID, v, prev, c.sort)
					}
					prev = v
					n++
				}
			}
			// The members' own orders differ from the merged one: a concatenation would fail.
			if len(pages[0].Meta.Federation) != 3 {
				t.Fatalf("the first sorted page asked %d members", len(pages[0].Meta.Federation))
			}
		})
	}
}

// entryView is one match's values that the sort tests read.
type entryView struct{ ID, BirthDate, LastUpdated, Family string }

func entries(p searchAnswer) []entryView {
	var out []entryView
	for _, e := range p.Entry {
		if e.Search.Mode != "match" {
			continue
		}
		v := entryView{ID: e.Resource.ID, BirthDate: e.Resource.BirthDate, LastUpdated: e.Resource.Meta.LastUpdated}
		if len(e.Resource.Name) > 0 {
			v.Family = e.Resource.Name[0].Family
		}
		out = append(out, v)
	}
	return out
}

// keyFile writes a page token key for gateways that share it.
func keyFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "page-token.key")
	if err := os.WriteFile(p, []byte("0123456789abcdef0123456789abcdef-shared\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTwoGatewaysSharingAKeyServeEachOthersPages(t *testing.T) {
	key := fmt.Sprintf("page_token_key_file = %q", keyFile(t))
	one := newHarness(t, harnessOptions{federation: key}, sixtySeven()...)
	var same []node
	for _, id := range []string{"node-a", "node-b", "node-c"} {
		same = append(same, node{id: id, url: one.members[id].URL})
	}
	two := newHarness(t, harnessOptions{federation: key}, same...)
	for _, sort := range []string{"", "&_sort=birthdate"} {
		pages := walk(t, "/fhir/Patient?_count=10"+sort, one, two)
		assertEveryMatchOnce(t, pages, 7, 67, 10)
	}

	// A gateway with a key of its own refuses both's tokens.
	own := newHarness(t, harnessOptions{}, same...)
	_, body := one.get("/fhir/Patient?_count=10")
	var b searchAnswer
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	_, rest, _ := strings.Cut(b.link("next"), testBase)
	res, body := own.get(rest)
	if res.StatusCode != 400 || !strings.Contains(string(body), "_page") || !strings.Contains(string(body), "not made by this gateway") {
		t.Fatalf("a foreign token: %d %s", res.StatusCode, body)
	}
}

var minusOne = -1

func TestATamperedForeignOrOversizedTokenIsRefused(t *testing.T) {
	// The gateway's key is one the test knows: the key file's.
	file := keyFile(t)
	h := newHarness(t, harnessOptions{federation: fmt.Sprintf("page_token_key_file = %q", file)}, sixtySeven()...)
	_, body := h.get("/fhir/Patient?_count=10")
	var b searchAnswer
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	_, tok, _ := strings.Cut(b.link("next"), "_page=")
	raw, err := config.ReadPageTokenKey(file)
	if err != nil {
		t.Fatal(err)
	}
	key := searchquery.Key(raw)
	// Each token is bound to the harness's client (sub app) for an hour: each case is
	// refused for what it names, not for whom.
	bind := func(k searchquery.Key, t searchquery.Token) searchquery.Token {
		t.Caller, t.Expires = k.Caller(issuer.URL, "app"), time.Now().Add(time.Hour).UnixMilli()
		return t
	}
	signed := func(t searchquery.Token) string {
		s, err := key.Encode(bind(key, t))
		if err != nil {
			panic(err)
		}
		return s
	}
	flip := func(s string, i int) string {
		c := byte('A')
		if s[i] == 'A' {
			c = 'B'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	other, _ := searchquery.NewKey()
	foreign, _ := other.Encode(bind(other, searchquery.Token{Type: "Patient", Count: 10, Members: []searchquery.TokenMember{{ID: "node-a", Cursor: "/Patient"}}}))
	cases := map[string]string{
		"a byte of the content changed":        flip(tok, 5),
		"a byte of the signature changed":      flip(tok, len(tok)-3),
		"the signature cut off":                tok[:strings.IndexByte(tok, '.')],
		"signed with another key":              foreign,
		"oversized":                            strings.Repeat("A", searchquery.MaxPageTokenBytes+1),
		"a cursor that climbs out of the base": signed(searchquery.Token{Type: "Patient", Count: 10, Members: []searchquery.TokenMember{{ID: "node-a", Cursor: "/../admin"}}}),
		"a cursor that climbs out encoded":     signed(searchquery.Token{Type: "Patient", Count: 10, Members: []searchquery.TokenMember{{ID: "node-a", Cursor: "/Patient%2F..%2F..%2Fadmin"}}}),
		"a cursor naming another host":         signed(searchquery.Token{Type: "Patient", Count: 10, Members: []searchquery.TokenMember{{ID: "node-a", Cursor: "//evil.example/fhir/Patient"}}}),
		"a cursor that is a URL":               signed(searchquery.Token{Type: "Patient", Count: 10, Members: []searchquery.TokenMember{{ID: "node-a", Cursor: "http://evil.example/x"}}}),
		"a member that is not configured":      signed(searchquery.Token{Type: "Patient", Count: 10, Members: []searchquery.TokenMember{{ID: "node-z", Cursor: "/Patient"}}}),
		"a member named twice":                 signed(searchquery.Token{Type: "Patient", Count: 10, Members: []searchquery.TokenMember{{ID: "node-a", Cursor: "/Patient"}, {ID: "node-a", Cursor: "/Patient"}}}),
		"a page size above max_count":          signed(searchquery.Token{Type: "Patient", Count: 5000, Members: []searchquery.TokenMember{{ID: "node-a", Cursor: "/Patient"}}}),
		"another resource type":                signed(searchquery.Token{Type: "Observation", Count: 10, Members: []searchquery.TokenMember{{ID: "node-a", Cursor: "/Observation"}}}),
		"a sort the gateway cannot merge":      signed(searchquery.Token{Type: "Patient", Count: 10, Sort: "gender", Members: []searchquery.TokenMember{{ID: "node-a", Cursor: "/Patient"}}}),
		"a negative remaining count":           signed(searchquery.Token{Type: "Patient", Count: 10, Members: []searchquery.TokenMember{{ID: "node-a", Cursor: "/Patient", Remaining: &minusOne}}}),
	}
	before := map[string]int64{}
	for id, m := range h.members {
		before[id] = int64(m.Requests())
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			res, body := h.get("/fhir/Patient?_page=" + tok)
			if res.StatusCode != 400 || !strings.Contains(string(body), "_page") {
				t.Fatalf("%d %s", res.StatusCode, body)
			}
			outcomeOf(t, body)
		})
	}
	for id, m := range h.members {
		if int64(m.Requests()) != before[id] {
			t.Fatalf("a refused token reached %s", id)
		}
	}
	// The right key and a cursor under the base: the member is asked exactly there.
	res, body := h.get("/fhir/Patient?_page=" + signed(searchquery.Token{Type: "Patient", Count: 2, Members: []searchquery.TokenMember{{ID: "node-b", Cursor: "/Patient?_count=2&_offset=1", Offset: 1}}}))
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if res.StatusCode != 200 || b.matches() != 1 || h.members["node-b"].LastRequest().RawQuery != "_count=2&_offset=1" {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
}

func TestCountSummaryAndTotal(t *testing.T) {
	four := []node{{id: "node-a", opts: members.Options{Entries: 4}}, {id: "node-b", opts: members.Options{Entries: 4}}, {id: "node-c", opts: members.Options{Entries: 4}}}
	h := newHarness(t, harnessOptions{federation: "max_count = 50\ndefault_count = 7"}, four...)
	for _, c := range []struct {
		query       string
		matches     int
		total       int
		next        bool
		selfHas     string
		memberCount string
	}{
		{"_count=5", 5, 12, true, "_count=5", "_count=5"},
		{"", 7, 12, true, "_count=7", "_count=7"},
		{"_count=100", 12, 12, false, "_count=50", "_count=50"},
		{"_count=0", 0, 12, false, "_summary=count", "_summary=count"},
		{"_summary=count", 0, 12, false, "_summary=count", "_summary=count"},
	} {
		t.Run(c.query, func(t *testing.T) {
			_, body := h.get("/fhir/Patient?" + c.query)
			var b searchAnswer
			if err := json.Unmarshal(body, &b); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			if b.matches() != c.matches || b.Total == nil || *b.Total != c.total || (b.link("next") != "") != c.next || !strings.Contains(b.link("self"), c.selfHas) {
				t.Fatalf("%d matches, total %v, self %s, next %q: %s", b.matches(), b.Total, b.link("self"), b.link("next"), body)
			}
			if q := h.members["node-c"].LastRequest().RawQuery; !strings.Contains(q, c.memberCount) {
				t.Fatalf("the member was asked %s", q)
			}
		})
	}
	noTotal := newHarness(t, harnessOptions{}, node{id: "node-a", opts: members.Options{Entries: 4, NoTotal: true}}, node{id: "node-b"})
	for _, q := range []string{"", "_summary=count"} {
		_, body := noTotal.get("/fhir/Patient?" + q)
		var b searchAnswer
		if err := json.Unmarshal(body, &b); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		if b.Total != nil {
			t.Fatalf("?%s: a total although node-a gave none: %s", q, body)
		}
	}
}

func TestCollidingIdsGetDistinctFullURLs(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a", opts: members.Options{NumericIDs: true}}, node{id: "node-b", opts: members.Options{NumericIDs: true}})
	_, body := h.get("/fhir/Patient")
	var b searchAnswer
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	var got []string
	for _, e := range b.Entry {
		got = append(got, e.FullURL)
	}
	base := h.URL + "/fhir/Patient/"
	want := []string{base + "node-a.1", base + "node-a.2", base + "node-b.1", base + "node-b.2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("fullUrls %v, want %v", got, want)
	}
	h.assertNoMemberAddress(body)
}

func TestAPostSearchEqualsTheGet(t *testing.T) {
	h := newHarness(t, harnessOptions{}, sixtySeven()...)
	_, get := h.get("/fhir/Patient?gender=male&_count=4&_sort=-birthdate")
	for _, c := range []struct{ query, form string }{
		{"", "gender=male&_count=4&_sort=-birthdate"},
		{"?gender=male", "_count=4&_sort=-birthdate"},
	} {
		res, body := h.postForm("/fhir/Patient/_search"+c.query, c.form, "application/x-www-form-urlencoded")
		var g, p searchAnswer
		if err := json.Unmarshal(get, &g); err != nil {
			t.Fatalf("%v: %s", err, get)
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		if res.StatusCode != 200 || strings.Join(matchURLs(t, []searchAnswer{g}), " ") != strings.Join(matchURLs(t, []searchAnswer{p}), " ") ||
			*g.Total != *p.Total || g.link("self") != p.link("self") {
			t.Fatalf("POST %s %s: %d\n%s\nGET\n%s", c.query, c.form, res.StatusCode, body, get)
		}
	}
	res, body := h.postForm("/fhir/Patient/_search", `{"gender":"male"}`, fhir.MediaType)
	if res.StatusCode != 415 {
		t.Fatalf("a JSON body: %d %s", res.StatusCode, body)
	}
	outcomeOf(t, body)
}

func TestAMemberThatIgnoresCountIsPagedWithinItsPage(t *testing.T) {
	var asked atomic.Int64
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		var entries []string
		for i := 1; i <= 35; i++ {
			entries = append(entries, fmt.Sprintf(`{"resource":{"resourceType":"Patient","id":"%d"}}`, i))
		}
		w.Header().Set("Content-Type", fhir.MediaType)
		fmt.Fprintf(w, `{"resourceType":"Bundle","type":"searchset","total":35,"entry":[%s]}`, strings.Join(entries, ","))
	}))
	defer member.Close()
	h := newHarness(t, harnessOptions{}, node{id: "node-x", url: member.URL + "/fhir"})
	pages := walk(t, "/fhir/Patient?_count=10", h)
	assertEveryMatchOnce(t, pages, 4, 35, 10)
	if n := asked.Load(); n != 4 {
		t.Fatalf("the member was asked %d times for 4 pages", n)
	}
}
