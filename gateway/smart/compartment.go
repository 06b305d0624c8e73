package smart

import (
	"slices"
	"sort"
)

// patientCompartment is FHIR R4's (4.0.1) CompartmentDefinition "patient"
// (hl7.org/fhir/R4/compartmentdefinition-patient.json): every resource type it lists
// with parameters, and those parameters, in its order. A resource is in a patient's
// compartment when one of its type's parameters refers to that patient. The 79
// types it lists without a parameter (Binary, Bundle, Device, Location, Medication,
// Organization, Practitioner, Task, ValueSet, ...) are never in the compartment and
// are left out. Patient's own entry is the link parameter only; a Patient is also in
// its own compartment by its id.
var patientCompartment = map[string][]string{
	"Account":                     {"subject"},
	"AdverseEvent":                {"subject"},
	"AllergyIntolerance":          {"patient", "recorder", "asserter"},
	"Appointment":                 {"actor"},
	"AppointmentResponse":         {"actor"},
	"AuditEvent":                  {"patient"},
	"Basic":                       {"patient", "author"},
	"BodyStructure":               {"patient"},
	"CarePlan":                    {"patient", "performer"},
	"CareTeam":                    {"patient", "participant"},
	"ChargeItem":                  {"subject"},
	"Claim":                       {"patient", "payee"},
	"ClaimResponse":               {"patient"},
	"ClinicalImpression":          {"subject"},
	"Communication":               {"subject", "sender", "recipient"},
	"CommunicationRequest":        {"subject", "sender", "recipient", "requester"},
	"Composition":                 {"subject", "author", "attester"},
	"Condition":                   {"patient", "asserter"},
	"Consent":                     {"patient"},
	"Coverage":                    {"policy-holder", "subscriber", "beneficiary", "payor"},
	"CoverageEligibilityRequest":  {"patient"},
	"CoverageEligibilityResponse": {"patient"},
	"DetectedIssue":               {"patient"},
	"DeviceRequest":               {"subject", "performer"},
	"DeviceUseStatement":          {"subject"},
	"DiagnosticReport":            {"subject"},
	"DocumentManifest":            {"subject", "author", "recipient"},
	"DocumentReference":           {"subject", "author"},
	"Encounter":                   {"patient"},
	"EnrollmentRequest":           {"subject"},
	"EpisodeOfCare":               {"patient"},
	"ExplanationOfBenefit":        {"patient", "payee"},
	"FamilyMemberHistory":         {"patient"},
	"Flag":                        {"patient"},
	"Goal":                        {"patient"},
	"Group":                       {"member"},
	"ImagingStudy":                {"patient"},
	"Immunization":                {"patient"},
	"ImmunizationEvaluation":      {"patient"},
	"ImmunizationRecommendation":  {"patient"},
	"Invoice":                     {"subject", "patient", "recipient"},
	"List":                        {"subject", "source"},
	"MeasureReport":               {"patient"},
	"Media":                       {"subject"},
	"MedicationAdministration":    {"patient", "performer", "subject"},
	"MedicationDispense":          {"subject", "patient", "receiver"},
	"MedicationRequest":           {"subject"},
	"MedicationStatement":         {"subject"},
	"MolecularSequence":           {"patient"},
	"NutritionOrder":              {"patient"},
	"Observation":                 {"subject", "performer"},
	"Patient":                     {"link"},
	"Person":                      {"patient"},
	"Procedure":                   {"patient", "performer"},
	"Provenance":                  {"patient"},
	"QuestionnaireResponse":       {"subject", "author"},
	"RelatedPerson":               {"patient"},
	"RequestGroup":                {"subject", "participant"},
	"ResearchSubject":             {"individual"},
	"RiskAssessment":              {"subject"},
	"Schedule":                    {"actor"},
	"ServiceRequest":              {"subject", "performer"},
	"Specimen":                    {"subject"},
	"SupplyDelivery":              {"patient"},
	"SupplyRequest":               {"subject"},
	"VisionPrescription":          {"patient"},
}

// CompartmentParams returns the search parameters through which a resource of the
// type belongs to a patient's compartment (a copy), and false for a type that is
// never in it.
func CompartmentParams(resourceType string) ([]string, bool) {
	p, ok := patientCompartment[resourceType]
	return slices.Clone(p), ok
}

// InCompartment reports whether resources of the type can be in a patient's
// compartment: those a patient-level scope can reach at all.
func InCompartment(resourceType string) bool {
	_, ok := patientCompartment[resourceType]
	return ok
}

// CompartmentTypes returns every type of the patient compartment, sorted.
func CompartmentTypes() []string {
	out := make([]string, 0, len(patientCompartment))
	for t := range patientCompartment {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
