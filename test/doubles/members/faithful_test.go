package members

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

// searchset is a member's Bundle as a client reads it.
type searchset struct {
	ResourceType string `json:"resourceType"`
	Type         string `json:"type"`
	Total        *int   `json:"total"`
	Link         []struct {
		Relation string `json:"relation"`
		URL      string `json:"url"`
	} `json:"link"`
	Entry []struct {
		FullURL  string `json:"fullUrl"`
		Resource struct {
			ResourceType string `json:"resourceType"`
			ID           string `json:"id"`
			BirthDate    string `json:"birthDate"`
			Meta         struct {
				LastUpdated string `json:"lastUpdated"`
			} `json:"meta"`
		} `json:"resource"`
		Search struct {
			Mode string `json:"mode"`
		} `json:"search"`
	} `json:"entry"`
}

func (b searchset) next() string {
	for _, l := range b.Link {
		if l.Relation == "next" {
			return l.URL
		}
	}
	return ""
}

func (b searchset) matches() int {
	n := 0
	for _, e := range b.Entry {
		if e.Search.Mode == "match" {
			n++
		}
	}
	return n
}

// fetch sends one request and checks that the body is valid FHIR R4 JSON.
func fetch(t *testing.T, method, u string, header http.Header, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := fhirschema.Validate(b); err != nil {
		t.Fatalf("%s %s answered %d, not valid R4: %v\n%s", method, u, res.StatusCode, err, b)
	}
	return res.StatusCode, res.Header, b
}

func decode(t *testing.T, body []byte) searchset {
	t.Helper()
	var b searchset
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAMemberPagesItsSearchWithNextLinksAndATotal(t *testing.T) {
	m := Start(t, Options{ID: "node-big", Entries: 67, NumericIDs: true})
	next := m.URL + "/Patient?gender=female"
	seen := map[string]bool{}
	pages := 0
	for next != "" && pages < 20 {
		status, _, body := fetch(t, http.MethodGet, next, nil, "")
		b := decode(t, body)
		if status != 200 || b.Type != "searchset" || b.Total == nil || *b.Total != 67 {
			t.Fatalf("page %d: %d %s", pages, status, body)
		}
		if pages == 0 && len(b.Entry) != DefaultPageSize {
			t.Fatalf("the first page holds %d entries, want the default page size %d", len(b.Entry), DefaultPageSize)
		}
		for _, e := range b.Entry {
			if e.Search.Mode != "match" || e.FullURL != m.URL+"/Patient/"+e.Resource.ID {
				t.Fatalf("entry %+v", e)
			}
			seen[e.FullURL] = true
		}
		next = b.next()
		if next != "" && !strings.Contains(next, "gender=female") {
			t.Fatalf("the next link %s lost the search", next)
		}
		pages++
	}
	if pages != 4 || len(seen) != 67 || !seen[m.URL+"/Patient/1"] || !seen[m.URL+"/Patient/67"] {
		t.Fatalf("%d pages, %d distinct entries", pages, len(seen))
	}
}

func TestAMemberHonoursCountSortAndSummary(t *testing.T) {
	m := Start(t, Options{ID: "node-a", Entries: 30, NumericIDs: true})
	_, _, body := fetch(t, http.MethodGet, m.URL+"/Patient?_count=7&_sort=-birthdate", nil, "")
	b := decode(t, body)
	if len(b.Entry) != 7 || !strings.Contains(b.next(), "_count=7") || !strings.Contains(b.next(), "_offset=7") {
		t.Fatalf("page %s", body)
	}
	for i := 1; i < len(b.Entry); i++ {
		if b.Entry[i-1].Resource.BirthDate < b.Entry[i].Resource.BirthDate {
			t.Fatalf("not sorted by -birthdate: %s", body)
		}
	}
	_, _, body = fetch(t, http.MethodGet, m.URL+"/Patient?_summary=count", nil, "")
	if b := decode(t, body); len(b.Entry) != 0 || b.Total == nil || *b.Total != 30 {
		t.Fatalf("_summary=count: %s", body)
	}
	status, _, body := fetch(t, http.MethodGet, m.URL+"/Patient?_sort=gender", nil, "")
	if status != 400 || !strings.Contains(string(body), "_sort") {
		t.Fatalf("an unsupported _sort: %d %s", status, body)
	}
	_, _, body = fetch(t, http.MethodGet, m.URL+"/Patient?_total=none", nil, "")
	if b := decode(t, body); b.Total != nil {
		t.Fatalf("_total=none: %s", body)
	}
	n := Start(t, Options{ID: "node-n", NoTotal: true})
	_, _, body = fetch(t, http.MethodGet, n.URL+"/Patient", nil, "")
	if b := decode(t, body); b.Total != nil || len(b.Entry) != 2 {
		t.Fatalf("NoTotal: %s", body)
	}
}

func TestAMemberHandlesUnknownParametersAsPreferSays(t *testing.T) {
	lenient := Start(t, Options{ID: "node-l"})
	strict := Start(t, Options{ID: "node-s", Handling: "strict"})
	cases := []struct {
		name    string
		m       *Server
		prefer  string
		status  int
		outcome bool // a warning entry
	}{
		{"a lenient member ignores it with a warning entry", lenient, "", 200, true},
		{"a lenient member asked for strict handling refuses it", lenient, "handling=strict", 400, false},
		{"a strict member refuses it", strict, "", 400, false},
		{"a strict member asked for lenient handling ignores it", strict, "return=minimal, handling=lenient", 200, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			if c.prefer != "" {
				h.Set("Prefer", c.prefer)
			}
			status, _, body := fetch(t, http.MethodGet, c.m.URL+"/Patient?colour=blue", h, "")
			if status != c.status || !strings.Contains(string(body), `colour`) {
				t.Fatalf("%d %s", status, body)
			}
			if c.outcome {
				b := decode(t, body)
				last := b.Entry[len(b.Entry)-1]
				if last.Search.Mode != "outcome" || last.Resource.ResourceType != "OperationOutcome" || b.matches() != 2 {
					t.Fatalf("%s", body)
				}
			}
		})
	}
}

func TestAMemberBuildsItsURLsOnTheForwardedBase(t *testing.T) {
	m := Start(t, Options{ID: "node-a", Entries: 25})
	for _, c := range []struct {
		name   string
		header http.Header
		want   string
	}{
		{"X-Forwarded-*", http.Header{"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"gw.example"}, "X-Forwarded-Prefix": {"/api/nodes/node-a/fhir"}}, "https://gw.example/api/nodes/node-a/fhir"},
		{"Forwarded", http.Header{"Forwarded": {`for=10.0.0.1;proto=https;host="gw.example:8443"`}}, "https://gw.example:8443/fhir"},
		{"no header", nil, m.URL},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, body := fetch(t, http.MethodGet, m.URL+"/Patient", c.header, "")
			b := decode(t, body)
			if !strings.HasPrefix(b.next(), c.want+"/Patient?") || !strings.HasPrefix(b.Entry[0].FullURL, c.want+"/Patient/") {
				t.Fatalf("links %+v, entry %s, want them under %s", b.Link, b.Entry[0].FullURL, c.want)
			}
			status, h, _ := fetch(t, http.MethodPost, m.URL+"/Patient", c.header, `{"resourceType":"Patient"}`)
			if status != 201 || !strings.HasPrefix(h.Get("Location"), c.want+"/Patient/new-") || h.Get("Content-Location") != h.Get("Location") {
				t.Fatalf("create: %d %v", status, h)
			}
		})
	}
}

func TestAMemberAnswersXMLWith406(t *testing.T) {
	m := Start(t, Options{})
	for _, c := range []struct {
		accept, query string
		status        int
	}{
		{"application/fhir+xml", "", 406},
		{"application/xml, text/xml", "", 406},
		{"", "_format=xml", 406},
		{"application/fhir+xml;q=1, application/fhir+json;q=0.5", "", 200},
		{"*/*", "", 200},
		{"", "_format=json", 200},
	} {
		h := http.Header{}
		if c.accept != "" {
			h.Set("Accept", c.accept)
		}
		if status, _, body := fetch(t, http.MethodGet, m.URL+"/Patient?"+c.query, h, ""); status != c.status {
			t.Errorf("Accept %q, %q: %d %s", c.accept, c.query, status, body)
		}
	}
}

func TestAMemberSearchesAFormBodyAsItsQuery(t *testing.T) {
	m := Start(t, Options{ID: "node-a", Entries: 5, NumericIDs: true})
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	_, _, post := fetch(t, http.MethodPost, m.URL+"/Patient/_search", h, url.Values{"_count": {"2"}, "_sort": {"_id"}}.Encode())
	_, _, get := fetch(t, http.MethodGet, m.URL+"/Patient?_count=2&_sort=_id", nil, "")
	pb, gb := decode(t, post), decode(t, get)
	if len(pb.Entry) != 2 || pb.Entry[0].Resource.ID != gb.Entry[0].Resource.ID || pb.Entry[1].Resource.ID != gb.Entry[1].Resource.ID || pb.next() == "" {
		t.Fatalf("POST %s\nGET %s", post, get)
	}
	if got := m.LastRequest(); got.Method != http.MethodGet {
		t.Fatalf("last %+v", got)
	}
	if log := m.Log(); len(log) != 2 || string(log[0].Body) != "_count=2&_sort=_id" {
		t.Fatalf("log %+v", log)
	}
}

func TestAMemberDescribesItselfAndRefusesTypesItDoesNotServe(t *testing.T) {
	m := Start(t, Options{ResourceTypes: []string{"Patient"}, OmitSearchParams: []string{"gender"}})
	_, _, body := fetch(t, http.MethodGet, m.URL+"/metadata", nil, "")
	if !strings.Contains(string(body), `"type":"Patient"`) || strings.Contains(string(body), `"gender"`) || strings.Contains(string(body), "Observation") {
		t.Fatalf("metadata %s", body)
	}
	if status, _, _ := fetch(t, http.MethodGet, m.URL+"/Observation", nil, ""); status != 404 {
		t.Fatalf("a type it does not serve answered %d", status)
	}
	if status, _, _ := fetch(t, http.MethodGet, m.URL+"/Patient?gender=x", http.Header{"Prefer": {"handling=strict"}}, ""); status != 400 {
		t.Fatalf("an omitted parameter under strict handling answered %d", status)
	}
}
