package identity

import (
	"bytes"
	"encoding/json"

	"github.com/ferrofed/ferrofed/gateway/fhir"
)

// Entry is the gateway's searchset entry of one of the member's entries e (whose
// resource's head is head), in the federated identity (docs/data-plane.md, "One
// identity space"): fullUrl {gateway}/fhir/{Type}/{member}.{id}, the resource
// rewritten (Resource), an extension naming the member and its own id, the search
// mode and score carried; the member's own fullUrl, request and response left behind
// (they name its address). A resource whose federated id would not be a FHIR id keeps
// its own, with the routed URL as its fullUrl; one with no valid type or id has no
// fullUrl. r.GW must be set. resource is the rewritten resource, within entry: what a
// sort reads (a _sort by _id orders by the federated id).
func (r Rewriter) Entry(e fhir.Entry, head fhir.Head, mode string) (entry, resource []byte) {
	var b bytes.Buffer
	b.Grow(len(e.Resource) + len(r.GW) + 256)
	b.WriteByte('{')
	if fhir.ValidResourceType(head.ResourceType) && fhir.ValidID(head.ID) {
		full := r.Route + "/" + head.ResourceType + "/" + head.ID
		if fid, ok := r.ID(head.ID); ok {
			full = r.GW + "/fhir/" + head.ResourceType + "/" + fid
		}
		b.WriteString(`"fullUrl":`)
		writeJSON(&b, full)
		b.WriteString(`,"extension":[{"url":"` + OriginURL + `","extension":[{"url":"member","valueString":`)
		writeJSON(&b, r.Member)
		b.WriteString(`},{"url":"id","valueId":`)
		writeJSON(&b, head.ID)
		b.WriteString(`}]}],`)
	}
	b.WriteString(`"resource":`)
	start := b.Len()
	b.Write(r.Resource(e.Resource))
	end := b.Len()
	b.WriteString(`,"search":{"mode":`)
	writeJSON(&b, mode)
	if e.Search != nil && len(e.Search.Score) > 0 && string(e.Search.Score) != "null" {
		b.WriteString(`,"score":`)
		b.Write(e.Search.Score)
	}
	b.WriteString("}}")
	out := b.Bytes()
	return out, out[start:end]
}

func writeJSON(b *bytes.Buffer, s string) {
	v, _ := json.Marshal(s)
	b.Write(v)
}
