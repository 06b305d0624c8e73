package searchquery

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The _sort keys the gateway can merge (docs/data-plane.md): each reads
// one value of the resources the members answer, so that the members' sorted pages
// can be merged into one order. Any other key is refused with a 400: a merge on a
// value the gateway cannot read would be a wrong order, answered as if right.
//
//	_id            any type        Resource.id, as text
//	_lastUpdated   any type        Resource.meta.lastUpdated, as an instant
//	birthdate      Patient         Patient.birthDate, as a date
//	family         Patient         Patient.name[0].family, as text without case
//	given          Patient         Patient.name[0].given[0], as text without case
//	date           Observation     Observation.effectiveDateTime | effectiveInstant |
//	                               effectivePeriod.start, as a date
//	date           Encounter       Encounter.period.start, as a date
//
// A resource without the value sorts after every resource with one, in either
// direction; equal values keep the members' registry order.
type SortKey struct {
	name string
	desc bool
}

// sortTypes says which types a key reads; nil: every type.
var sortTypes = map[string][]string{
	"_id":          nil,
	"_lastUpdated": nil,
	"birthdate":    {"Patient"},
	"family":       {"Patient"},
	"given":        {"Patient"},
	"date":         {"Observation", "Encounter"},
}

// maxSortKeys bounds a _sort.
const maxSortKeys = 8

// SortKeys are the _sort keys the gateway merges, for the docs and the
// CapabilityStatement.
func SortKeys() []string {
	return []string{"_id", "_lastUpdated", "birthdate", "family", "given", "date"}
}

// ParseSort reads a _sort value; "" is no sort.
func ParseSort(resourceType, v string) ([]SortKey, error) {
	if v == "" {
		return nil, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > maxSortKeys {
		return nil, fmt.Errorf("_sort: at most %d keys", maxSortKeys)
	}
	keys := make([]SortKey, 0, len(parts))
	for _, p := range parts {
		k := SortKey{name: strings.TrimSpace(p)}
		if n, ok := strings.CutPrefix(k.name, "-"); ok {
			k.name, k.desc = n, true
		}
		types, known := sortTypes[k.name]
		if !known || (types != nil && !contains(types, resourceType)) {
			return nil, fmt.Errorf("_sort: the gateway cannot merge %s results sorted by %q; it merges %s", resourceType, p, SortKeyDoc(resourceType))
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func SortKeyDoc(resourceType string) string {
	var ok []string
	for _, k := range SortKeys() {
		if t := sortTypes[k]; t == nil || contains(t, resourceType) {
			ok = append(ok, k)
		}
	}
	return strings.Join(ok, ", ")
}

// sortFields are the values of a resource that sort keys read.
type sortFields struct {
	ID   string `json:"id"`
	Meta struct {
		LastUpdated string `json:"lastUpdated"`
	} `json:"meta"`
	BirthDate string `json:"birthDate"`
	Name      []struct {
		Family string   `json:"family"`
		Given  []string `json:"given"`
	} `json:"name"`
	EffectiveDateTime string `json:"effectiveDateTime"`
	EffectiveInstant  string `json:"effectiveInstant"`
	EffectivePeriod   struct {
		Start string `json:"start"`
	} `json:"effectivePeriod"`
	Period struct {
		Start string `json:"start"`
	} `json:"period"`
}

// SortValue is one key's value of one resource: text, or a time in Unix
// nanoseconds; ok is false when the resource has none.
type SortValue struct {
	text string
	at   int64
	ok   bool
}

// SortValues reads the keys' values from a resource.
func SortValues(resource json.RawMessage, keys []SortKey) []SortValue {
	var f sortFields
	_ = json.Unmarshal(resource, &f) // a resource without the fields sorts last
	out := make([]SortValue, len(keys))
	for i, k := range keys {
		switch k.name {
		case "_id":
			out[i] = textValue(f.ID, false)
		case "_lastUpdated":
			out[i] = timeValue(f.Meta.LastUpdated)
		case "birthdate":
			out[i] = timeValue(f.BirthDate)
		case "family":
			if len(f.Name) > 0 {
				out[i] = textValue(f.Name[0].Family, true)
			}
		case "given":
			if len(f.Name) > 0 && len(f.Name[0].Given) > 0 {
				out[i] = textValue(f.Name[0].Given[0], true)
			}
		case "date":
			out[i] = timeValue(firstOf(f.EffectiveDateTime, f.EffectiveInstant, f.EffectivePeriod.Start, f.Period.Start))
		}
	}
	return out
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func textValue(s string, fold bool) SortValue {
	if s == "" {
		return SortValue{}
	}
	if fold {
		s = strings.ToLower(s)
	}
	return SortValue{text: s, ok: true}
}

// dateLayouts are FHIR's date, dateTime and instant forms, most precise first.
var dateLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", time.DateOnly, "2006-01", "2006"}

// timeValue reads a FHIR date, dateTime or instant. A partial date sorts at its
// start ("2020" with 2020-01-01); a value without a zone is taken as UTC.
func timeValue(s string) SortValue {
	if s == "" {
		return SortValue{}
	}
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return SortValue{at: t.UnixNano(), ok: true}
		}
	}
	return SortValue{}
}

// CompareValues orders two resources' values by the keys: negative when a comes
// first. A missing value comes last whatever the direction.
func CompareValues(keys []SortKey, a, b []SortValue) int {
	for i, k := range keys {
		x, y := a[i], b[i]
		switch {
		case !x.ok && !y.ok:
			continue
		case !x.ok:
			return 1
		case !y.ok:
			return -1
		}
		c := 0
		switch {
		case x.text != "" || y.text != "":
			c = strings.Compare(x.text, y.text)
		case x.at < y.at:
			c = -1
		case x.at > y.at:
			c = 1
		}
		if c != 0 {
			if k.desc {
				return -c
			}
			return c
		}
	}
	return 0
}

// First is the index of the member whose head comes first by keys, the first of equal
// ones (registry order), -1 when none of the n has a head (head's ok false); without
// keys, the first that has one.
func First(keys []SortKey, n int, head func(i int) (values []SortValue, ok bool)) int {
	best := -1
	var bestValues []SortValue
	for i := range n {
		v, ok := head(i)
		if !ok {
			continue
		}
		if best < 0 && len(keys) == 0 {
			return i
		}
		if best < 0 || CompareValues(keys, v, bestValues) < 0 {
			best, bestValues = i, v
		}
	}
	return best
}
