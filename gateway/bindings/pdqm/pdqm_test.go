package pdqm_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/bindings/pdqm"
)

// Classify drops a merged record only when its replacement is in the answer, and
// counts Patients of search.mode match alone.
func TestClassify(t *testing.T) {
	bundle := func(entries ...string) []byte {
		return []byte(`{"resourceType":"Bundle","type":"searchset","entry":[` + strings.Join(entries, ",") + `]}`)
	}
	patient := func(id string, active bool, replacedBy string) string {
		link := ""
		if replacedBy != "" {
			link = `,"link":[{"type":"replaced-by","other":{"reference":"Patient/` + replacedBy + `"}}]`
		}
		return fmt.Sprintf(`{"resource":{"resourceType":"Patient","id":%q,"active":%v,"identifier":[{"system":"urn:a","value":%q}]%s},"search":{"mode":"match"}}`, id, active, id, link)
	}
	cases := []struct {
		name string
		body []byte
		want pdqm.Kind
	}{
		{"an empty searchset", bundle(), pdqm.NoMatch},
		{"one", bundle(patient("1", true, "")), pdqm.OneMatch},
		{"two people", bundle(patient("1", true, ""), patient("2", true, "")), pdqm.Ambiguous},
		{"a merged pair", bundle(patient("old", false, "new"), patient("new", true, "")), pdqm.OneMatch},
		{"an inactive record replaced by one not in the answer", bundle(patient("old", false, "elsewhere"), patient("new", true, "")), pdqm.Ambiguous},
		{"an include is not a match", bundle(patient("1", true, ""), `{"resource":{"resourceType":"Patient","id":"x"},"search":{"mode":"include"}}`), pdqm.OneMatch},
		{"an outcome entry is not a match", bundle(`{"resource":{"resourceType":"OperationOutcome","issue":[]},"search":{"mode":"outcome"}}`), pdqm.NoMatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := pdqm.Classify(tc.body)
			if err != nil || r.Kind != tc.want {
				t.Fatalf("Classify = %+v, %v; want kind %d", r, err, tc.want)
			}
		})
	}
	if _, err := pdqm.Classify([]byte(`{"resourceType":"Parameters"}`)); err == nil {
		t.Error("a Parameters classified")
	}
}
