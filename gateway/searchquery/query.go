package searchquery

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/ferrofed/ferrofed/gateway/fhir"
)

// Query limits: every input bounded.
const (
	// maxQueryParams bounds how many parameters it may hold.
	maxQueryParams = 100
)

// Query is a federated search as the client asked it.
type Query struct {
	// Kept are the parameters sent to every member as they came, each "name=value"
	// re-escaped, in the client's order.
	Kept []string
	// Count is the page size: _count, or federation.default_count, at most
	// federation.max_count.
	Count int
	// SortRaw is _sort as given, Sort the same parsed.
	SortRaw string
	Sort    []SortKey
	// SummaryCount is _summary=count (or _count=0): totals only.
	SummaryCount bool
	// Page is the continuation token of a next link, "" on a first page.
	Page string
}

// Error is a refused query: the OperationOutcome says which parameter and why.
type Error struct {
	Status  int
	Outcome fhir.OperationOutcome
}

func badParam(param, format string, args ...any) *Error {
	return &Error{Status: 400, Outcome: fhir.ParamOutcome("invalid", param, fmt.Sprintf(format, args...))}
}

// Parse reads a search query (the URL's, or a form body joined to it). It keeps
// the order of the client's parameters; the gateway's own (_count, _sort, _page,
// _format) are taken out and resolved.
//
// maxQueryBytes is limits.max_query_bytes: the URL's query alone was held to it
// before (414), this holds the query and a form body joined.
func Parse(resourceType, raw string, defCount, maxCount, maxQueryBytes int) (Query, *Error) {
	q := Query{Count: defCount}
	if len(raw) > maxQueryBytes {
		return q, badParam("(query)", "the query is longer than %d bytes", maxQueryBytes)
	}
	var seenCount, seenSort, seenPage bool
	n := 0
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		if n++; n > maxQueryParams {
			return q, badParam("(query)", "the query holds more than %d parameters", maxQueryParams)
		}
		k, v, _ := strings.Cut(pair, "=")
		name, err1 := url.QueryUnescape(k)
		value, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil || name == "" {
			return q, badParam("(query)", "the query is not form-encoded")
		}
		switch name {
		case "_count":
			if seenCount {
				return q, badParam("_count", "_count is given more than once")
			}
			seenCount = true
			c, err := strconv.Atoi(value)
			if err != nil || c < 0 {
				return q, badParam("_count", "_count must be a whole number from 0 (totals only) to %d, not %q", maxCount, value)
			}
			if c == 0 {
				q.SummaryCount = true
			}
			q.Count = min(max(c, 1), maxCount)
		case "_sort":
			if seenSort {
				return q, badParam("_sort", "_sort is given more than once")
			}
			seenSort = true
			keys, err := ParseSort(resourceType, value)
			if err != nil {
				return q, &Error{Status: 400, Outcome: fhir.ParamOutcome("not-supported", "_sort", err.Error())}
			}
			q.SortRaw, q.Sort = value, keys
		case "_page":
			if seenPage {
				return q, badParam("_page", "_page is given more than once")
			}
			seenPage = true
			q.Page = value
		case "_format":
			// The gateway asks its members for JSON; an XML _format was refused before.
		default:
			if name == "_summary" && value == "count" {
				q.SummaryCount = true
			}
			q.Kept = append(q.Kept, EscapeQuery(name)+"="+EscapeQuery(value))
		}
	}
	if q.SummaryCount && !containsPair(q.Kept, "_summary=count") {
		q.Kept = append(q.Kept, "_summary=count")
	}
	return q, nil
}

func containsPair(kept []string, p string) bool {
	for _, k := range kept {
		if k == p {
			return true
		}
	}
	return false
}

// MemberQuery is the query a first page sends to every member: the kept parameters,
// then _count and _sort as the gateway resolved them.
func (q Query) MemberQuery() string {
	parts := append([]string(nil), q.Kept...)
	if !q.SummaryCount {
		parts = append(parts, "_count="+strconv.Itoa(q.Count))
	}
	if q.SortRaw != "" {
		parts = append(parts, "_sort="+EscapeQuery(q.SortRaw))
	}
	return strings.Join(parts, "&")
}

// escapeQuery escapes a query name or value for a URL, leaving readable the
// characters FHIR searches are made of (":", ",", "|", "$", "/", "@").
func EscapeQuery(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == ':', c == ',', c == '|', c == '$', c == '/', c == '@', c == '!', c == '*', c == '\'', c == '(', c == ')':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// UsedQuery is the member query mq less the parameters a member ignored, for a first
// page's self link (docs/data-plane.md, "A federated search"): a server's self link
// names the parameters it used, so a parameter is kept when the self link of every
// member page in selfs that names parameters names it too; _count and _sort, which the
// gateway resolved itself, are always kept. Without such a self link, mq is kept whole.
func UsedQuery(mq string, selfs []string) string {
	var named []url.Values
	for _, s := range selfs {
		if _, q, ok := strings.Cut(s, "?"); ok && q != "" {
			if v, err := url.ParseQuery(q); err == nil {
				named = append(named, v)
			}
		}
	}
	if len(named) == 0 || mq == "" {
		return mq
	}
	var kept []string
	for part := range strings.SplitSeq(mq, "&") {
		name, _, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		keep := true
		for _, v := range named {
			if _, ok := v[name]; !ok && name != "_count" && name != "_sort" {
				keep = false
				break
			}
		}
		if keep {
			kept = append(kept, part)
		}
	}
	return strings.Join(kept, "&")
}
