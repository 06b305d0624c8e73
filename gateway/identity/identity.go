// Package identity is the federation's one identity space (docs/data-plane.md, "One
// identity space"): every resource a member holds is known to clients as
// {member}.{id}, a FHIR id unique across the federation that the gateway can read
// back; every reference inside a federated answer is rewritten to it; and a search
// parameter that names a resource by reference is sent only to the member that holds
// it, in the member's own ids. It is pure: the federation calls it.
package identity

import (
	"strings"

	"github.com/ferrofed/ferrofed/gateway/fhir"
)

// OriginURL is the entry extension that names the member and its own id of a
// federated search's match (docs/data-plane.md, "One identity space").
const OriginURL = "https://ferrofed.io/fhir/StructureDefinition/federation-origin"

// Join is the federated id of member's resource id: "{member}.{id}". ok is false when
// that is not a FHIR id (more than 64 characters, or id not an id).
func Join(member, id string) (string, bool) {
	fid := member + "." + id
	return fid, member != "" && fhir.ValidID(id) && fhir.ValidID(fid)
}

// Split reads a federated id: the member (before the first dot; member ids have none)
// and the member's own id. ok is false when it is not one: no dot, an empty part, or
// not a FHIR id. Whether the member exists is the caller's to check.
func Split(fid string) (member, id string, ok bool) {
	member, id, ok = strings.Cut(fid, ".")
	return member, id, ok && member != "" && id != "" && fhir.ValidID(fid)
}

// Ref is a literal reference read: Type/id, with the version of Type/id/_history/v.
type Ref struct {
	Type, ID, Version string
}

// ParseRef reads a relative literal reference, Type/id or Type/id/_history/v; ok is
// false for anything else (an absolute URL, a fragment, a search).
func ParseRef(s string) (Ref, bool) {
	parts := strings.Split(s, "/")
	switch {
	case len(parts) == 2:
	case len(parts) == 4 && parts[2] == "_history" && fhir.ValidID(parts[3]):
	default:
		return Ref{}, false
	}
	if !fhir.ValidResourceType(parts[0]) || !fhir.ValidID(parts[1]) {
		return Ref{}, false
	}
	r := Ref{Type: parts[0], ID: parts[1]}
	if len(parts) == 4 {
		r.Version = parts[3]
	}
	return r, true
}

// String is the reference's relative form.
func (r Ref) String() string {
	s := r.Type + "/" + r.ID
	if r.Version != "" {
		s += "/_history/" + r.Version
	}
	return s
}
