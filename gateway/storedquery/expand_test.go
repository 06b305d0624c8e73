package storedquery

import (
	"net/url"
	"os"
	"strings"
	"testing"
)

// Whatever a client's value holds, the expanded search has exactly the template's
// parameters, by name and in order: a value never adds or renames one.
func FuzzExpandKeepsTheTemplatesParameters(f *testing.F) {
	f.Add("Observation?subject=Patient/{{%patient}}&status=final", "p1&_id=x")
	f.Add("Observation?subject={{%patient}}{{%patient}}", "a=b#c&d")
	f.Add("Observation?code=http://loinc.org|{{ %patient }}", "%26%3D")
	f.Add("Observation?{{%patient}}=x", "y")
	f.Add("Observation?a=b&&c={{%patient}}", "\x00&\n")
	f.Fuzz(func(t *testing.T, template, value string) {
		d := &Definition{Resource: "Observation", Code: "q", Params: []Param{{Name: "patient", Required: true}}}
		if d.parseTemplate(template) != nil {
			return
		}
		out, status, msg := d.expand("Observation", []kv{{"patient", value}})
		if status != 0 {
			t.Fatalf("a valid template and a given value refused: %d %s", status, msg)
		}
		var got []string
		for p := range strings.SplitSeq(out, "&") {
			k, v, _ := strings.Cut(p, "=")
			name, err := url.QueryUnescape(k)
			if err != nil {
				t.Fatalf("%q: %v", out, err)
			}
			if _, err := url.QueryUnescape(v); err != nil {
				t.Fatalf("%q: a value that does not unescape: %v", out, err)
			}
			got = append(got, name)
		}
		var want []string
		for _, p := range d.pairs {
			name, _ := url.QueryUnescape(p.name)
			want = append(want, name)
		}
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("template %q with %q expanded to the parameters %q, want %q", template, value, got, want)
		}
	})
}

func TestParseRefusesWhatIsNotAStoredQuery(t *testing.T) {
	for _, tc := range []struct{ name, doc, says string }{
		{"a kind operation", `{"resourceType":"OperationDefinition","id":"x","kind":"operation","code":"x","resource":["Observation"]}`, "kind must be query"},
		{"two resources", `{"resourceType":"OperationDefinition","id":"x","kind":"query","code":"x","resource":["Observation","Patient"]}`, "one resource type"},
		{"no template", `{"resourceType":"OperationDefinition","id":"x","kind":"query","code":"x","resource":["Observation"]}`, "must carry the template"},
		{"a template in another language", `{"resourceType":"OperationDefinition","id":"x","kind":"query","code":"x","resource":["Observation"],"extension":[{"url":"` + TemplateExtension + `","valueExpression":{"language":"text/fhirpath","expression":"Observation?a=b"}}]}`, "language application/x-fhir-query"},
		{"a code with a space", `{"resourceType":"OperationDefinition","id":"x","kind":"query","code":"a b","resource":["Observation"]}`, "code must be"},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			if _, err := Parse([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v; want %q", err, tc.says)
			}
		})
	}
}

func TestTheDigestLeavesOutMetaAndText(t *testing.T) {
	a, _ := Digest([]byte(`{"id":"x","b":[1,2],"meta":{"versionId":"3"}}`))
	b, _ := Digest([]byte(`{"b": [1, 2], "text": {"div": "<div/>"}, "id": "x"}`))
	c, _ := Digest([]byte(`{"b":[2,1],"id":"x"}`))
	if a != b || a == c {
		t.Fatalf("%s %s %s", a, b, c)
	}
}

// The StoredQuery sample's definition is one the gateway takes.
func TestTheSampleDefinitionIsAStoredQuery(t *testing.T) {
	data, err := os.ReadFile("../../config/samples/ferrofed_v1alpha1_storedquery.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "  definition: |\n")
	if !ok {
		t.Fatal("the sample has no spec.definition block")
	}
	var def strings.Builder
	for line := range strings.SplitSeq(block, "\n") {
		def.WriteString(strings.TrimPrefix(line, "    "))
		def.WriteByte('\n')
	}
	d, err := Parse([]byte(def.String()))
	if err != nil {
		t.Fatal(err)
	}
	if out, status, msg := d.expand("Observation", []kv{{"patient", "p1"}}); status != 0 || out != "subject=Patient/p1&status=final" {
		t.Fatalf("%q %d %s", out, status, msg)
	}
}
