package pdqsupplier_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
	"github.com/ferrofed/ferrofed/test/doubles/pdqsupplier"
)

func read(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ihe", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type answer struct {
	status int
	body   []byte
}

func do(t *testing.T, method, u, contentType, body string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, b}
}

// bundle is what a binding reads of a searchset.
type bundle struct {
	ResourceType string `json:"resourceType"`
	Type         string `json:"type"`
	Total        *int   `json:"total"`
	Link         []struct{ Relation, URL string }
	Entry        []struct {
		FullURL  string          `json:"fullUrl"`
		Resource json.RawMessage `json:"resource"`
		Search   *struct{ Mode string }
	} `json:"entry"`
}

func readBundle(t *testing.T, a answer) bundle {
	t.Helper()
	if a.status != 200 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	if err := fhirschema.Validate(a.body); err != nil {
		t.Fatalf("not valid R4: %v\n%s", err, a.body)
	}
	var b bundle
	if err := json.Unmarshal(a.body, &b); err != nil || b.ResourceType != "Bundle" || b.Type != "searchset" || b.Total == nil {
		t.Fatalf("not a searchset with a total (%v): %s", err, a.body)
	}
	return b
}

func sameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil || !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestPublishedExamples(t *testing.T) {
	guide := []json.RawMessage{read(t, "ex-patient.json"), read(t, "ex-patient-mothers-maiden-name.json")}
	s := pdqsupplier.Start(t, pdqsupplier.Options{Resources: guide})
	published := read(t, "ex-QueryPatientResourceResponseMessage.json")
	if err := fhirschema.Validate(published); err != nil {
		t.Fatalf("the rendered example is not valid R4: %v", err)
	}
	var want bundle
	if err := json.Unmarshal(published, &want); err != nil {
		t.Fatal(err)
	}
	t.Run("the example's self link answers the example's searchset", func(t *testing.T) {
		self := want.Link[0].URL
		_, query, _ := strings.Cut(self, "?")
		got := readBundle(t, do(t, "GET", s.URL+"/Patient?"+query, "", ""))
		if *got.Total != *want.Total || len(got.Entry) != len(want.Entry) {
			t.Fatalf("total %d entries %d, want %d %d", *got.Total, len(got.Entry), *want.Total, len(want.Entry))
		}
		for i := range want.Entry {
			sameJSON(t, got.Entry[i].Resource, want.Entry[i].Resource)
			if path.Base(got.Entry[i].FullURL) != path.Base(want.Entry[i].FullURL) || !strings.HasSuffix(got.Entry[i].FullURL, "/Patient/ex-patient") {
				t.Errorf("fullUrl %s, want …/Patient/%s", got.Entry[i].FullURL, path.Base(want.Entry[i].FullURL))
			}
		}
	})
	t.Run("the POST form of the same search answers the same", func(t *testing.T) {
		_, query, _ := strings.Cut(want.Link[0].URL, "?")
		got := readBundle(t, do(t, "POST", s.URL+"/Patient/_search", "application/x-www-form-urlencoded", query))
		if *got.Total != 1 {
			t.Fatalf("total %d", *got.Total)
		}
	})
	t.Run("the transaction's GET example is accepted, with its Accept header", func(t *testing.T) {
		doc := string(read(t, "ITI-78.md"))
		m := regexp.MustCompile(`GET https://server.example.com/fhir(/Patient\?\S+)\nAccept: (.+)`).FindStringSubmatch(doc)
		if m == nil {
			t.Fatal("no GET example in ITI-78.md")
		}
		// The guide's patients hold no Alice Mohr (Case 3); one of ours does (Case 1).
		if got := readBundle(t, do(t, "GET", s.URL+m[1], "", "", "Accept", m[2])); *got.Total != 0 || len(got.Entry) != 0 {
			t.Fatalf("guide's fixtures: total %d", *got.Total)
		}
		alice := pdqsupplier.Start(t, pdqsupplier.Options{Resources: guide, Patients: []pdqsupplier.Patient{{ID: "alice", Family: "MOHR", Given: []string{"ALICE"}, Gender: "female"}}})
		if got := readBundle(t, do(t, "GET", alice.URL+m[1], "", "", "Accept", m[2])); *got.Total != 1 || !strings.HasSuffix(got.Entry[0].FullURL, "/Patient/alice") {
			t.Fatalf("total %d %+v", *got.Total, got.Entry)
		}
	})
	t.Run("the domain examples: known domains filter, an unknown one is Case 4's 404", func(t *testing.T) {
		doc := string(read(t, "ITI-78.md"))
		var queries []string
		for _, m := range regexp.MustCompile(`[?&](\S*identifier=urn:oid:\S+)`).FindAllStringSubmatch(doc, -1) {
			queries = append(queries, m[1])
		}
		if len(queries) != 2 {
			t.Fatalf("domain examples %v", queries)
		}
		for _, q := range queries {
			if a := do(t, "GET", s.URL+"/Patient?"+q, "", ""); a.status != 404 || !strings.Contains(string(a.body), "targetSystem not found") || fhirschema.Validate(a.body) != nil {
				t.Errorf("%s against unknown domains: %d %s", q, a.status, a.body)
			}
		}
		known := pdqsupplier.Start(t, pdqsupplier.Options{Resources: guide, Domains: []string{"urn:oid:1.2.3", "urn:oid:4.5.6", "urn:oid:1.2.3.4.5"}})
		for _, q := range queries {
			if got := readBundle(t, do(t, "GET", known.URL+"/Patient?"+q, "", "")); *got.Total != 0 {
				t.Errorf("%s: total %d, want 0 (no patient holds those domains)", q, *got.Total)
			}
		}
	})
}

const (
	red  = "urn:oid:1.3.6.1.4.1.21367.13.20.1000"
	blue = "urn:oid:1.3.6.1.4.1.21367.13.20.3000"
)

// fixtures: Alice Mohr with a merged older record, Alissa Mohr, Bob Brown.
var fixtures = []pdqsupplier.Patient{
	{ID: "alice", Identifiers: []pdqsupplier.Identifier{{System: red, Value: "IHERED-994"}, {System: blue, Value: "IHEBLUE-994"}}, Family: "MOHR", Given: []string{"ALICE"}, Gender: "female", BirthDate: "1958-01-30"},
	{ID: "alice-old", Identifiers: []pdqsupplier.Identifier{{System: red, Value: "IHERED-m94"}}, Family: "MOHR", Given: []string{"MAIDEN"}, Gender: "female", BirthDate: "1958-01-30", ReplacedBy: "alice"},
	{ID: "alissa", Identifiers: []pdqsupplier.Identifier{{System: red, Value: "IHERED-995"}}, Family: "Mohr", Given: []string{"Alissa"}, Gender: "female", BirthDate: "1958-02-01"},
	{ID: "bob", Identifiers: []pdqsupplier.Identifier{{System: blue, Value: "B1"}}, Family: "Brown", Given: []string{"Bob", "Robert"}, Gender: "male", BirthDate: "1970"},
}

func TestMatch(t *testing.T) {
	s := pdqsupplier.Start(t, pdqsupplier.Options{Patients: fixtures, Domains: []string{"urn:yellow"}})
	for _, tc := range []struct {
		name, query string
		want        []string
		status      int
		text        string
	}{
		{name: "family is a prefix without case", query: "family=mo", want: []string{"alice", "alice-old", "alissa"}},
		{name: "family:exact is the whole value with case", query: "family:exact=Mohr", want: []string{"alissa"}},
		{name: "given matches any given name", query: "given=rob", want: []string{"bob"}},
		{name: "a comma is OR", query: "given=alice,alissa", want: []string{"alice", "alissa"}},
		{name: "a repeated parameter is AND", query: "family=mohr&family=MOHR&given=AL", want: []string{"alice", "alissa"}},
		{name: "family and gender", query: "family=MOHR&gender=male"},
		{name: "birthdate and family", query: "family=mohr&birthdate=1958-01-30", want: []string{"alice", "alice-old"}},
		{name: "birthdate at month precision", query: "birthdate=1958-02", want: []string{"alissa"}},
		{name: "birthdate ge and lt", query: "birthdate=ge1958-01-31&birthdate=lt1971", want: []string{"alissa", "bob"}},
		{name: "birthdate ne", query: "birthdate=ne1958", want: []string{"bob"}},
		{name: "identifier system|value", query: "identifier=" + red + "|IHERED-994", want: []string{"alice"}},
		{name: "identifier value in any system", query: "identifier=B1", want: []string{"bob"}},
		{name: "identifier of another system does not match", query: "identifier=" + red + "|B1"},
		{name: "a domain only: the patients holding one of its identifiers", query: "identifier=" + blue + "|", want: []string{"alice", "bob"}},
		{name: "a known domain nobody holds", query: "identifier=urn:yellow|"},
		{name: "active=true leaves the merged record out", query: "family:exact=MOHR&active=true", want: []string{"alice"}},
		{name: "active=false is the merged record", query: "active=false", want: []string{"alice-old"}},
		{name: "_id", query: "_id=bob,alissa", want: []string{"alissa", "bob"}},
		{name: "no criteria is every patient", want: []string{"alice", "alice-old", "alissa", "bob"}},
		{name: "an unknown domain is a 404", query: "identifier=urn:nowhere|", status: 404, text: "targetSystem not found"},
		{name: "an unknown parameter is a 400 naming it", query: "name=x", status: 400, text: `unknown search parameter "name"`},
		{name: "a modifier other than :exact is a 400", query: "family:contains=oh", status: 400, text: "modifier :contains of family"},
		{name: "a token with a modifier is a 400", query: "gender:not=male", status: 400, text: "modifier :not of gender"},
		{name: "a bad date is a 400", query: "birthdate=30-01-1958", status: 400, text: `birthdate "30-01-1958"`},
		{name: "a bad prefix is a 400", query: "birthdate=sa1958", status: 400, text: `birthdate "sa1958"`},
		{name: "a negative _count is a 400", query: "_count=-1", status: 400, text: "_count must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			q, e := s.Parse(v)
			if tc.status != 0 {
				if e == nil || e.Status != tc.status || !strings.Contains(e.Text, tc.text) {
					t.Fatalf("got %v, want %d %q", e, tc.status, tc.text)
				}
				return
			}
			if e != nil {
				t.Fatal(e)
			}
			if got := s.Match(q); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAnswers(t *testing.T) {
	s := pdqsupplier.Start(t, pdqsupplier.Options{Patients: fixtures})
	t.Run("_count bounds the page, total counts every match, next goes on", func(t *testing.T) {
		b := readBundle(t, do(t, "GET", s.URL+"/Patient?family=mohr&_count=2", "", ""))
		if *b.Total != 3 || len(b.Entry) != 2 || len(b.Link) != 2 || b.Link[1].Relation != "next" || b.Entry[0].Search.Mode != "match" {
			t.Fatalf("%+v", b)
		}
		u, err := url.Parse(b.Link[1].URL)
		if err != nil {
			t.Fatal(err)
		}
		n := readBundle(t, do(t, "GET", s.URL+"/Patient?"+u.RawQuery, "", ""))
		if len(n.Entry) != 1 || !strings.HasSuffix(n.Entry[0].FullURL, "/Patient/alissa") || len(n.Link) != 1 {
			t.Fatalf("next page %+v", n)
		}
	})
	t.Run("the merged record is answered with active false and its replaced-by link", func(t *testing.T) {
		b := readBundle(t, do(t, "GET", s.URL+"/Patient?identifier="+url.QueryEscape(red+"|IHERED-m94"), "", ""))
		var p struct {
			Active *bool
			Link   []struct {
				Other struct{ Reference string }
				Type  string
			}
		}
		if err := json.Unmarshal(b.Entry[0].Resource, &p); err != nil || p.Active == nil || *p.Active || len(p.Link) != 1 || p.Link[0].Type != "replaced-by" || p.Link[0].Other.Reference != "Patient/alice" {
			t.Fatalf("%s", b.Entry[0].Resource)
		}
	})
	t.Run("a domain only returns only that domain's identifiers", func(t *testing.T) {
		b := readBundle(t, do(t, "GET", s.URL+"/Patient?_id=alice&identifier="+url.QueryEscape(blue+"|"), "", ""))
		if got := string(b.Entry[0].Resource); strings.Contains(got, red) || !strings.Contains(got, "IHEBLUE-994") {
			t.Fatalf("%s", got)
		}
	})
	t.Run("_count=0 is the total alone", func(t *testing.T) {
		b := readBundle(t, do(t, "GET", s.URL+"/Patient?_count=0", "", ""))
		if *b.Total != 4 || len(b.Entry) != 0 {
			t.Fatalf("%+v", b)
		}
	})
	t.Run("every answer carries the marker", func(t *testing.T) {
		if a := do(t, "GET", s.URL+"/Patient?family=zz", "", ""); !strings.Contains(string(a.body), "PDQM-BODY") {
			t.Fatalf("%s", a.body)
		}
	})
	for _, tc := range []struct {
		name, method, path, ctype, body string
		header                          []string
		status                          int
	}{
		{"a read of a known Patient", "GET", "/Patient/bob", "", "", nil, 200},
		{"a read of an unknown Patient is a 404", "GET", "/Patient/zz", "", "", nil, 404},
		{"XML _format is Case 5's 406", "GET", "/Patient?family=x&_format=xml", "", "", nil, 406},
		{"an XML Accept is a 406", "GET", "/Patient", "", "", []string{"Accept", "application/fhir+xml"}, 406},
		{"a _search that is no form is a 400", "POST", "/Patient/_search", "application/json", "{}", nil, 400},
		{"another interaction is a 404", "DELETE", "/Patient/bob", "", "", nil, 404},
		{"another type is a 404", "GET", "/Observation", "", "", nil, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, tc.method, s.URL+tc.path, tc.ctype, tc.body, tc.header...)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			if err := fhirschema.Validate(a.body); err != nil {
				t.Fatal(err)
			}
			if a.status >= 400 && !strings.Contains(string(a.body), "PDQM-BODY") {
				t.Fatalf("no marker: %s", a.body)
			}
		})
	}
	r, ok := s.Last()
	if !ok || r.Method != "GET" || r.Path != "/fhir/Observation" {
		t.Fatalf("last %+v", r)
	}
	if s.Requests() < 10 || len(s.Log()) != s.Requests() {
		t.Fatalf("requests %d log %d", s.Requests(), len(s.Log()))
	}
}

func TestOptions(t *testing.T) {
	t.Run("OmitInactive leaves the merged record out", func(t *testing.T) {
		s := pdqsupplier.Start(t, pdqsupplier.Options{Patients: fixtures, OmitInactive: true})
		if b := readBundle(t, do(t, "GET", s.URL+"/Patient?family:exact=MOHR", "", "")); *b.Total != 1 {
			t.Fatalf("total %d", *b.Total)
		}
	})
	t.Run("UnknownDomainOK answers 200 with what it has", func(t *testing.T) {
		s := pdqsupplier.Start(t, pdqsupplier.Options{Patients: fixtures, UnknownDomainOK: true})
		if b := readBundle(t, do(t, "GET", s.URL+"/Patient?identifier=urn:nowhere|", "", "")); *b.Total != 0 {
			t.Fatalf("total %d", *b.Total)
		}
	})
	t.Run("a fixture that is no Patient is refused", func(t *testing.T) {
		if _, err := pdqsupplier.New(pdqsupplier.Options{Resources: []json.RawMessage{json.RawMessage(`{"resourceType":"Observation","id":"o"}`)}}); err == nil {
			t.Fatal("took an Observation")
		}
	})
}

func TestKnobs(t *testing.T) {
	t.Run("status 500 is an OperationOutcome with the marker", func(t *testing.T) {
		s := pdqsupplier.Start(t, pdqsupplier.Options{Patients: fixtures, Knobs: double.Knobs{Status: 500}})
		a := do(t, "GET", s.URL+"/Patient?family=x", "", "")
		if a.status != 500 || !strings.Contains(string(a.body), "PDQM-BODY") || fhirschema.Validate(a.body) != nil {
			t.Fatalf("%d %s", a.status, a.body)
		}
	})
	t.Run("malformed is a 200 no JSON reader takes", func(t *testing.T) {
		s := pdqsupplier.Start(t, pdqsupplier.Options{Patients: fixtures, Knobs: double.Knobs{Fault: double.FaultMalformed}})
		a := do(t, "GET", s.URL+"/Patient?family=x", "", "")
		if a.status != 200 || json.Valid(a.body) || !strings.Contains(string(a.body), "PDQM-BODY") {
			t.Fatalf("%d %s", a.status, a.body)
		}
	})
	t.Run("refused, hang, reset", func(t *testing.T) {
		s := pdqsupplier.Start(t, pdqsupplier.Options{Patients: fixtures, Knobs: double.Knobs{Fault: double.FaultRefused}})
		c := &http.Client{Timeout: 100 * time.Millisecond}
		try := func() error {
			resp, err := c.Get(s.URL + "/Patient?family=x")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, err = io.ReadAll(resp.Body)
			return err
		}
		if err := try(); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("refused: %v", err)
		}
		for _, f := range []double.Fault{double.FaultHang, double.FaultReset} {
			if err := s.SetKnobs(double.Knobs{Fault: f}); err != nil {
				t.Fatal(err)
			}
			if err := try(); err == nil {
				t.Fatalf("%s: a whole answer", f)
			}
		}
	})
}
