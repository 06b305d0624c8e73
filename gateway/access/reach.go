package access

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/ferrofed/ferrofed/gateway/identity"
	"github.com/ferrofed/ferrofed/gateway/smart"
)

// referenceTargets are the search parameters whose references reach one type only,
// so that a chain through them (patient.identifier) searches that type. A chain
// through any other parameter names its type with a modifier (subject:Patient.name)
// or reaches every type.
var referenceTargets = map[string]string{
	"patient": "Patient", "encounter": "Encounter", "organization": "Organization", "location": "Location",
	"medication": "Medication", "specimen": "Specimen", "device": "Device",
}

// decideReach decides what a search reaches beyond its own type: the types of _type,
// the targets of its chains and the types of its reverse chains must be searchable
// (a 403 otherwise), and an _include or _revinclude of a type the token may not read
// is dropped.
func decideReach(g smart.Grants, e smart.Entry) Verdict {
	var v Verdict
	for key, values := range e.Params {
		switch name, _, _ := strings.Cut(key, ":"); {
		case name == "_type":
			for _, t := range splitList(values) {
				if d := g.Allow(t, smart.SearchType); !d.Allowed {
					return refuse(d.Needed, fmt.Sprintf("_type names %s, which the token may not search", t))
				}
			}
		case name == "_include" || name == "_revinclude":
			for _, value := range values {
				if t := includedType(name, value); !readable(g, t) {
					v.Drop = append(v.Drop, key+"="+value)
				}
			}
		case strings.HasPrefix(key, "_has:"):
			parts := strings.Split(key, ":")
			if d := g.Allow(parts[1], smart.SearchType); !d.Allowed {
				return refuse(d.Needed, fmt.Sprintf("the reverse chain %s searches %s, which the token may not search", key, parts[1]))
			}
		case strings.Contains(key, "."):
			t := chainTarget(key)
			if d := g.Allow(t, smart.SearchType); t == "" || !d.Allowed {
				needed := d.Needed
				if t == "" {
					needed, t = "system/*.s", "a type the chain does not name (add a type modifier, as in subject:Patient.name)"
				}
				return refuse(needed, fmt.Sprintf("the chain %s searches %s, which the token may not search", key, t))
			}
		}
	}
	return v
}

// decideTypes decides a system-level search by its _type: each type must be
// searchable at the user or system level (a patient-level grant cannot confine
// several types in one search).
func decideTypes(g smart.Grants, params map[string][]string) Verdict {
	types := splitList(params["_type"])
	if len(types) == 0 {
		return refuse("", "_type names no type")
	}
	for _, t := range types {
		d := g.AllowSearch(t, smart.SearchType, params)
		if !d.Allowed {
			return refuse(d.Needed, fmt.Sprintf("_type names %s, which the token may not search", t))
		}
		if d.Level == smart.LevelPatient {
			return refuse("", "a search of several types cannot be confined to the token's patient: search one type")
		}
	}
	return decideReach(g, smart.Entry{Interaction: smart.SearchSystem, Params: params})
}

// includedType is the type an _include (Source:param[:Target]) or _revinclude
// (Source:param[:Target]) adds to the page; "" when it could be any type.
func includedType(name, value string) string {
	parts := strings.Split(value, ":")
	switch {
	case name == "_revinclude":
		return parts[0]
	case len(parts) >= 3:
		return parts[2]
	case len(parts) == 2:
		return referenceTargets[parts[1]]
	}
	return ""
}

// chainTarget is the type a chained parameter searches: its type modifier, or the one
// type its reference parameter reaches; "" when it could be any.
func chainTarget(key string) string {
	ref, _, _ := strings.Cut(key, ".")
	name, modifier, _ := strings.Cut(ref, ":")
	if modifier != "" {
		return modifier
	}
	return referenceTargets[name]
}

// readable reports whether the token may read resources of type t ("" for any type:
// only a * grant).
func readable(g smart.Grants, t string) bool {
	if t == "" {
		for _, gr := range g.List() {
			if gr.Type == "*" && gr.Perms.Has(smart.PermRead) && gr.Query == nil {
				return true
			}
		}
		return false
	}
	d := g.Allow(t, smart.Read)
	return d.Allowed && len(d.Restrictions) == 0
}

func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}

// confine confines a call decided at the patient level to the token's patient (docs/
// security.md, "Patient context"), whose claim is a federated id ({member}.{id}, docs/
// data-plane.md): a search of a type in the patient compartment gets the patient added
// (one naming another patient is refused; a routed one to a member that does not hold
// the patient too); a read of another patient is a 404, a read of a compartment
// resource goes on only once the patient's member finds it in the compartment, and
// what cannot be confined (a write, a type's history) is refused. restrictions are the
// scopes' queries the decision rests on, which a read must match too.
func confine(patient string, e smart.Entry, call Call, restrictions []url.Values) Verdict {
	pm, plocal, ok := identity.Split(patient)
	switch {
	case patient == "":
		return refuse("", "a patient-level scope needs the token's patient claim (the SMART launch context)")
	case !ok:
		return refuse("", "the token's patient claim is not a federated id ({member}.{id}), the one the gateway can confine to")
	}
	// self is the patient as the call names it: its federated id, or the member's own
	// id on a routed call to that member.
	self := patient
	if call.Routed {
		self = plocal
	}
	inCompartment := e.ResourceType == "Patient" || smart.InCompartment(e.ResourceType)
	switch {
	case e.Interaction == smart.SearchType:
		if !inCompartment {
			return Verdict{}
		}
		if call.Routed && call.Member != pm {
			return refuse("", "the token's patient is held by member "+pm+": search it there, or through {base}/fhir")
		}
		if refs := smart.PatientsNamed(e.ResourceType, e.Params); len(refs.IDs) > 0 && (len(refs.IDs) != 1 || refs.IDs[0] != self) {
			return refuse("", "the token's patient-level scopes reach its own patient only")
		}
		if e.ResourceType == "Patient" {
			return Verdict{Add: map[string][]string{"_id": {self}}}
		}
		params, _ := smart.CompartmentParams(e.ResourceType)
		return Verdict{Add: map[string][]string{params[0]: {"Patient/" + self}}}
	case readsOne(e.Interaction):
		member, id := readOf(call)
		switch {
		case !inCompartment:
			return confirmed(restrictions, nil)
		case member != pm:
			return notFound // nothing of the token's patient is held there
		case e.ResourceType == "Patient" && id != plocal:
			return notFound
		case e.ResourceType == "Patient":
			return confirmed(restrictions, nil)
		}
		params, _ := smart.CompartmentParams(e.ResourceType)
		return confirmed(restrictions, url.Values{params[0]: {"Patient/" + plocal}})
	}
	return refuse("", "a patient-level scope allows searches and reads of its patient's compartment only")
}

// readOf is the member and the member's own id of the resource a read names: the
// routed member's, or the one its federated id names ("" when it names none).
func readOf(call Call) (member, id string) {
	id = strings.Split(call.Path, "/")[1]
	if call.Routed {
		return call.Member, id
	}
	member, id, _ = identity.Split(id)
	return member, id
}

// confirmed is the verdict of a read that must be found by one of restrictions (none:
// unrestricted), each with the compartment's parameter added when there is one.
func confirmed(restrictions []url.Values, compartment url.Values) Verdict {
	if len(restrictions) == 0 {
		if compartment == nil {
			return Verdict{}
		}
		return Verdict{Confirm: []url.Values{compartment}}
	}
	out := make([]url.Values, len(restrictions))
	for i, r := range restrictions {
		out[i] = cloneValues(r)
		for k, vs := range compartment {
			out[i][k] = append(out[i][k], vs...)
		}
	}
	return Verdict{Confirm: out}
}

// notFound is the verdict for a patient the token may not know of.
var notFound = Verdict{Status: http.StatusNotFound, Reason: "no such resource"}
