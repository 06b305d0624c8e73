package fhir

import "slices"

// r4Types are the resource types of FHIR R4 (4.0.1), sorted: the resources of R4's
// resource list, as HL7's R4 JSON schema names them (its discriminator's mapping; the
// test reads test/doubles/members/fhirschema's copy of the schema).
var r4Types = []string{
	"Account", "ActivityDefinition", "AdverseEvent", "AllergyIntolerance", "Appointment",
	"AppointmentResponse", "AuditEvent", "Basic", "Binary", "BiologicallyDerivedProduct",
	"BodyStructure", "Bundle", "CapabilityStatement", "CarePlan", "CareTeam",
	"CatalogEntry", "ChargeItem", "ChargeItemDefinition", "Claim", "ClaimResponse",
	"ClinicalImpression", "CodeSystem", "Communication", "CommunicationRequest",
	"CompartmentDefinition", "Composition", "ConceptMap", "Condition", "Consent",
	"Contract", "Coverage", "CoverageEligibilityRequest", "CoverageEligibilityResponse",
	"DetectedIssue", "Device", "DeviceDefinition", "DeviceMetric", "DeviceRequest",
	"DeviceUseStatement", "DiagnosticReport", "DocumentManifest", "DocumentReference",
	"EffectEvidenceSynthesis", "Encounter", "Endpoint", "EnrollmentRequest",
	"EnrollmentResponse", "EpisodeOfCare", "EventDefinition", "Evidence",
	"EvidenceVariable", "ExampleScenario", "ExplanationOfBenefit", "FamilyMemberHistory",
	"Flag", "Goal", "GraphDefinition", "Group", "GuidanceResponse", "HealthcareService",
	"ImagingStudy", "Immunization", "ImmunizationEvaluation",
	"ImmunizationRecommendation", "ImplementationGuide", "InsurancePlan", "Invoice",
	"Library", "Linkage", "List", "Location", "Measure", "MeasureReport", "Media",
	"Medication", "MedicationAdministration", "MedicationDispense", "MedicationKnowledge",
	"MedicationRequest", "MedicationStatement", "MedicinalProduct",
	"MedicinalProductAuthorization", "MedicinalProductContraindication",
	"MedicinalProductIndication", "MedicinalProductIngredient",
	"MedicinalProductInteraction", "MedicinalProductManufactured",
	"MedicinalProductPackaged", "MedicinalProductPharmaceutical",
	"MedicinalProductUndesirableEffect", "MessageDefinition", "MessageHeader",
	"MolecularSequence", "NamingSystem", "NutritionOrder", "Observation",
	"ObservationDefinition", "OperationDefinition", "OperationOutcome", "Organization",
	"OrganizationAffiliation", "Parameters", "Patient", "PaymentNotice",
	"PaymentReconciliation", "Person", "PlanDefinition", "Practitioner",
	"PractitionerRole", "Procedure", "Provenance", "Questionnaire",
	"QuestionnaireResponse", "RelatedPerson", "RequestGroup", "ResearchDefinition",
	"ResearchElementDefinition", "ResearchStudy", "ResearchSubject", "RiskAssessment",
	"RiskEvidenceSynthesis", "Schedule", "SearchParameter", "ServiceRequest", "Slot",
	"Specimen", "SpecimenDefinition", "StructureDefinition", "StructureMap",
	"Subscription", "Substance", "SubstanceNucleicAcid", "SubstancePolymer",
	"SubstanceProtein", "SubstanceReferenceInformation", "SubstanceSourceMaterial",
	"SubstanceSpecification", "SupplyDelivery", "SupplyRequest", "Task",
	"TerminologyCapabilities", "TestReport", "TestScript", "ValueSet",
	"VerificationResult", "VisionPrescription",
}

// R4ResourceType reports whether t is a resource type of FHIR R4: a search or read of
// any other type is no route of the data plane (docs/data-plane.md, "Routes").
func R4ResourceType(t string) bool {
	_, ok := slices.BinarySearch(r4Types, t)
	return ok
}
