package pmir

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

	binding "github.com/ferrofed/ferrofed/gateway/bindings"
)

// The IHE transactions of the feed's exchanges.
const (
	TransactionSubscribe = "ITI-94"
	TransactionFeed      = "ITI-93"
)

var transactionDisplay = map[string]string{
	TransactionSubscribe: "Subscribe to Patient Updates",
	TransactionFeed:      "Mobile Patient Identity Feed",
}

// The RESTful interactions of the exchanges, as BALP's subtype names them.
const (
	interactionCreate    = "create"
	interactionRead      = "read"
	interactionSearch    = "search"
	interactionDelete    = "delete"
	interactionOperation = "operation" // $process-message, the feed
)

// balp is each interaction's BALP profile and DICOM action code.
var balp = map[string]struct{ profile, action string }{
	interactionCreate:    {"https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Create", "C"},
	interactionRead:      {"https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Read", "R"},
	interactionSearch:    {"https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Query", "E"},
	interactionDelete:    {"https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Delete", "D"},
	interactionOperation: {"https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Update", "U"},
}

// restEvent is one exchange of the feed to audit.
type restEvent struct {
	Interaction string
	Transaction string
	Time        time.Time
	// What is the resource the exchange is about ("Subscription/12", or the search
	// "Subscription?url=…"), or the feed message's id.
	What string
	// Query, for a search, is its query string: the entity's query (base64), as
	// BALP's Query profile has it.
	Query []byte
	// Outcome is AuditEvent.outcome ("0", "4", "8").
	Outcome string
	// Inbound is true for the feed: the registry is the source, the gateway the
	// destination.
	Inbound bool
}

// Event builds the BALP AuditEvent (FHIR R4 JSON) of e. It is pure.
func (e restEvent) Event() ([]byte, error) {
	p, ok := balp[e.Interaction]
	if !ok || e.What == "" {
		return nil, errors.New("pmir: an exchange event needs its interaction and what it is about")
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
	const dcm = "http://dicom.nema.org/resources/ontology/DCM"
	gateway := reference{Display: "ferrofed gateway"}
	registry := reference{Identifier: &identifier{System: binding.ServiceSystem, Value: Key}}
	source, destination := gateway, registry
	if e.Inbound {
		source, destination = registry, gateway
	}
	outcome := e.Outcome
	if outcome == "" {
		outcome = "0"
	}
	ev := struct {
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
	}{
		ResourceType: "AuditEvent",
		Meta:         map[string]any{"profile": []string{p.profile}},
		Type:         coding{System: "http://terminology.hl7.org/CodeSystem/audit-event-type", Code: "rest", Display: "Restful Operation"},
		Subtype: []coding{
			{System: "http://hl7.org/fhir/restful-interaction", Code: e.Interaction, Display: e.Interaction},
			{System: binding.TransactionSystem, Code: e.Transaction, Display: transactionDisplay[e.Transaction]},
		},
		Action:   p.action,
		Recorded: e.Time.UTC().Format(time.RFC3339Nano),
		Outcome:  outcome,
		Agent: []agent{
			{Type: codeable{Coding: []coding{{System: dcm, Code: "110153", Display: "Source Role ID"}}}, Who: source, Requestor: !e.Inbound},
			{Type: codeable{Coding: []coding{{System: dcm, Code: "110152", Display: "Destination Role ID"}}}, Who: destination, Requestor: e.Inbound},
		},
		Source: map[string]any{"observer": map[string]string{"display": "ferrofed"},
			"type": []coding{{System: "http://terminology.hl7.org/CodeSystem/security-source-type", Code: "4", Display: "Application Server"}}},
		Entity: []entity{{
			What: &reference{Display: e.What},
			Type: coding{System: "http://terminology.hl7.org/CodeSystem/audit-entity-type", Code: "2", Display: "System Object"},
			Role: coding{System: "http://terminology.hl7.org/CodeSystem/object-role", Code: "4", Display: "Domain Resource"},
		}},
	}
	if len(e.Query) > 0 {
		ev.Entity[0].Role = coding{System: "http://terminology.hl7.org/CodeSystem/object-role", Code: "24", Display: "Query"}
		ev.Entity[0].Query = base64.StdEncoding.EncodeToString(e.Query)
	}
	return json.Marshal(ev)
}
