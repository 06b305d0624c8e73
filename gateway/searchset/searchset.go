// Package searchset is the page of a federated search as a client reads it: a FHIR
// searchset Bundle whose meta carries one record per member, in meta.federation and as
// the federation-member extension in meta.extension (docs/data-plane.md, "A federated search").
// gateway/federation fills it.
package searchset

import (
	"time"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/outbound"
)

// Record is one member's part in a federated search: an entry of meta.federation. It
// names the member by id only.
type Record struct {
	ID      string           `json:"id"`
	Outcome outbound.Outcome `json:"outcome"`
	// Status is the member's HTTP status, absent when it did not answer.
	Status int `json:"status,omitempty"`
	// Entries is how many of the member's matches this page holds.
	Entries int `json:"entries"`
	// DurationMS is how long the member's part took, in milliseconds.
	DurationMS int64 `json:"duration_ms"`
	// ExcludedBy is the step of a patient-scoped search that dropped the member
	// (outcome excluded): demographics, resolver, consent or localizer.
	ExcludedBy string `json:"excluded_by,omitempty"`
}

// MemberExtensionURL is the complex extension that carries each member's record in
// Bundle.meta.extension; its StructureDefinition ships in
// fhir/StructureDefinition-federation-member.json.
const MemberExtensionURL = "https://ferrofed.io/fhir/StructureDefinition/federation-member"

// Bundle is the federated answer: one searchset page, with a record of each member
// asked in meta.extension (and, unless strict_fhir, meta.federation).
type Bundle struct {
	LastUpdated time.Time
	Records     []Record
	// Strict leaves meta.federation out.
	Strict bool
	// Total is Bundle.total, nil when not every member that answered gave one.
	Total *int
	Links []fhir.Link
	// Entry holds each entry as JSON, already rewritten (fullUrl, search.mode).
	Entry [][]byte
}

// memberExtension is one record as the federation-member complex extension.
func memberExtension(r Record) fhir.Extension {
	entries := r.Entries
	ext := fhir.Extension{URL: MemberExtensionURL, Extension: []fhir.Extension{
		{URL: "member", ValueString: r.ID},
		{URL: "outcome", ValueCode: string(r.Outcome)},
	}}
	if r.Status != 0 {
		status := r.Status
		ext.Extension = append(ext.Extension, fhir.Extension{URL: "status", ValueInteger: &status})
	}
	ext.Extension = append(ext.Extension,
		fhir.Extension{URL: "entries", ValueUnsignedInt: &entries},
		fhir.Extension{URL: "duration", ValueQuantityJSON: &fhir.Quantity{Value: r.DurationMS, Unit: "ms", System: "http://unitsofmeasure.org", Code: "ms"}},
	)
	if r.ExcludedBy != "" {
		ext.Extension = append(ext.Extension, fhir.Extension{URL: "excluded_by", ValueCode: r.ExcludedBy})
	}
	return ext
}

// MarshalJSON writes the Bundle as a searchset whose meta carries the records.
func (b Bundle) MarshalJSON() ([]byte, error) {
	sb := fhir.Searchset{LastUpdated: b.LastUpdated, Total: b.Total, Links: b.Links, Entry: b.Entry}
	for _, r := range b.Records {
		sb.Extension = append(sb.Extension, memberExtension(r))
	}
	if !b.Strict {
		records := b.Records
		if records == nil {
			records = []Record{}
		}
		sb.Federation = &records
	}
	return sb.MarshalJSON()
}
