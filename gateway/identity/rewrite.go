package identity

import (
	"bytes"
	"encoding/json"
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
	return r.appendResource(make([]byte, 0, len(raw)+64), raw)
}

// appendResource appends Resource(raw) to dst. Its common case allocates nothing of
// its own: ids and references without escapes are read and written in place.
func (r Rewriter) appendResource(dst, raw []byte) []byte {
	base := len(dst)
	from := 0
	var idStart, idEnd int
	if s, e, ok := topLevelID(raw); ok {
		idStart, idEnd = s, e
	}
	for i := 0; ; {
		k := -1
		if j := bytes.Index(raw[i:], referenceKey); j >= 0 {
			k = i + j
		}
		// The resource's own id, when it comes before the next reference.
		if idEnd > 0 && (k < 0 || idStart < k) {
			dst = append(dst, raw[from:idStart]...)
			dst = r.appendID(dst, raw[idStart:idEnd])
			from, idEnd = idEnd, 0
		}
		if k < 0 {
			break
		}
		i = k + len(referenceKey)
		start, end, ok := referenceValue(raw, k)
		if !ok {
			continue
		}
		dst = append(dst, raw[from:start]...)
		dst = r.appendReference(dst, raw[start:end])
		from, i = end, end
	}
	dst = append(dst, raw[from:]...)
	if len(r.Base) > 0 && bytes.Contains(dst[base:], []byte(r.Base)) {
		out := bytes.ReplaceAll(dst[base:], []byte(r.Base), []byte(r.Route))
		dst = append(dst[:base], out...)
	}
	return dst
}

// appendID appends the federated form of the JSON string id (quotes included), or id
// as it is when it has none.
func (r Rewriter) appendID(dst, quoted []byte) []byte {
	v := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(v, '\\') < 0 && validID(v) && len(r.Member)+1+len(v) <= 64 {
		dst = append(dst, '"')
		dst = append(dst, r.Member...)
		dst = append(dst, '.')
		dst = append(dst, v...)
		return append(dst, '"')
	}
	var id string
	if json.Unmarshal(quoted, &id) == nil {
		if fid, ok := r.ID(id); ok {
			return appendJSONString(dst, fid)
		}
	}
	return append(dst, quoted...)
}

// appendReference appends the federated form (Reference) of the JSON string ref.
func (r Rewriter) appendReference(dst, quoted []byte) []byte {
	v := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(v, '\\') < 0 {
		rel, own := bytes.CutPrefix(v, []byte(r.Base+"/"))
		if !own || len(r.Base) == 0 {
			rel, own = v, false
		}
		if typ, id, version, ok := refParts(rel); ok && len(r.Member)+1+len(id) <= 64 {
			dst = append(dst, '"')
			dst = append(dst, typ...)
			dst = append(dst, '/')
			dst = append(dst, r.Member...)
			dst = append(dst, '.')
			dst = append(dst, id...)
			if version != nil {
				dst = append(dst, "/_history/"...)
				dst = append(dst, version...)
			}
			return append(dst, '"')
		} else if !own && !ok {
			return append(dst, quoted...) // another server's, a fragment, a urn
		}
	}
	var ref string
	if json.Unmarshal(quoted, &ref) != nil {
		return append(dst, quoted...)
	}
	if fed, changed := r.Reference(ref); changed {
		return appendJSONString(dst, fed)
	}
	return append(dst, quoted...)
}

// refParts reads Type/id or Type/id/_history/v without allocating; ok is false for
// anything else.
func refParts(v []byte) (typ, id, version []byte, ok bool) {
	slash := bytes.IndexByte(v, '/')
	if slash < 0 {
		return nil, nil, nil, false
	}
	typ, rest := v[:slash], v[slash+1:]
	if h := bytes.Index(rest, []byte("/_history/")); h >= 0 {
		id, version = rest[:h], rest[h+len("/_history/"):]
		if !validID(version) {
			return nil, nil, nil, false
		}
	} else {
		id = rest
	}
	return typ, id, version, validType(typ) && validID(id)
}

// validType and validID are fhir.ValidResourceType and fhir.ValidID on bytes.
func validType(t []byte) bool {
	if len(t) < 2 || len(t) > 64 || t[0] < 'A' || t[0] > 'Z' {
		return false
	}
	for _, c := range t[1:] {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

func validID(id []byte) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// appendJSONString appends s as a JSON string: as it is when it needs no escape.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			v, _ := json.Marshal(s)
			return append(dst, v...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
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
