// Package double is the HTTP server the protocol doubles of the bindings (test/doubles/pdqsupplier,
// test/doubles/pixmanager, test/doubles/consentpdp, test/doubles/respondinggateway) run on: a real listener on loopback, a request
// log, and the fault knobs every binding test needs, the same for every profile:
// an overridden status, a delay, a hang, a refused connection (nothing listening), a
// connection reset in the middle of the answer, and a malformed body.
//
// A profile gives the server its Handler: how it answers a request, how it writes an
// error of a given status, and what a malformed body of its format is. The knobs are
// applied around the handler, so that every profile misbehaves the same way.
package double

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Fault is a way the double misbehaves beyond its status code.
type Fault string

const (
	// FaultNone answers normally (after Knobs.Delay, with Knobs.Status when set).
	FaultNone Fault = ""
	// FaultRefused leaves nothing listening: a connection to the address is refused.
	FaultRefused Fault = "refused"
	// FaultHang reads the request and never answers, until the caller gives up or the
	// double is closed.
	FaultHang Fault = "hang"
	// FaultReset sends the status line, a Content-Length for the whole body and half of
	// the body, then resets the connection (TCP RST), as a server that crashes mid-answer.
	FaultReset Fault = "reset"
	// FaultMalformed answers 200 with the profile's content type and a body that is no
	// document of its format (Handler.Malformed).
	FaultMalformed Fault = "malformed"
)

// Knobs are the faults a test sets on a double, at start or while it runs.
type Knobs struct {
	// Status, when not 0, is the status of every answer; from 400 on the body is the
	// profile's error document (Handler.Error), carrying the marker.
	Status int
	// Delay is how long the double waits before it answers; a caller that gives up
	// meanwhile is not answered.
	Delay time.Duration
	// Fault makes the double misbehave; see the Fault constants.
	Fault Fault
}

// Validate names the first knob that is out of range.
func (k Knobs) Validate() error {
	switch k.Fault {
	case FaultNone, FaultRefused, FaultHang, FaultReset, FaultMalformed:
	default:
		return fmt.Errorf("knobs: fault %q is not one of refused, hang, reset, malformed", k.Fault)
	}
	if k.Status != 0 && (k.Status < 100 || k.Status > 599) {
		return fmt.Errorf("knobs: status %d is not an HTTP status", k.Status)
	}
	if k.Delay < 0 {
		return fmt.Errorf("knobs: delay %s is negative", k.Delay)
	}
	return nil
}

// Request is what the double saw of one request.
type Request struct {
	Method   string
	Path     string
	RawQuery string
	Query    url.Values
	Header   http.Header
	// Body is the request body as sent, up to Options.MaxBodyBytes.
	Body []byte
}

// Answer is one answer of a profile.
type Answer struct {
	Status      int
	ContentType string
	Header      http.Header
	Body        []byte
}

// Handler is what a profile gives the server.
type Handler interface {
	// Answer answers one request; it runs after the knobs of a normal answer.
	Answer(r Request) Answer
	// Error is the profile's error answer of a status, its text carrying the marker.
	Error(status int, text string) Answer
	// Malformed is a 200 of the profile's content type whose body no client of the
	// profile can read.
	Malformed() Answer
}

// Options shape the server of one double.
type Options struct {
	// Listen is the address; default "127.0.0.1:0" (a free loopback port).
	Listen string
	// Name names the double in errors ("pixm manager").
	Name string
	// Marker is the text the profile puts in its error and malformed bodies.
	Marker string
	// MaxBodyBytes bounds a request body; a longer one is answered Error(413). Default
	// 1 MiB.
	MaxBodyBytes int64
	// Knobs are the faults the double starts with.
	Knobs Knobs
}

// maxLog bounds the request log: a benchmark's requests are counted, not kept.
const maxLog = 10000

// Server is one running double.
type Server struct {
	// Addr is the host:port the double listens on (closed while refused).
	Addr string

	opts    Options
	handler Handler

	mu       sync.Mutex
	knobs    Knobs
	srv      *http.Server
	log      []Request
	requests int
	closed   chan struct{}
	once     sync.Once
}

// Start starts a double for a test and stops it when the test ends.
func Start(tb testing.TB, opts Options, h Handler) *Server {
	tb.Helper()
	s, err := New(opts, h)
	if err != nil {
		tb.Fatalf("start %s: %v", opts.Name, err)
	}
	tb.Cleanup(s.Close)
	return s
}

// New starts a double; Close stops it.
func New(opts Options, h Handler) (*Server, error) {
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if err := opts.Knobs.Validate(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, handler: h, closed: make(chan struct{})}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.Addr = ln.Addr().String()
	s.knobs = opts.Knobs
	if opts.Knobs.Fault == FaultRefused {
		ln.Close()
		return s, nil
	}
	s.serve(ln)
	return s, nil
}

// serve starts an http.Server on ln; the caller holds mu or owns s alone.
func (s *Server) serve(ln net.Listener) {
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln) //nolint:errcheck // Serve returns http.ErrServerClosed on Close.
}

// URL is the double's root, "http://host:port".
func (s *Server) URL() string { return "http://" + s.Addr }

// SetKnobs changes the faults of the next requests. Turning FaultRefused on closes
// the listener and every open connection; turning it off listens again on the same
// address.
func (s *Server) SetKnobs(k Knobs) error {
	if err := k.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closed:
		return fmt.Errorf("%s is closed", s.opts.Name)
	default:
	}
	was := s.knobs.Fault == FaultRefused
	s.knobs = k
	switch now := k.Fault == FaultRefused; {
	case now && !was:
		if s.srv != nil {
			s.srv.Close() //nolint:errcheck // closing a listener we own.
			s.srv = nil
		}
	case was && !now:
		ln, err := net.Listen("tcp", s.Addr)
		if err != nil {
			return fmt.Errorf("listen again on %s: %w", s.Addr, err)
		}
		s.serve(ln)
	}
	return nil
}

// Knobs are the faults in force.
func (s *Server) Knobs() Knobs {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.knobs
}

// Close stops the double at once; hanging requests end unanswered.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closed)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.srv != nil {
			s.srv.Close() //nolint:errcheck // nothing to do about it.
		}
	})
}

// Requests counts the requests the double received.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Log is every request the double received, oldest first (the first 10,000).
func (s *Server) Log() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// Last is the last request the double received; ok is false before the first.
func (s *Server) Last() (Request, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.log) == 0 {
		return Request{}, false
	}
	return s.log[len(s.log)-1], true
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, s.opts.MaxBodyBytes+1))
	if err != nil {
		return
	}
	tooLong := int64(len(body)) > s.opts.MaxBodyBytes
	if tooLong {
		body = body[:s.opts.MaxBodyBytes]
	}
	req := Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	s.requests++
	if len(s.log) < maxLog {
		s.log = append(s.log, req)
	}
	k := s.knobs
	s.mu.Unlock()

	if k.Fault == FaultHang {
		select {
		case <-r.Context().Done():
		case <-s.closed:
		}
		return
	}
	if k.Delay > 0 {
		t := time.NewTimer(k.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		case <-s.closed:
			t.Stop()
			return
		}
	}
	var a Answer
	switch {
	case tooLong:
		a = s.handler.Error(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", s.opts.MaxBodyBytes))
	case k.Fault == FaultMalformed:
		a = s.handler.Malformed()
	case k.Status >= 400:
		a = s.handler.Error(k.Status, fmt.Sprintf("%s answers %d", s.opts.Name, k.Status))
	default:
		a = s.handler.Answer(req)
		if k.Status != 0 {
			a.Status = k.Status
		}
	}
	if k.Fault == FaultReset {
		reset(w, a)
		return
	}
	write(w, a)
}

func write(w http.ResponseWriter, a Answer) {
	for k, vs := range a.Header {
		w.Header()[k] = vs
	}
	if a.ContentType != "" {
		w.Header().Set("Content-Type", a.ContentType)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(a.Body)))
	w.WriteHeader(a.Status)
	w.Write(a.Body) //nolint:errcheck // the caller may be gone; nothing to do about it.
}

// reset sends the status line, a Content-Length for the whole body and half of it,
// then closes the connection with linger 0 (a TCP reset).
func reset(w http.ResponseWriter, a Answer) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		a.Status, http.StatusText(a.Status), a.ContentType, len(a.Body))
	buf.Write(a.Body[:len(a.Body)/2]) //nolint:errcheck // the connection is reset next.
	buf.Flush()                       //nolint:errcheck // idem.
	if tcp, ok := conn.(*net.TCPConn); ok {
		tcp.SetLinger(0) //nolint:errcheck // idem.
	}
	conn.Close()
}

// Truncated is the first half of body followed by the marker: for JSON and XML alike
// a document that ends in the middle, so no parser accepts it.
func Truncated(body []byte, marker string) []byte {
	return append(bytes.Clone(body[:len(body)/2]), marker...)
}
