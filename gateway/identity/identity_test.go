package identity

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

func TestJoinAndSplit(t *testing.T) {
	for _, tc := range []struct {
		member, id, fid string
		ok              bool
	}{
		{"h", "2", "h.2", true},
		{"h", "a.b", "h.a.b", true},
		{"node-a", "0b6e4d1c-8f4e-4c8e-9c2e-2a4f0f5c7d11", "node-a.0b6e4d1c-8f4e-4c8e-9c2e-2a4f0f5c7d11", true},
		{"h", strings.Repeat("x", 63), "", false}, // 65 characters
		{"h", "", "", false},
		{"h", "a b", "", false},
	} {
		fid, ok := Join(tc.member, tc.id)
		if ok != tc.ok || (ok && fid != tc.fid) {
			t.Errorf("Join(%q, %q) = %q, %v; want %q, %v", tc.member, tc.id, fid, ok, tc.fid, tc.ok)
		}
		if !ok {
			continue
		}
		m, id, ok := Split(fid)
		if !ok || m != tc.member || id != tc.id {
			t.Errorf("Split(%q) = %q, %q, %v; want %q, %q", fid, m, id, ok, tc.member, tc.id)
		}
	}
	for _, bad := range []string{"2", ".2", "h.", "h.a b", ""} {
		if _, _, ok := Split(bad); ok {
			t.Errorf("Split(%q) ok, want not a federated id", bad)
		}
	}
}

func TestReference(t *testing.T) {
	r := Rewriter{Member: "h", Base: "http://10.0.0.7:8080/fhir", Route: "https://gw/nodes/h/fhir"}
	long := strings.Repeat("x", 63)
	for _, tc := range []struct{ in, want string }{
		{"Patient/2", "Patient/h.2"},
		{"Patient/2/_history/3", "Patient/h.2/_history/3"},
		{"http://10.0.0.7:8080/fhir/Patient/2", "Patient/h.2"},
		{"http://10.0.0.7:8080/fhir/Patient?identifier=x|1", "https://gw/nodes/h/fhir/Patient?identifier=x|1"},
		{"Patient/" + long, "https://gw/nodes/h/fhir/Patient/" + long},
		{"http://other.example/fhir/Patient/2", "http://other.example/fhir/Patient/2"},
		{"urn:uuid:0b6e4d1c-8f4e-4c8e-9c2e-2a4f0f5c7d11", "urn:uuid:0b6e4d1c-8f4e-4c8e-9c2e-2a4f0f5c7d11"},
		{"#p1", "#p1"},
		{"Patient?identifier=x|1", "Patient?identifier=x|1"},
		{"patient/2", "patient/2"},
	} {
		if got, _ := r.Reference(tc.in); got != tc.want {
			t.Errorf("Reference(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Resource rewrites the resource's own id and every reference at any depth, wherever
// they stand in the object, and nothing else: a "reference" inside a string, a
// contained resource's id and another server's URL are kept; the result is the same
// JSON but for those values.
func TestResource(t *testing.T) {
	r := Rewriter{Member: "h", Base: "http://10.0.0.7:8080/fhir", Route: "https://gw/nodes/h/fhir"}
	in := `{"resourceType":"Observation","subject":{"reference":"Patient/2"},"id":"7",` +
		`"note":[{"text":"see \"reference\": \"Patient/9\""}],` +
		`"contained":[{"resourceType":"Practitioner","id":"pr1"}],"performer":[{"reference":"#pr1"},{"reference" : "http://10.0.0.7:8080/fhir/Practitioner/5"}],` +
		`"hasMember":[{"reference":"http://other.example/fhir/Observation/1"}],"derivedFrom":[{"reference":"Observation/7\/_history\/1"}],` +
		`"extension":[{"url":"x","valueUri":"http://10.0.0.7:8080/fhir/Binary/1"}]}`
	want := `{"resourceType":"Observation","subject":{"reference":"Patient/h.2"},"id":"h.7",` +
		`"note":[{"text":"see \"reference\": \"Patient/9\""}],` +
		`"contained":[{"resourceType":"Practitioner","id":"pr1"}],"performer":[{"reference":"#pr1"},{"reference" : "Practitioner/h.5"}],` +
		`"hasMember":[{"reference":"http://other.example/fhir/Observation/1"}],"derivedFrom":[{"reference":"Observation/h.7/_history/1"}],` +
		`"extension":[{"url":"x","valueUri":"https://gw/nodes/h/fhir/Binary/1"}]}`
	got := r.Resource([]byte(in))
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("not JSON: %v: %s", err, got)
	}
	_ = json.Unmarshal([]byte(want), &b)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestTranslate(t *testing.T) {
	isMember := func(m string) bool { return m == "h" || m == "m" }
	const gw = "https://gw.example/base"
	for _, tc := range []struct {
		name      string
		params    []string
		only      map[string][]string
		ambiguous string
	}{
		{name: "no reference", params: []string{"code=x", "_count=5"}},
		{name: "a federated patient", params: []string{"patient=Patient%2Fh.2", "code=x"}, only: map[string][]string{"h": {"patient=Patient%2F2", "code=x"}}},
		{name: "a bare federated id", params: []string{"subject=h.2"}, only: map[string][]string{"h": {"subject=2"}}},
		{name: "the gateway's fullUrl", params: []string{"patient=" + "https%3A%2F%2Fgw.example%2Fbase%2Ffhir%2FPatient%2Fm.5"}, only: map[string][]string{"m": {"patient=Patient%2F5"}}},
		{name: "the routed URL", params: []string{"patient=https://gw.example/base/nodes/h/fhir/Patient/2"}, only: map[string][]string{"h": {"patient=Patient%2F2"}}},
		{name: "two members, OR", params: []string{"patient=Patient/h.2,Patient/m.3"}, only: map[string][]string{"h": {"patient=Patient%2F2"}, "m": {"patient=Patient%2F3"}}},
		{name: "two parameters, two members: none", params: []string{"patient=Patient/h.2", "encounter=Encounter/m.3"}, only: map[string][]string{}},
		{name: "_id", params: []string{"_id=h.2,h.3"}, only: map[string][]string{"h": {"_id=2%2C3"}}},
		{name: "a bare _id is no reference", params: []string{"_id=2"}},
		{name: "a local reference", params: []string{"patient=Patient/2"}, ambiguous: "patient"},
		{name: "a local bare id", params: []string{"subject=2"}, ambiguous: "subject"},
		{name: "a typed modifier", params: []string{"subject:Patient=2"}, ambiguous: "subject:Patient"},
		{name: "a local encounter", params: []string{"encounter=Encounter/9"}, ambiguous: "encounter"},
		{name: "an unknown member's dotted id", params: []string{"patient=Patient/x.2"}, ambiguous: "patient"},
		{name: "a chain", params: []string{"patient.identifier=sys%7C2"}},
		{name: "an identifier modifier", params: []string{"subject:identifier=sys%7C2"}},
		{name: "missing", params: []string{"subject:missing=true"}},
		{name: "another server", params: []string{"subject=http://other.example/fhir/Patient/2"}},
		{name: "a token that looks like an id", params: []string{"code=1234-5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Translate(tc.params, gw, isMember)
			if got.Ambiguous != tc.ambiguous {
				t.Errorf("ambiguous %q, want %q", got.Ambiguous, tc.ambiguous)
			}
			if !reflect.DeepEqual(got.Only, tc.only) {
				t.Errorf("only %v, want %v", got.Only, tc.only)
			}
		})
	}
}

// The entry a federated page carries is valid R4 (in a searchset Bundle), and its
// origin extension is the one the shipped StructureDefinition describes: the member as
// a string, the member's own id as an id.
func TestTheEntryIsValidR4AndItsOriginIsTheShippedOne(t *testing.T) {
	r := Rewriter{Member: "h", Base: "http://10.0.0.7/fhir", Route: "https://gw/nodes/h/fhir", GW: "https://gw"}
	entry, resource := r.Entry(fhir.Entry{Resource: json.RawMessage(`{"resourceType":"Observation","id":"7","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/2"}}`)},
		fhir.Head{ResourceType: "Observation", ID: "7"}, "match")
	bundle := `{"resourceType":"Bundle","type":"searchset","entry":[` + string(entry) + `]}`
	if err := fhirschema.Validate([]byte(bundle)); err != nil {
		t.Fatalf("not valid R4: %v: %s", err, bundle)
	}
	if !strings.Contains(string(resource), `"id":"h.7"`) || !strings.Contains(string(resource), `"reference":"Patient/h.2"`) {
		t.Fatalf("the resource within the entry: %s", resource)
	}
	raw, err := os.ReadFile("fhir/StructureDefinition-federation-origin.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := fhirschema.Validate(raw); err != nil {
		t.Fatalf("the StructureDefinition is not valid R4: %v", err)
	}
	var sd struct {
		URL          string `json:"url"`
		Differential struct {
			Element []struct {
				ID   string `json:"id"`
				Type []struct {
					Code string `json:"code"`
				} `json:"type"`
			} `json:"element"`
		} `json:"differential"`
	}
	if err := json.Unmarshal(raw, &sd); err != nil || sd.URL != OriginURL {
		t.Fatalf("url %q (%v)", sd.URL, err)
	}
	var e struct {
		Extension []struct {
			URL       string           `json:"url"`
			Extension []map[string]any `json:"extension"`
		} `json:"extension"`
	}
	if err := json.Unmarshal(entry, &e); err != nil || len(e.Extension) != 1 || e.Extension[0].URL != OriginURL {
		t.Fatalf("the entry's extension: %s (%v)", entry, err)
	}
	defined := map[string]string{}
	for _, el := range sd.Differential.Element {
		if name, ok := strings.CutPrefix(el.ID, "Extension.extension:"); ok && strings.HasSuffix(name, ".value[x]") {
			defined[strings.TrimSuffix(name, ".value[x]")] = el.Type[0].Code
		}
	}
	if len(defined) != len(e.Extension[0].Extension) {
		t.Fatalf("written %v, defined %v", e.Extension[0].Extension, defined)
	}
	for _, sub := range e.Extension[0].Extension {
		name, _ := sub["url"].(string)
		typ, ok := defined[name]
		if _, written := sub["value"+strings.ToUpper(typ[:1])+typ[1:]]; !ok || !written {
			t.Fatalf("sub-extension %v is not written as defined (%v)", sub, defined)
		}
	}
}

// A match takes the includes it refers to and those that refer to it, each once; the
// rest are left for another match, or for the end of the member's page.
func TestAttach(t *testing.T) {
	incs := []Include{
		NewInclude([]byte(`{"resource":{"resourceType":"Patient","id":"h.1"}}`), "Patient/h.1"),
		NewInclude([]byte(`{"resource":{"resourceType":"Provenance","id":"h.9","target":[{"reference":"Observation/h.7/_history/2"}]}}`), "Provenance/h.9"),
		NewInclude([]byte(`{"resource":{"resourceType":"Patient","id":"h.2"}}`), "Patient/h.2"),
	}
	match := []byte(`{"resource":{"resourceType":"Observation","id":"h.7","subject":{"reference":"Patient/h.1"}}}`)
	if got := Attach(match, "Observation/h.7", incs); len(got) != 2 || !incs[0].Sent || !incs[1].Sent || incs[2].Sent {
		t.Fatalf("attached %d: %+v", len(got), incs)
	}
	if got := Attach(match, "Observation/h.7", incs); len(got) != 0 {
		t.Fatalf("attached %d again", len(got))
	}
	if rest := Unsent(incs); len(rest) != 1 || !strings.Contains(string(rest[0]), `"h.2"`) {
		t.Fatalf("unsent %s", rest)
	}
	if refs := Refs(match); !reflect.DeepEqual(refs, []string{"Patient/h.1"}) {
		t.Fatalf("refs %v", refs)
	}
}

// Whatever JSON a member sends, the rewritten resource is JSON again, and each
// reference in it is Reference of the one it replaced (the fast path and the general
// one agree).
func FuzzResource(f *testing.F) {
	for _, seed := range []string{
		`{"resourceType":"Observation","id":"7","subject":{"reference":"Patient/2"}}`,
		`{"id":"a\u002eb","x":{"reference":"Patient\/2"},"y":[{"reference":"http://10.0.0.7/fhir/Patient/3/_history/1"}]}`,
		`{"reference":"#p","id":"` + strings.Repeat("x", 64) + `","z":{"reference":"urn:uuid:1"}}`,
		`{"a":"\"reference\": \"Patient/9\"","reference":{"reference":"Group/1"}}`,
	} {
		f.Add(seed)
	}
	r := Rewriter{Member: "h", Base: "http://10.0.0.7/fhir", Route: "https://gw/nodes/h/fhir", GW: "https://gw"}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		out := r.Resource([]byte(in))
		if !json.Valid(out) {
			t.Fatalf("not JSON: %s -> %s", in, out)
		}
		var want []string
		for _, ref := range references(t, []byte(in)) {
			fed, _ := r.Reference(ref)
			want = append(want, strings.ReplaceAll(fed, r.Base, r.Route))
		}
		got := references(t, out)
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			t.Fatalf("references %q, want %q: %s -> %s", got, want, in, out)
		}
	})
}

// references are the string values of every "reference" member of raw.
func references(t *testing.T, raw []byte) []string {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			for _, k := range keys {
				if s, ok := x[k].(string); ok && k == "reference" {
					out = append(out, s)
				}
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	walk(v)
	return out
}
