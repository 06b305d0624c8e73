package access

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/proxy"
	"github.com/ferrofed/ferrofed/gateway/smart"
)

// callOf reads the Call of a request under prefix (the base path). fhirAPI is false
// for a path outside the FHIR APIs of the data plane; decidable is false for one the
// route refuses before asking any member (a dot segment, however hidden: the route's
// own path rule), which needs a token but no decision. A query that cannot be read is
// read as no parameters (the route refuses it too).
func callOf(r *http.Request, prefix string) (call Call, fhirAPI, decidable bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok {
		return Call{}, false, false
	}
	cleaned, err := proxy.CleanPath(rest)
	// A method no FHIR interaction has (TRACE, CONNECT) is the route's 405.
	decidable = err == nil && slices.Contains(restMethods, r.Method)
	segs := nonEmpty(strings.Split(cleaned, "/"))
	if !decidable {
		segs = nonEmpty(strings.Split(rest, "/"))
	}
	call = Call{Method: r.Method, IfNoneExist: r.Header.Get("If-None-Exist")}
	switch {
	case len(segs) >= 1 && segs[0] == "fhir":
		segs = segs[1:]
	case len(segs) >= 3 && segs[0] == "nodes" && segs[2] == "fhir":
		call.Routed, call.Member, segs = true, segs[1], segs[3:]
	case len(segs) >= 1 && segs[0] == "nodes":
		return Call{}, true, false // a path under /nodes the route answers 404
	default:
		return Call{}, false, false
	}
	call.Path = strings.Join(segs, "/")
	call.Params, _ = url.ParseQuery(r.URL.RawQuery)
	if call.Params == nil {
		call.Params = url.Values{}
	}
	return call, true, decidable
}

// restMethods are the methods of FHIR's RESTful API.
var restMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

func nonEmpty(segs []string) []string {
	out := segs[:0]
	for _, s := range segs {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// readBodies reads what the decision needs of a body, and puts it back for the
// route: a POST _search's form (its parameters are the search's), and a Bundle
// POSTed to a member's base (a transaction or batch, decided entry by entry). It
// answers a body it cannot read itself, and reports false then.
func readBodies(c *gin.Context, call *Call, b *bounds) bool {
	r := c.Request
	switch {
	case r.Method != http.MethodPost:
		return true
	case strings.HasSuffix(call.Path, "/_search"):
		body, ok := peek(c, b.formBytes, "the form body is longer than limits.max_query_bytes")
		if !ok {
			return false
		}
		if form, err := url.ParseQuery(strings.TrimSpace(string(body))); err == nil {
			for k, vs := range form {
				call.Params[k] = append(call.Params[k], vs...)
			}
		}
		return true
	case call.Routed && call.Path == "":
		body, ok := peek(c, b.bundleBytes, "a Bundle the gateway checks entry by entry is longer than limits.max_routed_body_buffer_bytes")
		if !ok {
			return false
		}
		entries, err := bundleEntries(body)
		if err != nil {
			fhir.Write(c.Writer, http.StatusBadRequest, fhir.Outcome("invalid", err.Error()))
			c.Abort()
			return false
		}
		call.Entries = entries
	}
	return true
}

// peek reads r's body, at most limit bytes (413 past it, with tooLong), and puts it
// back.
func peek(c *gin.Context, limit int64, tooLong string) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, limit+1))
	switch {
	case err != nil && proxy.BodyTimedOut(c.Request.Context(), err):
		c.Header("Connection", "close") // the rest of the body is never read
		fhir.Write(c.Writer, http.StatusRequestTimeout, fhir.Outcome("timeout", "the body did not arrive within server.request_timeout_ms"))
	case err != nil:
		c.Header("Connection", "close")
		fhir.Write(c.Writer, http.StatusBadRequest, fhir.Outcome("invalid", "the body could not be read"))
	case int64(len(body)) > limit:
		c.Header("Connection", "close")
		fhir.Write(c.Writer, http.StatusRequestEntityTooLarge, fhir.Outcome("too-long", fmt.Sprintf("%s (%d bytes)", tooLong, limit)))
	default:
		c.Request.Body = io.NopCloser(bytes.NewReader(body))
		return body, true
	}
	c.Abort()
	return nil, false
}

// bundleEntries reads the requests of a transaction or batch Bundle; anything that
// is not one is an error (a member's base takes nothing else by POST).
func bundleEntries(body []byte) ([]smart.Entry, error) {
	var b struct {
		ResourceType string `json:"resourceType"`
		Type         string `json:"type"`
		Entry        []struct {
			Request *struct {
				Method      string `json:"method"`
				URL         string `json:"url"`
				IfNoneExist string `json:"ifNoneExist"`
			} `json:"request"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(body, &b); err != nil || b.ResourceType != "Bundle" || (b.Type != "transaction" && b.Type != "batch") {
		return nil, fmt.Errorf("a POST to a member's base takes a transaction or batch Bundle, decided entry by entry")
	}
	entries := make([]smart.Entry, 0, len(b.Entry))
	for i, e := range b.Entry {
		if e.Request == nil {
			return nil, fmt.Errorf("entry %d of the Bundle has no request", i)
		}
		se, ok := smart.ParseEntry(e.Request.Method, e.Request.URL, e.Request.IfNoneExist)
		if !ok {
			return nil, fmt.Errorf("entry %d of the Bundle is a request the gateway cannot decide (an absolute url, an operation, a nested Bundle)", i)
		}
		entries = append(entries, se)
	}
	return entries, nil
}

// rewrite applies a verdict to the request: the items it drops leave the query, the
// parameters it adds join it.
func rewrite(r *http.Request, v Verdict) {
	if len(v.Drop) == 0 && len(v.Add) == 0 {
		return
	}
	q := dropItems(r.URL.RawQuery, v.Drop)
	if add := v.Add.Encode(); add != "" {
		if q != "" {
			q += "&"
		}
		q += add
	}
	r.URL.RawQuery = q
	if r.Method == http.MethodPost && len(v.Drop) > 0 && isForm(r) {
		dropForm(r, v.Drop)
	}
}

func isForm(r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == "application/x-www-form-urlencoded"
}

// dropForm removes the dropped items from a POST _search's form body (read back by
// peek, so it is in memory).
func dropForm(r *http.Request, drop []string) {
	body, _ := io.ReadAll(r.Body)
	out := dropItems(strings.TrimSpace(string(body)), drop)
	r.Body = io.NopCloser(strings.NewReader(out))
	r.ContentLength = int64(len(out))
}

// dropItems is raw (a query or a form, "k=v&...") without the items whose decoded
// "key=value" is in drop.
func dropItems(raw string, drop []string) string {
	if len(drop) == 0 {
		return raw
	}
	var kept []string
	for item := range strings.SplitSeq(raw, "&") {
		k, val, _ := strings.Cut(item, "=")
		dk, _ := url.QueryUnescape(k)
		dv, _ := url.QueryUnescape(val)
		if !slices.Contains(drop, dk+"="+dv) {
			kept = append(kept, item)
		}
	}
	return strings.Join(kept, "&")
}

// finds reports whether member finds resourceType/id by one of searches, asked in
// turn as {resourceType}?_id={id}&{search}&_count=1 (docs/security.md, "Reads that
// are found first"): a match of the searchset must be the resource. A member that
// answers 404 or 410 does not find it; any other answer that is not a searchset is an
// error naming the member, never its body.
func finds(ctx context.Context, members Members, member, resourceType, id string, searches []url.Values) (bool, error) {
	for _, search := range searches {
		q := cloneValues(search)
		q.Set("_id", id)
		q.Set("_count", "1")
		status, body, err := members.Get(ctx, member, "/"+resourceType, q.Encode())
		switch {
		case err != nil:
			return false, err
		case status == http.StatusNotFound || status == http.StatusGone:
			continue
		case status/100 != 2:
			return false, fmt.Errorf("member %s could not say whether it holds the resource (HTTP %d)", member, status)
		}
		found, ok := holds(body, resourceType, id)
		if !ok {
			return false, fmt.Errorf("member %s answered the search that finds a read with something other than a Bundle", member)
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}

// holds reports whether a searchset's matches hold resourceType/id; ok is false for a
// body that is not a Bundle.
func holds(body []byte, resourceType, id string) (found, ok bool) {
	var b struct {
		ResourceType string `json:"resourceType"`
		Entry        []struct {
			Resource struct {
				ResourceType string `json:"resourceType"`
				ID           string `json:"id"`
			} `json:"resource"`
			Search struct {
				Mode string `json:"mode"`
			} `json:"search"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(body, &b); err != nil || b.ResourceType != "Bundle" {
		return false, false
	}
	for _, e := range b.Entry {
		if (e.Search.Mode == "" || e.Search.Mode == "match") && e.Resource.ResourceType == resourceType && e.Resource.ID == id {
			return true, true
		}
	}
	return false, true
}
