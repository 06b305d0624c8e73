package bindings

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"
)

// The RESTful interactions of a RESTEvent, as BALP's subtype names them.
const (
	InteractionCreate    = "create"
	InteractionRead      = "read"
	InteractionUpdate    = "update"
	InteractionDelete    = "delete"
	InteractionSearch    = "search"
	InteractionOperation = "operation" // an operation such as $process-message, audited as an update
)

// balpREST is each interaction's BALP profile and DICOM action code.
var balpREST = map[string]struct{ profile, action string }{
	InteractionCreate:    {"https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Create", "C"},
	InteractionRead:      {"https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Read", "R"},
	InteractionUpdate:    {"https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Update", "U"},
	InteractionDelete:    {"https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Delete", "D"},
	InteractionSearch:    {"https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Query", "E"},
	InteractionOperation: {"https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Update", "U"},
}

// RESTEvent is one RESTful exchange of a long-running binding to audit, with its
// service (the PMIR registry) or with a member (a stored query's copy): BALP's Create,
// Read, Update, Delete or Query, the IHE transaction as a second subtype when there is
// one.
type RESTEvent struct {
	// Interaction is one of the Interaction constants.
	Interaction string
	// Transaction and TransactionDisplay name the IHE transaction ("ITI-94"); empty
	// when the exchange belongs to none.
	Transaction, TransactionDisplay string
	// Time is when the exchange was sent (or received, Inbound).
	Time time.Time
	// What is the resource the exchange is about ("Subscription/12",
	// "OperationDefinition/high-risk", a search "Subscription"), or a message's id.
	What string
	// Query, for a search, is its query string: the entity's query (base64) and role
	// Query, as BALP's Query profile has it.
	Query []byte
	// Outcome is AuditEvent.outcome ("0", "4", "8"); empty is "0".
	Outcome string
	// PeerSystem and PeerValue identify the other party: a service by its report key
	// under ServiceSystem, a member by its id under the audit trail's member system.
	PeerSystem, PeerValue string
	// Inbound is true when the peer sent the exchange (a feed message): the peer is
	// then the source and the requestor, the gateway the destination.
	Inbound bool
}

// Event builds the BALP AuditEvent (FHIR R4 JSON) of e. It is pure.
func (e RESTEvent) Event() ([]byte, error) {
	p, ok := balpREST[e.Interaction]
	if !ok || e.What == "" || e.PeerValue == "" {
		return nil, errors.New("binding: a REST exchange event needs its interaction, what it is about and its peer")
	}
	gateway := reference{Display: "ferrofed gateway"}
	peer := reference{Identifier: &identifier{System: e.PeerSystem, Value: e.PeerValue}}
	source, destination := gateway, peer
	if e.Inbound {
		source, destination = peer, gateway
	}
	outcome := e.Outcome
	if outcome == "" {
		outcome = "0"
	}
	subtype := []coding{{System: "http://hl7.org/fhir/restful-interaction", Code: e.Interaction, Display: e.Interaction}}
	if e.Transaction != "" {
		subtype = append(subtype, coding{System: TransactionSystem, Code: e.Transaction, Display: e.TransactionDisplay})
	}
	ev := auditEvent{
		ResourceType: "AuditEvent",
		Meta:         map[string]any{"profile": []string{p.profile}},
		Type:         coding{System: "http://terminology.hl7.org/CodeSystem/audit-event-type", Code: "rest", Display: "Restful Operation"},
		Subtype:      subtype,
		Action:       p.action,
		Recorded:     e.Time.UTC().Format(time.RFC3339Nano),
		Outcome:      outcome,
		Agent: []agent{
			{Type: codeable{Coding: []coding{{System: dcm, Code: "110153", Display: "Source Role ID"}}}, Who: source, Requestor: true},
			{Type: codeable{Coding: []coding{{System: dcm, Code: "110152", Display: "Destination Role ID"}}}, Who: destination},
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
