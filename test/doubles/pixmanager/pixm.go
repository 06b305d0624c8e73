// Package pixm is an IHE PIXm Patient Identifier Cross-reference Manager for tests: a
// real HTTP server on loopback that answers Mobile Patient Identifier Cross-reference
// Query [ITI-83], `GET [base]/Patient/$ihe-pix?sourceIdentifier=<system>|<value>
// {&targetSystem=<uri>}*`, from fixture cross-reference sets, as ITI-83 says:
//
//   - 200 with one Parameters: for every other Patient record of the source's set that
//     has an identifier in a requested domain (every domain without targetSystem), one
//     `targetId` (valueReference Patient/<id>) and one `targetIdentifier` per identifier
//     in a requested domain; the source identifier itself is never echoed;
//   - 400 code-invalid for a sourceIdentifier without both a domain and a value, or
//     whose domain no fixture knows ("sourceIdentifier Assigning Authority not found");
//   - 403 code-invalid when one targetSystem is a domain no fixture knows ("targetSystem
//     not found": the whole call fails);
//   - 404 not-found for an identifier unknown in a known domain ("sourceIdentifier
//     Patient Identifier not found");
//   - 406 for an XML _format or Accept.
//
// OpenCR mode answers as intrahealth/client-registry does: 200 with an empty
// Parameters where ITI-83 says 404, and targetId.valueReference as a bare string.
// Every error body carries the marker; the knobs of test/double apply.
package pixmanager

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/test/double"
)

// Identifier is one business identifier of a Patient record.
type Identifier struct {
	System string
	Value  string
	// Assigner, when set, is the assigner.display of the targetIdentifier.
	Assigner string
}

// Record is one Patient resource of the manager: its logical id and identifiers.
type Record struct {
	ID          string
	Identifiers []Identifier
}

// Set is the Patient records the manager cross-references as one person.
type Set []Record

// Options shape one manager.
type Options struct {
	// Listen is the address; default "127.0.0.1:0".
	Listen string
	// Sets are the cross-reference sets.
	Sets []Set
	// Domains are identifier domains the manager knows beyond those of its fixtures
	// (a known domain with no patient of the source's set is a 200 without parameters).
	Domains []string
	// OpenCR answers 200 with an empty Parameters for an unknown identifier, and writes
	// targetId.valueReference as a bare string.
	OpenCR bool
	// Marker is put in every error and malformed body; default "PIXM-BODY".
	Marker string
	// Knobs are the faults the manager starts with (test/double).
	Knobs double.Knobs
}

// Server is one running manager.
type Server struct {
	*double.Server
	// URL is the FHIR base, e.g. "http://127.0.0.1:40123/fhir"; the operation is at
	// URL + "/Patient/$ihe-pix".
	URL string

	opts Options
}

// Start starts a manager for a test and stops it when the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := New(opts)
	if err != nil {
		tb.Fatalf("start pixm manager: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// New starts a manager; Close stops it.
func New(opts Options) (*Server, error) {
	if opts.Marker == "" {
		opts.Marker = "PIXM-BODY"
	}
	for i, set := range opts.Sets {
		for j, r := range set {
			if r.ID == "" {
				return nil, fmt.Errorf("pixm: sets[%d][%d]: a record needs an id", i, j)
			}
			for k, id := range r.Identifiers {
				if id.System == "" || id.Value == "" {
					return nil, fmt.Errorf("pixm: sets[%d][%d].identifiers[%d]: an identifier needs a system and a value", i, j, k)
				}
			}
		}
	}
	s := &Server{opts: opts}
	ds, err := double.New(double.Options{Listen: opts.Listen, Name: "pixm manager", Marker: opts.Marker, MaxBodyBytes: 64 << 10, Knobs: opts.Knobs}, s)
	if err != nil {
		return nil, err
	}
	s.Server = ds
	s.URL = ds.URL() + "/fhir"
	return s, nil
}

// Path is the path of the operation.
const Path = "/fhir/Patient/$ihe-pix"

// Answer answers one request.
func (s *Server) Answer(r double.Request) double.Answer {
	if r.Path != Path {
		return s.outcome(http.StatusNotFound, "error", "not-found", "no operation at "+r.Path)
	}
	if r.Method != http.MethodGet {
		return s.outcome(http.StatusMethodNotAllowed, "error", "not-supported", "ITI-83 is a GET")
	}
	if !double.JSONAccepted(r.Header.Get("Accept"), r.Query.Get("_format")) {
		return s.outcome(http.StatusNotAcceptable, "error", "not-supported", "this manager answers application/fhir+json only")
	}
	res, e := s.Resolve(r.Query["sourceIdentifier"], r.Query["targetSystem"])
	if e != nil {
		return s.outcome(e.Status, "error", e.Code, e.Text)
	}
	return double.FHIRJSON(http.StatusOK, s.parameters(res))
}

// Error is a Resolve failure: the status and issue code ITI-83 gives it.
type Error struct {
	Status int
	Code   string
	Text   string
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Text) }

// Result is what the manager answers a resolution with.
type Result struct {
	// IDs are the logical ids of the matching Patient records.
	IDs []string
	// Identifiers are the identifiers in the requested domains.
	Identifiers []Identifier
}

// Resolve is ITI-83's matching over the fixtures: the raw sourceIdentifier and
// targetSystem values of the query (each repeatable; a targetSystem may list several
// domains separated by commas).
func (s *Server) Resolve(source, targets []string) (Result, *Error) {
	if len(source) != 1 {
		return Result{}, &Error{http.StatusBadRequest, "code-invalid", fmt.Sprintf("sourceIdentifier must be given once, got %d", len(source))}
	}
	system, value, ok := strings.Cut(source[0], "|")
	if !ok || system == "" || value == "" {
		return Result{}, &Error{http.StatusBadRequest, "code-invalid", "sourceIdentifier must be <system>|<value>"}
	}
	if !s.knows(system) {
		return Result{}, &Error{http.StatusBadRequest, "code-invalid", "sourceIdentifier Assigning Authority not found"}
	}
	var domains []string
	for _, t := range targets {
		for d := range strings.SplitSeq(t, ",") {
			if d == "" {
				continue
			}
			if !s.knows(d) {
				return Result{}, &Error{http.StatusForbidden, "code-invalid", "targetSystem not found"}
			}
			domains = append(domains, d)
		}
	}
	set, src, found := s.find(system, value)
	if !found {
		if s.opts.OpenCR {
			return Result{}, nil
		}
		return Result{}, &Error{http.StatusNotFound, "not-found", "sourceIdentifier Patient Identifier not found"}
	}
	wanted := func(id Identifier) bool {
		return (id.System != system || id.Value != value) && (len(domains) == 0 || slices.Contains(domains, id.System))
	}
	var res Result
	for i, rec := range set {
		ids := slices.DeleteFunc(slices.Clone(rec.Identifiers), func(id Identifier) bool { return !wanted(id) })
		if len(ids) == 0 {
			continue
		}
		if i != src {
			res.IDs = append(res.IDs, rec.ID)
		}
		res.Identifiers = append(res.Identifiers, ids...)
	}
	return res, nil
}

// find is the set holding system|value, and the index of the record holding it.
func (s *Server) find(system, value string) (Set, int, bool) {
	for _, set := range s.opts.Sets {
		for i, rec := range set {
			if slices.ContainsFunc(rec.Identifiers, func(id Identifier) bool { return id.System == system && id.Value == value }) {
				return set, i, true
			}
		}
	}
	return nil, 0, false
}

func (s *Server) knows(domain string) bool {
	if slices.Contains(s.opts.Domains, domain) {
		return true
	}
	for _, set := range s.opts.Sets {
		for _, rec := range set {
			if slices.ContainsFunc(rec.Identifiers, func(id Identifier) bool { return id.System == domain }) {
				return true
			}
		}
	}
	return false
}

// parameters is the Parameters resource of a result, each record's targetId before
// its identifiers, as the guide's example writes them.
func (s *Server) parameters(res Result) map[string]any {
	params := []map[string]any{}
	for _, id := range res.IDs {
		var ref any = map[string]any{"reference": "Patient/" + id}
		if s.opts.OpenCR {
			ref = "Patient/" + id
		}
		params = append(params, map[string]any{"name": "targetId", "valueReference": ref})
	}
	for _, id := range res.Identifiers {
		v := map[string]any{"system": id.System, "value": id.Value}
		if id.Assigner != "" {
			v["assigner"] = map[string]any{"display": id.Assigner}
		}
		params = append(params, map[string]any{"name": "targetIdentifier", "valueIdentifier": v})
	}
	p := map[string]any{"resourceType": "Parameters"}
	if len(params) > 0 {
		p["parameter"] = params
	}
	return p
}

// Error is the manager's error answer of a status.
func (s *Server) Error(status int, text string) double.Answer {
	return s.outcome(status, "error", "exception", text)
}

// Malformed is a 200 whose body is a Parameters cut in the middle.
func (s *Server) Malformed() double.Answer {
	b, _ := json.Marshal(s.parameters(Result{IDs: []string{"cut"}}))
	return double.Answer{Status: http.StatusOK, ContentType: "application/fhir+json", Body: double.Truncated(b, s.opts.Marker)}
}

func (s *Server) outcome(status int, severity, code, text string) double.Answer {
	return double.OperationOutcome(status, severity, code, text, s.opts.Marker)
}
