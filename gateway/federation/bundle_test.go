package federation

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

func TestValidResourceType(t *testing.T) {
	cases := map[string]bool{
		"Patient":               true,
		"Observation":           true,
		"MedicationStatement":   true,
		"patient":               false,
		"P":                     false,
		"Patient1":              false,
		"Pat-ient":              false,
		"":                      false,
		"metadata":              false,
		"Patient/../../admin":   false,
		"%50atient":             false,
		strings.Repeat("A", 65): false, // longer than any resource type
		"Ab":                    true,
		"Pätient":               false,
	}
	for in, want := range cases {
		if got := ValidResourceType(in); got != want {
			t.Errorf("ValidResourceType(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestValidID(t *testing.T) {
	for in, want := range map[string]bool{
		"1": true, "a-B.9": true, strings.Repeat("x", 64): true,
		"": false, strings.Repeat("x", 65): false, "a/b": false, "a b": false, "a_b": false, "é": false, `a"b`: false,
	} {
		if got := validID(in); got != want {
			t.Errorf("validID(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestDecodePage(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		entries int
		next    string
		wantErr bool
	}{
		{"a searchset with two entries", `{"resourceType":"Bundle","type":"searchset","entry":[{"resource":{}},{"resource":{}}]}`, 2, "", false},
		{"an entry that is not an object is refused", `{"resourceType":"Bundle","type":"searchset","entry":[7]}`, 0, "", true},
		{"a searchset with a next link", `{"resourceType":"Bundle","type":"searchset","link":[{"relation":"self","url":"s"},{"relation":"next","url":"n"}]}`, 0, "n", false},
		{"an empty searchset", `{"resourceType":"Bundle","type":"searchset"}`, 0, "", false},
		{"a negative total is refused", `{"resourceType":"Bundle","type":"searchset","total":-1}`, 0, "", true},
		{"a transaction bundle is refused", `{"resourceType":"Bundle","type":"transaction","entry":[{}]}`, 0, "", true},
		{"a Patient is refused", `{"resourceType":"Patient"}`, 0, "", true},
		{"broken JSON is refused", `{"resourceType":"Bundle","type":"searchset","entry":[`, 0, "", true},
		{"HTML is refused", `<html>`, 0, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := decodePage([]byte(c.body), config.DefaultMaxMemberEntries)
			if (err != nil) != c.wantErr || (err == nil && (len(got.Entry) != c.entries || got.next != c.next)) {
				t.Fatalf("decodePage = %+v, err %v; want %d entries, next %q, error %v", got, err, c.entries, c.next, c.wantErr)
			}
		})
	}
}

func TestABundleCarriesEveryRecordInItsMetaExtension(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	total := 3
	b := Bundle{
		LastUpdated: now,
		Records: []Record{
			{ID: "a", Outcome: OK, Status: 200, Entries: 2, DurationMS: 20},
			{ID: "b", Outcome: Timeout, DurationMS: 300},
		},
		Total: &total,
		Links: []Link{{Relation: "self", URL: "http://gw/fhir/Patient"}},
		Entry: [][]byte{[]byte(`{"n":"a1"}`), []byte(`{"n":"a2"}`)},
	}
	body, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	const ext = `{"url":"https://ferrofed.io/fhir/StructureDefinition/federation-member","extension":[`
	const want = `{"resourceType":"Bundle","meta":{"lastUpdated":"2026-01-02T03:04:05Z","extension":[` +
		ext + `{"url":"member","valueString":"a"},{"url":"outcome","valueCode":"ok"},{"url":"status","valueInteger":200},{"url":"entries","valueUnsignedInt":2},{"url":"duration","valueQuantity":{"value":20,"unit":"ms","system":"http://unitsofmeasure.org","code":"ms"}}]},` +
		ext + `{"url":"member","valueString":"b"},{"url":"outcome","valueCode":"timeout"},{"url":"entries","valueUnsignedInt":0},{"url":"duration","valueQuantity":{"value":300,"unit":"ms","system":"http://unitsofmeasure.org","code":"ms"}}]}],` +
		`"federation":[{"id":"a","outcome":"ok","status":200,"entries":2,"duration_ms":20},{"id":"b","outcome":"timeout","entries":0,"duration_ms":300}]},` +
		`"type":"searchset","total":3,"link":[{"relation":"self","url":"http://gw/fhir/Patient"}],"entry":[{"n":"a1"},{"n":"a2"}]}`
	if string(body) != want {
		t.Fatalf("bundle\n%s\nwant\n%s", body, want)
	}
	b.Strict = true
	body, _ = json.Marshal(b)
	if strings.Contains(string(body), `"federation"`) || !strings.Contains(string(body), `{"url":"member","valueString":"b"}`) {
		t.Fatalf("strict_fhir bundle %s", body)
	}
}

func TestABundleOfNoMemberIsAnEmptySearchset(t *testing.T) {
	body, _ := json.Marshal(Bundle{LastUpdated: time.Unix(0, 0)})
	const want = `{"resourceType":"Bundle","meta":{"lastUpdated":"1970-01-01T00:00:00Z","federation":[]},"type":"searchset"}`
	if string(body) != want {
		t.Fatalf("bundle %s", body)
	}
}

func TestTheShippedStructureDefinitionDescribesTheExtensionWritten(t *testing.T) {
	raw, err := os.ReadFile("fhir/StructureDefinition-federation-member.json")
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
				ID       string `json:"id"`
				FixedURI string `json:"fixedUri"`
				Type     []struct {
					Code string `json:"code"`
				} `json:"type"`
			} `json:"element"`
		} `json:"differential"`
	}
	if err := json.Unmarshal(raw, &sd); err != nil {
		t.Fatal(err)
	}
	if sd.URL != MemberExtensionURL {
		t.Fatalf("url %s", sd.URL)
	}
	types := map[string]string{}
	for _, e := range sd.Differential.Element {
		if name, ok := strings.CutPrefix(e.ID, "Extension.extension:"); ok && strings.HasSuffix(name, ".value[x]") {
			types[strings.TrimSuffix(name, ".value[x]")] = e.Type[0].Code
		}
	}
	// Every sub-extension written is defined with the value type it is written with.
	ext := memberExtension(Record{ID: "a", Outcome: Excluded, Status: 200, Entries: 1, DurationMS: 2, ExcludedBy: "resolver"})
	written, _ := json.Marshal(ext.Extension)
	var subs []map[string]any
	if err := json.Unmarshal(written, &subs); err != nil {
		t.Fatalf("%v: %s", err, written)
	}
	if len(subs) != len(types) {
		t.Fatalf("written %s, defined %v", written, types)
	}
	for _, s := range subs {
		name := s["url"].(string)
		want, ok := types[name]
		if !ok {
			t.Fatalf("sub-extension %s is not defined", name)
		}
		if _, ok := s["value"+strings.ToUpper(want[:1])+want[1:]]; !ok {
			t.Fatalf("sub-extension %s is written as %v, defined as %s", name, s, want)
		}
	}
}
