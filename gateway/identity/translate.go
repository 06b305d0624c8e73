package identity

import (
	"net/url"
	"strings"

	"github.com/ferrofed/ferrofed/gateway/fhir"
)

// referenceParams are the R4 search parameters of type reference that a bare id may be
// given to (patient=2 means Patient/2): a value with a type (Patient/2), or a
// parameter with a type modifier (subject:Patient=2), is a reference whatever its
// name.
var referenceParams = map[string]bool{
	"patient": true, "subject": true, "encounter": true, "performer": true, "requester": true, "author": true,
	"organization": true, "practitioner": true, "location": true, "general-practitioner": true, "link": true,
	"context": true, "focus": true, "based-on": true, "part-of": true, "recorder": true, "asserter": true,
	"source": true, "target": true, "device": true, "specimen": true, "medication": true, "beneficiary": true,
	"insurer": true, "provider": true, "participant": true, "actor": true, "service-provider": true,
	"managing-organization": true, "endpoint": true, "owner": true, "agent": true, "entity": true, "episode-of-care": true,
	"care-team": true, "request": true, "partof": true, "derived-from": true, "has-member": true, "result": true,
}

// Search is what the references of a federated search's parameters come to.
type Search struct {
	// Only, when not nil, are the members the search may ask (those that hold what its
	// references name), each with its parameters in its own ids, in the order given;
	// nil when no parameter names a federated id: every member, the parameters as
	// they are. An empty, non-nil Only is a search no member can match.
	Only map[string][]string
	// Ambiguous is the name of the first parameter that gives a member's own id
	// (patient=Patient/2), which could name a different resource at every member;
	// "" for none. The search is then refused, or put to the patient-scoped flow.
	Ambiguous string
}

// Translate reads the reference parameters of a federated search (params: "name=value"
// pairs, escaped as in the query) for members (every member's id, isMember) under the
// gateway base gw (docs/data-plane.md, "References in a search"). A value that names
// a resource by its federated id (Patient/h.2, h.2 for a reference parameter or _id,
// {gw}/fhir/Patient/h.2) or by its routed URL ({gw}/nodes/h/fhir/Patient/2) limits
// the search to that member, in the member's own id; a value that gives a member's own
// id to a reference parameter is ambiguous. Chains (patient.name), reverse chains and
// the parameters the gateway owns are no references.
func Translate(params []string, gw string, isMember func(string) bool) Search {
	var out Search
	var only map[string]bool // nil: every member so far
	perParam := make([]map[string][]string, len(params))
	for i, pair := range params {
		rawName, rawValue, _ := strings.Cut(pair, "=")
		name, err1 := url.QueryUnescape(rawName)
		value, err2 := url.QueryUnescape(rawValue)
		if err1 != nil || err2 != nil || !candidate(name) {
			continue
		}
		byMember := map[string][]string{}
		for item := range strings.SplitSeq(value, ",") {
			member, local, kind := classify(name, item, gw, isMember)
			switch kind {
			case federated:
				byMember[member] = append(byMember[member], local)
			case ambiguous:
				if out.Ambiguous == "" {
					out.Ambiguous = name
				}
			}
		}
		if len(byMember) == 0 {
			continue
		}
		perParam[i] = byMember
		only = intersect(only, byMember)
	}
	if only == nil {
		return out
	}
	out.Only = make(map[string][]string, len(only))
	for m := range only {
		kept := make([]string, len(params))
		for i, pair := range params {
			kept[i] = pair
			if byMember := perParam[i]; byMember != nil {
				rawName, _, _ := strings.Cut(pair, "=")
				kept[i] = rawName + "=" + url.QueryEscape(strings.Join(byMember[m], ","))
			}
		}
		out.Only[m] = kept
	}
	return out
}

// candidate reports whether a parameter may carry a reference: not one the gateway
// owns (_count, _sort…) but _id, not a chain or a reverse chain.
func candidate(name string) bool {
	switch {
	case name == "_id":
		return true
	case strings.HasPrefix(name, "_"), strings.Contains(name, "."):
		return false
	}
	return true
}

type kind int

const (
	notReference kind = iota
	federated
	ambiguous
)

// classify reads one value of parameter name: a federated reference (the member, and
// the value in the member's own id), an ambiguous one, or no reference.
func classify(name, item, gw string, isMember func(string) bool) (member, local string, k kind) {
	bare, modifier, _ := strings.Cut(name, ":")
	typed := modifier != "" && fhir.ValidResourceType(modifier)
	if rest, ok := strings.CutPrefix(item, gw+"/nodes/"); ok && gw != "" {
		// The routed URL: {gw}/nodes/{member}/fhir/Type/id.
		m, path, _ := strings.Cut(rest, "/fhir/")
		if r, ok := ParseRef(path); ok && isMember(m) {
			return m, r.String(), federated
		}
		return "", "", notReference
	}
	if rest, ok := strings.CutPrefix(item, gw+"/fhir/"); ok && gw != "" {
		item = rest
	}
	if r, ok := ParseRef(item); ok {
		if m, id, ok := Split(r.ID); ok && isMember(m) {
			r.ID = id
			return m, r.String(), federated
		}
		return "", "", ambiguous
	}
	if strings.Contains(item, "/") || strings.Contains(item, ":") || !fhir.ValidID(item) {
		return "", "", notReference // another server's URL, a urn, a token
	}
	if m, id, ok := Split(item); ok && isMember(m) && (bare == "_id" || typed || referenceParams[bare]) {
		return m, id, federated
	}
	if bare != "_id" && (typed || referenceParams[bare]) && (modifier == "" || typed) {
		return "", "", ambiguous
	}
	return "", "", notReference
}

// intersect is the members both sets allow (nil a: every member).
func intersect(a map[string]bool, byMember map[string][]string) map[string]bool {
	out := map[string]bool{}
	for m := range byMember {
		if a == nil || a[m] {
			out[m] = true
		}
	}
	return out
}

// PatientParam reports whether parameter name of a search of resourceType names the
// patient the patient-scoped flow asks about: patient or subject (bare, or typed
// Patient), and a Patient search's _id.
func PatientParam(resourceType, name string) bool {
	switch name {
	case "patient", "subject", "patient:Patient", "subject:Patient":
		return resourceType != "Patient"
	case "_id":
		return resourceType == "Patient"
	}
	return false
}

// PatientByIdentifier rewrites the parameter that names the patient by a federated id
// (PatientParam; one value) into the identifier the patient-scoped flow asks about:
// patient.identifier={system}|{id}, or identifier= for a Patient search, system being
// the member's identifier system (domain; "" when it has none, and the parameter is
// kept). The other parameters are kept as they are.
func PatientByIdentifier(resourceType string, params []string, gw string, domain func(member string) string) []string {
	out := params
	for i, pair := range params {
		rawName, rawValue, _ := strings.Cut(pair, "=")
		name, err1 := url.QueryUnescape(rawName)
		value, err2 := url.QueryUnescape(rawValue)
		if err1 != nil || err2 != nil || !PatientParam(resourceType, name) || strings.Contains(value, ",") {
			continue
		}
		member, local, k := classify(name, value, gw, func(m string) bool { return domain(m) != "" })
		if k != federated {
			continue
		}
		local = strings.TrimPrefix(local, "Patient/")
		target := "patient.identifier"
		if resourceType == "Patient" {
			target = "identifier"
		}
		if &out[0] == &params[0] {
			out = append([]string(nil), params...) // the caller's slice is kept
		}
		out[i] = target + "=" + url.QueryEscape(domain(member)+"|"+local)
	}
	return out
}

// Plan is what the reference rule makes of a federated search's first page
// (docs/data-plane.md, "References in a search").
type Plan struct {
	// Params are the search's parameters for the patient-scoped flow: a patient named
	// by federated id asked about by its member's identifier (PatientByIdentifier).
	Params []string
	// Only is Search.Only: nil for every member.
	Only map[string][]string
	// Refusal, when not empty, refuses the search (400) naming Param.
	Param, Refusal string
}

// Members are the registry as Narrow reads it: whether an id is a member's, and the
// identifier system of its Patient ids ("" for none).
type Members interface {
	IsMember(id string) bool
	Domain(id string) string
}

// Narrow applies the reference rule to a search of resourceType with params under the
// gateway base gw. flow is true when the patient-scoped flow runs after it, and names
// reports whether params name a patient the flow asks about.
func Narrow(resourceType string, params []string, gw string, members Members, flow bool, names func([]string) bool) Plan {
	p := Plan{Params: params}
	if flow {
		p.Params = PatientByIdentifier(resourceType, params, gw, members.Domain)
	}
	tr := Translate(p.Params, gw, members.IsMember)
	switch {
	case tr.Ambiguous != "" && (!flow || !PatientParam(resourceType, tr.Ambiguous)):
		p.Param, p.Refusal = tr.Ambiguous, "a member's own id names a different resource at every member: "+
			"name it by its federated id ({member}.{id}, as a search's entries give it), by an identifier (system|value), or ask that member at {base}/nodes/{member}/fhir"
	case tr.Only != nil && flow && names(p.Params):
		// The flow asks every member it keeps with the one query: it cannot carry
		// each member's own ids.
		p.Param, p.Refusal = "(query)", "a search that names its patient cannot also name other resources by federated id: "+
			"name them by identifier, or ask the member at {base}/nodes/{member}/fhir"
	default:
		p.Only = tr.Only
	}
	return p
}
