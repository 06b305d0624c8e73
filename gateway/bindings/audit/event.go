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
	// Issuer and Subject are the verified token's, when the request carried one; both
	// "" otherwise. FHIRUser, ClientID and Scopes are its fhirUser claim, its client
	// (client_id, or azp) and the scopes it was used with; never the token itself.
	Issuer, Subject    string
	FHIRUser, ClientID string
	Scopes             []string
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
	// ScopesExtension is the extension of the requesting agent that carries the scopes
	// its token was used with, space-separated.
	ScopesExtension = "https://ferrofed.io/fhir/StructureDefinition/oauth-scopes"
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
	// The bytes are appended in the order and with the escaping of encoding/json
	// (event_test.go holds the reflective encoder they are compared with): a search
	// builds one event, and the reflective encoder cost more than the spool.
	b := make([]byte, 0, eventSize(a, src, observer))
	b = append(b, `{"resourceType":"AuditEvent","meta":{"profile":[`...)
	b = appendString(b, profile)
	b = append(b, `],"tag":[{"system":`...)
	b = appendString(b, EventIDSystem)
	b = append(b, `,"code":`...)
	b = appendString(b, eventID)
	b = append(b, `}]},"type":{"system":"`+systemEventType+`","code":"rest","display":"Restful Operation"},"subtype":[{"system":"`+systemInteraction+`","code":`...)
	b = appendString(b, code)
	b = append(b, `}],"action":`...)
	b = appendString(b, action)
	b = append(b, `,"recorded":"`...)
	b = a.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = appendAgents(b, a, observer)
	b = appendSourceAndEntity(b, a, src, observer)
	return b, nil
}

// appendAgents appends the event's agents to b: the requester (Source Role ID: the
// token's subject, its fhirUser and the scopes used), its client application when the
// token names one, the gateway (Application) and each member asked (Destination Role
// ID).
func appendAgents(b []byte, a Access, observer string) []byte {
	b = append(b, `","agent":[{"type":{"coding":[{"system":"`+systemDCM+`","code":"110153","display":"Source Role ID"}]}`...)
	if len(a.Scopes) > 0 {
		b = append(b, `,"extension":[{"url":"`+ScopesExtension+`","valueString":`...)
		b = appendString(b, strings.Join(a.Scopes, " "))
		b = append(b, `}]`...)
	}
	b = append(b, `,"who":{`...)
	if a.FHIRUser != "" {
		b = append(b, `"reference":`...)
		b = appendString(b, a.FHIRUser)
		b = append(b, ',')
	}
	if a.Subject != "" {
		b = append(b, `"identifier":{`...)
		if a.Issuer != "" {
			b = append(b, `"system":`...)
			b = appendString(b, a.Issuer)
			b = append(b, ',')
		}
		b = append(b, `"value":`...)
		b = appendString(b, a.Subject)
		b = append(b, '}')
	} else {
		b = append(b, `"display":"`+AnonymousSubject+`"`...)
	}
	b = append(b, `},"requestor":true`...)
	if a.ClientAddress != "" {
		b = append(b, `,"network":{"address":`...)
		b = appendString(b, a.ClientAddress)
		b = append(b, `,"type":"`...)
		b = append(b, networkType(a.ClientAddress)...)
		b = append(b, `"}`...)
	}
	if a.ClientID != "" {
		b = append(b, `},{"type":{"coding":[{"system":"`+systemDCM+`","code":"110150","display":"Application"}]},"who":{"identifier":{`...)
		if a.Issuer != "" {
			b = append(b, `"system":`...)
			b = appendString(b, a.Issuer)
			b = append(b, ',')
		}
		b = append(b, `"value":`...)
		b = appendString(b, a.ClientID)
		b = append(b, `}},"requestor":false`...)
	}
	b = append(b, `},{"type":{"coding":[{"system":"`+systemDCM+`","code":"110150","display":"Application"}]},"who":{"display":`...)
	b = appendString2(b, "ferrofed gateway ", observer)
	b = append(b, `},"requestor":false}`...)
	for _, m := range a.Members {
		b = append(b, `,{"type":{"coding":[{"system":"`+systemDCM+`","code":"110152","display":"Destination Role ID"}]},"who":{"identifier":{"system":"`+MemberSystem+`","value":`...)
		b = appendString(b, m)
		b = append(b, `}},"requestor":false}`...)
	}
	return b
}

// appendSourceAndEntity appends the event's source (the observer) and its entity
// (what was read: a query, or a path) to b, closing the event.
func appendSourceAndEntity(b []byte, a Access, src Source, observer string) []byte {
	b = append(b, `],"source":{`...)
	if src.Site != "" {
		b = append(b, `"site":`...)
		b = appendString(b, src.Site)
		b = append(b, ',')
	}
	b = append(b, `"observer":{"display":`...)
	b = appendString(b, observer)
	b = append(b, `},"type":[{"system":"`+systemSourceType+`","code":"4","display":"Application Server"}]},"entity":[{`...)
	if a.Query == "" {
		// An empty base64Binary is no valid FHIR value: a request without a query
		// names what it reads by its path alone.
		b = append(b, `"what":{`...)
		if a.Path != "" {
			b = append(b, `"display":`...)
			b = appendString(b, a.Path)
		}
		b = append(b, `},"type":{"system":"`+systemEntityType+`","code":"2","display":"System Object"},"role":{"system":"`+systemObjectRole+`","code":"4","display":"Domain Resource"}`...)
	} else {
		b = append(b, `"type":{"system":"`+systemEntityType+`","code":"2","display":"System Object"},"role":{"system":"`+systemObjectRole+`","code":"24","display":"Query"}`...)
	}
	b = append(b, `,"description":`...) // never empty: it holds a space
	b = appendString2(b, a.Method+" ", a.Path)
	if a.Query != "" {
		b = append(b, `,"query":"`...)
		b = appendBase64(b, a.Query)
		b = append(b, '"')
	}
	b = append(b, `}]}`...)
	return b
}

// eventSize is a bound of an event's length for the usual values (no escaping), so
// that its buffer is allocated once.
func eventSize(a Access, src Source, observer string) int {
	n := 1600 + 2*len(a.Issuer) + len(a.Subject) + len(a.FHIRUser) + len(a.ClientID) + len(a.ClientAddress) + len(src.Site) + 2*len(observer) + 2*len(a.Path) + len(a.Method) +
		base64.StdEncoding.EncodedLen(len(a.Query))
	for _, m := range a.Members {
		n += 200 + len(m)
	}
	for _, sc := range a.Scopes {
		n += 1 + len(sc)
	}
	return n
}

// appendString appends s as a JSON string, escaped as encoding/json escapes it
// (HTML characters too). Plain printable ASCII, nearly every value of an event, is
// copied; anything else is left to encoding/json.
func appendString(b []byte, s string) []byte {
	if !plain(s) {
		q, _ := json.Marshal(s) // a string always marshals
		return append(b, q...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendString2 is appendString(b, s1+s2) without the concatenation.
func appendString2(b []byte, s1, s2 string) []byte {
	if !plain(s1) || !plain(s2) {
		return appendString(b, s1+s2)
	}
	b = append(b, '"')
	b = append(b, s1...)
	b = append(b, s2...)
	return append(b, '"')
}

// plain says whether s is printable ASCII that JSON takes as it is.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// appendBase64 appends the standard base64 of s, in slices of a stack buffer rather
// than a copy of s.
func appendBase64(b []byte, s string) []byte {
	var chunk [192]byte // a multiple of 3: no padding but at the end
	for len(s) > 0 {
		n := copy(chunk[:], s)
		s = s[n:]
		b = base64.StdEncoding.AppendEncode(b, chunk[:n])
	}
	return b
}

// networkType is the FHIR network type of an address: 2 for an IP address, 1 for a
// machine name.
func networkType(addr string) string {
	if strings.ContainsAny(addr, ":") || strings.Trim(addr, "0123456789.") == "" {
		return "2"
	}
	return "1"
}
