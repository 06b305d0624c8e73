// Package members is a FHIR R4 member node for tests and the demo: a real HTTP server
// on loopback that behaves, for what the gateway relies on, like a production FHIR
// server: searches answer a searchset Bundle of a default page size with `next` links,
// `total`, `fullUrl` and `search.mode`; `_count`, `_offset`, `_sort`, `_summary=count`
// and `_total=none` are honoured; an unknown search parameter is a 400
// OperationOutcome under `Prefer: handling=strict` and a warning entry under lenient
// handling (the default); `X-Forwarded-Proto`/`-Host`/`-Prefix` (or `Forwarded`) are
// honoured when it builds URLs; an XML `Accept` or `_format` is a 406; a create answers
// 201 with `Location`; `/metadata` is a CapabilityStatement. With NumericIDs, resource
// ids are 1, 2, 3…, so that members collide as real ones do.
//
// It runs on test/double, whose knobs (Options.Knobs, SetKnobs) make it misbehave the
// ways a member does in production: answer late, answer 4xx or 5xx, refuse
// connections, hang, reset the connection in the middle of its body, or send a body
// that is no FHIR JSON.
//
// Every body it sends carries a marker string (Options.Marker), so that a test can
// assert that a member's body never leaks where it must not (the dependency report).
package members

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
)

// Page sizes of a search: DefaultPageSize without _count, at most MaxPageSize with it.
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
)

// Options shape one member.
type Options struct {
	// ID names the member in its resources' ids and in its marker; default "member".
	ID string
	// Listen is the address to listen on; default "127.0.0.1:0" (a free loopback port).
	Listen string
	// Knobs are the faults the member starts with (test/double): a status from 400 on
	// is answered with an OperationOutcome, a request whose caller gives up while
	// delayed or held is counted (Cancelled) and not answered.
	Knobs double.Knobs
	// Entries is how many resources of each type a search matches; default 2,
	// negative for none.
	Entries int
	// NumericIDs makes resource ids 1, 2, 3… instead of "<ID>-1", "<ID>-2"…: two
	// members then hold a Patient/1 each.
	NumericIDs bool
	// Subjects gives each Observation and Encounter a subject, the member's patient of
	// the same index (Observation/a-2's is Patient/a-2), and makes a search by subject
	// or patient (Patient/{id} or {id}) match that patient's resources only, as a real
	// server does; a read, vread or history of an id the member does not hold is then a
	// 404. Off: they name no patient, those parameters filter nothing, and any id reads.
	Subjects bool
	// References (with Subjects) gives each Observation a performer absolute under the
	// member's own base and a focus on another server, beside its relative subject.
	References bool
	// NoTotal leaves Bundle.total out of every searchset, as servers that do not count
	// do.
	NoTotal bool
	// Handling is how an unknown search parameter is treated without a
	// `Prefer: handling=` header: "lenient" (the default: ignored, with a warning entry)
	// or "strict" (a 400 OperationOutcome).
	Handling string
	// ResourceTypes are the types the member serves; default Patient, Observation,
	// Encounter. A search of any other type answers 404.
	ResourceTypes []string
	// OmitSearchParams are search parameters the member does not know (left out of its
	// CapabilityStatement, treated as unknown).
	OmitSearchParams []string
	// Marker is put in every body the member sends; default "MEMBER-BODY-<id>".
	Marker string
	// Diagnostics is added to the diagnostics of every OperationOutcome the member
	// sends (its errors and its warning entries): what a member's own text may carry
	// (its backend's URL, an address, a token), for a test that it never reaches a
	// client.
	Diagnostics string
	// OperationDefinitions gives the member an OperationDefinition store (opdefs.go):
	// its CapabilityStatement offers read, update and delete of OperationDefinition,
	// and PUT, GET and DELETE OperationDefinition/{id} (GET ?url= searches) work on
	// it, as a server that takes stored queries does. Off: it has none and says so.
	OperationDefinitions bool
	// Encoding compresses the member's answers, or makes them what a gateway must not
	// pass on as they are (encoding.go).
	Encoding
	// SortMissing leaves the sorted date out of some resources, and says where a sort
	// puts them (sortmissing.go); off by default.
	SortMissing SortMissing
	// NoNext honours _count but never links a next page, Bundle.total still counting
	// every match: a member whose further matches no link reaches.
	NoNext bool
}

// Request is what the member saw of one request (a form-encoded search's or a PUT's
// body in Body).
type Request = double.Request

// Server is one running member.
type Server struct {
	*double.Server
	// URL is the base URL of the member's FHIR API (its query_endpoint), e.g.
	// "http://127.0.0.1:40123/fhir".
	URL string
	// Opts are the options the member was started with, defaults applied.
	Opts Options

	opdefs  opdefStore
	mu      sync.Mutex
	created atomic.Int64
}

// Start starts a member for a test and stops it when the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := New(opts)
	if err != nil {
		tb.Fatalf("start member: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Serve starts a member that stops when ctx ends: the form for demos and for code
// that has a context rather than a test.
func Serve(ctx context.Context, opts Options) (*Server, error) {
	s, err := New(opts)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, s.Close)
	return s, nil
}

// New starts a member; Close stops it.
func New(opts Options) (*Server, error) {
	if opts.ID == "" {
		opts.ID = "member"
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if opts.Entries == 0 {
		opts.Entries = 2
	}
	if opts.Entries < 0 {
		opts.Entries = 0
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	switch opts.Handling {
	case "":
		opts.Handling = "lenient"
	case "lenient", "strict":
	default:
		return nil, fmt.Errorf("handling %q is not lenient or strict", opts.Handling)
	}
	if len(opts.ResourceTypes) == 0 {
		opts.ResourceTypes = []string{"Patient", "Observation", "Encounter"}
	}
	if opts.Marker == "" {
		opts.Marker = "MEMBER-BODY-" + opts.ID
	}
	s := &Server{Opts: opts}
	// The largest body it reads is an OperationDefinition's PUT; one past the store's
	// bound still reaches the store, which refuses it as a FHIR server does.
	d, err := double.New(double.Options{Listen: opts.Listen, Name: "member " + opts.ID, Marker: opts.Marker, MaxBodyBytes: maxOpdefBytes + 1, Knobs: opts.Knobs}, s)
	if err != nil {
		return nil, err
	}
	s.Server = d
	s.URL = d.URL() + "/fhir"
	return s, nil
}

// LastRequest is the last request the member received (zero before the first).
func (s *Server) LastRequest() Request {
	r, _ := s.Last()
	return r
}

// Answer answers one request (double.Handler).
func (s *Server) Answer(r double.Request) double.Answer {
	var form string
	if (r.Method == http.MethodPost && isForm(r.Header.Get("Content-Type"))) || (r.Method == http.MethodPut && s.Opts.OperationDefinitions) {
		form = string(r.Body) // a form-encoded search, or the resource a PUT carries
	}
	return s.encode(&r, s.answer(r, form))
}

// Error is an OperationOutcome of status (double.Handler).
func (s *Server) Error(status int, text string) double.Answer {
	return s.encode(nil, s.errorAnswer(status, text))
}

// Malformed is a 200 whose body is a searchset Bundle cut in the middle
// (double.Handler).
func (s *Server) Malformed() double.Answer {
	b, _ := json.Marshal(map[string]any{"resourceType": "Bundle", "type": "searchset", "total": 1, "entry": []any{}})
	return double.Answer{Status: http.StatusOK, ContentType: fhirJSON, Body: double.Truncated(b, s.Opts.Marker)}
}

// fhirJSON is the content type of every answer.
const fhirJSON = "application/fhir+json"

func (s *Server) fail(status int, code, diagnostics string) double.Answer {
	body, _ := json.Marshal(outcomeResource("error", code, diagnostics+" "+s.Opts.Marker+s.extra()))
	return double.Answer{Status: status, ContentType: fhirJSON, Body: body}
}

// extra is Options.Diagnostics as an outcome's diagnostics carry it.
func (s *Server) extra() string {
	if s.Opts.Diagnostics == "" {
		return ""
	}
	return " " + s.Opts.Diagnostics
}

func (s *Server) ok(status int, v any) double.Answer {
	body, err := json.Marshal(v)
	if err != nil {
		return s.fail(http.StatusInternalServerError, "exception", err.Error())
	}
	return double.Answer{Status: status, ContentType: fhirJSON, Body: body}
}

// answer is what the member answers r with (form: a form-encoded body already read).
func (s *Server) answer(r double.Request, form string) double.Answer {
	rest, ok := strings.CutPrefix(r.Path, "/fhir/")
	if !ok || rest == "" {
		return s.fail(http.StatusNotFound, "not-found", "no FHIR API at "+r.Path)
	}
	if !acceptsJSON(r.Header.Get("Accept")) || !formatIsJSON(r.Query.Get("_format")) {
		return s.fail(http.StatusNotAcceptable, "not-supported", "this server answers application/fhir+json only")
	}
	base := s.baseURL(r)
	parts := strings.Split(rest, "/")
	switch {
	case rest == "metadata":
		return s.ok(http.StatusOK, s.capabilityStatement())
	case parts[0] == "OperationDefinition" && s.Opts.OperationDefinitions:
		return s.operationDefinition(r, base, parts[1:], form)
	case !slices.Contains(s.Opts.ResourceTypes, parts[0]):
		return s.fail(http.StatusNotFound, "not-supported", fmt.Sprintf("unknown resource type %q", parts[0]))
	case len(parts) == 1 && r.Method == http.MethodGet:
		return s.search(r, base, parts[0], r.RawQuery)
	case len(parts) == 2 && parts[1] == "_search" && r.Method == http.MethodPost:
		q := r.RawQuery
		if form != "" {
			if q != "" {
				q += "&"
			}
			q += form
		}
		return s.search(r, base, parts[0], q)
	case len(parts) == 1 && r.Method == http.MethodPost:
		id := fmt.Sprintf("new-%d", s.created.Add(1))
		loc := base + "/" + parts[0] + "/" + id + "/_history/1"
		a := s.ok(http.StatusCreated, s.resource(parts[0], id, 0))
		a.Header = http.Header{"Location": {loc}, "Content-Location": {loc}}
		return a
	case s.Opts.Subjects:
		return s.read(base, parts)
	default:
		id := strings.Join(parts[1:], "-")
		return s.ok(http.StatusOK, s.resource(parts[0], id, s.index(id)))
	}
}

// read answers a read (Type/id), vread (Type/id/_history/1) or history
// (Type/id/_history) as a server that holds only its own resources does: an id that
// is none of them, or a version but the first, is a 404.
func (s *Server) read(base string, parts []string) double.Answer {
	i := s.index(parts[1])
	if s.id(i) != parts[1] || len(parts) > 4 || (len(parts) > 2 && parts[2] != "_history") || (len(parts) == 4 && parts[3] != "1") {
		return s.fail(http.StatusNotFound, "not-found", "no such resource")
	}
	res := s.resource(parts[0], parts[1], i)
	s.addReferences(base, res)
	res["meta"].(map[string]any)["versionId"] = "1"
	if len(parts) != 3 {
		return s.ok(http.StatusOK, res)
	}
	return s.ok(http.StatusOK, map[string]any{"resourceType": "Bundle", "type": "history", "total": 1, "entry": []map[string]any{{
		"fullUrl": base + "/" + parts[0] + "/" + parts[1], "resource": res,
		"request":  map[string]any{"method": "PUT", "url": parts[0] + "/" + parts[1]},
		"response": map[string]any{"status": "200", "location": base + "/" + parts[0] + "/" + parts[1] + "/_history/1"},
	}}})
}

// index is the index of the resource whose id is id, 0 when it is none of the
// member's.
func (s *Server) index(id string) int {
	for i := range s.Opts.Entries {
		if s.id(i) == id {
			return i
		}
	}
	return 0
}

func isForm(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/x-www-form-urlencoded"
}

// acceptsJSON reports whether an Accept header allows FHIR JSON: absent, or naming a
// JSON type or a wildcard with a q above 0.
func acceptsJSON(accept string) bool {
	if strings.TrimSpace(accept) == "" {
		return true
	}
	for part := range strings.SplitSeq(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if q, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
				continue
			}
		}
		switch mt {
		case "*/*", "application/*", "application/fhir+json", "application/json", "application/json+fhir":
			return true
		}
	}
	return false
}

func formatIsJSON(f string) bool {
	switch f {
	case "", "json", "application/json", "application/fhir+json", "application/json+fhir":
		return true
	}
	return false
}

// baseURL is the FHIR base the member's URLs are built on: its own, or the one the
// proxy in front of it says it is reached at.
func (s *Server) baseURL(r double.Request) string {
	proto, host, prefix := "http", r.Host, "/fhir"
	if s.Opts.OwnBase {
		return proto + "://" + host + prefix
	}
	if f := r.Header.Get("Forwarded"); f != "" {
		for el := range strings.SplitSeq(strings.Split(f, ",")[0], ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(el), "=")
			v = strings.Trim(v, `"`)
			switch strings.ToLower(k) {
			case "proto":
				proto = v
			case "host":
				host = v
			}
		}
	}
	if v := r.Header.Get("X-Forwarded-Proto"); v != "" {
		proto = v
	}
	if v := r.Header.Get("X-Forwarded-Host"); v != "" {
		host = v
	}
	if v := r.Header.Get("X-Forwarded-Prefix"); v != "" {
		prefix = "/" + strings.Trim(v, "/")
	}
	return proto + "://" + host + prefix
}

// commonParams are the search parameters every type has, result parameters included.
var commonParams = []string{"_id", "_lastUpdated", "_count", "_offset", "_sort", "_summary", "_total", "_elements", "_format", "_pretty", "_include", "_revinclude"}

// typeParams are each type's own search parameters and their FHIR types.
var typeParams = map[string][][2]string{
	"Patient":     {{"name", "string"}, {"family", "string"}, {"given", "string"}, {"birthdate", "date"}, {"gender", "token"}, {"identifier", "token"}},
	"Observation": {{"subject", "reference"}, {"patient", "reference"}, {"code", "token"}, {"date", "date"}, {"status", "token"}},
	"Encounter":   {{"subject", "reference"}, {"patient", "reference"}, {"date", "date"}, {"status", "token"}},
}

func (s *Server) knows(resourceType, param string) bool {
	if slices.Contains(s.Opts.OmitSearchParams, param) {
		return false
	}
	if slices.Contains(commonParams, param) {
		return true
	}
	for _, p := range typeParams[resourceType] {
		if p[0] == param {
			return true
		}
	}
	return false
}

func (s *Server) capabilityStatement() map[string]any {
	var resources []map[string]any
	for _, t := range s.Opts.ResourceTypes {
		params := []map[string]any{{"name": "_id", "type": "token"}, {"name": "_lastUpdated", "type": "date"}}
		for _, p := range typeParams[t] {
			if !slices.Contains(s.Opts.OmitSearchParams, p[0]) {
				params = append(params, map[string]any{"name": p[0], "type": p[1]})
			}
		}
		resources = append(resources, map[string]any{
			"type":        t,
			"interaction": []map[string]any{{"code": "read"}, {"code": "search-type"}, {"code": "create"}},
			"searchParam": params,
		})
	}
	if s.Opts.OperationDefinitions {
		resources = append(resources, map[string]any{
			"type":        "OperationDefinition",
			"interaction": []map[string]any{{"code": "read"}, {"code": "update"}, {"code": "delete"}, {"code": "search-type"}},
			"searchParam": []map[string]any{{"name": "url", "type": "uri"}},
		})
	}
	return map[string]any{
		"resourceType": "CapabilityStatement",
		"status":       "active",
		"date":         "2026-01-01",
		"kind":         "instance",
		"software":     map[string]any{"name": "ferrofed test member " + s.Opts.ID},
		"fhirVersion":  "4.0.1",
		"format":       []string{"application/fhir+json"},
		"publisher":    s.Opts.Marker,
		"rest":         []map[string]any{{"mode": "server", "resource": resources}},
	}
}

// handling is the request's Prefer: handling=, else the member's own.
func (s *Server) handling(r double.Request) string {
	for _, v := range r.Header.Values("Prefer") {
		for p := range strings.SplitSeq(v, ",") {
			k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "handling") {
				switch val = strings.Trim(strings.TrimSpace(val), `"`); val {
				case "strict", "lenient":
					return val
				}
			}
		}
	}
	return s.Opts.Handling
}

// search answers one page of a search of resourceType with the raw query q.
func (s *Server) search(r double.Request, base, resourceType, q string) double.Answer {
	params, err := url.ParseQuery(q)
	if err != nil {
		return s.fail(http.StatusBadRequest, "invalid", "the query is not form-encoded: "+err.Error())
	}
	var unknown []string
	for name := range params {
		bare, _, _ := strings.Cut(name, ":")
		bare, _, _ = strings.Cut(bare, ".")
		if !s.knows(resourceType, bare) {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	strict := s.handling(r) == "strict"
	if len(unknown) > 0 && strict {
		return s.fail(http.StatusBadRequest, "processing", fmt.Sprintf("unknown search parameter %q for resource type %s", unknown[0], resourceType))
	}
	count := DefaultPageSize
	if v := params.Get("_count"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return s.fail(http.StatusBadRequest, "invalid", "_count must be a non-negative integer")
		}
		count = min(n, MaxPageSize)
	}
	offset := 0
	if v := params.Get("_offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return s.fail(http.StatusBadRequest, "invalid", "_offset must be a non-negative integer")
		}
		offset = n
	}
	all := make([]map[string]any, s.Opts.Entries)
	for i := range all {
		all[i] = s.resource(resourceType, s.id(i), i)
		s.addReferences(base, all[i])
	}
	if ids := params.Get("_id"); ids != "" {
		want := strings.Split(ids, ",")
		all = slices.DeleteFunc(all, func(res map[string]any) bool { return !slices.Contains(want, res["id"].(string)) })
	}
	if s.Opts.Subjects && resourceType != "Patient" {
		for _, name := range []string{"subject", "patient", "subject:Patient", "patient:Patient"} {
			for _, v := range params[name] {
				want := "Patient/" + strings.TrimPrefix(v, "Patient/")
				all = slices.DeleteFunc(all, func(res map[string]any) bool {
					ref, _ := res["subject"].(map[string]any)
					return ref == nil || ref["reference"] != want
				})
			}
		}
	}
	if keys := params.Get("_sort"); keys != "" {
		for k := range strings.SplitSeq(keys, ",") {
			if !sortable(resourceType, strings.TrimPrefix(k, "-")) {
				return s.fail(http.StatusBadRequest, "not-supported", fmt.Sprintf("_sort by %q is not supported", k))
			}
		}
		s.sortAll(all, strings.Split(keys, ","))
	}
	b := map[string]any{"resourceType": "Bundle", "type": "searchset"}
	if !s.Opts.NoTotal && params.Get("_total") != "none" {
		b["total"] = len(all)
	}
	self := base + "/" + resourceType
	if used := usedQuery(q, unknown); used != "" {
		self += "?" + used
	}
	links := []map[string]any{{"relation": "self", "url": self}}
	var entries []map[string]any
	if params.Get("_summary") != "count" {
		end := min(offset+count, len(all))
		for i := offset; i < end; i++ {
			res := all[i]
			entries = append(entries, map[string]any{
				"fullUrl":  base + "/" + resourceType + "/" + res["id"].(string),
				"resource": res,
				"search":   map[string]any{"mode": "match"},
			})
		}
		if end < len(all) && count > 0 && !s.Opts.NoNext {
			next := url.Values{}
			for k, vs := range params {
				if k != "_offset" && k != "_count" {
					next[k] = vs
				}
			}
			next.Set("_count", strconv.Itoa(count))
			next.Set("_offset", strconv.Itoa(end))
			links = append(links, map[string]any{"relation": "next", "url": base + "/" + resourceType + "?" + next.Encode()})
		}
	}
	entries = append(entries, s.includes(base, resourceType, params["_include"], entries)...)
	for _, u := range unknown {
		entries = append(entries, map[string]any{
			"resource": outcomeResource("warning", "not-supported", fmt.Sprintf("unknown search parameter %q ignored %s", u, s.Opts.Marker)+s.extra()),
			"search":   map[string]any{"mode": "outcome"},
		})
	}
	b["link"] = links
	if len(entries) > 0 {
		b["entry"] = entries
	}
	return s.ok(http.StatusOK, b)
}

func (s *Server) id(i int) string {
	if s.Opts.NumericIDs {
		return strconv.Itoa(i + 1)
	}
	return fmt.Sprintf("%s-%d", s.Opts.ID, i+1)
}

var families = []string{"Smith", "jones", "Brown", "Taylor", "wilson", "Evans", "Thomas", "Roberts", "Walker", "Wright", "Hall"}
var givens = []string{"Ann", "bob", "Carla", "Dev", "Eve", "Farid", "Gus"}

// seed spreads each member's values differently, the same on every run.
func (s *Server) seed() int {
	n := 0
	for _, c := range s.Opts.ID {
		n = n*31 + int(c)
	}
	if n < 0 {
		n = -n
	}
	return n % 997
}

// resource is the member's resource of a type; i spreads its values (names, dates).
func (s *Server) resource(resourceType, id string, i int) map[string]any {
	if id == "" {
		id = s.Opts.ID
	}
	k := i*7 + s.seed()
	updated := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(k*37%5000) * time.Minute)
	res := map[string]any{
		"resourceType": resourceType,
		"id":           id,
		"meta":         map[string]any{"source": s.Opts.ID, "lastUpdated": updated.Format(time.RFC3339), "tag": []map[string]any{{"code": s.Opts.Marker}}},
	}
	day := time.Date(1950, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, k*131%20000)
	switch resourceType {
	case "Patient":
		res["name"] = []map[string]any{{"family": families[k%len(families)], "given": []string{givens[k%len(givens)]}}}
		res["birthDate"] = day.Format(time.DateOnly)
		res["gender"] = []string{"female", "male", "other", "unknown"}[k%4]
	case "Observation":
		res["status"] = "final"
		res["code"] = map[string]any{"text": "heart rate"}
		res["effectiveDateTime"] = day.Add(time.Duration(k%24) * time.Hour).Format(time.RFC3339)
	case "Encounter":
		res["status"] = "finished"
		res["class"] = map[string]any{"code": "AMB"}
	}
	s.withoutSortValue(res, i)
	if s.Opts.Subjects && resourceType != "Patient" {
		res["subject"] = map[string]any{"reference": "Patient/" + s.id(i)}
	}
	return res
}

// sortable reports whether the member sorts resourceType by key.
func sortable(resourceType, key string) bool {
	switch key {
	case "_id", "_lastUpdated":
		return true
	case "family", "given", "birthdate":
		return resourceType == "Patient"
	case "date":
		return resourceType == "Observation"
	}
	return false
}

// sortValue is what the member sorts a resource by: the value as text, ordered as
// text (ISO dates of one precision order as text), names without case.
func sortValue(res map[string]any, key string) string {
	switch key {
	case "_id":
		return res["id"].(string)
	case "_lastUpdated":
		return res["meta"].(map[string]any)["lastUpdated"].(string)
	case "family":
		return strings.ToLower(res["name"].([]map[string]any)[0]["family"].(string))
	case "given":
		return strings.ToLower(res["name"].([]map[string]any)[0]["given"].([]string)[0])
	case "birthdate":
		return res["birthDate"].(string)
	case "date":
		return res["effectiveDateTime"].(string)
	}
	return ""
}

func outcomeResource(severity, code, diagnostics string) map[string]any {
	return map[string]any{
		"resourceType": "OperationOutcome",
		"issue":        []map[string]any{{"severity": severity, "code": code, "diagnostics": diagnostics}},
	}
}

// Wait blocks until ctx is done, then closes the member: the runnable form's main loop.
func (s *Server) Wait(ctx context.Context) error {
	<-ctx.Done()
	s.Close()
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil
	}
	return ctx.Err()
}
