package mcsdsupplier

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type page struct {
	ResourceType string `json:"resourceType"`
	Type         string `json:"type"`
	Total        int    `json:"total"`
	Link         []struct {
		Relation, URL string
	} `json:"link"`
	Entry []struct {
		Resource map[string]any `json:"resource"`
		Search   *struct {
			Mode string `json:"mode"`
		} `json:"search"`
		Request *struct {
			Method, URL string
		} `json:"request"`
	} `json:"entry"`
}

func (p page) next() string {
	for _, l := range p.Link {
		if l.Relation == "next" {
			return l.URL
		}
	}
	return ""
}

func get(t *testing.T, u string) (int, page, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Accept", "application/fhir+json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var p page
	_ = json.Unmarshal(raw, &p)
	return res.StatusCode, p, string(raw)
}

// loadExamples puts the published mCSD examples (testdata/ihe) into s.
func loadExamples(t *testing.T, s *Server) {
	t.Helper()
	files, _ := filepath.Glob("testdata/ihe/*.json")
	if len(files) != 4 {
		t.Fatalf("want the 4 published examples, found %v", files)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r map[string]any
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		s.MustPut(t, r)
	}
}

// The directory answers ITI-90 and ITI-91 over IHE's own examples as the IG says:
// the active Organizations with the Endpoint ex-OrgC references included, then each
// create as a POST in the history, an update as a PUT before it, and a delete as a
// tombstone without a resource.
func TestPublishedExamples(t *testing.T) {
	s := Start(t, Options{})
	start := time.Now().UTC()
	loadExamples(t, s)

	status, p, raw := get(t, s.URL+"/Organization?active=true&_include=Organization:endpoint")
	if status != 200 || p.ResourceType != "Bundle" || p.Type != "searchset" || p.Total != 3 {
		t.Fatalf("ITI-90 answered %d %s", status, raw)
	}
	var matches, includes []string
	for _, e := range p.Entry {
		if e.Search.Mode == "match" {
			matches = append(matches, e.Resource["id"].(string))
		} else {
			includes = append(includes, e.Resource["id"].(string))
		}
	}
	if strings.Join(matches, ",") != "ex-OrgA,ex-OrgB,ex-OrgC" || strings.Join(includes, ",") != "ex-endpointXCAquery" {
		t.Fatalf("matches %v, includes %v", matches, includes)
	}

	since := start.Add(-time.Second).Format(time.RFC3339Nano)
	status, p, raw = get(t, s.URL+"/Organization/_history?_since="+since)
	if status != 200 || p.Type != "history" || len(p.Entry) != 3 {
		t.Fatalf("ITI-91 answered %d %s", status, raw)
	}
	for _, e := range p.Entry {
		if e.Request == nil || e.Request.Method != "POST" || e.Resource == nil {
			t.Fatalf("a create is not a POST with its resource: %s", raw)
		}
	}

	org := Organization("ex-OrgC", "urn:x", "", "ex-endpointXCAquery")
	org["active"] = false
	s.MustPut(t, org)
	if err := s.Delete("Organization", "ex-OrgB"); err != nil {
		t.Fatal(err)
	}
	_, p, raw = get(t, s.URL+"/Organization/_history?_since="+since)
	if len(p.Entry) != 5 || p.Entry[0].Request.Method != "DELETE" || p.Entry[0].Request.URL != "Organization/ex-OrgB" || p.Entry[0].Resource != nil ||
		p.Entry[1].Request.Method != "PUT" || p.Entry[1].Resource["id"] != "ex-OrgC" {
		t.Fatalf("newest first, a tombstone then an update; got %s", raw)
	}
	_, p, _ = get(t, s.URL+"/Organization?active=true&_include=Organization:endpoint")
	if p.Total != 1 || len(p.Entry) != 1 || p.Entry[0].Resource["id"] != "ex-OrgA" {
		t.Fatalf("after the delete and the deactivation only ex-OrgA is active: %+v", p)
	}
}

// Pages end at _count, and the next link reads the rest.
func TestPaging(t *testing.T) {
	s := Start(t, Options{})
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		s.MustPut(t, Endpoint("ep-"+id, "http://"+id+".example/fhir"), Organization("org-"+id, "urn:m", id, "ep-"+id))
	}
	var ids []string
	u := s.URL + "/Organization?active=true&_include=Organization:endpoint&_count=2"
	pages := 0
	for u != "" {
		_, p, raw := get(t, u)
		pages++
		for _, e := range p.Entry {
			if e.Search.Mode == "match" {
				ids = append(ids, e.Resource["id"].(string))
			}
		}
		if len(p.Entry) == 0 {
			t.Fatalf("an empty page: %s", raw)
		}
		u = p.next()
	}
	if pages != 3 || strings.Join(ids, ",") != "org-a,org-b,org-c,org-d,org-e" {
		t.Fatalf("%d pages, ids %v", pages, ids)
	}
}

// The directory's knobs: each changes every answer as documented.
func TestKnobs(t *testing.T) {
	s := Start(t, Options{})
	s.MustPut(t, Endpoint("ep", "http://a.example/fhir"), Organization("org", "urn:m", "a", "ep"))
	hist := s.URL + "/Organization/_history?_since=2000-01-01T00:00:00Z"

	s.SetPages(Pages{SelfNext: true})
	_, p, _ := get(t, hist)
	if p.next() != hist {
		t.Errorf("SelfNext: next is %q, want %q", p.next(), hist)
	}
	s.SetPages(Pages{ForeignNext: true})
	if _, p, _ = get(t, hist); !strings.HasPrefix(p.next(), "http://directory.elsewhere.example/") {
		t.Errorf("ForeignNext: next is %q", p.next())
	}
	s.SetPages(Pages{EndlessPaging: true})
	u := hist
	for range 5 {
		_, p, _ = get(t, u)
		if p.next() == "" || p.next() == u {
			t.Fatalf("EndlessPaging: next %q after %q", p.next(), u)
		}
		u = p.next()
	}
	s.SetPages(Pages{NonBundle: true})
	if _, p, raw := get(t, hist); p.ResourceType != "OperationOutcome" || !strings.Contains(raw, "MCSD-BODY") {
		t.Errorf("NonBundle: %s", raw)
	}
	s.SetPages(Pages{PadBytes: 1 << 20})
	if _, _, raw := get(t, hist); len(raw) < 1<<20 {
		t.Errorf("PadBytes: a page of %d bytes", len(raw))
	}
	s.SetPages(Pages{ExtraEndpoints: 1000})
	if _, p, _ := get(t, s.URL+"/Organization?_include=Organization:endpoint"); len(p.Entry) != 1002 {
		t.Errorf("ExtraEndpoints: %d entries", len(p.Entry))
	}
}

// The directory serves what a test adds to a resource: an Organization's patient
// identifier domain and an Endpoint's home community id, typed HCID as the mCSD guide
// codes it, in ITI-90 and in ITI-91 alike.
func TestServesDomainAndHCID(t *testing.T) {
	s := Start(t, Options{})
	since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	s.MustPut(t, WithHCID(Endpoint("ep-a", "http://a.example/fhir"), "urn:oid:1.2.3.70.1"),
		WithIdentifier(Organization("org-a", "urn:oid:1.2.3", "a", "ep-a"), "https://ferrofed.example/patient-domain", "urn:oid:1.2.3.10"))
	for _, u := range []string{s.URL + "/Organization?active=true&_include=Organization:endpoint", s.URL + "/Endpoint/_history?_since=" + since, s.URL + "/Organization/_history?_since=" + since} {
		status, p, raw := get(t, u)
		if status != http.StatusOK || len(p.Entry) == 0 {
			t.Fatalf("%s answered %d: %s", u, status, raw)
		}
		for _, e := range p.Entry {
			ids, _ := json.Marshal(e.Resource["identifier"])
			switch e.Resource["resourceType"] {
			case "Endpoint":
				if !strings.Contains(string(ids), `"code":"HCID"`) || !strings.Contains(string(ids), EndpointIdentifierTypes) || !strings.Contains(string(ids), "urn:oid:1.2.3.70.1") {
					t.Errorf("%s: the Endpoint's identifiers are %s", u, ids)
				}
			case "Organization":
				if !strings.Contains(string(ids), `"value":"a"`) || !strings.Contains(string(ids), `"value":"urn:oid:1.2.3.10"`) {
					t.Errorf("%s: the Organization's identifiers are %s", u, ids)
				}
			}
		}
	}
}
