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
// decoded entity.query values), and misbehaves on demand: a script of statuses for the
// next requests (503×N then 201), Retry-After on those answers, 401 for every request,
// 413 for every batch, 422 for any event whose body or decoded entity.query holds a
// poison marker, holding a
// request after reading its body (a delivery in flight, never answered), and refusing
// connections (nothing listening).
package auditrepo

import (
	"bytes"
	"encoding/base64"
	"encoding/json"

	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// EventIDSystem is the meta.tag system of the gateway's stable event id (kept here as
// the wire contract, not imported, so that a change on one side fails a test).
const EventIDSystem = "https://ferrofed.io/fhir/audit-event-id"

// MaxBodyBytes bounds a request body; a longer one is a 413.
const MaxBodyBytes = 8 << 20

// Options shape one repository.
type Options struct {
	// Listen is the address; default "127.0.0.1:0".
	Listen string
	// Refused leaves nothing listening at the address.
	Refused bool
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
	// URL is the FHIR base, e.g. "http://127.0.0.1:40123".
	URL string
	// Addr is the host:port.
	Addr string

	opts Options
	srv  *http.Server

	mu          sync.Mutex
	events      []Event
	requests    int
	script      []int
	retryAfter  string
	hold        bool
	held        int
	release     chan struct{}
	unauth      bool
	batchTooBig bool
	closed      chan struct{}
	closeOnce   sync.Once
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

// New starts a repository; Close stops it.
func New(opts Options) (*Server, error) {
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &Server{Addr: ln.Addr().String(), opts: opts, release: make(chan struct{}), closed: make(chan struct{})}
	s.URL = "http://" + s.Addr
	if opts.Refused {
		ln.Close()
		return s, nil
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln) //nolint:errcheck // Serve returns http.ErrServerClosed on Close.
	return s, nil
}

// NewHandler makes a repository that listens nowhere itself: it is an http.Handler
// for a server of the caller's (cmd/auditrepo serves it next to a control API). URL and
// Addr stay empty; Close drops the held requests.
func NewHandler(opts Options) *Server {
	return &Server{opts: opts, release: make(chan struct{}), closed: make(chan struct{})}
}

// Close stops the repository; held requests are dropped unanswered.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		if s.srv != nil {
			_ = s.srv.Close()
		}
	})
}

// Script sets the statuses of the next requests, one per request (a batch is one);
// after them the repository answers normally again.
func (s *Server) Script(statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = slices.Clone(statuses)
}

// SetRetryAfter sets the Retry-After header of every scripted answer ("" for none).
func (s *Server) SetRetryAfter(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retryAfter = v
}

// SetHold makes every request, once its body is read, wait unanswered (and unstored)
// until SetHold(false) or Close; SetHold(false) lets the held ones go on normally.
func (s *Server) SetHold(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold && !on {
		close(s.release)
		s.release = make(chan struct{})
	}
	s.hold = on
}

// SetUnauthorized makes every request a 401 while on.
func (s *Server) SetUnauthorized(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unauth = on
}

// SetBatchTooLarge makes every batch a 413 while on.
func (s *Server) SetBatchTooLarge(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batchTooBig = on
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

// Requests counts the requests that reached a handler.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Held counts the requests held so far.
func (s *Server) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	batch := r.URL.Path == "/"
	if r.Method != http.MethodPost || (!batch && r.URL.Path != "/AuditEvent") {
		writeOutcome(w, http.StatusNotFound, "not-supported", "only POST /AuditEvent and POST / (batch)")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		return
	}
	s.mu.Lock()
	s.requests++
	status := 0
	if len(s.script) > 0 {
		status, s.script = s.script[0], s.script[1:]
	}
	retryAfter, hold, release, unauth, tooBig := s.retryAfter, s.hold, s.release, s.unauth, s.batchTooBig && batch
	if hold {
		s.held++
	}
	s.mu.Unlock()
	if hold {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		case <-s.closed:
			return
		}
	}
	switch {
	case unauth:
		w.Header().Set("WWW-Authenticate", `Bearer realm="arr"`)
		writeOutcome(w, http.StatusUnauthorized, "login", "no valid bearer token")
		return
	case status != 0:
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		if status >= 400 {
			writeOutcome(w, status, "transient", "scripted")
			return
		}
	case len(body) > MaxBodyBytes || tooBig:
		writeOutcome(w, http.StatusRequestEntityTooLarge, "too-costly", "request body too large")
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/fhir+json" && ct != "application/json" {
		writeOutcome(w, http.StatusUnsupportedMediaType, "not-supported", "Content-Type must be application/fhir+json")
		return
	}
	minimal := preferMinimal(r.Header)
	if batch {
		s.serveBatch(w, body, minimal)
		return
	}
	code, ev, why := s.check(body)
	if code != http.StatusCreated {
		writeOutcome(w, code, why[0], why[1])
		return
	}
	ev = s.store(ev)
	w.Header().Set("Location", "AuditEvent/"+ev.ID+"/_history/1")
	if minimal {
		w.WriteHeader(http.StatusCreated)
		return
	}
	writeJSON(w, http.StatusCreated, json.RawMessage(body))
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
func (s *Server) serveBatch(w http.ResponseWriter, body []byte, minimal bool) {
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
		writeOutcome(w, http.StatusBadRequest, "structure", "not a JSON resource")
		return
	}
	if b.ResourceType != "Bundle" || b.Type != "batch" {
		writeOutcome(w, http.StatusUnprocessableEntity, "invalid", "POST / takes a Bundle of type batch")
		return
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
	writeJSON(w, http.StatusOK, out)
}

func outcome(code, text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"resourceType": "OperationOutcome",
		"issue":        []any{map[string]any{"severity": "error", "code": code, "diagnostics": text}},
	})
	return b
}

func writeOutcome(w http.ResponseWriter, status int, code, text string) {
	writeJSON(w, status, outcome(code, text))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/fhir+json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
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
