package federation

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"time"
)

// FHIRJSON is the content type of every FHIR body the gateway writes.
const FHIRJSON = "application/fhir+json"

// resourceTypePattern is FHIR's lexical form of a resource type name. Anything else
// in {base}/fhir/{Type} is refused before a single member is asked.
var resourceTypePattern = regexp.MustCompile(`^[A-Z][A-Za-z]+$`)

// ValidResourceType reports whether t may name a FHIR resource type.
func ValidResourceType(t string) bool { return len(t) <= 64 && resourceTypePattern.MatchString(t) }

// Record is one member's part in a federated request: an entry of meta.federation,
// and of the probe's answer. It names the member by id only.
type Record struct {
	ID      string  `json:"id"`
	Outcome Outcome `json:"outcome"`
	// Status is the member's HTTP status, absent when it did not answer.
	Status int `json:"status,omitempty"`
	// Entries is how many entries of the member's Bundle were merged.
	Entries int `json:"entries"`
	// DurationMS is how long the member's part took, in milliseconds.
	DurationMS int64 `json:"duration_ms"`
}

// ProbeRecord is one member's line in the ask-all probe's answer.
type ProbeRecord struct {
	ID         string  `json:"id"`
	Outcome    Outcome `json:"outcome"`
	Status     int     `json:"status,omitempty"`
	DurationMS int64   `json:"duration_ms"`
}

func millis(d time.Duration) int64 { return d.Milliseconds() }

// memberBundle is what the gateway reads of a member's answer: its type and its
// entries, kept as raw JSON so that the merge neither loses nor rewrites a field.
type memberBundle struct {
	ResourceType string            `json:"resourceType"`
	Type         string            `json:"type"`
	Entry        []json.RawMessage `json:"entry"`
}

var errNotASearchset = errors.New("not a searchset Bundle")

// decodeSearchset reads a member's searchset Bundle. A body that is not one is refused
// whole: half a member's result merged in silence would be worse than none.
func decodeSearchset(body []byte) ([]json.RawMessage, error) {
	var b memberBundle
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, err
	}
	if b.ResourceType != "Bundle" || b.Type != "searchset" {
		return nil, errNotASearchset
	}
	return b.Entry, nil
}

// Bundle is the federated answer: one searchset with every member's entries, in the
// registry's member order, and a meta.federation record for each member.
type Bundle struct {
	ResourceType string            `json:"resourceType"`
	Type         string            `json:"type"`
	Meta         BundleMeta        `json:"meta"`
	Entry        []json.RawMessage `json:"entry,omitempty"`
}

// BundleMeta is the Bundle's meta: FHIR's lastUpdated and the federation records.
type BundleMeta struct {
	LastUpdated string   `json:"lastUpdated"`
	Federation  []Record `json:"federation"`
}

// memberPart is one member's contribution to a merge.
type memberPart struct {
	record  Record
	entries []json.RawMessage
}

// mergeBundle builds the federated answer from every member's part, in order.
func mergeBundle(parts []memberPart, now time.Time) Bundle {
	n := 0
	for _, p := range parts {
		n += len(p.entries)
	}
	b := Bundle{
		ResourceType: "Bundle",
		Type:         "searchset",
		Meta:         BundleMeta{LastUpdated: now.UTC().Format(time.RFC3339Nano), Federation: make([]Record, 0, len(parts))},
		Entry:        make([]json.RawMessage, 0, n),
	}
	for _, p := range parts {
		rec := p.record
		rec.Entries = len(p.entries)
		b.Meta.Federation = append(b.Meta.Federation, rec)
		b.Entry = append(b.Entry, p.entries...)
	}
	return b
}

// MarshalJSON writes the Bundle with its entries copied as they are. Each entry is
// already valid JSON (decodeSearchset parsed it), and letting encoding/json re-validate
// and compact every member's every entry was most of the gateway's own cost of a
// federated query.
func (b Bundle) MarshalJSON() ([]byte, error) {
	head, err := json.Marshal(struct {
		ResourceType string     `json:"resourceType"`
		Type         string     `json:"type"`
		Meta         BundleMeta `json:"meta"`
	}{b.ResourceType, b.Type, b.Meta})
	if err != nil {
		return nil, err
	}
	if len(b.Entry) == 0 {
		return head, nil
	}
	n := len(head) + len(`,"entry":[]`) + len(b.Entry)
	for _, e := range b.Entry {
		n += len(e)
	}
	var buf bytes.Buffer
	buf.Grow(n)
	buf.Write(head[:len(head)-1])
	buf.WriteString(`,"entry":[`)
	for i, e := range b.Entry {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(e)
	}
	buf.WriteString("]}")
	return buf.Bytes(), nil
}

// OperationOutcome is a FHIR OperationOutcome with one issue: the body of every error
// the data plane answers itself.
type OperationOutcome struct {
	ResourceType string  `json:"resourceType"`
	Issue        []Issue `json:"issue"`
}

// Issue is one OperationOutcome issue.
type Issue struct {
	Severity    string `json:"severity"`
	Code        string `json:"code"`
	Diagnostics string `json:"diagnostics,omitempty"`
}

func operationOutcome(code, diagnostics string) OperationOutcome {
	return OperationOutcome{ResourceType: "OperationOutcome", Issue: []Issue{{Severity: "error", Code: code, Diagnostics: diagnostics}}}
}
