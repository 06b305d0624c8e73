package federation

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/outbound"
)

// Record is one member's part in a federated request: an entry of meta.federation,
// and of the probe's answer. It names the member by id only.
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

// ProbeRecord is one member's line in the ask-all probe's answer.
type ProbeRecord struct {
	ID         string           `json:"id"`
	Outcome    outbound.Outcome `json:"outcome"`
	Status     int              `json:"status,omitempty"`
	DurationMS int64            `json:"duration_ms"`
}

func millis(d time.Duration) int64 { return d.Milliseconds() }

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

// extension is a FHIR Extension with the value types the records use.
type extension struct {
	URL               string       `json:"url"`
	Extension         []extension  `json:"extension,omitempty"`
	ValueString       string       `json:"valueString,omitempty"`
	ValueCode         string       `json:"valueCode,omitempty"`
	ValueInteger      *int         `json:"valueInteger,omitempty"`
	ValueUnsignedInt  *int         `json:"valueUnsignedInt,omitempty"`
	ValueQuantityJSON *quantityOut `json:"valueQuantity,omitempty"`
}

type quantityOut struct {
	Value  int64  `json:"value"`
	Unit   string `json:"unit"`
	System string `json:"system"`
	Code   string `json:"code"`
}

// memberExtension is one record as the federation-member complex extension.
func memberExtension(r Record) extension {
	entries := r.Entries
	ext := extension{URL: MemberExtensionURL, Extension: []extension{
		{URL: "member", ValueString: r.ID},
		{URL: "outcome", ValueCode: string(r.Outcome)},
	}}
	if r.Status != 0 {
		status := r.Status
		ext.Extension = append(ext.Extension, extension{URL: "status", ValueInteger: &status})
	}
	ext.Extension = append(ext.Extension,
		extension{URL: "entries", ValueUnsignedInt: &entries},
		extension{URL: "duration", ValueQuantityJSON: &quantityOut{Value: r.DurationMS, Unit: "ms", System: "http://unitsofmeasure.org", Code: "ms"}},
	)
	if r.ExcludedBy != "" {
		ext.Extension = append(ext.Extension, extension{URL: "excluded_by", ValueCode: r.ExcludedBy})
	}
	return ext
}

type bundleMeta struct {
	LastUpdated string      `json:"lastUpdated"`
	Extension   []extension `json:"extension,omitempty"`
	Federation  *[]Record   `json:"federation,omitempty"`
}

// MarshalJSON writes the Bundle with its entries copied as they are: each was built
// by the gateway from JSON it parsed, and letting encoding/json re-validate and
// compact every entry again was most of the gateway's own cost of a federated query.
func (b Bundle) MarshalJSON() ([]byte, error) {
	meta := bundleMeta{LastUpdated: b.LastUpdated.UTC().Format(time.RFC3339Nano)}
	for _, r := range b.Records {
		meta.Extension = append(meta.Extension, memberExtension(r))
	}
	if !b.Strict {
		records := b.Records
		if records == nil {
			records = []Record{}
		}
		meta.Federation = &records
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	n := len(m) + 128 + len(b.Entry)
	for _, e := range b.Entry {
		n += len(e)
	}
	var buf bytes.Buffer
	buf.Grow(n)
	buf.WriteString(`{"resourceType":"Bundle","meta":`)
	buf.Write(m)
	buf.WriteString(`,"type":"searchset"`)
	if b.Total != nil {
		buf.WriteString(`,"total":`)
		buf.WriteString(strconv.Itoa(*b.Total))
	}
	if len(b.Links) > 0 {
		l, err := json.Marshal(b.Links)
		if err != nil {
			return nil, err
		}
		buf.WriteString(`,"link":`)
		buf.Write(l)
	}
	if len(b.Entry) > 0 {
		buf.WriteString(`,"entry":[`)
		for i, e := range b.Entry {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(e)
		}
		buf.WriteByte(']')
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
