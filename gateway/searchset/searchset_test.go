package searchset

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

func TestABundleCarriesEveryRecordInItsMetaExtension(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	total := 3
	b := Bundle{
		LastUpdated: now,
		Records: []Record{
			{ID: "a", Outcome: outbound.OK, Status: 200, Entries: 2, DurationMS: 20},
			{ID: "b", Outcome: outbound.Timeout, DurationMS: 300},
		},
		Total: &total,
		Links: []fhir.Link{{Relation: "self", URL: "http://gw/fhir/Patient"}},
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
	ext := memberExtension(Record{ID: "a", Outcome: outbound.Excluded, Status: 200, Entries: 1, DurationMS: 2, ExcludedBy: "resolver"})
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
