package identity

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/ferrofed/ferrofed/gateway/fhir"
)

// Include is an include entry of a member's page (an _include or _revinclude), held
// until a match it is linked to is on the gateway's page (docs/data-plane.md, "One
// identity space"): it travels with the first match that refers to it, or that it
// refers to.
type Include struct {
	// JSON is the gateway's entry; Key its resource's federated reference (Type/{fid}).
	JSON []byte
	Key  string
	// refs are the federated references in its resource.
	refs []string
	// Sent is true once it is on a page.
	Sent bool
}

// Key is the federated reference (Type/{fid}) of the member's resource of head, its
// own when its federated id would not be an id.
func (r Rewriter) Key(head fhir.Head) string {
	if fid, ok := r.ID(head.ID); ok {
		return head.ResourceType + "/" + fid
	}
	return head.ResourceType + "/" + head.ID
}

// NewInclude holds an include entry whose resource's federated reference is key.
func NewInclude(entry []byte, key string) Include {
	return Include{JSON: entry, Key: key, refs: Refs(entry)}
}

// Attach is the includes of incs a match (its entry, its federated reference key)
// takes onto the page: those not sent yet that it refers to, or that refer to it;
// each is marked sent.
func Attach(match []byte, key string, incs []Include) [][]byte {
	var out [][]byte
	var refs []string
	for i := range incs {
		if incs[i].Sent {
			continue
		}
		if refs == nil {
			refs = append(Refs(match), "") // never nil once read
		}
		if slices.Contains(refs, incs[i].Key) || slices.Contains(incs[i].refs, key) {
			incs[i].Sent = true
			out = append(out, incs[i].JSON)
		}
	}
	return out
}

// Unsent are the includes of incs no match took: a page passes them on at the end of
// the member's page that brought them, rather than lose them.
func Unsent(incs []Include) [][]byte {
	var out [][]byte
	for _, inc := range incs {
		if !inc.Sent {
			out = append(out, inc.JSON)
		}
	}
	return out
}

// Refs are the relative references (Type/id, a version left off) of raw's
// "reference" members, at any depth: a rewritten resource's federated references.
func Refs(raw []byte) []string {
	var out []string
	for i := 0; ; {
		k := bytes.Index(raw[i:], referenceKey)
		if k < 0 {
			return out
		}
		k += i
		i = k + len(referenceKey)
		start, end, ok := referenceValue(raw, k)
		var ref string
		if !ok || json.Unmarshal(raw[start:end], &ref) != nil {
			continue
		}
		if r, ok := ParseRef(ref); ok {
			r.Version = ""
			out = append(out, r.String())
		}
		i = end
	}
}
