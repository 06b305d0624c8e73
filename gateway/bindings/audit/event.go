package audit

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
)

// Kind is what an audited access is.
type Kind int

const (
	// Search is a federated search: {base}/fhir/{type}, sent to every query member.
	Search Kind = iota + 1
	// Routed is a request routed to one member: {base}/nodes/{id}/fhir/....
	Routed
)

// Access is one access of the data plane, as the gateway is about to make it: the
// federation records it before any member is asked.
type Access struct {
	// Kind is a federated search or a routed request.
	Kind Kind
	// Time is when the gateway took the request.
	Time time.Time
	// Method is the client's HTTP method.
	Method string
	// Path is the path the client asked for, under the gateway's base
	// ("/fhir/Patient", "/nodes/a/fhir/Patient/1").
	Path string
	// Query is the query string (for a search, the query, or the form of a POST
	// _search), as the client sent it: entity.query carries it, base64.
	Query string
	// ResourceType is the type searched, or the first segment of a routed path.
	ResourceType string
	// Issuer and Subject are the verified operator token's, when the request carried
	// one; both "" otherwise.
	Issuer, Subject string
	// ClientAddress is the client's network address (its IP).
	ClientAddress string
	// Members are the ids of the members the gateway sends the request to.
	Members []string
}

// Source names the gateway in its events (AuditEvent.source).
type Source struct {
	// Observer is this gateway instance (the host name: the pod name on Kubernetes).
	Observer string
	// Site is the gateway's own FHIR base as clients reach it, when known.
	Site string
}

// The code systems of the events (FHIR R4 terminology, DICOM, BALP).
const (
	systemEventType   = "http://terminology.hl7.org/CodeSystem/audit-event-type"
	systemInteraction = "http://hl7.org/fhir/restful-interaction"
	systemDCM         = "http://dicom.nema.org/resources/ontology/DCM"
	systemSourceType  = "http://terminology.hl7.org/CodeSystem/security-source-type"
	systemEntityType  = "http://terminology.hl7.org/CodeSystem/audit-entity-type"
	systemObjectRole  = "http://terminology.hl7.org/CodeSystem/object-role"
	// MemberSystem is the identifier system of a member in an event's agents.
	MemberSystem = "https://ferrofed.io/fhir/member"
	// AnonymousSubject stands for the requester of a request without a verified token.
	AnonymousSubject = "anonymous"
	// ProfileQuery is BALP's profile of a query event.
	ProfileQuery = "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Query"
	// ProfileRead, ProfileCreate, ProfileUpdate and ProfileDelete are BALP's profiles of
	// the RESTful interactions a routed request makes.
	ProfileRead   = "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Read"
	ProfileCreate = "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Create"
	ProfileUpdate = "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Update"
	ProfileDelete = "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Delete"
)

// interaction is the RESTful interaction of an access: its subtype code, its action
// (C, R, U, D, E) and its BALP profile. A routed GET with an id is a read; one
// without (a type, or a query) a search, as is every federated search.
func interaction(a Access) (code, action, profile string) {
	if a.Kind == Search {
		return "search", "E", ProfileQuery
	}
	rest := strings.Trim(a.Path, "/")
	if _, after, ok := strings.Cut(rest, "/fhir"); ok {
		rest = strings.Trim(after, "/")
	}
	segs := 0
	if rest != "" {
		segs = len(strings.Split(rest, "/"))
	}
	switch a.Method {
	case http.MethodPost:
		if strings.HasSuffix(rest, "/_search") {
			return "search", "E", ProfileQuery
		}
		return "create", "C", ProfileCreate
	case http.MethodPut:
		return "update", "U", ProfileUpdate
	case http.MethodPatch:
		return "patch", "U", ProfileUpdate
	case http.MethodDelete:
		return "delete", "D", ProfileDelete
	}
	if segs >= 2 && !strings.HasPrefix(rest, "_") {
		return "read", "R", ProfileRead
	}
	return "search", "E", ProfileQuery
}

type coding struct {
	System  string `json:"system"`
	Code    string `json:"code"`
	Display string `json:"display,omitempty"`
}

type codeable struct {
	Coding []coding `json:"coding"`
	Text   string   `json:"text,omitempty"`
}

type identifier struct {
	System string `json:"system,omitempty"`
	Value  string `json:"value"`
}

type reference struct {
	Identifier *identifier `json:"identifier,omitempty"`
	Display    string      `json:"display,omitempty"`
}

type network struct {
	Address string `json:"address"`
	Type    string `json:"type"`
}

type agent struct {
	Type      *codeable  `json:"type,omitempty"`
	Who       *reference `json:"who,omitempty"`
	Requestor bool       `json:"requestor"`
	Network   *network   `json:"network,omitempty"`
}

type entity struct {
	What        *reference `json:"what,omitempty"`
	Type        *coding    `json:"type,omitempty"`
	Role        *coding    `json:"role,omitempty"`
	Description string     `json:"description,omitempty"`
	Query       string     `json:"query,omitempty"`
}

type source struct {
	Site     string     `json:"site,omitempty"`
	Observer *reference `json:"observer"`
	Type     []coding   `json:"type"`
}

type meta struct {
	Profile []string `json:"profile"`
	Tag     []coding `json:"tag,omitempty"`
}

type auditEvent struct {
	ResourceType string   `json:"resourceType"`
	Meta         meta     `json:"meta"`
	Type         coding   `json:"type"`
	Subtype      []coding `json:"subtype"`
	Action       string   `json:"action"`
	Recorded     string   `json:"recorded"`
	Agent        []agent  `json:"agent"`
	Source       source   `json:"source"`
	Entity       []entity `json:"entity"`
}

// EventIDSystem is deliver.EventIDSystem, the meta.tag system of the stable event id
// (kept equal by a test: this package builds the tag, deliver reads it back).
const EventIDSystem = "https://ferrofed.io/fhir/audit-event-id"

// Event is the BALP AuditEvent (FHIR R4 JSON) of one access, with eventID as its
// stable event id tag. It is pure: the same arguments give the same bytes.
//
//   - type rest, subtype the RESTful interaction, action E for a search (BALP
//     Query) or C, R, U, D for a routed create, read, update or delete;
//   - agent 1, the requester (DICOM Source Role ID): the verified token's subject
//     under its issuer, or "anonymous", with the client's address;
//   - agent 2, the gateway (DICOM Application), and one agent per member the
//     request goes to (DICOM Destination Role ID), identified by its member id;
//   - entity 1, the query (object role 24, Query): entity.query is the base64 of the
//     query string, as BALP Query wants, and entity.description the path.
func Event(a Access, src Source, eventID string) ([]byte, error) {
	if a.Kind != Search && a.Kind != Routed {
		return nil, errors.New("audit: an access must be a search or a routed request")
	}
	if eventID == "" {
		return nil, errors.New("audit: an event needs its event id")
	}
	code, action, profile := interaction(a)
	observer := src.Observer
	if observer == "" {
		observer = "ferrofed"
	}
	who := &reference{Display: AnonymousSubject}
	if a.Subject != "" {
		who = &reference{Identifier: &identifier{System: a.Issuer, Value: a.Subject}}
	}
	requester := agent{
		Type:      &codeable{Coding: []coding{{System: systemDCM, Code: "110153", Display: "Source Role ID"}}},
		Who:       who,
		Requestor: true,
	}
	if a.ClientAddress != "" {
		requester.Network = &network{Address: a.ClientAddress, Type: networkType(a.ClientAddress)}
	}
	agents := []agent{requester, {
		Type:      &codeable{Coding: []coding{{System: systemDCM, Code: "110150", Display: "Application"}}},
		Who:       &reference{Display: "ferrofed gateway " + observer},
		Requestor: false,
	}}
	for _, m := range a.Members {
		agents = append(agents, agent{
			Type:      &codeable{Coding: []coding{{System: systemDCM, Code: "110152", Display: "Destination Role ID"}}},
			Who:       &reference{Identifier: &identifier{System: MemberSystem, Value: m}},
			Requestor: false,
		})
	}
	q := entity{
		Type:        &coding{System: systemEntityType, Code: "2", Display: "System Object"},
		Role:        &coding{System: systemObjectRole, Code: "24", Display: "Query"},
		Description: a.Method + " " + a.Path,
		Query:       base64.StdEncoding.EncodeToString([]byte(a.Query)),
	}
	if a.Query == "" {
		// An empty base64Binary is no valid FHIR value: a request without a query
		// names what it reads by its path alone.
		q.Query = ""
		q.What = &reference{Display: a.Path}
		q.Role = &coding{System: systemObjectRole, Code: "4", Display: "Domain Resource"}
	}
	ev := auditEvent{
		ResourceType: "AuditEvent",
		Meta:         meta{Profile: []string{profile}, Tag: []coding{{System: EventIDSystem, Code: eventID}}},
		Type:         coding{System: systemEventType, Code: "rest", Display: "Restful Operation"},
		Subtype:      []coding{{System: systemInteraction, Code: code}},
		Action:       action,
		Recorded:     a.Time.UTC().Format(time.RFC3339Nano),
		Agent:        agents,
		Source: source{
			Site:     src.Site,
			Observer: &reference{Display: observer},
			Type:     []coding{{System: systemSourceType, Code: "4", Display: "Application Server"}},
		},
		Entity: []entity{q},
	}
	return json.Marshal(ev)
}

// networkType is the FHIR network type of an address: 2 for an IP address, 1 for a
// machine name.
func networkType(addr string) string {
	if strings.ContainsAny(addr, ":") || strings.Trim(addr, "0123456789.") == "" {
		return "2"
	}
	return "1"
}
