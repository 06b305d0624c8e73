package fhir

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// Searchset is a searchset Bundle as the gateway writes it.
type Searchset struct {
	LastUpdated time.Time
	// Extension is meta.extension.
	Extension []Extension
	// Federation is meta.federation, left out when nil.
	Federation any
	// Total is Bundle.total, nil when unknown.
	Total *int
	Links []Link
	// Entry holds each entry as JSON, already built.
	Entry [][]byte
}

// Extension is a FHIR Extension with the value types the records use.
type Extension struct {
	URL               string      `json:"url"`
	Extension         []Extension `json:"extension,omitempty"`
	ValueString       string      `json:"valueString,omitempty"`
	ValueCode         string      `json:"valueCode,omitempty"`
	ValueInteger      *int        `json:"valueInteger,omitempty"`
	ValueUnsignedInt  *int        `json:"valueUnsignedInt,omitempty"`
	ValueQuantityJSON *Quantity   `json:"valueQuantity,omitempty"`
}

// Quantity is a FHIR Quantity.
type Quantity struct {
	Value  int64  `json:"value"`
	Unit   string `json:"unit"`
	System string `json:"system"`
	Code   string `json:"code"`
}

type bundleMeta struct {
	LastUpdated string      `json:"lastUpdated"`
	Extension   []Extension `json:"extension,omitempty"`
	Federation  any         `json:"federation,omitempty"`
}

// MarshalJSON writes the searchset with its entries copied as they are: each was built
// by the gateway from JSON it parsed, and letting encoding/json re-validate and
// compact every entry again was most of the gateway's own cost of a federated query.
func (b Searchset) MarshalJSON() ([]byte, error) {
	meta := bundleMeta{LastUpdated: b.LastUpdated.UTC().Format(time.RFC3339Nano), Extension: b.Extension, Federation: b.Federation}
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
