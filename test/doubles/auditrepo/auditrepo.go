// Package auditrepo is an IHE audit record repository for tests: a real HTTP server on
// loopback that takes RESTful ATNA (ITI-20) Send Audit Resource requests
// (`POST /AuditEvent`, FHIR JSON) and Send Audit Bundle requests (`POST /`, a Bundle of
// type batch), as a FHIR server does: a body that is no JSON is a 400, a resource that
// is no AuditEvent (or a Bundle that is no batch) a 422, an entity.query that is no
// base64 a 400, each with an OperationOutcome; a create answers 201 with Location, a
// batch 200 with a batch-response whose entries carry their own status. The stored
// resources are echoed unless the request says Prefer: return=minimal.
//
// It keeps every AuditEvent it stored (its body, its ferrofed event id tag and its
// decoded entity.query values). It runs on test/double, whose knobs make it misbehave
// (Options.Knobs, SetKnobs, Script): a script of statuses for the next requests
// (503×N then 201) with a Retry-After, 401 for every request (with its
// WWW-Authenticate), 413 for every batch (a status on BatchRoute), holding a request
// after reading its body (FaultHold: a delivery in flight, answered once the fault is
// turned off), refusing connections. Its own rule, which no knob says, is 422 for any
// event whose body or decoded entity.query holds a poison marker.
package auditrepo

import (
	"bytes"
	"encoding/base64"
	"encoding/json"

	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ferrofed/ferrofed/test/double"
)

// EventIDSystem is the meta.tag system of the gateway's stable event id (kept here as
// the wire contract, not imported, so that a change on one side fails a test).
const EventIDSystem = "https://ferrofed.io/fhir/audit-event-id"

// BatchRoute is the route of Send Audit Bundle, for test/double's Knobs.Route
// (double.Knobs{Route: BatchRoute, Status: 413}: every batch is too large).
const BatchRoute = "POST /{$}"

// MaxBodyBytes bounds a request body; a longer one is a 413.
const MaxBodyBytes = 8 << 20

// Options shape one repository.
type Options struct {
	// Listen is the address; default "127.0.0.1:0".
	Listen string
	// Knobs are the faults the repository starts with (test/double).
	Knobs double.Knobs
	// PoisonMarker, when set, makes every AuditEvent whose body contains it a 422.
	PoisonMarker string
}

// Event is one AuditEvent the repository stored.
type Event struct {
	// ID is the id the repository assigned (the Location).
	ID string
	// EventID is the gateway's event id tag, "" without one.
	EventID string
	// Queries are the decoded entity.query values, in entity order.
	Queries []string
	// Body is the resource as received.
	Body []byte
	// Batch is true when it came in a batch Bundle.
	Batch bool
}

// Server is one running repository.
type Server struct {
	*double.Server
	// URL is the FHIR base, e.g. "http://127.0.0.1:40123".
	URL string

	opts Options

	mu     sync.Mutex
	events []Event
}

// Start starts a repository for a test and stops it when the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := New(opts)
	if err != nil {
		tb.Fatalf("start audit repository: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// doubleOptions are the options of the repository's test/double server.
func doubleOptions(opts Options) double.Options {
	return double.Options{Listen: opts.Listen, Name: "audit repository", MaxBodyBytes: MaxBodyBytes, Knobs: opts.Knobs}
}

// New starts a repository; Close stops it, held requests dropped unanswered.
func New(opts Options) (*Server, error) {
	s := &Server{opts: opts}
	d, err := double.New(doubleOptions(opts), s)
	if err != nil {
		return nil, err
	}
	s.Server, s.URL = d, d.URL()
	return s, nil
}

// NewHandler makes a repository that listens nowhere itself: it is an http.Handler
// for a server of the caller's (cmd/auditrepo serves it next to a control API). URL and
// Addr stay empty; Close drops the held requests.
func NewHandler(opts Options) (*Server, error) {
	s := &Server{opts: opts}
	d, err := double.NewHandler(doubleOptions(opts), s)
	if err != nil {
		return nil, err
	}
	s.Server = d
	return s, nil
}

// Received is every stored AuditEvent, in order.
func (s *Server) Received() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// Stored counts the stored AuditEvents (len(Received()) without the copy).
func (s *Server) Stored() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

// Answer answers one request (double.Handler), after the knobs.
func (s *Server) Answer(r double.Request) double.Answer {
	batch := r.Path == "/"
	if r.Method != http.MethodPost || (!batch && r.Path != "/AuditEvent") {
		return answerOutcome(http.StatusNotFound, "not-supported", "only POST /AuditEvent and POST / (batch)")
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/fhir+json" && ct != "application/json" {
		return answerOutcome(http.StatusUnsupportedMediaType, "not-supported", "Content-Type must be application/fhir+json")
	}
	minimal := preferMinimal(r.Header)
	if batch {
		return s.serveBatch(r.Body, minimal)
	}
	code, ev, why := s.check(r.Body)
	if code != http.StatusCreated {
		return answerOutcome(code, why[0], why[1])
	}
	ev = s.store(ev)
	h := http.Header{"Location": {"AuditEvent/" + ev.ID + "/_history/1"}}
	if minimal {
		return double.Answer{Status: http.StatusCreated, Header: h}
	}
	a := double.FHIRJSON(http.StatusCreated, json.RawMessage(r.Body))
	a.Header = h
	return a
}

// Error is an OperationOutcome of status (double.Handler): a 401 says how to
// authenticate, a 413 is too costly, anything else transient.
func (s *Server) Error(status int, text string) double.Answer {
	switch status {
	case http.StatusUnauthorized:
		a := answerOutcome(status, "login", "no valid bearer token: "+text)
		a.Header = http.Header{"Www-Authenticate": {`Bearer realm="arr"`}}
		return a
	case http.StatusRequestEntityTooLarge:
		return answerOutcome(status, "too-costly", text)
	}
	return answerOutcome(status, "transient", text)
}

// Malformed is a 200 whose body is an AuditEvent cut in the middle (double.Handler).
func (s *Server) Malformed() double.Answer {
	return double.Answer{Status: http.StatusOK, ContentType: "application/fhir+json", Body: double.Truncated([]byte(`{"resourceType":"AuditEvent","id":"1"}`), "MALFORMED")}
}

// preferMinimal says whether the request asks for no resource in the answer (FHIR's
// Prefer: return=minimal).
func preferMinimal(h http.Header) bool {
	for _, v := range h.Values("Prefer") {
		for p := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(p), "return=minimal") {
				return true
			}
		}
	}
	return false
}

// check validates one resource as an AuditEvent: its status (201 when stored), the
// event, and on failure an issue code and a text.
func (s *Server) check(body []byte) (int, Event, [2]string) {
	var res struct {
		ResourceType string `json:"resourceType"`
		Meta         struct {
			Tag []struct {
				System string `json:"system"`
				Code   string `json:"code"`
			} `json:"tag"`
		} `json:"meta"`
		Entity []struct {
			Query *string `json:"query"`
		} `json:"entity"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return http.StatusBadRequest, Event{}, [2]string{"structure", "not a JSON resource"}
	}
	if res.ResourceType != "AuditEvent" {
		return http.StatusUnprocessableEntity, Event{}, [2]string{"invalid", "resourceType must be AuditEvent"}
	}
	ev := Event{Body: slices.Clone(body)}
	for _, t := range res.Meta.Tag {
		if t.System == EventIDSystem {
			ev.EventID = t.Code
		}
	}
	for _, e := range res.Entity {
		if e.Query == nil {
			continue
		}
		q, err := base64.StdEncoding.DecodeString(*e.Query)
		if err != nil {
			return http.StatusBadRequest, Event{}, [2]string{"value", "entity.query is not base64Binary"}
		}
		ev.Queries = append(ev.Queries, string(q))
	}
	if m := s.opts.PoisonMarker; m != "" && (bytes.Contains(body, []byte(m)) || slices.ContainsFunc(ev.Queries, func(q string) bool { return strings.Contains(q, m) })) {
		return http.StatusUnprocessableEntity, Event{}, [2]string{"business-rule", "refused by this repository's rules"}
	}
	return http.StatusCreated, ev, [2]string{}
}

func (s *Server) store(ev Event) Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev.ID = fmt.Sprint(len(s.events) + 1)
	s.events = append(s.events, ev)
	return ev
}

// serveBatch stores a batch's entries and answers a batch-response, each stored
// resource echoed unless minimal.
func (s *Server) serveBatch(body []byte, minimal bool) double.Answer {
	var b struct {
		ResourceType string `json:"resourceType"`
		Type         string `json:"type"`
		Entry        []struct {
			Resource json.RawMessage `json:"resource"`
			Request  struct {
				Method string `json:"method"`
				URL    string `json:"url"`
			} `json:"request"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return answerOutcome(http.StatusBadRequest, "structure", "not a JSON resource")
	}
	if b.ResourceType != "Bundle" || b.Type != "batch" {
		return answerOutcome(http.StatusUnprocessableEntity, "invalid", "POST / takes a Bundle of type batch")
	}
	type entryResponse struct {
		Status   string          `json:"status"`
		Location string          `json:"location,omitempty"`
		Outcome  json.RawMessage `json:"outcome,omitempty"`
	}
	type entry struct {
		Resource json.RawMessage `json:"resource,omitempty"`
		Response entryResponse   `json:"response"`
	}
	out := struct {
		ResourceType string  `json:"resourceType"`
		Type         string  `json:"type"`
		Entry        []entry `json:"entry"`
	}{ResourceType: "Bundle", Type: "batch-response", Entry: []entry{}}
	for _, e := range b.Entry {
		if e.Request.Method != http.MethodPost || strings.TrimPrefix(e.Request.URL, "/") != "AuditEvent" {
			out.Entry = append(out.Entry, entry{Response: entryResponse{Status: "400 Bad Request", Outcome: outcome("not-supported", "entries must be POST AuditEvent")}})
			continue
		}
		code, ev, why := s.check(e.Resource)
		if code != http.StatusCreated {
			out.Entry = append(out.Entry, entry{Response: entryResponse{Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), Outcome: outcome(why[0], why[1])}})
			continue
		}
		ev.Batch = true
		ev = s.store(ev)
		echo := e.Resource
		if minimal {
			echo = nil
		}
		out.Entry = append(out.Entry, entry{Resource: echo, Response: entryResponse{Status: "201 Created", Location: "AuditEvent/" + ev.ID + "/_history/1"}})
	}
	return double.FHIRJSON(http.StatusOK, out)
}

func outcome(code, text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"resourceType": "OperationOutcome",
		"issue":        []any{map[string]any{"severity": "error", "code": code, "diagnostics": text}},
	})
	return b
}

func answerOutcome(status int, code, text string) double.Answer {
	return double.FHIRJSON(status, outcome(code, text))
}

// ByEventID counts the stored events per event id tag.
func (s *Server) ByEventID() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, e := range s.events {
		out[e.EventID]++
	}
	return out
}
