package identity

import (
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
	// Room for the fullUrl, the origin extension (about 200 bytes) and a reference's
	// longer form (each gains the member's id and a dot), so that it is made once.
	b := make([]byte, 0, len(e.Resource)+len(r.GW)+len(OriginURL)+2*len(head.ID)+8*len(r.Member)+320)
	b = append(b, '{')
	if fhir.ValidResourceType(head.ResourceType) && fhir.ValidID(head.ID) {
		b = append(b, `"fullUrl":`...)
		if _, ok := r.ID(head.ID); ok {
			b = appendJSONString(b, r.GW+"/fhir/"+head.ResourceType+"/"+r.Member+"."+head.ID)
		} else {
			b = appendJSONString(b, r.Route+"/"+head.ResourceType+"/"+head.ID)
		}
		b = append(b, `,"extension":[{"url":"`+OriginURL+`","extension":[{"url":"member","valueString":`...)
		b = appendJSONString(b, r.Member)
		b = append(b, `},{"url":"id","valueId":`...)
		b = appendJSONString(b, head.ID)
		b = append(b, `}]}],`...)
	}
	b = append(b, `"resource":`...)
	start := len(b)
	b = r.appendResource(b, e.Resource)
	end := len(b)
	b = append(b, `,"search":{"mode":`...)
	b = appendJSONString(b, mode)
	if e.Search != nil && len(e.Search.Score) > 0 && string(e.Search.Score) != "null" {
		b = append(b, `,"score":`...)
		b = append(b, e.Search.Score...)
	}
	b = append(b, "}}"...)
	return b, b[start:end]
}
