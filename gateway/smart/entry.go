package smart

import (
	"net/url"
	"strings"
)

// Entry is one request of a transaction or batch Bundle, as far as its
// authorization goes.
type Entry struct {
	// ResourceType is the entry's type ("" for a system-level search or history).
	ResourceType string
	// Interaction is what the entry does.
	Interaction Interaction
	// Params are the search parameters of a search, or the criteria of a conditional
	// interaction (the URL's query, or If-None-Exist for a conditional create).
	Params url.Values
}

// ParseEntry classifies a Bundle entry's request from its method (GET, HEAD, POST,
// PUT, PATCH or DELETE, as Bundle.entry.request.method spells it), its url (relative
// to the FHIR base, as Bundle.entry.request.url is: "Observation/1",
// "Observation?code=x", "Patient/1/_history/2") and its ifNoneExist. It reports false
// for what it does not classify, which the caller refuses: an absolute url, an
// operation ($everything), a nested Bundle (POST to the base), a conditional
// interaction without criteria, an id or type FHIR cannot name. The parameters of a
// POST [type]/_search are those of its url only: a form body's are the caller's to add.
func ParseEntry(method, requestURL, ifNoneExist string) (Entry, bool) {
	if strings.Contains(requestURL, "://") {
		return Entry{}, false
	}
	path, rawQuery, _ := strings.Cut(strings.TrimPrefix(requestURL, "/"), "?")
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return Entry{}, false
	}
	segs := strings.Split(path, "/")
	if path == "" {
		segs = nil
	}
	switch method {
	case "GET", "HEAD":
		return parseGet(segs, query)
	case "POST":
		return parsePost(segs, query, rawQuery, ifNoneExist)
	case "PUT", "PATCH", "DELETE":
		return parseChange(method, segs, query, rawQuery)
	}
	return Entry{}, false
}

// parseGet classifies a GET (or HEAD): the capability statement, a search, a read, a
// vread or a history, at the system, type or instance level.
func parseGet(segs []string, query url.Values) (Entry, bool) {
	switch {
	case len(segs) == 0:
		return Entry{Interaction: SearchSystem, Params: query}, true
	case len(segs) == 1 && segs[0] == "metadata":
		return Entry{Interaction: Capabilities}, true
	case len(segs) == 1 && segs[0] == "_history":
		return Entry{Interaction: HistorySystem}, true
	case !validType(segs[0]):
		return Entry{}, false
	}
	t := segs[0]
	switch {
	case len(segs) == 1:
		return Entry{ResourceType: t, Interaction: SearchType, Params: query}, true
	case len(segs) == 2 && segs[1] == "_history":
		return Entry{ResourceType: t, Interaction: HistoryType}, true
	case !validID(segs[1]):
		return Entry{}, false
	case len(segs) == 2:
		return Entry{ResourceType: t, Interaction: Read}, true
	case len(segs) == 3 && segs[2] == "_history":
		return Entry{ResourceType: t, Interaction: HistoryInstance}, true
	case len(segs) == 4 && segs[2] == "_history" && validID(segs[3]):
		return Entry{ResourceType: t, Interaction: VRead}, true
	}
	return Entry{}, false
}

// parsePost classifies a POST: a create (conditional with If-None-Exist) or a
// POST [type]/_search.
func parsePost(segs []string, query url.Values, rawQuery, ifNoneExist string) (Entry, bool) {
	if len(segs) == 0 || !validType(segs[0]) {
		return Entry{}, false
	}
	t := segs[0]
	switch {
	case len(segs) == 2 && segs[1] == "_search":
		return Entry{ResourceType: t, Interaction: SearchType, Params: query}, true
	case len(segs) != 1 || rawQuery != "":
		return Entry{}, false
	case ifNoneExist == "":
		return Entry{ResourceType: t, Interaction: Create}, true
	}
	criteria, err := url.ParseQuery(strings.TrimPrefix(ifNoneExist, "?"))
	if err != nil || len(criteria) == 0 {
		return Entry{}, false
	}
	return Entry{ResourceType: t, Interaction: ConditionalCreate, Params: criteria}, true
}

// plain and conditional are the interactions of a PUT, PATCH or DELETE on an
// instance and on criteria.
var (
	plain       = map[string]Interaction{"PUT": Update, "PATCH": Patch, "DELETE": Delete}
	conditional = map[string]Interaction{"PUT": ConditionalUpdate, "PATCH": ConditionalPatch, "DELETE": ConditionalDelete}
)

// parseChange classifies a PUT, PATCH or DELETE: on an instance, or, with criteria
// and no id, conditional.
func parseChange(method string, segs []string, query url.Values, rawQuery string) (Entry, bool) {
	if len(segs) == 0 || !validType(segs[0]) {
		return Entry{}, false
	}
	switch {
	case len(segs) == 2 && validID(segs[1]) && rawQuery == "":
		return Entry{ResourceType: segs[0], Interaction: plain[method]}, true
	case len(segs) == 1 && len(query) > 0:
		return Entry{ResourceType: segs[0], Interaction: conditional[method], Params: query}, true
	}
	return Entry{}, false
}

// validID is FHIR's id type, [A-Za-z0-9\-.]{1,64}: gateway/fhir's ValidID, kept here
// so that this package imports nothing (a test holds the two equal).
func validID(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// AllowEntry decides one entry: a search or a conditional interaction through
// AllowSearch (its restricted grants apply when its parameters satisfy them), the
// rest through Allow.
func (g Grants) AllowEntry(e Entry) Decision {
	switch e.Interaction {
	case SearchType, SearchSystem, ConditionalCreate, ConditionalUpdate, ConditionalPatch, ConditionalDelete:
		return g.AllowSearch(e.ResourceType, e.Interaction, e.Params)
	}
	return g.Allow(e.ResourceType, e.Interaction)
}

// FirstRefusal decides a transaction's or batch's entries in order and returns the
// index and decision of the first one refused, or -1 and the zero Decision when every
// entry is allowed. An allowed entry may still carry a patient level or restrictions
// the caller enforces on it (AllowEntry returns them entry by entry). A nested
// transaction entry is refused like the wrapper.
func (g Grants) FirstRefusal(entries []Entry) (int, Decision) {
	for i, e := range entries {
		if d := g.AllowEntry(e); !d.Allowed {
			return i, d
		}
	}
	return -1, Decision{}
}
