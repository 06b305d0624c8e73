package identity

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// Rewriter rewrites one member's resources into the federated identity.
type Rewriter struct {
	// Member is the member's id.
	Member string
	// Base is the member's FHIR base URL, without a trailing slash: a reference under
	// it is the member's own.
	Base string
	// Route is the gateway's route to the member, {gateway}/nodes/{member}/fhir: what a
	// reference becomes when its federated id would be too long, and what every other
	// URL under Base becomes.
	Route string
	// GW is the gateway's base URL as the client reached it: a search entry's fullUrl
	// is {GW}/fhir/{Type}/{federated id} (Entry).
	GW string
}

// Reference is the federated form of ref, a reference found in one of the member's
// resources: Type/id (relative, or absolute under the member's base) becomes
// Type/{member}.{id}, its version kept; one whose federated id would not be a FHIR id
// becomes the absolute routed URL; any other URL under the member's base its routed
// URL. A fragment (#id), a urn: or another server's URL is kept (ok false).
func (r Rewriter) Reference(ref string) (string, bool) {
	rel, own := strings.CutPrefix(ref, r.Base+"/")
	if !own {
		rel = ref
	}
	parsed, ok := ParseRef(rel)
	switch {
	case !ok && own:
		return r.Route + "/" + rel, true
	case !ok:
		return ref, false
	}
	fid, ok := Join(r.Member, parsed.ID)
	if !ok {
		return r.Route + "/" + parsed.String(), true
	}
	parsed.ID = fid
	return parsed.String(), true
}

// ID is the federated id of the member's resource id; ok is false when it would not
// be a FHIR id (the resource then keeps its own, its fullUrl the routed one).
func (r Rewriter) ID(id string) (string, bool) { return Join(r.Member, id) }

// Resource is raw, one of the member's resources as JSON, with its id and every
// reference in it (each "reference" member of an object, at any depth) in the
// federated identity, and every other occurrence of the member's base replaced by its
// route. The rest of the bytes are kept as they are. raw must be valid JSON (a page's
// entries are decoded before they are rewritten).
func (r Rewriter) Resource(raw []byte) []byte {
	var edits []edit
	if start, end, ok := topLevelID(raw); ok {
		var id string
		if json.Unmarshal(raw[start:end], &id) == nil {
			if fid, ok := r.ID(id); ok {
				edits = append(edits, edit{start, end, fid})
			}
		}
	}
	for i := 0; ; {
		k := bytes.Index(raw[i:], referenceKey)
		if k < 0 {
			break
		}
		k += i
		i = k + len(referenceKey)
		start, end, ok := referenceValue(raw, k)
		var ref string
		if !ok || json.Unmarshal(raw[start:end], &ref) != nil {
			continue
		}
		if fed, changed := r.Reference(ref); changed {
			edits = append(edits, edit{start, end, fed})
		}
		i = end
	}
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	var out bytes.Buffer
	out.Grow(len(raw) + 16*len(edits))
	from := 0
	for _, e := range edits {
		out.Write(raw[from:e.start])
		v, _ := json.Marshal(e.value)
		out.Write(v)
		from = e.end
	}
	out.Write(raw[from:])
	b := out.Bytes()
	if base := []byte(r.Base); len(base) > 0 && bytes.Contains(b, base) {
		b = bytes.ReplaceAll(b, base, []byte(r.Route))
	}
	return b
}

// edit replaces raw[start:end] (a JSON string) with value.
type edit struct {
	start, end int
	value      string
}

var referenceKey = []byte(`"reference"`)

// referenceValue is the span of the string value of the "reference" key at k, ok false
// when the match is not a key (an escaped quote before it) or its value is no string.
func referenceValue(raw []byte, k int) (start, end int, ok bool) {
	if backslashesBefore(raw, k)%2 == 1 {
		return 0, 0, false
	}
	i := skipSpace(raw, k+len(referenceKey))
	if i >= len(raw) || raw[i] != ':' {
		return 0, 0, false
	}
	i = skipSpace(raw, i+1)
	if i >= len(raw) || raw[i] != '"' {
		return 0, 0, false
	}
	end = stringEnd(raw, i)
	return i, end, end > i
}

func backslashesBefore(raw []byte, i int) int {
	n := 0
	for i--; i >= 0 && raw[i] == '\\'; i-- {
		n++
	}
	return n
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the string that starts at raw[i] (a quote), or i
// when it does not end.
func stringEnd(raw []byte, i int) int {
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return i
}

// topLevelID is the span of the string value of the object's own "id" member.
func topLevelID(raw []byte) (start, end int, ok bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return 0, 0, false
	}
	i++
	for {
		i = skipSpace(raw, i)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
		if i >= len(raw) || raw[i] != '"' {
			return 0, 0, false
		}
		kend := stringEnd(raw, i)
		if kend == i {
			return 0, 0, false
		}
		key := raw[i:kend]
		i = skipSpace(raw, kend)
		if i >= len(raw) || raw[i] != ':' {
			return 0, 0, false
		}
		i = skipSpace(raw, i+1)
		vend := valueEnd(raw, i)
		if vend <= i {
			return 0, 0, false
		}
		if string(key) == `"id"` && raw[i] == '"' {
			return i, vend, true
		}
		i = vend
	}
}

// valueEnd is the index just past the JSON value that starts at raw[i], or i when it
// does not end.
func valueEnd(raw []byte, i int) int {
	if i >= len(raw) {
		return i
	}
	switch raw[i] {
	case '"':
		return stringEnd(raw, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(raw); j++ {
			switch raw[j] {
			case '"':
				e := stringEnd(raw, j)
				if e == j {
					return i
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return i
	}
	j := i
	for j < len(raw) && raw[j] != ',' && raw[j] != '}' && raw[j] != ']' && raw[j] != ' ' && raw[j] != '\n' && raw[j] != '\r' && raw[j] != '\t' {
		j++
	}
	return j
}
