package process

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

// Two `ferrofed serve` processes that share federation.page_token_key_file serve each
// other's next links: a client that alternates between them (a load balancer in front
// of two replicas) walks 67 matches over three members in seven pages of ten, each
// match once. A process without the key makes its own, says so, and refuses both's.
func TestTwoProcessesSharingAPageTokenKeyServeEachOthersPages(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "page-token.key")
	writeFile(t, key, "a-key-of-more-than-thirty-two-bytes-shared-by-replicas\n")
	var registry strings.Builder
	for i, n := range []int{62, 3, 2} {
		m := members.Start(t, members.Options{ID: fmt.Sprintf("node-%d", i), Entries: n, NumericIDs: true})
		fmt.Fprintf(&registry, "[[registry.members]]\nid = \"node-%d\"\nquery_endpoint = %q\n", i, m.URL)
	}
	start := func(name, federation string) (string, *gateway) {
		port := freePort(t)
		path := filepath.Join(dir, name+".toml")
		writeFile(t, path, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:%d\"\nbase_path = \"/gw\"\ntermination_message_path = \"\"\n%s\n%s", port, federation, registry.String()))
		g := serve(t, path)
		base := fmt.Sprintf("http://127.0.0.1:%d/gw", port)
		waitReady(t, base)
		return base, g
	}
	shared := fmt.Sprintf("[federation]\npage_token_key_file = %q\n", key)
	one, g1 := start("one", shared)
	two, _ := start("two", shared)
	own, g3 := start("own", "")
	g3.waitLog(t, "Made a page token key of its own")
	if strings.Contains(g1.stderr.String(), "of its own") {
		t.Fatal("a process with a key file says it made its own")
	}

	seen := map[string]bool{}
	pages := 0
	next := one + "/fhir/Patient?_count=10"
	var firstNext string
	for next != "" && pages < 20 {
		var page struct {
			Total *int `json:"total"`
			Link  []struct{ Relation, URL string }
			Entry []struct {
				FullURL string `json:"fullUrl"`
				Search  struct{ Mode string }
			}
		}
		get(t, next, &page)
		if page.Total == nil || *page.Total != 67 {
			t.Fatalf("page %d: total %v", pages+1, page.Total)
		}
		for _, e := range page.Entry {
			if e.Search.Mode != "match" {
				continue
			}
			_, rest, ok := strings.Cut(e.FullURL, "/gw/fhir/Patient/")
			if !ok || seen[rest] {
				t.Fatalf("%s answered twice", rest)
			}
			seen[rest] = true
		}
		pages++
		next = ""
		for _, l := range page.Link {
			if l.Relation == "next" {
				// The next page from the other process.
				_, q, _ := strings.Cut(l.URL, "/gw/fhir/")
				next = []string{one, two}[pages%2] + "/fhir/" + q
				if firstNext == "" {
					firstNext = q
				}
			}
		}
	}
	if pages != 7 || len(seen) != 67 {
		t.Fatalf("%d pages, %d distinct matches; want 7 and 67", pages, len(seen))
	}
	res, err := clientGet(own + "/fhir/" + firstNext)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(body), "_page") {
		t.Fatalf("a process with its own key answered another's token with %d %s", res.StatusCode, body)
	}
	if err := fhirschema.ValidateFederated(body); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits until the gateway's readiness answers 200 (which opens its data plane).
func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := http.Get(base + "/health/readiness")
		if err == nil {
			_, readErr := io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if readErr == nil && res.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not ready: %v", base, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// get GETs url, checks a 200 of valid FHIR R4 (but for meta.federation), and decodes it.
func get(t *testing.T, url string, v any) {
	t.Helper()
	getAs(t, url, clientToken, v)
}

// getAs is get with token instead of clientToken.
func getAs(t *testing.T, url, token string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v %s", url, res.StatusCode, err, body)
	}
	if err := fhirschema.ValidateFederated(body); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatal(err)
	}
}
