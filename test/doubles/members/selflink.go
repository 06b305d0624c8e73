package members

import (
	"net/url"
	"slices"
	"strings"
)

// usedQuery is the query q without the parameters the member ignored (unknown): what
// its self link names, as FHIR's self link names the parameters a server used.
func usedQuery(q string, unknown []string) string {
	if len(unknown) == 0 || q == "" {
		return q
	}
	var used []string
	for part := range strings.SplitSeq(q, "&") {
		name, _, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if !slices.Contains(unknown, name) {
			used = append(used, part)
		}
	}
	return strings.Join(used, "&")
}
