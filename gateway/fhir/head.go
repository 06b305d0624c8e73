package fhir

import "encoding/json"

// ReadHead reads a resource's resourceType and id, the two values every entry's
// fullUrl needs, by walking the resource's top-level keys without decoding the rest:
// decoding every resource of every page into a struct to read two strings was a
// third of the gateway's own cost of a federated page. raw is valid JSON (the page it
// came from was decoded). A value with an escape is left to encoding/json.
func ReadHead(raw []byte) (Head, bool) {
	var h Head
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return h, false
	}
	i++
	haveType, haveID := false, false
	for {
		i = skipSpace(raw, i)
		if i >= len(raw) || raw[i] == '}' {
			return h, haveType
		}
		if raw[i] == ',' {
			i++
			continue
		}
		key, next, plain := readString(raw, i)
		if next < 0 {
			return h, false
		}
		i = skipSpace(raw, next)
		if i >= len(raw) || raw[i] != ':' {
			return h, false
		}
		i = skipSpace(raw, i+1)
		isType, isID := string(key) == "resourceType", string(key) == "id"
		if plain && (isType || isID) && i < len(raw) && raw[i] == '"' {
			v, next, vplain := readString(raw, i)
			if next < 0 {
				return h, false
			}
			if !vplain {
				return headByDecoding(raw)
			}
			if isType {
				h.ResourceType, haveType = string(v), true
			} else {
				h.ID, haveID = string(v), true
			}
			if haveType && haveID {
				return h, true
			}
			i = next
			continue
		}
		if i = skipValue(raw, i); i < 0 {
			return h, false
		}
	}
}

func headByDecoding(raw []byte) (Head, bool) {
	var h Head
	err := json.Unmarshal(raw, &h)
	return h, err == nil && h.ResourceType != ""
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// readString reads the string at b[i] (a '"'): its bytes (a slice of b: nothing is
// copied), the index after it, and whether it held no escape (when it did, the bytes
// are not its value).
func readString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, -1, false
	}
	plain := true
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			plain = false
			j++
		case '"':
			return b[i+1 : j], j + 1, plain
		}
	}
	return nil, -1, false
}

// skipValue returns the index after the JSON value at b[i], -1 when b ends first.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		_, next, _ := readString(b, i)
		return next
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				_, next, _ := readString(b, j)
				if next < 0 {
					return -1
				}
				j = next - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		for j := i; j < len(b); j++ {
			switch b[j] {
			case ',', '}', ']', ' ', '\n', '\r', '\t':
				return j
			}
		}
		return len(b)
	}
}
