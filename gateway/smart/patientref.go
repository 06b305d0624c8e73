package smart

import (
	"net/url"
	"slices"
	"strings"
)

// patientOnly are the compartment parameters whose references can only be to a
// Patient in R4, so that a bare id ("patient=123") names one: every "patient"
// parameter, ResearchSubject's "individual" and Coverage's "beneficiary". The others
// (subject, performer, actor, member, ...) also reach groups, practitioners, devices
// and the like, so that a bare id there names no type and is unresolved.
var patientOnly = map[string]bool{"patient": true, "individual": true, "beneficiary": true}

// PatientRefs are the patients a search names through the patient compartment.
type PatientRefs struct {
	// IDs are the ids of the patients named, deduplicated and sorted.
	IDs []string
	// Unresolved are the "param=value" items of compartment parameters that may name
	// a patient but whose id cannot be read: a chain (subject.name=x), a modifier
	// other than a type (:identifier, :missing), a bare id on a parameter that also
	// reaches other types (subject=123), a value that is no reference. Sorted.
	Unresolved []string
}

// Named reports whether the search names any patient, readably or not.
func (r PatientRefs) Named() bool { return len(r.IDs) > 0 || len(r.Unresolved) > 0 }

// Only reports whether the search names exactly one patient, id, and nothing
// unresolved: what a patient-level search may name.
func (r PatientRefs) Only(id string) bool {
	return len(r.Unresolved) == 0 && len(r.IDs) == 1 && r.IDs[0] == id
}

// PatientsNamed reads which patients a search of the type names through the type's
// compartment parameters (CompartmentParams), and, for a Patient search, through
// _id. A reference may be "Patient/123", "123" on a Patient-only parameter (patient,
// individual, beneficiary) or with the :Patient modifier (subject:Patient=123), a full
// URL ending in /Patient/123, or any of them with /_history/[vid]; comma lists are
// read item by item. A reference to another type (performer=Practitioner/9,
// subject:Group=1) names no patient. The base of a full URL is not compared:
// https://elsewhere/fhir/Patient/123 names 123 as Patient/123 does, so a caller that
// passes a search on unchanged because it names only its patient should compare the
// base or add its own restriction as well. Parameters outside the compartment are
// not read: Observation's patient parameter (a subject that is a Patient) is not one
// of the R4 compartment's, so Observation?patient=123 names nobody here. A type
// outside the compartment names nobody.
func PatientsNamed(resourceType string, params url.Values) PatientRefs {
	compartment, ok := patientCompartment[resourceType]
	if !ok {
		return PatientRefs{}
	}
	var r PatientRefs
	for key, values := range params {
		name := key[:strings.IndexFunc(key+":", func(c rune) bool { return c == ':' || c == '.' })]
		switch {
		case resourceType == "Patient" && name == "_id":
			r.readIDs(key, values)
		case slices.Contains(compartment, name):
			r.readRefs(key, name, values)
		}
	}
	slices.Sort(r.IDs)
	r.IDs = slices.Compact(r.IDs)
	slices.Sort(r.Unresolved)
	r.Unresolved = slices.Compact(r.Unresolved)
	return r
}

// readIDs reads a Patient search's _id: plain ids, each a patient.
func (r *PatientRefs) readIDs(key string, values []string) {
	for _, v := range values {
		for _, item := range splitList(v) {
			if key == "_id" && validID(item) {
				r.IDs = append(r.IDs, item)
			} else {
				r.Unresolved = append(r.Unresolved, key+"="+item)
			}
		}
	}
}

// readRefs reads a compartment parameter: its modifier says which type a bare id
// is, that the parameter reaches another type (no patient), or, with a chain or a
// modifier that is no type, that its values are no references to read; then each
// item is resolved.
func (r *PatientRefs) readRefs(key, name string, values []string) {
	rest := key[len(name):]
	modifier, chained := "", strings.HasPrefix(rest, ".")
	if !chained && rest != "" {
		modifier, _, chained = strings.Cut(rest[1:], ".")
	}
	if validType(modifier) && modifier != "Patient" {
		return // subject:Group=1, subject:Group.name=x: another type, no patient
	}
	opaque := chained || (modifier != "" && modifier != "Patient")
	patientTyped := patientOnly[name] || modifier == "Patient"
	for _, v := range values {
		for _, item := range splitList(v) {
			id, patient, ok := resolveRef(item, patientTyped)
			switch {
			case opaque || !ok:
				r.Unresolved = append(r.Unresolved, key+"="+item)
			case patient:
				r.IDs = append(r.IDs, id)
			}
		}
	}
}

// splitList splits a search value at its unescaped commas (FHIR writes a comma
// inside a value as \,), each item keeping its escapes: an escape cannot be in an id,
// so an item that has one is unresolved whole.
func splitList(v string) []string {
	var out []string
	start := 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++ // the escaped character, a comma included
		case ',':
			out = append(out, v[start:i])
			start = i + 1
		}
	}
	return append(out, v[start:])
}

// resolveRef reads one reference: ok reports whether it could be read, patient
// whether it is to a Patient (then id is its id). A bare id is a Patient's when the
// parameter is Patient-typed, and unreadable otherwise.
func resolveRef(item string, patientTyped bool) (id string, patient, ok bool) {
	if base, _, versioned := strings.Cut(item, "/_history/"); versioned {
		item = base
	}
	slash := strings.LastIndexByte(item, '/')
	if slash < 0 {
		return item, true, patientTyped && validID(item)
	}
	id = item[slash+1:]
	typ := item[strings.LastIndexByte(item[:slash], '/')+1 : slash]
	if !validType(typ) || !validID(id) {
		return "", false, false
	}
	if typ != "Patient" {
		return "", false, !patientTyped // Group/1 on subject is no patient; on patient= it is nonsense
	}
	return id, true, true
}
