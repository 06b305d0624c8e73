// Package pdqm is an IHE PDQm Patient Demographics Supplier for tests: a real HTTP
// server on loopback that answers Mobile Patient Demographics Query [ITI-78] over
// fixture Patients, as ITI-78 says:
//
//   - `GET [base]/Patient?…` and `POST [base]/Patient/_search` (a form body) answer a
//     searchset Bundle: `total` the number of matches, one entry per Patient of the
//     page (`_count`, default 10, at most 100; `_offset` for the `next` link), each
//     with `fullUrl` and `search.mode = match`; no match is `total: 0` and no entry;
//   - the parameters are those of ITI-78: `_id`, `active`, `family`, `given`,
//     `identifier`, `telecom`, `birthdate`, `address`, `address-city`,
//     `address-country`, `address-postalcode`, `address-state`, `gender`,
//     `mothersMaidenName`; strings match a prefix without case, or the whole value
//     with `:exact`; a comma is OR, a repeated parameter AND; a date matches at the
//     precision given, with the prefixes eq, ne, gt, lt, ge, le;
//   - `identifier=<system>|` names a domain: the Patient must hold an identifier of
//     it, and only identifiers of the named domains are returned (Case 2); a domain
//     the supplier does not know is a 404 OperationOutcome "targetSystem not found"
//     (Case 4, its preferred answer; UnknownDomainOK gives the allowed 200);
//   - an XML `_format` or Accept is a 406 (Case 5); another parameter or modifier is
//     a 400 naming it;
//   - a merged record is a fixture of its own (`active: false` and a `link` of type
//     `replaced-by`), answered as it is (Case 6), or left out with OmitInactive;
//   - `GET [base]/Patient/<id>` reads one Patient (404 unknown);
//   - `POST [base]/Patient/$match` is Patient Demographics Match [ITI-119]: a
//     Parameters (resource, onlyCertainMatches, count) or a bare Patient, answered
//     with a searchset whose entries carry `search.score` and the match-grade
//     extension, best first; with onlyCertainMatches only the certain ones (none is
//     the empty Bundle of Cases 4 and 5), at most count. Its grading is MatchResults
//     when set (a canned ranking), else: a shared identifier is certain (1.0), the
//     same family, given name and birth date probable (0.8), the same family and
//     birth date possible (0.6).
//
// Every answer carries the marker (a meta.tag of the Bundle, the text of an
// OperationOutcome); the knobs of test/double apply.
package pdqsupplier

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/test/double"
)

// Page sizes of a search.
const (
	DefaultCount = 10
	MaxCount     = 100
)

// MothersMaidenName is the extension url of the mothersMaidenName parameter.
const MothersMaidenName = "http://hl7.org/fhir/StructureDefinition/patient-mothersMaidenName"

// Identifier is a business identifier.
type Identifier struct {
	System string `json:"system,omitempty"`
	Value  string `json:"value,omitempty"`
}

// ContactPoint is a telecom of a Patient.
type ContactPoint struct {
	System string `json:"system,omitempty"`
	Value  string `json:"value,omitempty"`
}

// Patient builds a fixture Patient resource.
type Patient struct {
	ID          string
	Identifiers []Identifier
	Family      string
	Given       []string
	Gender      string // male | female | other | unknown
	BirthDate   string // YYYY-MM-DD
	// ReplacedBy, when set, makes the record a merged one: active false and a link of
	// type replaced-by to Patient/<ReplacedBy>.
	ReplacedBy string
}

// Resource is the Patient as FHIR JSON.
func (p Patient) Resource() json.RawMessage {
	res := map[string]any{"resourceType": "Patient", "id": p.ID, "active": p.ReplacedBy == ""}
	if len(p.Identifiers) > 0 {
		res["identifier"] = p.Identifiers
	}
	if p.Family != "" || len(p.Given) > 0 {
		n := map[string]any{}
		if p.Family != "" {
			n["family"] = p.Family
		}
		if len(p.Given) > 0 {
			n["given"] = p.Given
		}
		res["name"] = []any{n}
	}
	if p.Gender != "" {
		res["gender"] = p.Gender
	}
	if p.BirthDate != "" {
		res["birthDate"] = p.BirthDate
	}
	if p.ReplacedBy != "" {
		res["link"] = []any{map[string]any{"other": map[string]any{"reference": "Patient/" + p.ReplacedBy}, "type": "replaced-by"}}
	}
	b, _ := json.Marshal(res)
	return b
}

// Options shape one supplier.
type Options struct {
	// Listen is the address; default "127.0.0.1:0".
	Listen string
	// Patients are fixtures built here; Resources are fixtures as FHIR JSON (the
	// guide's examples, for one). Both are searched.
	Patients  []Patient
	Resources []json.RawMessage
	// Domains are identifier domains the supplier knows beyond those of its fixtures.
	Domains []string
	// UnknownDomainOK answers a search naming an unknown domain with the results
	// available (200) instead of 404.
	UnknownDomainOK bool
	// OmitInactive leaves records with active false out of every answer.
	OmitInactive bool
	// MatchResults, when set, are the ranking every $match answers (before
	// onlyCertainMatches and count).
	MatchResults []Graded
	// Marker is put in every body; default "PDQM-BODY".
	Marker string
	// Knobs are the faults the supplier starts with (test/double).
	Knobs double.Knobs
}

// Server is one running supplier.
type Server struct {
	*double.Server
	// URL is the FHIR base, e.g. "http://127.0.0.1:40123/fhir".
	URL string

	opts     Options
	patients []record
}

// record is one fixture: the resource as given and what the search reads of it.
type record struct {
	raw map[string]any
	v   view
}

type view struct {
	ID         string       `json:"id"`
	Active     *bool        `json:"active"`
	Identifier []Identifier `json:"identifier"`
	Name       []struct {
		Family string   `json:"family"`
		Given  []string `json:"given"`
	} `json:"name"`
	Telecom   []ContactPoint `json:"telecom"`
	Gender    string         `json:"gender"`
	BirthDate string         `json:"birthDate"`
	Address   []struct {
		Line       []string `json:"line"`
		City       string   `json:"city"`
		State      string   `json:"state"`
		PostalCode string   `json:"postalCode"`
		Country    string   `json:"country"`
		Text       string   `json:"text"`
	} `json:"address"`
	Extension []struct {
		URL         string `json:"url"`
		ValueString string `json:"valueString"`
	} `json:"extension"`
}

// Start starts a supplier for a test and stops it when the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := New(opts)
	if err != nil {
		tb.Fatalf("start pdqm supplier: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// New starts a supplier; Close stops it.
func New(opts Options) (*Server, error) {
	if opts.Marker == "" {
		opts.Marker = "PDQM-BODY"
	}
	s := &Server{opts: opts}
	raws := slices.Clone(opts.Resources)
	for _, p := range opts.Patients {
		raws = append(raws, p.Resource())
	}
	for i, b := range raws {
		var r record
		if err := json.Unmarshal(b, &r.raw); err != nil {
			return nil, fmt.Errorf("pdqm: fixture %d: %w", i, err)
		}
		if err := json.Unmarshal(b, &r.v); err != nil {
			return nil, fmt.Errorf("pdqm: fixture %d: %w", i, err)
		}
		if r.raw["resourceType"] != "Patient" || r.v.ID == "" {
			return nil, fmt.Errorf("pdqm: fixture %d is no Patient with an id", i)
		}
		s.patients = append(s.patients, r)
	}
	for i, g := range opts.MatchResults {
		if !slices.ContainsFunc(s.patients, func(p record) bool { return p.v.ID == g.ID }) {
			return nil, fmt.Errorf("pdqm: matchResults[%d]: no fixture %q", i, g.ID)
		}
		if !slices.Contains([]string{"certain", "probable", "possible", "certainly-not"}, g.Grade) || g.Score < 0 || g.Score > 1 {
			return nil, fmt.Errorf("pdqm: matchResults[%d]: grade %q score %g (certain, probable, possible or certainly-not; 0 to 1)", i, g.Grade, g.Score)
		}
	}
	ds, err := double.New(double.Options{Listen: opts.Listen, Name: "pdqm supplier", Marker: opts.Marker, MaxBodyBytes: 64 << 10, Knobs: opts.Knobs}, s)
	if err != nil {
		return nil, err
	}
	s.Server = ds
	s.URL = ds.URL() + "/fhir"
	return s, nil
}

// Answer answers one request.
func (s *Server) Answer(r double.Request) double.Answer {
	if !double.JSONAccepted(r.Header.Get("Accept"), r.Query.Get("_format")) {
		return s.outcome(http.StatusNotAcceptable, "error", "not-supported", "this supplier answers application/fhir+json only")
	}
	switch rest, _ := strings.CutPrefix(r.Path, "/fhir/Patient"); {
	case rest == "" && r.Method == http.MethodGet:
		return s.search(r.Query)
	case rest == "/$match" && r.Method == http.MethodPost:
		return s.match(r)
	case rest == "/_search" && r.Method == http.MethodPost:
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
			return s.outcome(http.StatusBadRequest, "error", "invalid", "a _search body must be application/x-www-form-urlencoded")
		}
		form, err := url.ParseQuery(string(r.Body))
		if err != nil {
			return s.outcome(http.StatusBadRequest, "error", "invalid", "the _search body is not form-encoded")
		}
		for k, vs := range r.Query {
			form[k] = append(form[k], vs...)
		}
		return s.search(form)
	case strings.HasPrefix(rest, "/") && !strings.Contains(rest[1:], "/") && r.Method == http.MethodGet:
		for _, p := range s.patients {
			if p.v.ID == rest[1:] {
				return double.FHIRJSON(http.StatusOK, p.raw)
			}
		}
		return s.outcome(http.StatusNotFound, "error", "not-found", "no Patient "+rest[1:])
	}
	return s.outcome(http.StatusNotFound, "error", "not-supported", r.Method+" "+r.Path+" is not an ITI-78 interaction")
}

// MatchGrade is the extension url of a $match entry's grade.
const MatchGrade = "http://hl7.org/fhir/StructureDefinition/match-grade"

// Graded is one $match result: a Patient, its grade (certain, probable, possible,
// certainly-not) and its score (0 to 1).
type Graded struct {
	ID    string
	Grade string
	Score float64
}

// MatchInput is what a $match asks.
type MatchInput struct {
	Patient            json.RawMessage
	OnlyCertainMatches bool
	Count              int // 0: no limit
}

// ParseMatch reads a $match body: a Parameters or a bare Patient.
func ParseMatch(body []byte) (MatchInput, error) {
	var head struct {
		ResourceType string `json:"resourceType"`
		Parameter    []struct {
			Name         string          `json:"name"`
			Resource     json.RawMessage `json:"resource"`
			ValueBoolean *bool           `json:"valueBoolean"`
			ValueInteger *int            `json:"valueInteger"`
		} `json:"parameter"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return MatchInput{}, fmt.Errorf("the body is no FHIR JSON: %w", err)
	}
	switch head.ResourceType {
	case "Patient":
		return MatchInput{Patient: body}, nil
	case "Parameters":
	default:
		return MatchInput{}, fmt.Errorf("the body is a %q, not a Parameters or a Patient", head.ResourceType)
	}
	var in MatchInput
	for i, p := range head.Parameter {
		switch p.Name {
		case "resource":
			var r struct {
				ResourceType string `json:"resourceType"`
			}
			if json.Unmarshal(p.Resource, &r) != nil || r.ResourceType != "Patient" {
				return MatchInput{}, fmt.Errorf("parameter[%d] resource is not a Patient", i)
			}
			in.Patient = p.Resource
		case "onlyCertainMatches":
			if p.ValueBoolean == nil {
				return MatchInput{}, fmt.Errorf("parameter[%d] onlyCertainMatches needs a valueBoolean", i)
			}
			in.OnlyCertainMatches = *p.ValueBoolean
		case "count":
			if p.ValueInteger == nil || *p.ValueInteger < 1 {
				return MatchInput{}, fmt.Errorf("parameter[%d] count needs a valueInteger of 1 or more", i)
			}
			in.Count = *p.ValueInteger
		default:
			return MatchInput{}, fmt.Errorf("parameter[%d] %q is not a $match parameter", i, p.Name)
		}
	}
	if in.Patient == nil {
		return MatchInput{}, fmt.Errorf("no resource parameter")
	}
	return in, nil
}

// Rank is the supplier's $match results for an input, best first.
func (s *Server) Rank(in MatchInput) ([]Graded, error) {
	var p view
	if err := json.Unmarshal(in.Patient, &p); err != nil {
		return nil, fmt.Errorf("the input Patient: %w", err)
	}
	out := slices.Clone(s.opts.MatchResults)
	if out == nil {
		for _, r := range s.patients {
			if s.opts.OmitInactive && r.v.Active != nil && !*r.v.Active {
				continue
			}
			if g, ok := grade(p, r.v); ok {
				out = append(out, Graded{ID: r.v.ID, Grade: g.Grade, Score: g.Score})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	if in.OnlyCertainMatches {
		out = slices.DeleteFunc(out, func(g Graded) bool { return g.Grade != "certain" })
	}
	if in.Count > 0 && len(out) > in.Count {
		out = out[:in.Count]
	}
	return out, nil
}

// grade is the built-in grading of a fixture against a $match input.
func grade(in, p view) (Graded, bool) {
	for _, a := range in.Identifier {
		if slices.Contains(p.Identifier, a) {
			return Graded{Grade: "certain", Score: 1}, true
		}
	}
	if in.BirthDate == "" || in.BirthDate != p.BirthDate {
		return Graded{}, false
	}
	family, given := false, false
	for _, a := range in.Name {
		for _, b := range p.Name {
			if a.Family != "" && strings.EqualFold(a.Family, b.Family) {
				family = true
				given = given || slices.ContainsFunc(a.Given, func(g string) bool {
					return slices.ContainsFunc(b.Given, func(h string) bool { return strings.EqualFold(g, h) })
				})
			}
		}
	}
	switch {
	case family && given:
		return Graded{Grade: "probable", Score: 0.8}, true
	case family:
		return Graded{Grade: "possible", Score: 0.6}, true
	}
	return Graded{}, false
}

// match answers a $match.
func (s *Server) match(r double.Request) double.Answer {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/fhir+json" && mt != "application/json" {
		return s.outcome(http.StatusUnsupportedMediaType, "error", "not-supported", "a $match body must be application/fhir+json")
	}
	in, err := ParseMatch(r.Body)
	if err != nil {
		return s.outcome(http.StatusBadRequest, "error", "invalid", err.Error())
	}
	ranked, err := s.Rank(in)
	if err != nil {
		return s.outcome(http.StatusBadRequest, "error", "invalid", err.Error())
	}
	var entries []any
	for _, g := range ranked {
		i := slices.IndexFunc(s.patients, func(p record) bool { return p.v.ID == g.ID })
		if i < 0 {
			return s.outcome(http.StatusInternalServerError, "error", "exception", "MatchResults names "+g.ID+", no fixture")
		}
		entries = append(entries, map[string]any{
			"fullUrl":  s.URL + "/Patient/" + g.ID,
			"resource": s.patients[i].raw,
			"search": map[string]any{
				"extension": []any{map[string]any{"url": MatchGrade, "valueCode": g.Grade}},
				"mode":      "match",
				"score":     g.Score,
			},
		})
	}
	b := map[string]any{
		"resourceType": "Bundle",
		"meta":         map[string]any{"tag": []any{map[string]any{"code": s.opts.Marker}}},
		"type":         "searchset",
		"total":        len(entries),
		"link":         []any{map[string]any{"relation": "self", "url": s.URL + "/Patient/$match"}},
	}
	if len(entries) > 0 {
		b["entry"] = entries
	}
	return double.FHIRJSON(http.StatusOK, b)
}

// Query is a search's criteria, parsed.
type Query struct {
	params  []criterion
	domains []string
	count   int
	offset  int
}

type criterion struct {
	name, modifier string
	values         []string
}

// ParseError is a search the supplier refuses, with the status ITI-78 gives it.
type ParseError struct {
	Status   int
	Severity string
	Code     string
	Text     string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Text) }

var stringParams = []string{"family", "given", "address", "address-city", "address-country", "address-postalcode", "address-state", "mothersMaidenName"}

// Parse reads a search's parameters.
func (s *Server) Parse(q url.Values) (Query, *ParseError) {
	out := Query{count: DefaultCount}
	names := make([]string, 0, len(q))
	for k := range q {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, key := range names {
		name, modifier, _ := strings.Cut(key, ":")
		for _, raw := range q[key] {
			switch {
			case name == "_format":
				continue
			case name == "_count" || name == "_offset":
				n, err := strconv.Atoi(raw)
				if err != nil || n < 0 || modifier != "" {
					return Query{}, &ParseError{http.StatusBadRequest, "error", "invalid", key + " must be a non-negative integer"}
				}
				if name == "_count" {
					out.count = min(n, MaxCount)
				} else {
					out.offset = n
				}
				continue
			case slices.Contains(stringParams, name):
				if modifier != "" && modifier != "exact" {
					return Query{}, &ParseError{http.StatusBadRequest, "error", "not-supported", "modifier :" + modifier + " of " + name + " is not supported"}
				}
			case slices.Contains([]string{"_id", "active", "identifier", "telecom", "gender", "birthdate"}, name):
				if modifier != "" {
					return Query{}, &ParseError{http.StatusBadRequest, "error", "not-supported", "modifier :" + modifier + " of " + name + " is not supported"}
				}
			default:
				return Query{}, &ParseError{http.StatusBadRequest, "error", "not-supported", "unknown search parameter " + strconv.Quote(key)}
			}
			values := strings.Split(raw, ",")
			if name == "birthdate" {
				for _, v := range values {
					if _, _, ok := dateValue(v); !ok {
						return Query{}, &ParseError{http.StatusBadRequest, "error", "invalid", "birthdate " + strconv.Quote(v) + " is not [eq|ne|gt|lt|ge|le]YYYY[-MM[-DD]]"}
					}
				}
			}
			if name == "identifier" {
				for _, v := range values {
					if sys, val, ok := strings.Cut(v, "|"); ok && val == "" {
						if !s.knows(sys) && !s.opts.UnknownDomainOK {
							return Query{}, &ParseError{http.StatusNotFound, "warning", "not-found", "targetSystem not found"}
						}
						out.domains = append(out.domains, sys)
					}
				}
			}
			out.params = append(out.params, criterion{name, modifier, values})
		}
	}
	return out, nil
}

func (s *Server) knows(domain string) bool {
	if slices.Contains(s.opts.Domains, domain) {
		return true
	}
	for _, p := range s.patients {
		if slices.ContainsFunc(p.v.Identifier, func(id Identifier) bool { return id.System == domain }) {
			return true
		}
	}
	return false
}

// Match is the ids of the fixtures a query matches, in fixture order.
func (s *Server) Match(q Query) []string {
	var ids []string
	for _, p := range s.matches(q) {
		ids = append(ids, p.v.ID)
	}
	return ids
}

func (s *Server) matches(q Query) []record {
	var out []record
	for _, p := range s.patients {
		if s.opts.OmitInactive && p.v.Active != nil && !*p.v.Active {
			continue
		}
		if !slices.ContainsFunc(q.params, func(c criterion) bool { return !c.holds(p.v) }) {
			out = append(out, p)
		}
	}
	return out
}

// holds reports whether one of the criterion's values matches the Patient.
func (c criterion) holds(v view) bool {
	return slices.ContainsFunc(c.values, func(want string) bool {
		switch c.name {
		case "_id":
			return v.ID == want
		case "active":
			return (v.Active == nil || *v.Active) == (want == "true")
		case "gender":
			return v.Gender == want
		case "identifier":
			return slices.ContainsFunc(v.Identifier, func(id Identifier) bool { return token(want, id.System, id.Value) })
		case "telecom":
			return slices.ContainsFunc(v.Telecom, func(t ContactPoint) bool { return token(want, t.System, t.Value) })
		case "birthdate":
			return dateMatches(want, v.BirthDate)
		}
		return slices.ContainsFunc(c.strings(v), func(have string) bool {
			if c.modifier == "exact" {
				return have == want
			}
			return strings.HasPrefix(strings.ToLower(have), strings.ToLower(want))
		})
	})
}

// strings are the Patient's values of a string parameter.
func (c criterion) strings(v view) []string {
	var out []string
	for _, n := range v.Name {
		switch c.name {
		case "family":
			out = append(out, n.Family)
		case "given":
			out = append(out, n.Given...)
		}
	}
	for _, a := range v.Address {
		switch c.name {
		case "address":
			out = append(out, a.Line...)
			out = append(out, a.City, a.State, a.PostalCode, a.Country, a.Text)
		case "address-city":
			out = append(out, a.City)
		case "address-state":
			out = append(out, a.State)
		case "address-postalcode":
			out = append(out, a.PostalCode)
		case "address-country":
			out = append(out, a.Country)
		}
	}
	if c.name == "mothersMaidenName" {
		for _, e := range v.Extension {
			if e.URL == MothersMaidenName {
				out = append(out, e.ValueString)
			}
		}
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// token matches a token search value (value, system|value, |value or system|).
func token(want, system, value string) bool {
	sys, val, hasBar := strings.Cut(want, "|")
	if !hasBar {
		return value == want
	}
	return sys == system && (val == "" || val == value)
}

// dateValue splits a date search value into its prefix and date.
func dateValue(v string) (string, string, bool) {
	prefix := "eq"
	if len(v) > 2 && v[0] >= 'a' && v[0] <= 'z' {
		prefix, v = v[:2], v[2:]
	}
	if !slices.Contains([]string{"eq", "ne", "gt", "lt", "ge", "le"}, prefix) {
		return "", "", false
	}
	switch len(v) {
	case 4, 7, 10:
	default:
		return "", "", false
	}
	for i, c := range v {
		if (i == 4 || i == 7) && c != '-' || i != 4 && i != 7 && (c < '0' || c > '9') {
			return "", "", false
		}
	}
	return prefix, v, true
}

// dateMatches compares a birth date with a search value at the precision both have
// (a birth date of 1970 is at or after 1958-01-31).
func dateMatches(want, birthDate string) bool {
	prefix, d, _ := dateValue(want)
	n := min(len(d), len(birthDate))
	c := strings.Compare(birthDate[:n], d[:n])
	switch prefix {
	case "ne":
		return c != 0
	case "gt":
		return c > 0
	case "lt":
		return c < 0
	case "ge":
		return c >= 0
	case "le":
		return c <= 0
	}
	return c == 0
}

// search answers one page of a search.
func (s *Server) search(params url.Values) double.Answer {
	q, e := s.Parse(params)
	if e != nil {
		return s.outcome(e.Status, e.Severity, e.Code, e.Text)
	}
	all := s.matches(q)
	self := s.URL + "/Patient"
	if enc := params.Encode(); enc != "" {
		self += "?" + enc
	}
	links := []any{map[string]any{"relation": "self", "url": self}}
	var entries []any
	end := min(q.offset+q.count, len(all))
	for i := q.offset; i < end; i++ {
		entries = append(entries, map[string]any{
			"fullUrl":  s.URL + "/Patient/" + all[i].v.ID,
			"resource": s.restrict(all[i].raw, q.domains),
			"search":   map[string]any{"mode": "match"},
		})
	}
	if end < len(all) && q.count > 0 {
		next := url.Values{}
		for k, vs := range params {
			next[k] = vs
		}
		next.Set("_count", strconv.Itoa(q.count))
		next.Set("_offset", strconv.Itoa(end))
		links = append(links, map[string]any{"relation": "next", "url": s.URL + "/Patient?" + next.Encode()})
	}
	b := map[string]any{
		"resourceType": "Bundle",
		"meta":         map[string]any{"tag": []any{map[string]any{"code": s.opts.Marker}}},
		"type":         "searchset",
		"total":        len(all),
		"link":         links,
	}
	if len(entries) > 0 {
		b["entry"] = entries
	}
	return double.FHIRJSON(http.StatusOK, b)
}

// restrict is a Patient with only the identifiers of the domains (all without).
func (s *Server) restrict(raw map[string]any, domains []string) map[string]any {
	if len(domains) == 0 {
		return raw
	}
	out := map[string]any{}
	for k, v := range raw {
		out[k] = v
	}
	ids, _ := raw["identifier"].([]any)
	var kept []any
	for _, id := range ids {
		if m, ok := id.(map[string]any); ok && slices.Contains(domains, fmt.Sprint(m["system"])) {
			kept = append(kept, id)
		}
	}
	delete(out, "identifier")
	if len(kept) > 0 {
		out["identifier"] = kept
	}
	return out
}

// Error is the supplier's error answer of a status.
func (s *Server) Error(status int, text string) double.Answer {
	return s.outcome(status, "error", "exception", text)
}

// Malformed is a 200 whose body is a Bundle cut in the middle.
func (s *Server) Malformed() double.Answer {
	b, _ := json.Marshal(map[string]any{"resourceType": "Bundle", "type": "searchset", "total": 1, "entry": []any{map[string]any{"fullUrl": s.URL + "/Patient/cut"}}})
	return double.Answer{Status: http.StatusOK, ContentType: "application/fhir+json", Body: double.Truncated(b, s.opts.Marker)}
}

func (s *Server) outcome(status int, severity, code, text string) double.Answer {
	return double.OperationOutcome(status, severity, code, text, s.opts.Marker)
}
