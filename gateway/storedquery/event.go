package storedquery

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
)

// The RESTful interactions of the stored queries' member exchanges, as BALP's
// subtype names them.
const (
	interactionUpdate = "update"
	interactionRead   = "read"
	interactionDelete = "delete"
)

// balp is each interaction's BALP profile and DICOM action code.
var balp = map[string]struct{ profile, action string }{
	interactionUpdate: {"https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Update", "U"},
	interactionRead:   {"https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Read", "R"},
	interactionDelete: {"https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Delete", "D"},
}

// memberEvent is one exchange of a stored query with a member to audit: the PUT of a
// distribution or a repair, the read of a drift check or a repair, the DELETE of a
// withdrawal.
type memberEvent struct {
	Interaction string
	Time        time.Time
	// Member is the member's id: the destination agent.
	Member string
	// Query is the OperationDefinition's id: the entity.
	Query string
	// Outcome is AuditEvent.outcome ("0", "4", "8").
	Outcome string
}

// Event builds the BALP AuditEvent (FHIR R4 JSON) of e. It is pure.
func (e memberEvent) Event() ([]byte, error) {
	p, ok := balp[e.Interaction]
	if !ok || e.Member == "" || e.Query == "" {
		return nil, errors.New("stored queries: an exchange event needs its interaction, member and stored query")
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
		What reference `json:"what"`
		Type coding    `json:"type"`
		Role coding    `json:"role"`
	}
	const dcm = "http://dicom.nema.org/resources/ontology/DCM"
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
		Subtype:      []coding{{System: "http://hl7.org/fhir/restful-interaction", Code: e.Interaction, Display: e.Interaction}},
		Action:       p.action,
		Recorded:     e.Time.UTC().Format(time.RFC3339Nano),
		Outcome:      outcome,
		Agent: []agent{
			{Type: codeable{Coding: []coding{{System: dcm, Code: "110153", Display: "Source Role ID"}}}, Who: reference{Display: "ferrofed gateway"}, Requestor: true},
			{Type: codeable{Coding: []coding{{System: dcm, Code: "110152", Display: "Destination Role ID"}}}, Who: reference{Identifier: &identifier{System: audit.MemberSystem, Value: e.Member}}},
		},
		Source: map[string]any{"observer": map[string]string{"display": "ferrofed"},
			"type": []coding{{System: "http://terminology.hl7.org/CodeSystem/security-source-type", Code: "4", Display: "Application Server"}}},
		Entity: []entity{{
			What: reference{Display: "OperationDefinition/" + e.Query},
			Type: coding{System: "http://terminology.hl7.org/CodeSystem/audit-entity-type", Code: "2", Display: "System Object"},
			Role: coding{System: "http://terminology.hl7.org/CodeSystem/object-role", Code: "4", Display: "Domain Resource"},
		}},
	}
	return json.Marshal(ev)
}
