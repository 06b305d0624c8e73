package pixmanager_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
	"github.com/ferrofed/ferrofed/test/doubles/pixmanager"
)

const (
	red   = "urn:oid:1.3.6.1.4.1.21367.13.20.1000"
	green = "urn:oid:1.3.6.1.4.1.21367.13.20.2000"
	blue  = "urn:oid:1.3.6.1.4.1.21367.13.20.3000"
)

// published is the guide's cross-reference set of Alice Mohr: its Patient examples,
// read from testdata.
func published(t *testing.T) pixmanager.Set {
	t.Helper()
	var set pixmanager.Set
	for _, name := range []string{"Red", "Blue", "Green"} {
		b, err := os.ReadFile(filepath.Join("testdata", "ihe", "Patient-MohrAlice-"+name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			ID         string `json:"id"`
			Identifier []struct {
				System string `json:"system"`
				Value  string `json:"value"`
			} `json:"identifier"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		rec := pixmanager.Record{ID: p.ID}
		for _, id := range p.Identifier {
			rec.Identifiers = append(rec.Identifiers, pixmanager.Identifier{System: id.System, Value: id.Value})
		}
		set = append(set, rec)
	}
	return set
}

func get(t *testing.T, u string, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// param is one parameter of a Parameters, as a binding reads it.
type param struct{ Name, Ref, System, Value string }

func jsonParams(t *testing.T, body []byte) []param {
	t.Helper()
	var p struct {
		ResourceType string `json:"resourceType"`
		Parameter    []struct {
			Name           string `json:"name"`
			ValueReference *struct {
				Reference string `json:"reference"`
			} `json:"valueReference"`
			ValueIdentifier *struct {
				System string `json:"system"`
				Value  string `json:"value"`
			} `json:"valueIdentifier"`
		} `json:"parameter"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.ResourceType != "Parameters" {
		t.Fatalf("not a Parameters (%v): %s", err, body)
	}
	var out []param
	for _, x := range p.Parameter {
		q := param{Name: x.Name}
		if x.ValueReference != nil {
			q.Ref = x.ValueReference.Reference
		}
		if x.ValueIdentifier != nil {
			q.System, q.Value = x.ValueIdentifier.System, x.ValueIdentifier.Value
		}
		out = append(out, q)
	}
	return out
}

// xmlParameters is a FHIR XML Parameters.
type xmlParameters struct {
	XMLName   xml.Name `xml:"http://hl7.org/fhir Parameters"`
	Parameter []struct {
		Name struct {
			Value string `xml:"value,attr"`
		} `xml:"name"`
		ValueString *struct {
			Value string `xml:"value,attr"`
		} `xml:"valueString"`
		ValueReference *struct {
			Reference struct {
				Value string `xml:"value,attr"`
			} `xml:"reference"`
		} `xml:"valueReference"`
		ValueIdentifier *struct {
			System struct {
				Value string `xml:"value,attr"`
			} `xml:"system"`
			Value struct {
				Value string `xml:"value,attr"`
			} `xml:"value"`
		} `xml:"valueIdentifier"`
	} `xml:"parameter"`
}

func readXML(t *testing.T, name string) xmlParameters {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ihe", name))
	if err != nil {
		t.Fatal(err)
	}
	var p xmlParameters
	if err := xml.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

func xmlParams(p xmlParameters) []param {
	var out []param
	for _, x := range p.Parameter {
		q := param{Name: x.Name.Value}
		if x.ValueReference != nil {
			q.Ref = x.ValueReference.Reference.Value
		}
		if x.ValueIdentifier != nil {
			q.System, q.Value = x.ValueIdentifier.System.Value, x.ValueIdentifier.Value.Value
		}
		out = append(out, q)
	}
	return out
}

func sorted(ps []param) []param {
	ps = slices.Clone(ps)
	slices.SortFunc(ps, func(a, b param) int {
		return strings.Compare(a.Name+a.Ref+a.System+a.Value, b.Name+b.Ref+b.System+b.Value)
	})
	return ps
}

var getLine = regexp.MustCompile(`GET \[base\](\S+)`)

// TestPublishedExamples runs the guide's requests against a manager holding the
// guide's Patients and compares the answers with the guide's responses (in any
// order, as ITI-83 allows), each answer valid R4 JSON.
func TestPublishedExamples(t *testing.T) {
	s := pixmanager.Start(t, pixmanager.Options{Sets: []pixmanager.Set{published(t)}})
	for _, name := range []string{"red-all", "red-to-blue"} {
		t.Run("the intro's GET of "+name+" answers the guide's response", func(t *testing.T) {
			intro, err := os.ReadFile(filepath.Join("testdata", "ihe", "Parameters-pixm-request-mohralice-"+name+"-intro.md"))
			if err != nil {
				t.Fatal(err)
			}
			m := getLine.FindSubmatch(intro)
			if m == nil {
				t.Fatalf("no GET line in the intro: %s", intro)
			}
			u, err := url.Parse(strings.TrimPrefix(string(m[1]), "/fhir"))
			if err != nil {
				t.Fatal(err)
			}
			// The guide writes its query unescaped ('|' in a token); send it escaped.
			status, body := get(t, s.URL+u.Path+"?"+u.Query().Encode())
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			if err := fhirschema.Validate(body); err != nil {
				t.Fatalf("not valid R4: %v\n%s", err, body)
			}
			want := xmlParams(readXML(t, "pixm-response-mohralice-"+name+".xml"))
			if got := jsonParams(t, body); !slices.Equal(sorted(got), sorted(want)) {
				t.Fatalf("got  %v\nwant %v", sorted(got), sorted(want))
			}
		})
	}
	t.Run("the XML requests' parameters are accepted", func(t *testing.T) {
		for _, name := range []string{"pixm-request-mohralice-red-all.xml", "pixm-request-mohralice-red-to-blue.xml"} {
			q := url.Values{}
			for _, p := range readXML(t, name).Parameter {
				q.Add(p.Name.Value, p.ValueString.Value)
			}
			format := q.Get("_format")
			q.Del("_format")
			status, body := get(t, s.URL+"/Patient/$ihe-pix?"+q.Encode())
			if status != http.StatusOK {
				t.Fatalf("%s: status %d: %s", name, status, body)
			}
			// Every record but the source's that has an identifier in a requested domain.
			want := 2
			if got := len(jsonParams(t, body)); got != 2*want {
				t.Errorf("%s: %d parameters, want %d", name, got, 2*want)
			}
			if format != "" {
				q.Set("_format", format)
				if status, _ := get(t, s.URL+"/Patient/$ihe-pix?"+q.Encode()); status != http.StatusNotAcceptable {
					t.Errorf("%s with _format %s: status %d, want 406", name, format, status)
				}
			}
		}
	})
	t.Run("an unknown identifier is the guide's not-found OperationOutcome", func(t *testing.T) {
		fsh, err := os.ReadFile(filepath.Join("testdata", "ihe", "ex-error-not-found.fsh"))
		if err != nil {
			t.Fatal(err)
		}
		text := regexp.MustCompile(`details.text = "([^"]+)"`).FindSubmatch(fsh)
		code := regexp.MustCompile(`code = #(\S+)`).FindSubmatch(fsh)
		severity := regexp.MustCompile(`severity = #(\S+)`).FindSubmatch(fsh)
		status, body := get(t, s.URL+"/Patient/$ihe-pix?"+url.Values{"sourceIdentifier": {red + "|NOBODY"}}.Encode())
		if status != http.StatusNotFound {
			t.Fatalf("status %d", status)
		}
		if err := fhirschema.Validate(body); err != nil {
			t.Fatal(err)
		}
		var oo struct {
			Issue []struct{ Severity, Code, Diagnostics string } `json:"issue"`
		}
		if err := json.Unmarshal(body, &oo); err != nil || len(oo.Issue) != 1 {
			t.Fatalf("%v %s", err, body)
		}
		is := oo.Issue[0]
		if is.Severity != string(severity[1]) || is.Code != string(code[1]) || !strings.HasPrefix(is.Diagnostics, string(text[1])) || !strings.Contains(is.Diagnostics, "PIXM-BODY") {
			t.Fatalf("issue %+v, want %s/%s %q and the marker", is, severity[1], code[1], text[1])
		}
	})
}

// fixtures: Alice in red, blue and green; Bob in red only; the yellow domain is known
// with nobody in it.
var fixtures = []pixmanager.Set{
	{
		{ID: "a-red", Identifiers: []pixmanager.Identifier{{System: red, Value: "A1"}, {System: red, Value: "A1-old"}}},
		{ID: "a-blue", Identifiers: []pixmanager.Identifier{{System: blue, Value: "B1", Assigner: "Blue Hospital"}}},
		{ID: "a-green", Identifiers: []pixmanager.Identifier{{System: green, Value: "G1"}}},
	},
	{{ID: "b-red", Identifiers: []pixmanager.Identifier{{System: red, Value: "A2"}}}},
}

func TestResolve(t *testing.T) {
	s := pixmanager.Start(t, pixmanager.Options{Sets: fixtures, Domains: []string{"urn:yellow"}})
	ids := func(ids ...pixmanager.Identifier) []pixmanager.Identifier { return ids }
	for _, tc := range []struct {
		name     string
		source   []string
		targets  []string
		ids      []string
		idents   []pixmanager.Identifier
		status   int
		diagnose string
	}{
		{name: "every domain without targetSystem, never the source", source: []string{red + "|A1"},
			ids: []string{"a-blue", "a-green"}, idents: ids(pixmanager.Identifier{System: red, Value: "A1-old"}, pixmanager.Identifier{System: blue, Value: "B1", Assigner: "Blue Hospital"}, pixmanager.Identifier{System: green, Value: "G1"})},
		{name: "one targetSystem filters the answer", source: []string{red + "|A1"}, targets: []string{blue},
			ids: []string{"a-blue"}, idents: ids(pixmanager.Identifier{System: blue, Value: "B1", Assigner: "Blue Hospital"})},
		{name: "repeated and comma-separated targetSystems add up", source: []string{blue + "|B1"}, targets: []string{red, green + "," + blue},
			ids: []string{"a-red", "a-green"}, idents: ids(pixmanager.Identifier{System: red, Value: "A1"}, pixmanager.Identifier{System: red, Value: "A1-old"}, pixmanager.Identifier{System: green, Value: "G1"})},
		{name: "the source's own other identifiers in the domain, no targetId for its record", source: []string{red + "|A1"}, targets: []string{red},
			idents: ids(pixmanager.Identifier{System: red, Value: "A1-old"})},
		{name: "a known patient with nobody in the domain is an empty answer", source: []string{red + "|A2"}, targets: []string{blue, "urn:yellow"}},
		{name: "an unknown identifier in a known domain is a 404", source: []string{red + "|ZZ"}, status: 404, diagnose: "sourceIdentifier Patient Identifier not found"},
		{name: "an unknown source domain is a 400", source: []string{"urn:nowhere|A1"}, status: 400, diagnose: "sourceIdentifier Assigning Authority not found"},
		{name: "one unknown targetSystem fails the whole call with a 403", source: []string{red + "|A1"}, targets: []string{blue, "urn:nowhere"}, status: 403, diagnose: "targetSystem not found"},
		{name: "a sourceIdentifier without a bar is a 400", source: []string{"A1"}, status: 400, diagnose: "sourceIdentifier must be"},
		{name: "a sourceIdentifier without a value is a 400", source: []string{red + "|"}, status: 400, diagnose: "sourceIdentifier must be"},
		{name: "no sourceIdentifier is a 400", status: 400, diagnose: "sourceIdentifier must be given once"},
		{name: "two sourceIdentifiers are a 400", source: []string{red + "|A1", red + "|A2"}, status: 400, diagnose: "sourceIdentifier must be given once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, e := s.Resolve(tc.source, tc.targets)
			if tc.status != 0 {
				if e == nil || e.Status != tc.status || !strings.HasPrefix(e.Text, tc.diagnose) {
					t.Fatalf("got %v, want %d %q", e, tc.status, tc.diagnose)
				}
				return
			}
			if e != nil {
				t.Fatal(e)
			}
			if !slices.Equal(res.IDs, tc.ids) || !slices.Equal(res.Identifiers, tc.idents) {
				t.Fatalf("got %+v, want %v %v", res, tc.ids, tc.idents)
			}
		})
	}
}

func TestAnswers(t *testing.T) {
	s := pixmanager.Start(t, pixmanager.Options{Sets: fixtures, Marker: "M-42"})
	q := func(v url.Values) string { return s.URL + "/Patient/$ihe-pix?" + v.Encode() }
	t.Run("an answer is a valid Parameters with the assigner's display", func(t *testing.T) {
		status, body := get(t, q(url.Values{"sourceIdentifier": {red + "|A1"}, "targetSystem": {blue}}), "Accept", "application/fhir+json")
		if status != 200 || !strings.Contains(string(body), `"assigner":{"display":"Blue Hospital"}`) {
			t.Fatalf("%d %s", status, body)
		}
		if err := fhirschema.Validate(body); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("an empty answer is a valid Parameters without parameters", func(t *testing.T) {
		status, body := get(t, q(url.Values{"sourceIdentifier": {red + "|A2"}, "targetSystem": {blue}}))
		if status != 200 || string(body) != `{"resourceType":"Parameters"}` {
			t.Fatalf("%d %s", status, body)
		}
		if err := fhirschema.Validate(body); err != nil {
			t.Fatal(err)
		}
	})
	for _, tc := range []struct {
		name, url string
		header    []string
		status    int
	}{
		{"an error is an OperationOutcome with the marker", q(url.Values{"sourceIdentifier": {"A1"}}), nil, 400},
		{"an XML Accept is a 406", q(url.Values{"sourceIdentifier": {red + "|A1"}}), []string{"Accept", "application/fhir+xml"}, 406},
		{"another path is a 404", s.URL + "/Patient?identifier=x", nil, 404},
		{"the request log keeps the query", q(url.Values{"sourceIdentifier": {red + "|A1"}, "targetSystem": {blue, green}}), nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(t, tc.url, tc.header...)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if status >= 400 && !strings.Contains(string(body), "M-42") {
				t.Fatalf("no marker: %s", body)
			}
			if err := fhirschema.Validate(body); err != nil {
				t.Fatal(err)
			}
		})
	}
	r, ok := s.Last()
	if !ok || r.Method != "GET" || r.Path != pixmanager.Path || !slices.Equal(r.Query["targetSystem"], []string{blue, green}) {
		t.Fatalf("last request %+v", r)
	}
	t.Run("a POST is a 405", func(t *testing.T) {
		resp, err := http.Post(q(url.Values{"sourceIdentifier": {red + "|A1"}}), "application/fhir+json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
}

func TestOpenCR(t *testing.T) {
	s := pixmanager.Start(t, pixmanager.Options{Sets: fixtures, OpenCR: true})
	status, body := get(t, s.URL+"/Patient/$ihe-pix?"+url.Values{"sourceIdentifier": {red + "|ZZ"}}.Encode())
	if status != 200 || string(body) != `{"resourceType":"Parameters"}` {
		t.Fatalf("unknown identifier: %d %s, want 200 and an empty Parameters", status, body)
	}
	status, body = get(t, s.URL+"/Patient/$ihe-pix?"+url.Values{"sourceIdentifier": {red + "|A1"}, "targetSystem": {blue}}.Encode())
	if status != 200 || !strings.Contains(string(body), `"valueReference":"Patient/a-blue"`) {
		t.Fatalf("%d %s, want a bare string valueReference", status, body)
	}
	// R4's JSON schema does not type its datatypes as objects, so it takes a string
	// Reference; a reader that wants a Reference object does not.
	var p struct {
		Parameter []struct {
			ValueReference *struct{ Reference string } `json:"valueReference"`
		} `json:"parameter"`
	}
	if err := json.Unmarshal(body, &p); err == nil {
		t.Fatal("a Reference reader took the bare string")
	}
}

func TestKnobs(t *testing.T) {
	ok := "/Patient/$ihe-pix?" + url.Values{"sourceIdentifier": {red + "|A1"}}.Encode()
	t.Run("status 503 is an OperationOutcome with the marker", func(t *testing.T) {
		s := pixmanager.Start(t, pixmanager.Options{Sets: fixtures, Knobs: double.Knobs{Status: 503}})
		status, body := get(t, s.URL+ok)
		if status != 503 || !strings.Contains(string(body), "PIXM-BODY") || fhirschema.Validate(body) != nil {
			t.Fatalf("%d %s", status, body)
		}
	})
	t.Run("malformed is a 200 no JSON reader takes, with the marker", func(t *testing.T) {
		s := pixmanager.Start(t, pixmanager.Options{Sets: fixtures, Knobs: double.Knobs{Fault: double.FaultMalformed}})
		status, body := get(t, s.URL+ok)
		if status != 200 || json.Valid(body) || !strings.Contains(string(body), "PIXM-BODY") {
			t.Fatalf("%d %s", status, body)
		}
	})
	t.Run("refused, hang and reset", func(t *testing.T) {
		s := pixmanager.Start(t, pixmanager.Options{Sets: fixtures, Knobs: double.Knobs{Fault: double.FaultRefused}})
		c := &http.Client{Timeout: 200 * time.Millisecond}
		if resp, err := c.Get(s.URL + ok); !errors.Is(err, syscall.ECONNREFUSED) {
			if err == nil {
				resp.Body.Close()
			}
			t.Fatalf("refused: %v", err)
		}
		if err := s.SetKnobs(double.Knobs{Fault: double.FaultHang}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+ok, nil)
		if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.DeadlineExceeded) { //nolint:bodyclose // no answer
			t.Fatalf("hang: %v", err)
		}
		if err := s.SetKnobs(double.Knobs{Fault: double.FaultReset}); err != nil {
			t.Fatal(err)
		}
		resp, err := c.Get(s.URL + ok)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.ReadAll(resp.Body); err == nil {
			t.Fatal("reset: the whole body was read")
		}
	})
}
