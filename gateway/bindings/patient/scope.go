package patient

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/ferrofed/ferrofed/gateway/fhir"
)

// Limits of the patient a search names: it goes into every binding's query.
const (
	// MaxIdentifierBytes bounds the system and the value of patient.identifier= (and
	// Patient?identifier=), each.
	MaxIdentifierBytes = 256
)

// Scope is the patient a search names: the parameter, and the patient as given.
type Scope struct {
	// Index is the parameter's position in the query's parameters.
	Index int
	// Name is the parameter: patient, subject, patient.identifier, or identifier (of
	// a Patient search).
	Name string
	// System and Value are the identifier of patient.identifier= and identifier=.
	System, Value string
	// ID is the logical id of patient= and subject= (Patient/<id>, or <id>).
	ID string
}

// Identified reports whether the search names the patient by an identifier.
func (s Scope) Identified() bool { return s.Value != "" }

// Refusal is a patient-scoped search the gateway will not run: a 400 naming the
// parameter.
type Refusal struct {
	Param, Diagnostics string
}

func (r *Refusal) Error() string { return r.Param + ": " + r.Diagnostics }

// Find is the patient a search of resourceType names among params (each "name=value",
// escaped as the data plane keeps them), ok false when it names none. A search that
// names the patient in a way the bindings cannot ask about is refused.
func Find(resourceType string, params []string) (s Scope, ok bool, err error) {
	for i, pair := range params {
		rawName, rawValue, _ := strings.Cut(pair, "=")
		name, err1 := url.QueryUnescape(rawName)
		value, err2 := url.QueryUnescape(rawValue)
		if err1 != nil || err2 != nil {
			return Scope{}, false, &Refusal{Param: "(query)", Diagnostics: "the query is not form-encoded"}
		}
		switch {
		case name == "patient" || name == "subject" || name == "patient.identifier":
		case name == "identifier" && resourceType == "Patient":
		default:
			continue
		}
		if ok {
			return Scope{}, false, &Refusal{Param: name, Diagnostics: fmt.Sprintf("the search names its patient twice (%s and %s): a patient-scoped search names one", s.Name, name)}
		}
		s, ok = Scope{Index: i, Name: name}, true
		if strings.Contains(value, ",") {
			return Scope{}, false, &Refusal{Param: name, Diagnostics: "a patient-scoped search names one patient, not a list"}
		}
		if name == "patient" || name == "subject" {
			id, msg := referenceID(value)
			if msg != "" {
				return Scope{}, false, &Refusal{Param: name, Diagnostics: msg}
			}
			s.ID = id
			continue
		}
		system, v, bar := strings.Cut(value, "|")
		switch {
		case !bar || system == "" || v == "":
			return Scope{}, false, &Refusal{Param: name, Diagnostics: "a patient-scoped search names the patient's identifier as system|value, both given"}
		case len(system) > MaxIdentifierBytes || len(v) > MaxIdentifierBytes:
			return Scope{}, false, &Refusal{Param: name, Diagnostics: fmt.Sprintf("the identifier's system and value are at most %d bytes each", MaxIdentifierBytes)}
		case !visible(system) || !visible(v):
			return Scope{}, false, &Refusal{Param: name, Diagnostics: "the identifier's system and value are visible ASCII without spaces"}
		}
		s.System, s.Value = system, v
	}
	return s, ok, nil
}

// referenceID is the logical id of a patient reference (Patient/<id> or <id>), or why
// the gateway will not take it. An absolute URL is refused whatever its host: the
// bindings know the patient by identifier, and a URL would name another server's.
func referenceID(v string) (string, string) {
	if strings.Contains(v, "://") || strings.HasPrefix(v, "//") {
		return "", "a patient-scoped search names the patient as Patient/<id> or by patient.identifier=system|value, never by a URL"
	}
	id := strings.TrimPrefix(v, "Patient/")
	if !fhir.ValidID(id) {
		return "", "the patient reference must be Patient/<id> with a FHIR id (A-Z, a-z, 0-9, '-', '.', at most 64)"
	}
	return id, ""
}

func visible(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r > '~' }) < 0
}

// memberParam is the parameter a member is asked with in place of the scope's: the
// patient by the member's own id.
func (s Scope) memberParam(localID string) string {
	switch s.Name {
	case "identifier":
		return "_id=" + localID
	case "patient.identifier":
		return "patient=Patient/" + localID
	}
	return s.Name + "=Patient/" + localID
}
