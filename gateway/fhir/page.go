package fhir

import (
	"encoding/json"
	"errors"
)

// ErrNotASearchset is a page's refusal: the body is no searchset Bundle.
var ErrNotASearchset = errors.New("not a searchset Bundle")

// ErrTooManyEntries refuses a page of more entries than the reader was allowed.
var ErrTooManyEntries = errors.New("its page holds more entries than limits.max_member_entries")

// Page is what the gateway reads of a member's searchset page.
type Page struct {
	Total *int
	Entry []Entry
	// Next is the page's next link, "" for none.
	Next string
	// Self is the page's self link, "" for none: the parameters the server used.
	Self string
}

// DecodePage reads a member's searchset Bundle. A body that is not one is refused
// whole: half a member's result merged in silence would be worse than none. A page
// of more than maxEntries entries is refused before they are decoded.
func DecodePage(body []byte, maxEntries int) (*Page, error) {
	var b struct {
		ResourceType string         `json:"resourceType"`
		Type         string         `json:"type"`
		Total        *int           `json:"total"`
		Link         []Link         `json:"link"`
		Entry        boundedEntries `json:"entry"`
	}
	b.Entry.max = maxEntries
	if err := json.Unmarshal(body, &b); err != nil {
		if errors.Is(err, ErrTooManyEntries) {
			return nil, ErrTooManyEntries
		}
		return nil, err
	}
	if b.ResourceType != "Bundle" || b.Type != "searchset" {
		return nil, ErrNotASearchset
	}
	if b.Total != nil && *b.Total < 0 {
		return nil, ErrNotASearchset
	}
	pg := &Page{Total: b.Total, Entry: b.Entry.entries}
	for _, l := range b.Link {
		switch l.Relation {
		case "next":
			pg.Next = l.URL
		case "self":
			pg.Self = l.URL
		}
	}
	return pg, nil
}

// boundedEntries decodes Bundle.entry after counting it: at most max entries.
type boundedEntries struct {
	max     int
	entries []Entry
}

func (b *boundedEntries) UnmarshalJSON(v []byte) error {
	if len(v) > 0 && v[0] == '[' && countElements(v, b.max) > b.max {
		return ErrTooManyEntries
	}
	return json.Unmarshal(v, &b.entries)
}

// Entry is what the gateway reads of one entry of a member's page.
type Entry struct {
	Resource json.RawMessage `json:"resource"`
	Search   *EntrySearch    `json:"search"`
}

type EntrySearch struct {
	Mode  string          `json:"mode"`
	Score json.RawMessage `json:"score"`
}

type Head struct {
	ResourceType string `json:"resourceType"`
	ID           string `json:"id"`
}

// ReadIssues reads the issues of an OperationOutcome another server wrote, at most
// max, severity and code checked (ValidSeverity, ValidIssueCode), every text through
// clean; nil when body is no OperationOutcome.
func ReadIssues(body []byte, max int, clean func(string) string) []Issue {
	var oo struct {
		ResourceType string `json:"resourceType"`
		Issue        []struct {
			Severity    string `json:"severity"`
			Code        string `json:"code"`
			Diagnostics string `json:"diagnostics"`
			Details     *struct {
				Text string `json:"text"`
			} `json:"details"`
			Expression []string `json:"expression"`
		} `json:"issue"`
	}
	if len(body) == 0 || json.Unmarshal(body, &oo) != nil || oo.ResourceType != "OperationOutcome" {
		return nil
	}
	var out []Issue
	for _, i := range oo.Issue {
		if len(out) == max {
			break
		}
		is := Issue{Severity: ValidSeverity(i.Severity), Code: ValidIssueCode(i.Code), Diagnostics: clean(i.Diagnostics)}
		if i.Details != nil && i.Details.Text != "" {
			is.Details = &IssueDetails{Text: clean(i.Details.Text)}
		}
		for _, x := range i.Expression {
			if len(is.Expression) < 8 {
				is.Expression = append(is.Expression, clean(x))
			}
		}
		out = append(out, is)
	}
	return out
}

// Extras is how many of a page's entries are not matches (includes, outcomes):
// the part of a member's page that is not bounded by _count.
func Extras(pg *Page) int {
	n := 0
	for _, e := range pg.Entry {
		if e.Search != nil && e.Search.Mode != "" && e.Search.Mode != "match" {
			n++
		} else if h, ok := ReadHead(e.Resource); ok && h.ResourceType == "OperationOutcome" {
			n++
		}
	}
	return n
}
