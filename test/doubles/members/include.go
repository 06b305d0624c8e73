package members

import (
	"slices"
	"strings"
)

// includes are the include entries of a page whose matches are matches (Subjects on):
// for `_include={Type}:subject` or `{Type}:patient` (optionally `:Patient`), the patient
// each match's subject names, once, after the matches, as a server that supports
// _include does.
func (s *Server) includes(base, resourceType string, include []string, matches []map[string]any) []map[string]any {
	if !s.Opts.Subjects || !slices.ContainsFunc(include, func(v string) bool {
		v = strings.TrimSuffix(v, ":Patient")
		return v == resourceType+":subject" || v == resourceType+":patient"
	}) {
		return nil
	}
	var out []map[string]any
	var seen []string
	for _, e := range matches {
		res, _ := e["resource"].(map[string]any)
		ref, _ := res["subject"].(map[string]any)
		refValue, _ := ref["reference"].(string)
		id, ok := strings.CutPrefix(refValue, "Patient/")
		if !ok || slices.Contains(seen, id) {
			continue
		}
		seen = append(seen, id)
		out = append(out, map[string]any{
			"fullUrl":  base + "/Patient/" + id,
			"resource": s.resource("Patient", id, s.index(id)),
			"search":   map[string]any{"mode": "include"},
		})
	}
	return out
}

// addReferences gives an Observation (Options.References) the two other forms of a
// reference beside its relative subject: a performer absolute under the member's own
// base, and a focus on another server, as real members write them.
func (s *Server) addReferences(base string, res map[string]any) {
	if !s.Opts.References || res["resourceType"] != "Observation" {
		return
	}
	res["performer"] = []map[string]any{{"reference": base + "/Practitioner/" + res["id"].(string)}}
	res["focus"] = []map[string]any{{"reference": "http://other.example/fhir/Observation/" + res["id"].(string)}}
}
