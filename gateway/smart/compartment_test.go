package smart

import (
	"slices"
	"sort"
	"testing"
)

func TestCompartmentParams(t *testing.T) {
	for _, c := range []struct {
		typ    string
		params []string
		ok     bool
	}{
		{"Observation", []string{"subject", "performer"}, true},
		{"Encounter", []string{"patient"}, true},
		{"Patient", []string{"link"}, true},
		{"AllergyIntolerance", []string{"patient", "recorder", "asserter"}, true},
		{"Condition", []string{"patient", "asserter"}, true},
		{"DiagnosticReport", []string{"subject"}, true},
		{"MedicationRequest", []string{"subject"}, true},
		{"MedicationAdministration", []string{"patient", "performer", "subject"}, true},
		{"MedicationDispense", []string{"subject", "patient", "receiver"}, true},
		{"Immunization", []string{"patient"}, true},
		{"Procedure", []string{"patient", "performer"}, true},
		{"CarePlan", []string{"patient", "performer"}, true},
		{"CareTeam", []string{"patient", "participant"}, true},
		{"DocumentReference", []string{"subject", "author"}, true},
		{"Coverage", []string{"policy-holder", "subscriber", "beneficiary", "payor"}, true},
		{"CommunicationRequest", []string{"subject", "sender", "recipient", "requester"}, true},
		{"Group", []string{"member"}, true},
		{"ResearchSubject", []string{"individual"}, true},
		{"Appointment", []string{"actor"}, true},
		{"Provenance", []string{"patient"}, true},
		{"AuditEvent", []string{"patient"}, true},
		{"Person", []string{"patient"}, true},
		{"RelatedPerson", []string{"patient"}, true},

		// Listed without a parameter: never in the compartment.
		{"Practitioner", nil, false},
		{"Organization", nil, false},
		{"Medication", nil, false},
		{"Location", nil, false},
		{"Device", nil, false},
		{"Task", nil, false},
		{"Binary", nil, false},
		{"Bundle", nil, false},
		{"ValueSet", nil, false},
		{"Contract", nil, false},

		// Not R4 types, or not types at all.
		{"DeviceUsage", nil, false},
		{"observation", nil, false},
		{"", nil, false},
		{"*", nil, false},
	} {
		got, ok := CompartmentParams(c.typ)
		if ok != c.ok || !slices.Equal(got, c.params) {
			t.Errorf("CompartmentParams(%q) = %q, %v; want %q, %v", c.typ, got, ok, c.params, c.ok)
		}
		if InCompartment(c.typ) != c.ok {
			t.Errorf("InCompartment(%q) = %v, want %v", c.typ, !c.ok, c.ok)
		}
	}
}

func TestCompartmentParamsIsACopy(t *testing.T) {
	p, _ := CompartmentParams("Observation")
	p[0] = "code"
	if again, _ := CompartmentParams("Observation"); again[0] != "subject" {
		t.Errorf("changing CompartmentParams' result changed the table: %q", again)
	}
}

// The table is R4's: 66 types with parameters (of the 145 the definition lists),
// each a valid type name with at least one parameter, none twice.
func TestCompartmentTypes(t *testing.T) {
	types := CompartmentTypes()
	if len(types) != 66 {
		t.Errorf("%d compartment types, want R4's 66", len(types))
	}
	if !sort.StringsAreSorted(types) {
		t.Errorf("CompartmentTypes is not sorted: %q", types)
	}
	for _, typ := range types {
		params, _ := CompartmentParams(typ)
		if !validType(typ) || len(params) == 0 {
			t.Errorf("%q: params %q", typ, params)
		}
		sorted := slices.Clone(params)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) != len(params) {
			t.Errorf("%q lists a parameter twice: %q", typ, params)
		}
	}
	types[0] = "Changed"
	if CompartmentTypes()[0] != "Account" {
		t.Errorf("changing CompartmentTypes' result changed the table")
	}
}
