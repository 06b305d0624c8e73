package federation

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
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
	}
	for in, want := range cases {
		if got := ValidResourceType(in); got != want {
			t.Errorf("ValidResourceType(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestDecodeSearchset(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		entries int
		wantErr bool
	}{
		{"a searchset with two entries", `{"resourceType":"Bundle","type":"searchset","entry":[{"resource":{}},{"resource":{}}]}`, 2, false},
		{"an empty searchset", `{"resourceType":"Bundle","type":"searchset"}`, 0, false},
		{"a transaction bundle is refused", `{"resourceType":"Bundle","type":"transaction","entry":[{}]}`, 0, true},
		{"a Patient is refused", `{"resourceType":"Patient"}`, 0, true},
		{"broken JSON is refused", `{"resourceType":"Bundle","type":"searchset","entry":[`, 0, true},
		{"HTML is refused", `<html>`, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := decodeSearchset([]byte(c.body))
			if (err != nil) != c.wantErr || len(got) != c.entries {
				t.Fatalf("decodeSearchset = %d entries, err %v; want %d, error %v", len(got), err, c.entries, c.wantErr)
			}
		})
	}
}

func TestMergeBundleKeepsMemberOrderAndCountsEntries(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	parts := []memberPart{
		{record: Record{ID: "a", Outcome: OK, Status: 200, DurationMS: 20}, entries: []json.RawMessage{json.RawMessage(`{"n":"a1"}`), json.RawMessage(`{"n":"a2"}`)}},
		{record: Record{ID: "b", Outcome: Timeout, DurationMS: 300}},
		{record: Record{ID: "c", Outcome: OK, Status: 200, DurationMS: 5}, entries: []json.RawMessage{json.RawMessage(`{"n":"c1"}`)}},
	}
	body, err := json.Marshal(mergeBundle(parts, now))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"resourceType":"Bundle","type":"searchset","meta":{"lastUpdated":"2026-01-02T03:04:05Z","federation":[` +
		`{"id":"a","outcome":"ok","status":200,"entries":2,"duration_ms":20},` +
		`{"id":"b","outcome":"timeout","entries":0,"duration_ms":300},` +
		`{"id":"c","outcome":"ok","status":200,"entries":1,"duration_ms":5}]},` +
		`"entry":[{"n":"a1"},{"n":"a2"},{"n":"c1"}]}`
	if string(body) != want {
		t.Fatalf("bundle\n%s\nwant\n%s", body, want)
	}
}

func TestMergeBundleOfNoMemberIsAnEmptySearchset(t *testing.T) {
	body, _ := json.Marshal(mergeBundle(nil, time.Unix(0, 0)))
	const want = `{"resourceType":"Bundle","type":"searchset","meta":{"lastUpdated":"1970-01-01T00:00:00Z","federation":[]}}`
	if string(body) != want {
		t.Fatalf("bundle %s", body)
	}
}
