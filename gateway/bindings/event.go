package bindings

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"
)

// Exchange events: the BALP AuditEvent (FHIR R4 JSON) a patient-scoped binding
// records of each exchange with its service, as the consumer side of its profile
// (IHE.PIXm.Query.Audit.Consumer, IHE.PDQm.Query.Audit.Consumer, …): BALP
// PatientQuery, the IHE transaction as a second subtype.
const (
	// ProfilePatientQuery is BALP's patient query profile.
	ProfilePatientQuery = "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.PatientQuery"
	// TransactionSystem is the code system of IHE transactions (ITI-83, ITI-78, ITI-55).
	TransactionSystem = "urn:ihe:event-type-code"
	// ServiceSystem names the service of an exchange event by its report key.
	ServiceSystem = "https://ferrofed.io/fhir/binding"
)

// QueryEvent is one exchange to audit.
type QueryEvent struct {
	// Key is the binding's report key ("resolver"): the destination agent.
	Key string
	// Transaction and TransactionDisplay name the IHE transaction ("ITI-83"); empty
	// for a protocol of no IHE profile (AuthZEN), which then has one subtype.
	Transaction, TransactionDisplay string
	// Time is when the exchange was sent.
	Time time.Time
	// Query is what was asked, as sent (a query string or a body), base64 in the event.
	Query []byte
	// PatientSystem and PatientValue identify the patient asked about.
	PatientSystem, PatientValue string
	// Outcome is FHIR's AuditEvent.outcome: "0" success, "4" minor failure (an answer
	// that could not be used), "8" serious failure (no answer, a 5xx).
	Outcome string
}

// Event builds the AuditEvent of e. It is pure.
func (e QueryEvent) Event() ([]byte, error) {
	if e.Key == "" || len(e.Query) == 0 {
		return nil, errors.New("binding: an exchange event needs its binding and its query")
	}
	subtype := []coding{{System: "http://hl7.org/fhir/restful-interaction", Code: "search", Display: "search"}}
	if e.Transaction != "" {
		subtype = append(subtype, coding{System: TransactionSystem, Code: e.Transaction, Display: e.TransactionDisplay})
	}
	entities := []entity{{
		Type:  coding{System: "http://terminology.hl7.org/CodeSystem/audit-entity-type", Code: "2", Display: "System Object"},
		Role:  coding{System: "http://terminology.hl7.org/CodeSystem/object-role", Code: "24", Display: "Query"},
		Query: base64.StdEncoding.EncodeToString(e.Query),
	}}
	if e.PatientValue != "" {
		entities = append(entities, entity{
			What: &reference{Identifier: &identifier{System: e.PatientSystem, Value: e.PatientValue}},
			Type: coding{System: "http://terminology.hl7.org/CodeSystem/audit-entity-type", Code: "1", Display: "Person"},
			Role: coding{System: "http://terminology.hl7.org/CodeSystem/object-role", Code: "1", Display: "Patient"},
		})
	}
	outcome := e.Outcome
	if outcome == "" {
		outcome = "0"
	}
	ev := auditEvent{
		ResourceType: "AuditEvent",
		Meta:         map[string]any{"profile": []string{ProfilePatientQuery}},
		Type:         coding{System: "http://terminology.hl7.org/CodeSystem/audit-event-type", Code: "rest", Display: "Restful Operation"},
		Subtype:      subtype,
		Action:       "E",
		Recorded:     e.Time.UTC().Format(time.RFC3339Nano),
		Outcome:      outcome,
		Agent: []agent{
			{Type: codeable{Coding: []coding{{System: dcm, Code: "110153", Display: "Source Role ID"}}}, Who: reference{Display: "ferrofed gateway"}, Requestor: true},
			{Type: codeable{Coding: []coding{{System: dcm, Code: "110152", Display: "Destination Role ID"}}}, Who: reference{Identifier: &identifier{System: ServiceSystem, Value: e.Key}}},
		},
		Source: map[string]any{"observer": map[string]string{"display": "ferrofed"},
			"type": []coding{{System: "http://terminology.hl7.org/CodeSystem/security-source-type", Code: "4", Display: "Application Server"}}},
		Entity: entities,
	}
	return json.Marshal(ev)
}

// AuditOutcome is the AuditEvent.outcome of an exchange: "0" when answered below 400,
// "4" for another answer, "8" for none or a 5xx.
func (e Exchange) AuditOutcome() string {
	switch {
	case !e.Answered || e.Status >= 500 || e.HeadTooLarge:
		return "8"
	case e.Status >= 400 || e.TooLarge:
		return "4"
	}
	return "0"
}

// auditEvent is the FHIR R4 AuditEvent an exchange event is, and below, its parts.
type auditEvent struct {
	ResourceType string         `json:"resourceType"`
	Meta         map[string]any `json:"meta"`
	Type         coding         `json:"type"`
	Subtype      []coding       `json:"subtype"`
	Action       string         `json:"action"`
	Recorded     string         `json:"recorded"`
	Outcome      string         `json:"outcome"`
	Agent        []agent        `json:"agent"`
	Source       map[string]any `json:"source"`
	Entity       []entity       `json:"entity"`
}

type coding struct {
	System  string `json:"system"`
	Code    string `json:"code"`
	Display string `json:"display,omitempty"`
}

type codeable struct {
	Coding []coding `json:"coding"`
}

type identifier struct {
	System string `json:"system,omitempty"`
	Value  string `json:"value"`
}

type reference struct {
	Identifier *identifier `json:"identifier,omitempty"`
	Display    string      `json:"display,omitempty"`
}

type agent struct {
	Type      codeable  `json:"type"`
	Who       reference `json:"who"`
	Requestor bool      `json:"requestor"`
}

type entity struct {
	What  *reference `json:"what,omitempty"`
	Type  coding     `json:"type"`
	Role  coding     `json:"role"`
	Query string     `json:"query,omitempty"`
}

// dcm is DICOM's code system, of the agents' roles.
const dcm = "http://dicom.nema.org/resources/ontology/DCM"
