package fhir

import (
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/config"
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
		if got := ValidID(in); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", in, got, want)
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
			got, err := DecodePage([]byte(c.body), config.DefaultMaxMemberEntries)
			if (err != nil) != c.wantErr || (err == nil && (len(got.Entry) != c.entries || got.Next != c.next)) {
				t.Fatalf("DecodePage = %+v, err %v; want %d entries, next %q, error %v", got, err, c.entries, c.next, c.wantErr)
			}
		})
	}
}
