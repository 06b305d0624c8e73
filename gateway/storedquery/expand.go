package storedquery

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// passThrough are the search's own parameters a client may add to a stored query's:
// they shape the answer, not what it matches.
var passThrough = []string{"_count", "_sort", "_summary", "_elements", "_total", "_format"}

// maxRunParams bounds the parameters of a _query search (the federation bounds the
// expanded one again).
const maxRunParams = 100

// expand is the search d stands for, with the client's parameters (raw, less _query)
// substituted, or a status and a message refusing it. A value is query-escaped before
// it is put in: whatever it holds (&, =, #), it stays one value of one parameter.
func (d *Definition) expand(resourceType string, given []kv) (string, int, string) {
	if resourceType != d.Resource {
		return "", http.StatusBadRequest, fmt.Sprintf("the stored query %s searches %s, not %s", d.Code, d.Resource, resourceType)
	}
	values := map[string]string{}
	var extra []string
	for _, p := range given {
		switch {
		case slices.ContainsFunc(d.Params, func(q Param) bool { return q.Name == p.name }):
			if _, dup := values[p.name]; dup {
				return "", http.StatusBadRequest, fmt.Sprintf("the parameter %s of the stored query %s is given more than once", p.name, d.Code)
			}
			values[p.name] = p.value
		case slices.Contains(passThrough, p.name):
			extra = append(extra, url.QueryEscape(p.name)+"="+url.QueryEscape(p.value))
		default:
			return "", http.StatusBadRequest, fmt.Sprintf("%s is not a parameter of the stored query %s (it takes %s, and %s)", p.name, d.Code, d.paramNames(), strings.Join(passThrough, ", "))
		}
	}
	for _, p := range d.Params {
		if _, ok := values[p.Name]; p.Required && !ok {
			return "", http.StatusBadRequest, fmt.Sprintf("the stored query %s needs the parameter %s", d.Code, p.Name)
		}
	}
	var out []string
pairs:
	for _, p := range d.pairs {
		var b strings.Builder
		b.WriteString(p.name)
		b.WriteByte('=')
		for _, pt := range p.parts {
			if pt.param == "" {
				b.WriteString(pt.literal)
				continue
			}
			v, ok := values[pt.param]
			if !ok {
				continue pairs // an optional parameter not given: its search parameter is left out
			}
			b.WriteString(url.QueryEscape(v))
		}
		out = append(out, b.String())
	}
	return strings.Join(append(out, extra...), "&"), 0, ""
}

func (d *Definition) paramNames() string {
	if len(d.Params) == 0 {
		return "no parameter of its own"
	}
	names := make([]string, len(d.Params))
	for i, p := range d.Params {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

type kv struct{ name, value string }

// splitQuery reads a form-encoded query: the _query it names (found false when none),
// and the other parameters in order.
func splitQuery(raw string) (code string, found bool, rest []kv, status int, msg string) {
	n := 0
	for p := range strings.SplitSeq(raw, "&") {
		if p == "" {
			continue
		}
		if n++; n > maxRunParams {
			return "", false, nil, http.StatusBadRequest, fmt.Sprintf("the query holds more than %d parameters", maxRunParams)
		}
		k, v, _ := strings.Cut(p, "=")
		name, err1 := url.QueryUnescape(k)
		value, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil || name == "" {
			return "", false, nil, http.StatusBadRequest, "the query is not form-encoded"
		}
		switch name {
		case "_query":
			if found {
				return "", true, nil, http.StatusBadRequest, "_query is given more than once"
			}
			code, found = value, true
		default:
			rest = append(rest, kv{name, value})
		}
	}
	return code, found, rest, 0, ""
}
