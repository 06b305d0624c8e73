package pdqsupplier_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
	"github.com/ferrofed/ferrofed/test/doubles/pdqsupplier"
)

// graded is what a binding reads of a $match entry.
type graded struct {
	ID    string
	Grade string
	Score float64
}

func readMatch(t *testing.T, a answer) (int, []graded) {
	t.Helper()
	if a.status != 200 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	if err := fhirschema.Validate(a.body); err != nil {
		t.Fatalf("not valid R4: %v\n%s", err, a.body)
	}
	return entries(t, a.body)
}

func entries(t *testing.T, body []byte) (int, []graded) {
	t.Helper()
	var b struct {
		ResourceType, Type string
		Total              int
		Entry              []struct {
			Resource struct{ ID string }
			Search   struct {
				Mode      string
				Score     float64
				Extension []struct{ URL, ValueCode string }
			}
		}
	}
	if err := json.Unmarshal(body, &b); err != nil || b.ResourceType != "Bundle" || b.Type != "searchset" {
		t.Fatalf("not a searchset (%v): %s", err, body)
	}
	var out []graded
	for _, e := range b.Entry {
		if e.Search.Mode != "match" {
			continue
		}
		g := graded{ID: e.Resource.ID, Score: e.Search.Score}
		for _, x := range e.Search.Extension {
			if x.URL == pdqsupplier.MatchGrade {
				g.Grade = x.ValueCode
			}
		}
		out = append(out, g)
	}
	return b.Total, out
}

// TestPublishedMatchExamples posts the guide's $match inputs and compares the
// answers with the guide's outputs, the supplier ranking as each output does.
func TestPublishedMatchExamples(t *testing.T) {
	guide := []json.RawMessage{read(t, "ex-patient.json"), read(t, "ex-patient-mothers-maiden-name.json")}
	files, err := filepath.Glob("testdata/ihe/*.json")
	if err != nil || len(files) < 14 {
		t.Fatalf("rendered examples %v %v", files, err)
	}
	for _, f := range files {
		if err := fhirschema.Validate(read(t, filepath.Base(f))); err != nil {
			t.Errorf("the rendered %s is not valid R4: %v", f, err)
		}
	}
	// ranking is a published output's ranking, as MatchResults.
	ranking := func(name string) []pdqsupplier.Graded {
		_, es := entries(t, read(t, name))
		var out []pdqsupplier.Graded
		for _, e := range es {
			out = append(out, pdqsupplier.Graded(e))
		}
		return out
	}
	post := func(s *pdqsupplier.Server, input string) answer {
		return do(t, "POST", s.URL+"/Patient/$match", "application/fhir+json", string(read(t, input)))
	}
	for _, tc := range []struct{ name, input, ranking, want string }{
		{"Case 1: one patient, certain", "ex-match-input-patient-only.json", "ex-match-output.json", "ex-match-output.json"},
		{"the bare Patient is the same input", "ex-match-input-patient.json", "ex-match-output.json", "ex-match-output.json"},
		{"Case 2: two patients, best first", "ex-match-input-patient-only.json", "ex-match-output-multiple.json", "ex-match-output-multiple.json"},
		{"Case 4: onlyCertainMatches without a certain one is the empty Bundle", "ex-match-input-onlyCertainMatches.json", "ex-match-output-multiple.json", "ex-match-output-empty.json"},
		{"Case 3: onlyCertainMatches with a certain one", "ex-match-input-onlyCertainMatches.json", "ex-match-output.json", "ex-match-output.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := pdqsupplier.Start(t, pdqsupplier.Options{Resources: guide, MatchResults: ranking(tc.ranking)})
			total, got := readMatch(t, post(s, tc.input))
			wantTotal, want := entries(t, read(t, tc.want))
			if total != wantTotal || !reflect.DeepEqual(got, want) {
				t.Fatalf("total %d %v, want %d %v", total, got, wantTotal, want)
			}
		})
	}
	t.Run("Case 6: count keeps the best", func(t *testing.T) {
		s := pdqsupplier.Start(t, pdqsupplier.Options{Resources: guide, MatchResults: ranking("ex-match-output-multiple.json")})
		if total, got := readMatch(t, post(s, "ex-match-input-count.json")); total != 1 || len(got) != 1 || got[0].ID != "ex-patient" {
			t.Fatalf("total %d %v", total, got)
		}
	})
	t.Run("the built-in grading finds ex-patient by its identifier", func(t *testing.T) {
		s := pdqsupplier.Start(t, pdqsupplier.Options{Resources: guide})
		if _, got := readMatch(t, post(s, "ex-match-input-patient-only.json")); !reflect.DeepEqual(got, []graded{{"ex-patient", "certain", 1}}) {
			t.Fatalf("%v", got)
		}
	})
}

func TestRank(t *testing.T) {
	s := pdqsupplier.Start(t, pdqsupplier.Options{Patients: fixtures})
	patient := func(p pdqsupplier.Patient) json.RawMessage { return p.Resource() }
	for _, tc := range []struct {
		name string
		in   pdqsupplier.MatchInput
		want []pdqsupplier.Graded
	}{
		{"a shared identifier is certain", pdqsupplier.MatchInput{Patient: patient(pdqsupplier.Patient{Identifiers: []pdqsupplier.Identifier{{System: blue, Value: "B1"}}})},
			[]pdqsupplier.Graded{{ID: "bob", Grade: "certain", Score: 1}}},
		{"family, given and birth date are probable, family and birth date possible, best first", pdqsupplier.MatchInput{Patient: patient(pdqsupplier.Patient{Family: "mohr", Given: []string{"maiden"}, BirthDate: "1958-01-30"})},
			[]pdqsupplier.Graded{{ID: "alice-old", Grade: "probable", Score: 0.8}, {ID: "alice", Grade: "possible", Score: 0.6}}},
		{"onlyCertainMatches drops the rest", pdqsupplier.MatchInput{OnlyCertainMatches: true, Patient: patient(pdqsupplier.Patient{Family: "mohr", BirthDate: "1958-01-30"})}, nil},
		{"count keeps the best", pdqsupplier.MatchInput{Count: 1, Patient: patient(pdqsupplier.Patient{Family: "mohr", Given: []string{"maiden"}, BirthDate: "1958-01-30"})},
			[]pdqsupplier.Graded{{ID: "alice-old", Grade: "probable", Score: 0.8}}},
		{"no birth date, no demographic match", pdqsupplier.MatchInput{Patient: patient(pdqsupplier.Patient{Family: "mohr"})}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Rank(tc.in)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v %v, want %v", got, err, tc.want)
			}
		})
	}
}

func TestParseMatch(t *testing.T) {
	for _, tc := range []struct{ body, err string }{
		{`{"resourceType":"Patient"}`, ""},
		{`{"resourceType":"Parameters","parameter":[{"name":"resource","resource":{"resourceType":"Patient"}},{"name":"count","valueInteger":2}]}`, ""},
		{`{`, "the body is no FHIR JSON"},
		{`{"resourceType":"Bundle"}`, `the body is a "Bundle"`},
		{`{"resourceType":"Parameters"}`, "no resource parameter"},
		{`{"resourceType":"Parameters","parameter":[{"name":"resource","resource":{"resourceType":"Person"}}]}`, "parameter[0] resource is not a Patient"},
		{`{"resourceType":"Parameters","parameter":[{"name":"count","valueInteger":0}]}`, "parameter[0] count needs a valueInteger of 1 or more"},
		{`{"resourceType":"Parameters","parameter":[{"name":"onlyCertainMatches","valueString":"yes"}]}`, "parameter[0] onlyCertainMatches needs a valueBoolean"},
		{`{"resourceType":"Parameters","parameter":[{"name":"limit"}]}`, `parameter[0] "limit" is not a $match parameter`},
	} {
		_, err := pdqsupplier.ParseMatch([]byte(tc.body))
		if (err == nil) != (tc.err == "") || (err != nil && !strings.HasPrefix(err.Error(), tc.err)) {
			t.Errorf("%s: err %v, want %q", tc.body, err, tc.err)
		}
	}
	s := pdqsupplier.Start(t, pdqsupplier.Options{Patients: fixtures})
	if a := do(t, "POST", s.URL+"/Patient/$match", "application/fhir+json", `{"resourceType":"Bundle"}`); a.status != 400 || !strings.Contains(string(a.body), "PDQM-BODY") {
		t.Fatalf("%d %s", a.status, a.body)
	}
	if a := do(t, "POST", s.URL+"/Patient/$match", "application/xml", `<Patient/>`); a.status != 415 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	for _, bad := range []pdqsupplier.Graded{{ID: "nobody", Grade: "certain"}, {ID: "bob", Grade: "likely"}, {ID: "bob", Grade: "certain", Score: 2}} {
		if _, err := pdqsupplier.New(pdqsupplier.Options{Patients: fixtures, MatchResults: []pdqsupplier.Graded{bad}}); err == nil {
			t.Errorf("took %+v", bad)
		}
	}
}
