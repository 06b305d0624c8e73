// Package mcsd is an IHE mCSD Care Services Selective and Update Supplier for tests
// (docs/bindings.md, "Directory"): a real HTTP server on loopback that holds
// Organizations and Endpoints with their versions and answers
//
//   - ITI-90 `GET [base]/Organization?active=true&_include=Organization:endpoint&_count=n`
//     (and `GET [base]/Endpoint?_count=n`) with searchset Bundles, paged by `next`
//     links at _count (default 100), each page's referenced Endpoints as `include`
//     entries;
//   - ITI-91 `GET [base]/{Organization|Endpoint}/_history?_since=<instant>&_count=n`
//     with history Bundles, newest first: every version since the instant, a create
//     as POST, an update as PUT, a delete as a DELETE tombstone (request.url only, no
//     resource).
//
// A test mutates it while it runs (Put, Delete) and misbehaves it with the knobs of
// test/double (status, hang, refused, reset, malformed) and the directory's own
// (Pages): a next link to another origin, a page that links to itself, paging that
// never ends, a 200 that is not a Bundle, a padded (oversized) page, and extra
// resources in every searchset. Every error and non-Bundle body carries the marker.
package mcsdsupplier

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
)

// Pages shape the directory's pages beyond test/double's knobs: what a directory
// gets wrong in its Bundles, not in its HTTP.
type Pages struct {
	// ForeignNext makes every page's next link point at another origin (and a last
	// page have one).
	ForeignNext bool
	// SelfNext makes every history page link to itself as next.
	SelfNext bool
	// EndlessPaging gives every page a next link to a page after it, for ever.
	EndlessPaging bool
	// NonBundle answers every search and history with a 200 OperationOutcome.
	NonBundle bool
	// PadBytes pads every page with a meta.tag of this many bytes.
	PadBytes int
	// ExtraEndpoints adds this many Endpoint entries (search.mode include) to every
	// searchset page.
	ExtraEndpoints int
}

// Options shape one directory.
type Options struct {
	// Listen is the address; default "127.0.0.1:0".
	Listen string
	// Marker is put in every error and non-Bundle body; default "MCSD-BODY".
	Marker string
	// Knobs are the double's faults it starts with.
	Knobs double.Knobs
}

// Server is one running directory.
type Server struct {
	*double.Server
	// URL is the FHIR base, "http://127.0.0.1:port/fhir".
	URL string

	opts  Options
	mu    sync.Mutex
	res   map[string]map[string][]version // type → id → versions, oldest first
	last  time.Time
	pages Pages
}

type version struct {
	n       int
	at      time.Time
	deleted bool
	body    map[string]any
}

// Start starts a directory for a test and stops it when the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := New(opts)
	if err != nil {
		tb.Fatalf("start mcsd directory: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// New starts a directory; Close stops it.
func New(opts Options) (*Server, error) {
	if opts.Marker == "" {
		opts.Marker = "MCSD-BODY"
	}
	s := &Server{opts: opts, res: map[string]map[string][]version{"Organization": {}, "Endpoint": {}}}
	ds, err := double.New(double.Options{Listen: opts.Listen, Name: "mcsd directory", Marker: opts.Marker, Knobs: opts.Knobs}, s)
	if err != nil {
		return nil, err
	}
	s.Server = ds
	s.URL = ds.URL() + "/fhir"
	return s, nil
}

// SetPages sets the shape of the next requests' pages.
func (s *Server) SetPages(k Pages) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages = k
}

// stamp is the time of a new version: now, and always after the last one (by a
// microsecond, so that thousands of puts in a row stay close to now).
func (s *Server) stamp() time.Time {
	t := time.Now().UTC().Truncate(time.Microsecond)
	if !t.After(s.last) {
		t = s.last.Add(time.Microsecond)
	}
	s.last = t
	return t
}

// Put creates or updates a resource (an Organization or an Endpoint, with its id)
// as a new version. The map is copied.
func (s *Server) Put(resource map[string]any) error {
	typ, _ := resource["resourceType"].(string)
	id, _ := resource["id"].(string)
	if (typ != "Organization" && typ != "Endpoint") || id == "" {
		return fmt.Errorf("mcsd: put needs an Organization or an Endpoint with an id, got %q/%q", typ, id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	vs := s.res[typ][id]
	body := make(map[string]any, len(resource)+1)
	for k, v := range resource {
		body[k] = v
	}
	s.res[typ][id] = append(vs, version{n: len(vs) + 1, at: s.stamp(), body: body})
	return nil
}

// MustPut is Put for a test.
func (s *Server) MustPut(tb testing.TB, resources ...map[string]any) {
	tb.Helper()
	for _, r := range resources {
		if err := s.Put(r); err != nil {
			tb.Fatal(err)
		}
	}
}

// Delete deletes a resource: a tombstone version. Deleting what is not there (or is
// deleted) is an error.
func (s *Server) Delete(typ, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	vs := s.res[typ][id]
	if len(vs) == 0 || vs[len(vs)-1].deleted {
		return fmt.Errorf("mcsd: no %s/%s to delete", typ, id)
	}
	s.res[typ][id] = append(vs, version{n: len(vs) + 1, at: s.stamp(), deleted: true})
	return nil
}

// Organization is an Organization resource: active, with the member identifier
// value in system, referencing the given Endpoints.
func Organization(id, system, value string, endpoints ...string) map[string]any {
	r := map[string]any{"resourceType": "Organization", "id": id, "active": true, "name": "Organization " + id}
	if value != "" {
		r["identifier"] = []any{map[string]any{"system": system, "value": value}}
	}
	var refs []any
	for _, e := range endpoints {
		refs = append(refs, map[string]any{"reference": "Endpoint/" + e})
	}
	if refs != nil {
		r["endpoint"] = refs
	}
	return r
}

// Endpoint is an active FHIR REST Endpoint resource at address.
func Endpoint(id, address string) map[string]any {
	return map[string]any{"resourceType": "Endpoint", "id": id, "status": "active",
		"connectionType": map[string]any{"system": "http://terminology.hl7.org/CodeSystem/endpoint-connection-type", "code": "hl7-fhir-rest"},
		"payloadType":    []any{map[string]any{"text": "any"}},
		"address":        address}
}

// The type of an Endpoint identifier that is the home community id of the
// Endpoint's community (the mCSD guide's MCSDEndpointIdentifierTypes#HCID).
const (
	EndpointIdentifierTypes = "https://profiles.ihe.net/ITI/mCSD/CodeSystem/MCSDEndpointIdentifierTypes"
	HCID                    = "HCID"
)

// WithIdentifier adds an identifier of system and value to resource (an
// Organization or an Endpoint) and returns it.
func WithIdentifier(resource map[string]any, system, value string) map[string]any {
	ids, _ := resource["identifier"].([]any)
	resource["identifier"] = append(ids, map[string]any{"system": system, "value": value})
	return resource
}

// WithHCID adds a home community id to an Endpoint and returns it: an identifier
// typed MCSDEndpointIdentifierTypes#HCID, its system urn:ietf:rfc:3986 (a URI) and
// its value as given (urn:oid:…, or a bare OID as some directories write it).
func WithHCID(endpoint map[string]any, value string) map[string]any {
	ids, _ := endpoint["identifier"].([]any)
	endpoint["identifier"] = append(ids, map[string]any{
		"type":   map[string]any{"coding": []any{map[string]any{"system": EndpointIdentifierTypes, "code": HCID}}},
		"system": "urn:ietf:rfc:3986",
		"value":  value,
	})
	return endpoint
}

// Answer answers one request.
func (s *Server) Answer(r double.Request) double.Answer {
	if r.Method != http.MethodGet {
		return s.outcome(http.StatusMethodNotAllowed, "not-supported", "ITI-90 and ITI-91 are GETs here")
	}
	if !double.JSONAccepted(r.Header.Get("Accept"), r.Query.Get("_format")) {
		return s.outcome(http.StatusNotAcceptable, "not-supported", "this directory answers application/fhir+json only")
	}
	path, ok := strings.CutPrefix(r.Path, "/fhir/")
	if !ok {
		return s.outcome(http.StatusNotFound, "not-found", "no FHIR API at "+r.Path)
	}
	count := 100
	if c := r.Query.Get("_count"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			return s.outcome(http.StatusBadRequest, "invalid", "_count must be a positive integer")
		}
		count = n
	}
	offset, _ := strconv.Atoi(r.Query.Get("_offset"))
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.pages
	if k.NonBundle {
		return s.outcome(http.StatusOK, "informational", "not a Bundle")
	}
	switch path {
	case "Organization", "Endpoint":
		return s.search(r, path, count, offset, k)
	case "Organization/_history", "Endpoint/_history":
		typ := strings.TrimSuffix(path, "/_history")
		var since time.Time
		if v := r.Query.Get("_since"); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return s.outcome(http.StatusBadRequest, "invalid", "_since is not an instant")
			}
			since = t
		}
		return s.history(r, typ, since, count, offset, k)
	}
	return s.outcome(http.StatusNotFound, "not-found", "no resource type or interaction at "+r.Path)
}

// current is the live resources of typ, by id.
func (s *Server) current(typ string) []map[string]any {
	ids := make([]string, 0, len(s.res[typ]))
	for id := range s.res[typ] {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []map[string]any
	for _, id := range ids {
		vs := s.res[typ][id]
		if v := vs[len(vs)-1]; !v.deleted {
			out = append(out, s.withMeta(typ, id, v))
		}
	}
	return out
}

func (s *Server) withMeta(typ, id string, v version) map[string]any {
	body := make(map[string]any, len(v.body)+1)
	for k, x := range v.body {
		body[k] = x
	}
	body["meta"] = map[string]any{"versionId": strconv.Itoa(v.n), "lastUpdated": v.at.Format(time.RFC3339Nano)}
	return body
}

func (s *Server) search(r double.Request, typ string, count, offset int, k Pages) double.Answer {
	var matches []map[string]any
	for _, res := range s.current(typ) {
		if a := r.Query.Get("active"); typ == "Organization" && a != "" && fmt.Sprint(res["active"]) != a {
			continue
		}
		matches = append(matches, res)
	}
	page := window(matches, offset, count)
	var entries []any
	for _, res := range page {
		entries = append(entries, map[string]any{"fullUrl": s.URL + "/" + typ + "/" + res["id"].(string), "resource": res, "search": map[string]any{"mode": "match"}})
	}
	if typ == "Organization" && slices.Contains(r.Query["_include"], "Organization:endpoint") {
		seen := map[string]bool{}
		for _, res := range page {
			refs, _ := res["endpoint"].([]any)
			for _, ref := range refs {
				id := strings.TrimPrefix(fmt.Sprint(ref.(map[string]any)["reference"]), "Endpoint/")
				vs := s.res["Endpoint"][id]
				if seen[id] || len(vs) == 0 || vs[len(vs)-1].deleted {
					continue
				}
				seen[id] = true
				entries = append(entries, map[string]any{"fullUrl": s.URL + "/Endpoint/" + id, "resource": s.withMeta("Endpoint", id, vs[len(vs)-1]), "search": map[string]any{"mode": "include"}})
			}
		}
	}
	for i := range k.ExtraEndpoints {
		id := fmt.Sprintf("extra-%d", i)
		entries = append(entries, map[string]any{"resource": map[string]any{"resourceType": "Endpoint", "id": id, "status": "off", "address": "http://x"}, "search": map[string]any{"mode": "include"}})
	}
	return s.bundle(r, "searchset", entries, offset, count, len(matches), k, false)
}

func (s *Server) history(r double.Request, typ string, since time.Time, count, offset int, k Pages) double.Answer {
	type item struct {
		id string
		v  version
	}
	var items []item
	for id, vs := range s.res[typ] {
		for _, v := range vs {
			if !v.at.Before(since) {
				items = append(items, item{id, v})
			}
		}
	}
	// Newest first; equal instants by id, then version, for stable pages.
	slices.SortFunc(items, func(a, b item) int {
		if c := b.v.at.Compare(a.v.at); c != 0 {
			return c
		}
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return b.v.n - a.v.n
	})
	var entries []any
	for _, it := range window(items, offset, count) {
		e := map[string]any{"fullUrl": s.URL + "/" + typ + "/" + it.id}
		switch {
		case it.v.deleted:
			e["request"] = map[string]any{"method": "DELETE", "url": typ + "/" + it.id}
			e["response"] = map[string]any{"status": "204 No Content"}
		case it.v.n == 1:
			e["resource"] = s.withMeta(typ, it.id, it.v)
			e["request"] = map[string]any{"method": "POST", "url": typ}
			e["response"] = map[string]any{"status": "201 Created"}
		default:
			e["resource"] = s.withMeta(typ, it.id, it.v)
			e["request"] = map[string]any{"method": "PUT", "url": typ + "/" + it.id}
			e["response"] = map[string]any{"status": "200 OK"}
		}
		entries = append(entries, e)
	}
	return s.bundle(r, "history", entries, offset, count, len(items), k, true)
}

func window[T any](all []T, offset, count int) []T {
	if offset >= len(all) {
		return nil
	}
	return all[offset:min(offset+count, len(all))]
}

// bundle writes one page with its links.
func (s *Server) bundle(r double.Request, typ string, entries []any, offset, count, total int, k Pages, history bool) double.Answer {
	self := s.URL + strings.TrimPrefix(r.Path, "/fhir") + "?" + r.RawQuery
	links := []any{map[string]any{"relation": "self", "url": self}}
	next := ""
	switch {
	case k.SelfNext && history:
		next = self
	case k.EndlessPaging:
		next = s.pageURL(s.URL, r, offset+count)
	case offset+count < total:
		next = s.pageURL(s.URL, r, offset+count)
	}
	if k.ForeignNext {
		next = s.pageURL("http://directory.elsewhere.example/fhir", r, offset+count)
	}
	if next != "" {
		links = append(links, map[string]any{"relation": "next", "url": next})
	}
	meta := map[string]any{"lastUpdated": time.Now().UTC().Format(time.RFC3339Nano)}
	if k.PadBytes > 0 {
		meta["tag"] = []any{map[string]any{"display": strings.Repeat("x", k.PadBytes)}}
	}
	b := map[string]any{"resourceType": "Bundle", "type": typ, "meta": meta, "link": links}
	if typ == "searchset" {
		b["total"] = total
	}
	if entries != nil {
		b["entry"] = entries
	}
	return double.FHIRJSON(http.StatusOK, b)
}

func (s *Server) pageURL(base string, r double.Request, offset int) string {
	q := url.Values{}
	for k, v := range r.Query {
		q[k] = slices.Clone(v)
	}
	if offset > 0 {
		q.Set("_offset", strconv.Itoa(offset))
	} else {
		q.Del("_offset")
	}
	return base + strings.TrimPrefix(r.Path, "/fhir") + "?" + q.Encode()
}

func (s *Server) outcome(status int, code, text string) double.Answer {
	return double.OperationOutcome(status, "error", code, text, s.opts.Marker)
}

// Error is the directory's error answer of a status.
func (s *Server) Error(status int, text string) double.Answer {
	return s.outcome(status, "exception", text)
}

// Malformed is a 200 FHIR JSON body that ends in the middle.
func (s *Server) Malformed() double.Answer {
	b, _ := json.Marshal(map[string]any{"resourceType": "Bundle", "type": "searchset", "entry": []any{}})
	return double.Answer{Status: http.StatusOK, ContentType: "application/fhir+json", Body: double.Truncated(b, s.opts.Marker)}
}
