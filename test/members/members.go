// Package members is a small FHIR R4 member node for tests and the demo: a real HTTP
// server on loopback that answers searches with a searchset Bundle, /metadata with a
// CapabilityStatement, and can be told to misbehave the ways a member does in
// production: answer late, answer 4xx or 5xx, refuse connections, hang, or reset the
// connection in the middle of its body.
//
// Every body it sends carries a marker string (Options.Marker), so that a test can
// assert that a member's body never leaks where it must not (the dependency report).
package members

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fault is a way the member misbehaves beyond its status code.
type Fault string

const (
	// FaultNone answers normally (after Delay, with Status).
	FaultNone Fault = ""
	// FaultRefused leaves nothing listening: the member's address is a closed port.
	FaultRefused Fault = "refused"
	// FaultHang never answers: each request waits until the caller gives up.
	FaultHang Fault = "hang"
	// FaultReset sends its status line and part of its body, then resets the connection.
	FaultReset Fault = "reset"
)

// Options shape one member.
type Options struct {
	// ID names the member in its resources' ids and in its marker; default "member".
	ID string
	// Listen is the address to listen on; default "127.0.0.1:0" (a free loopback port).
	Listen string
	// Delay is how long the member waits before it answers. A request cancelled by the
	// caller meanwhile is counted (Cancelled) and not answered.
	Delay time.Duration
	// Status is the status of every answer; default 200. From 400 on the body is an
	// OperationOutcome.
	Status int
	// Fault makes the member misbehave; see the Fault constants.
	Fault Fault
	// Entries is how many resources a search answers; default 2, negative for none.
	Entries int
	// Marker is put in every body the member sends; default "MEMBER-BODY-<id>".
	Marker string
}

// Request is what the member saw of one request.
type Request struct {
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
}

// Server is one running member.
type Server struct {
	// URL is the base URL of the member's FHIR API (its query_endpoint), e.g.
	// "http://127.0.0.1:40123/fhir".
	URL string
	// Addr is the host:port the member listens on (closed for FaultRefused).
	Addr string
	// Opts are the options the member was started with, defaults applied.
	Opts Options

	srv       *http.Server
	requests  atomic.Int64
	cancelled chan struct{}
	mu        sync.Mutex
	last      Request
	closeOnce sync.Once
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
	if opts.Status == 0 {
		opts.Status = http.StatusOK
	}
	if opts.Entries == 0 {
		opts.Entries = 2
	}
	if opts.Marker == "" {
		opts.Marker = "MEMBER-BODY-" + opts.ID
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &Server{
		Addr:      ln.Addr().String(),
		Opts:      opts,
		cancelled: make(chan struct{}, 1024),
	}
	s.URL = "http://" + s.Addr + "/fhir"
	if opts.Fault == FaultRefused {
		// Nothing listens there any more: a connection is refused at once.
		ln.Close()
		return s, nil
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln) //nolint:errcheck // Serve returns http.ErrServerClosed on Close.
	return s, nil
}

// Close stops the member at once: open connections are closed, which cancels the
// requests still waiting.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if s.srv != nil {
			s.srv.Close()
		}
	})
}

// Requests is how many requests the member received.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Cancelled receives once for every request whose caller gave up (its context was
// cancelled) before the member answered.
func (s *Server) Cancelled() <-chan struct{} { return s.cancelled }

// LastRequest is the last request the member received.
func (s *Server) LastRequest() Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// ServeHTTP answers as the options say.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	s.mu.Lock()
	s.last = Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone()}
	s.mu.Unlock()

	wait := s.Opts.Delay
	if s.Opts.Fault == FaultHang {
		wait = 24 * time.Hour
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			select {
			case s.cancelled <- struct{}{}:
			default:
			}
			return
		}
	}

	body, err := s.body(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if s.Opts.Fault == FaultReset {
		s.reset(w, body)
		return
	}
	w.Header().Set("Content-Type", "application/fhir+json")
	w.WriteHeader(s.Opts.Status)
	w.Write(body) //nolint:errcheck // the caller may be gone; nothing to do about it.
}

// reset sends the status line, a Content-Length for the whole body and half of it,
// then closes the connection with a TCP reset (linger 0), as a member that crashes
// mid-answer does.
func (s *Server) reset(w http.ResponseWriter, body []byte) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/fhir+json\r\nContent-Length: %d\r\n\r\n",
		s.Opts.Status, http.StatusText(s.Opts.Status), len(body))
	buf.Write(body[:len(body)/2]) //nolint:errcheck
	buf.Flush()                   //nolint:errcheck
	if tcp, ok := conn.(*net.TCPConn); ok {
		tcp.SetLinger(0) //nolint:errcheck
	}
	conn.Close()
}

// body is the FHIR JSON the member answers r with.
func (s *Server) body(r *http.Request) ([]byte, error) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/fhir/")
	if !ok || rest == "" {
		return outcome("not-found", "no FHIR API at "+r.URL.Path+" "+s.Opts.Marker)
	}
	if s.Opts.Status >= 400 {
		return outcome("exception", fmt.Sprintf("member %s answers %d %s", s.Opts.ID, s.Opts.Status, s.Opts.Marker))
	}
	parts := strings.Split(rest, "/")
	switch {
	case rest == "metadata":
		return json.Marshal(map[string]any{
			"resourceType": "CapabilityStatement",
			"status":       "active",
			"kind":         "instance",
			"fhirVersion":  "4.0.1",
			"format":       []string{"application/fhir+json"},
			"publisher":    s.Opts.Marker,
		})
	case len(parts) == 1 && r.Method == http.MethodGet:
		return json.Marshal(s.searchset(parts[0]))
	default:
		return json.Marshal(s.resource(parts[0], strings.Join(parts[1:], "-")))
	}
}

func (s *Server) searchset(resourceType string) map[string]any {
	var entries []map[string]any
	for i := 0; i < s.Opts.Entries; i++ {
		id := fmt.Sprintf("%s-%d", s.Opts.ID, i+1)
		entries = append(entries, map[string]any{
			"fullUrl":  s.URL + "/" + resourceType + "/" + id,
			"resource": s.resource(resourceType, id),
			"search":   map[string]any{"mode": "match"},
		})
	}
	b := map[string]any{
		"resourceType": "Bundle",
		"type":         "searchset",
		"total":        len(entries),
	}
	if len(entries) > 0 {
		b["entry"] = entries
	}
	return b
}

func (s *Server) resource(resourceType, id string) map[string]any {
	if id == "" {
		id = s.Opts.ID
	}
	return map[string]any{
		"resourceType": resourceType,
		"id":           id,
		"meta":         map[string]any{"source": s.Opts.ID, "tag": []map[string]any{{"code": s.Opts.Marker}}},
	}
}

func outcome(code, diagnostics string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"resourceType": "OperationOutcome",
		"issue":        []map[string]any{{"severity": "error", "code": code, "diagnostics": diagnostics}},
	})
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
