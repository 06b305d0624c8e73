package smart

import (
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestPatientsNamed(t *testing.T) {
	for _, c := range []struct {
		name, typ, query string
		ids, unresolved  []string
	}{
		// How a patient is named.
		{"a relative reference", "Observation", "subject=Patient/123", []string{"123"}, nil},
		{"a bare id on a Patient-only param", "Encounter", "patient=123", []string{"123"}, nil},
		{"a relative reference on a Patient-only param", "Encounter", "patient=Patient/123", []string{"123"}, nil},
		{"the :Patient modifier", "Observation", "subject:Patient=123", []string{"123"}, nil},
		{"the :Patient modifier, a reference", "Observation", "subject:Patient=Patient/123", []string{"123"}, nil},
		{"a full URL", "Observation", "subject=https://fhir.example.org/r4/Patient/123", []string{"123"}, nil},
		{"a full URL on a Patient-only param", "Condition", "patient=http://fhir.example.org/Patient/abc-1.2", []string{"abc-1.2"}, nil},
		{"a versioned reference", "Observation", "subject=Patient/123/_history/4", []string{"123"}, nil},
		{"a versioned full URL", "Observation", "subject=https://h/fhir/Patient/123/_history/4", []string{"123"}, nil},
		{"a comma list", "Observation", "subject=Patient/1,Patient/2", []string{"1", "2"}, nil},
		{"a repeated param", "Observation", "subject=Patient/2&subject=Patient/1", []string{"1", "2"}, nil},
		{"deduplicated", "Encounter", "patient=1,Patient/1&patient=1", []string{"1"}, nil},
		{"two compartment params", "Observation", "subject=Patient/1&performer=Patient/2", []string{"1", "2"}, nil},
		{"ResearchSubject's individual", "ResearchSubject", "individual=7", []string{"7"}, nil},
		{"Coverage's beneficiary", "Coverage", "beneficiary=7", []string{"7"}, nil},
		{"a Patient by _id", "Patient", "_id=123", []string{"123"}, nil},
		{"Patients by _id", "Patient", "_id=1,2", []string{"1", "2"}, nil},
		{"a Patient by link", "Patient", "link=Patient/9", []string{"9"}, nil},
		{"a Group by member", "Group", "member=Patient/5", []string{"5"}, nil},

		// Other types: no patient.
		{"a practitioner", "Observation", "performer=Practitioner/9", nil, nil},
		{"a group subject", "Observation", "subject=Group/1", nil, nil},
		{"another type's modifier", "Observation", "subject:Group=1", nil, nil},
		{"another type's modifier, chained", "Observation", "subject:Group.name=x", nil, nil},
		{"a full URL of another type", "Observation", "subject=https://h/fhir/Group/1", nil, nil},
		{"a patient and a practitioner", "Observation", "subject=Patient/1&performer=Practitioner/9", []string{"1"}, nil},

		// Named, but not readably.
		{"a bare id on a param of several types", "Observation", "subject=123", nil, []string{"subject=123"}},
		{"a chain", "Observation", "subject.name=Smith", nil, []string{"subject.name=Smith"}},
		{"a typed chain", "Observation", "subject:Patient.name=Smith", nil, []string{"subject:Patient.name=Smith"}},
		{"a chain with a reference value", "Observation", "subject.link=Patient/1", nil, []string{"subject.link=Patient/1"}},
		{"an identifier", "Observation", "subject:identifier=http://mrn|123", nil, []string{"subject:identifier=http://mrn|123"}},
		{":missing", "Encounter", "patient:missing=true", nil, []string{"patient:missing=true"}},
		{"an empty value", "Encounter", "patient=", nil, []string{"patient="}},
		{"an empty item", "Encounter", "patient=1,", []string{"1"}, []string{"patient="}},
		{"an id FHIR cannot name", "Encounter", "patient=a_b", nil, []string{"patient=a_b"}},
		{"a reference FHIR cannot name", "Observation", "subject=Patient/a_b", nil, []string{"subject=Patient/a_b"}},
		{"a non-Patient on a Patient-only param", "Encounter", "patient=Group/1", nil, []string{"patient=Group/1"}},
		{"the :Patient modifier on another type", "Observation", "subject:Patient=Group/1", nil, []string{"subject:Patient=Group/1"}},
		{"a lower-case type", "Observation", "subject=patient/1", nil, []string{"subject=patient/1"}},
		{"a trailing slash", "Observation", "subject=Patient/", nil, []string{"subject=Patient/"}},
		{"_id with a modifier", "Patient", "_id:missing=false", nil, []string{"_id:missing=false"}},
		{"_id as a reference", "Patient", "_id=Patient/1", nil, []string{"_id=Patient/1"}},
		{"read and unread", "Observation", "subject=Patient/1&subject.name=x", []string{"1"}, []string{"subject.name=x"}},

		// Parameters outside the compartment are not read.
		{"Observation's patient param", "Observation", "patient=123", nil, nil},
		{"a code", "Observation", "code=http://loinc.org|1234-5", nil, nil},
		{"_id on another type", "Observation", "_id=1", nil, nil},
		{"_has", "Patient", "_has:Observation:patient:code=1234-5", nil, nil},
		{"a param that starts like one", "Encounter", "patients=1&patient-x=2", nil, nil},
		{"a type outside the compartment", "Practitioner", "_id=1", nil, nil},
		{"not a type", "observation", "subject=Patient/1", nil, nil},
		{"nothing", "Observation", "", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			params, err := url.ParseQuery(c.query)
			if err != nil {
				t.Fatal(err)
			}
			r := PatientsNamed(c.typ, params)
			if !slices.Equal(r.IDs, c.ids) || !slices.Equal(r.Unresolved, c.unresolved) {
				t.Errorf("PatientsNamed(%s, %q) = %q, unresolved %q; want %q, unresolved %q", c.typ, c.query, r.IDs, r.Unresolved, c.ids, c.unresolved)
			}
			if r.Named() != (len(c.ids)+len(c.unresolved) > 0) {
				t.Errorf("Named() = %v", r.Named())
			}
		})
	}
}

// FHIR writes a comma inside a value as \, and a backslash as \\: an escaped
// comma splits nothing, and an item with an escape is no id.
func TestEscapesInAList(t *testing.T) {
	for _, c := range []struct {
		value           string
		ids, unresolved []string
	}{
		{`1\,2`, nil, []string{`patient=1\,2`}},
		{`1\,2,3`, []string{"3"}, []string{`patient=1\,2`}},
		{`1\\,2`, []string{"2"}, []string{`patient=1\\`}},
		{`1,2\`, []string{"1"}, []string{`patient=2\`}},
	} {
		r := PatientsNamed("Encounter", url.Values{"patient": {c.value}})
		if !slices.Equal(r.IDs, c.ids) || !slices.Equal(r.Unresolved, c.unresolved) {
			t.Errorf("patient=%s: %q, unresolved %q; want %q, unresolved %q", c.value, r.IDs, r.Unresolved, c.ids, c.unresolved)
		}
	}
}

func TestPatientRefsOnly(t *testing.T) {
	for _, c := range []struct {
		name string
		r    PatientRefs
		want bool
	}{
		{"the one", PatientRefs{IDs: []string{"1"}}, true},
		{"another", PatientRefs{IDs: []string{"2"}}, false},
		{"two", PatientRefs{IDs: []string{"1", "2"}}, false},
		{"none", PatientRefs{}, false},
		{"the one and something unread", PatientRefs{IDs: []string{"1"}, Unresolved: []string{"subject.name=x"}}, false},
	} {
		if got := c.r.Only("1"); got != c.want {
			t.Errorf("%s: Only(1) = %v, want %v", c.name, got, c.want)
		}
	}
}

// Every compartment parameter of every type reads a relative Patient reference.
func TestEveryCompartmentParamReadsAReference(t *testing.T) {
	for _, typ := range CompartmentTypes() {
		params, _ := CompartmentParams(typ)
		for _, p := range params {
			r := PatientsNamed(typ, url.Values{p: {"Patient/42"}})
			if !r.Only("42") {
				t.Errorf("%s?%s=Patient/42: %q, unresolved %q", typ, p, r.IDs, r.Unresolved)
			}
			bare := PatientsNamed(typ, url.Values{p: {"42"}})
			if patientOnly[p] != bare.Only("42") {
				t.Errorf("%s?%s=42: %q, unresolved %q (Patient-only: %v)", typ, p, bare.IDs, bare.Unresolved, patientOnly[p])
			}
		}
	}
}

func FuzzPatientsNamed(f *testing.F) {
	for _, s := range []string{"subject=Patient/1,2&subject:Patient.name=x", "patient=1&patient:missing=true", "_id=1,,2", "subject=https://h/Patient/1/_history/2"} {
		f.Add("Observation", s)
	}
	f.Fuzz(func(t *testing.T, typ, query string) {
		params, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		r := PatientsNamed(typ, params)
		for _, id := range r.IDs {
			if !validID(id) {
				t.Fatalf("an id FHIR cannot name: %q", id)
			}
		}
		if !slices.IsSorted(r.IDs) || !slices.IsSorted(r.Unresolved) {
			t.Fatalf("not sorted: %q %q", r.IDs, r.Unresolved)
		}
		if !InCompartment(typ) && r.Named() {
			t.Fatalf("%q is outside the compartment, yet names %q %q", typ, r.IDs, r.Unresolved)
		}
		for _, u := range r.Unresolved {
			if !strings.Contains(u, "=") {
				t.Fatalf("an unresolved item without its param: %q", u)
			}
		}
	})
}
