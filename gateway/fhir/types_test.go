package fhir

import (
	"compress/gzip"
	"encoding/json"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"testing"
)

// TestTheR4ResourceTypesAreHL7s checks the list against HL7's R4 JSON schema (the copy
// test/doubles/members/fhirschema validates with): every resource type it maps, and no
// other.
func TestTheR4ResourceTypesAreHL7s(t *testing.T) {
	f, err := os.Open("../../test/doubles/members/fhirschema/testdata/fhir.schema.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Discriminator struct {
			Mapping map[string]string `json:"mapping"`
		} `json:"discriminator"`
	}
	if err := json.NewDecoder(zr).Decode(&schema); err != nil {
		t.Fatal(err)
	}
	var want []string
	for k := range schema.Discriminator.Mapping {
		want = append(want, k)
	}
	sort.Strings(want)
	if len(want) != 146 || !slices.Equal(r4Types, want) {
		t.Fatalf("the list has %d types, the schema %d: %v", len(r4Types), len(want), want)
	}
	for _, yes := range []string{"Patient", "Account", "VisionPrescription", "Bundle", "OperationOutcome", "Binary"} {
		if !R4ResourceType(yes) {
			t.Errorf("%s is an R4 resource type", yes)
		}
	}
	for _, no := range []string{"Foo", "patient", "Resource", "DomainResource", "", "Patient ", "MedicinalProductDefinition", "Zz"} {
		if R4ResourceType(no) {
			t.Errorf("%q is no R4 resource type", no)
		}
	}
}

func TestAnAcceptOfAnotherFHIRVersionIsNotAcceptable(t *testing.T) {
	for _, c := range []struct {
		accept, format string
		anyType, want  bool
	}{
		{"application/fhir+json; fhirVersion=4.0", "", false, true},
		{"application/fhir+json; fhirVersion=4.0.1", "", false, true},
		{"application/fhir+json;fhirVersion=3.0", "", false, false},
		{"application/fhir+json; fhirVersion=3.0", "", true, false},
		{"application/fhir+json; fhirVersion=5.0", "", true, false},
		{"application/fhir+json; fhirVersion=3.0, application/fhir+json; fhirVersion=4.0", "", false, true},
		{"application/fhir+json; fhirVersion=3.0, image/png", "", true, true},
		{"application/fhir+json; fhirVersion=3.0;q=0, application/json", "", false, true},
		{"", "application/fhir+json;fhirVersion=3.0", false, false},
		{"", "application/fhir+json;fhirVersion=4.0", true, true},
	} {
		r := httptest.NewRequest("GET", "/fhir/Patient", nil)
		if c.format != "" {
			r = httptest.NewRequest("GET", "/fhir/Patient?_format="+c.format, nil)
		}
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		if got := Acceptable(r, c.anyType); got != c.want {
			t.Errorf("Accept %q _format %q (any type %v): %v, want %v", c.accept, c.format, c.anyType, got, c.want)
		}
	}
}
