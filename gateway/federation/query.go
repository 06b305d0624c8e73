package federation

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Query limits: every input bounded.
const (
	// maxQueryParams bounds how many parameters it may hold.
	maxQueryParams = 100
)

// searchQuery is a federated search as the client asked it.
type searchQuery struct {
	// kept are the parameters sent to every member as they came, each "name=value"
	// re-escaped, in the client's order.
	kept []string
	// count is the page size: _count, or federation.default_count, at most
	// federation.max_count.
	count int
	// sortRaw is _sort as given, sort the same parsed.
	sortRaw string
	sort    []sortKey
	// summaryCount is _summary=count (or _count=0): totals only.
	summaryCount bool
	// page is the continuation token of a next link, "" on a first page.
	page string
}

// queryError is a refused query: the OperationOutcome says which parameter and why.
type queryError struct {
	status  int
	outcome OperationOutcome
}

func badParam(param, format string, args ...any) *queryError {
	return &queryError{status: 400, outcome: paramOutcome("invalid", param, fmt.Sprintf(format, args...))}
}

// parseSearch reads a search query (the URL's, or a form body joined to it). It keeps
// the order of the client's parameters; the gateway's own (_count, _sort, _page,
// _format) are taken out and resolved.
//
// maxQueryBytes is limits.max_query_bytes: the URL's query alone was held to it
// before (414), this holds the query and a form body joined.
func parseSearch(resourceType, raw string, defCount, maxCount, maxQueryBytes int) (searchQuery, *queryError) {
	q := searchQuery{count: defCount}
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
				q.summaryCount = true
			}
			q.count = min(max(c, 1), maxCount)
		case "_sort":
			if seenSort {
				return q, badParam("_sort", "_sort is given more than once")
			}
			seenSort = true
			keys, err := parseSort(resourceType, value)
			if err != nil {
				return q, &queryError{status: 400, outcome: paramOutcome("not-supported", "_sort", err.Error())}
			}
			q.sortRaw, q.sort = value, keys
		case "_page":
			if seenPage {
				return q, badParam("_page", "_page is given more than once")
			}
			seenPage = true
			q.page = value
		case "_format":
			// The gateway asks its members for JSON; an XML _format was refused before.
		default:
			if name == "_summary" && value == "count" {
				q.summaryCount = true
			}
			q.kept = append(q.kept, escapeQuery(name)+"="+escapeQuery(value))
		}
	}
	if q.summaryCount && !containsPair(q.kept, "_summary=count") {
		q.kept = append(q.kept, "_summary=count")
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

// memberQuery is the query a first page sends to every member: the kept parameters,
// then _count and _sort as the gateway resolved them.
func (q searchQuery) memberQuery() string {
	parts := append([]string(nil), q.kept...)
	if !q.summaryCount {
		parts = append(parts, "_count="+strconv.Itoa(q.count))
	}
	if q.sortRaw != "" {
		parts = append(parts, "_sort="+escapeQuery(q.sortRaw))
	}
	return strings.Join(parts, "&")
}

// escapeQuery escapes a query name or value for a URL, leaving readable the
// characters FHIR searches are made of (":", ",", "|", "$", "/", "@").
func escapeQuery(s string) string {
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

func unescape(s string) (string, error) { return url.QueryUnescape(s) }
