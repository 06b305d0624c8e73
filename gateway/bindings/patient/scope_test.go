package patient

import (
	"errors"
	"strings"
	"testing"
)

func TestFindTheSearchedPatient(t *testing.T) {
	cases := []struct {
		name, resourceType string
		params             []string
		want               Scope
		scoped             bool
		refused            string // the refused parameter, "" when not refused
	}{
		{"no patient", "Observation", []string{"code=1"}, Scope{}, false, ""},
		{"patient by reference", "Observation", []string{"code=1", "patient=Patient/123"}, Scope{Index: 1, Name: "patient", ID: "123"}, true, ""},
		{"subject by bare id", "Condition", []string{"subject=abc"}, Scope{Name: "subject", ID: "abc"}, true, ""},
		{"patient by identifier, escaped", "Observation", []string{"patient.identifier=urn:oid:1.2%7CMRN-1"}, Scope{Name: "patient.identifier", System: "urn:oid:1.2", Value: "MRN-1"}, true, ""},
		{"a Patient search by identifier", "Patient", []string{"identifier=urn:a|1"}, Scope{Name: "identifier", System: "urn:a", Value: "1"}, true, ""},
		{"identifier of another type is not the patient", "Observation", []string{"identifier=urn:a|1"}, Scope{}, false, ""},
		{"a patient named twice", "Observation", []string{"patient=1", "subject=2"}, Scope{}, false, "subject"},
		{"a list of patients", "Observation", []string{"patient=1,2"}, Scope{}, false, "patient"},
		{"an identifier without a system", "Observation", []string{"patient.identifier=MRN-1"}, Scope{}, false, "patient.identifier"},
		{"an identifier of 100 KB", "Observation", []string{"patient.identifier=urn:a|" + strings.Repeat("x", 100<<10)}, Scope{}, false, "patient.identifier"},
		{"an identifier with a space", "Observation", []string{"patient.identifier=urn:a|a%20b"}, Scope{}, false, "patient.identifier"},
		{"a patient URL of another host", "Observation", []string{"patient=https://evil.example/fhir/Patient/1"}, Scope{}, false, "patient"},
		{"a scheme-relative URL", "Observation", []string{"patient=//evil.example/Patient/1"}, Scope{}, false, "patient"},
		{"a reference that is no FHIR id", "Observation", []string{"patient=Patient/../x"}, Scope{}, false, "patient"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, scoped, err := Find(tc.resourceType, tc.params)
			if tc.refused != "" {
				var r *Refusal
				if !errors.As(err, &r) || r.Param != tc.refused {
					t.Fatalf("err = %v, want a refusal of %s", err, tc.refused)
				}
				return
			}
			if err != nil || scoped != tc.scoped || got != tc.want {
				t.Fatalf("Find = %+v, %v, %v; want %+v, %v", got, scoped, err, tc.want, tc.scoped)
			}
		})
	}
}

func TestEachMemberIsAskedByItsOwnID(t *testing.T) {
	for name, want := range map[string]string{"patient": "patient=Patient/L1", "subject": "subject=Patient/L1",
		"patient.identifier": "patient=Patient/L1", "identifier": "_id=L1"} {
		if got := (Scope{Name: name}).memberParam("L1"); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
}
