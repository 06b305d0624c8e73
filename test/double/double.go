// Package double is the HTTP server every protocol double of test/doubles runs on
// (pdqsupplier, pixmanager, consentpdp, respondinggateway, mcsdsupplier,
// identityregistry, auditrepo, members): a real listener on loopback, a request log,
// and the fault knobs every test needs, the same for every profile: an overridden
// status (with a Retry-After), a delay, a hang (never answered), a hold (answered once
// released), a refused connection (nothing listening), a connection reset in the
// middle of the answer, and a malformed body, on every request or on one route. The
// knobs stand for every request until changed (SetKnobs), or a script of knobs
// answers the next requests one each (Script) before the standing ones again.
//
// A profile gives the server its Handler: how it answers a request, how it writes an
// error of a given status, and what a malformed body of its format is. The knobs are
// applied around the handler, so that every profile misbehaves the same way. A double
// faults through these knobs and no switches of its own; what it has of its own
// shapes its protocol's answers (a next link to another origin, a forced status).
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
	// double is closed: a server that is stuck.
	FaultHang Fault = "hang"
	// FaultHold reads the request and holds it unanswered until the fault is turned off
	// (SetKnobs), the caller gives up or the double is closed; turned off, it answers
	// the held requests as the knobs then in force say: an answer in flight.
	FaultHold Fault = "hold"
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
	// RetryAfter, when set, is the Retry-After header of an answer whose status the
	// knobs set ("2", or an HTTP date).
	RetryAfter string
	// Delay is how long the double waits before it answers; a caller that gives up
	// meanwhile is not answered.
	Delay time.Duration
	// Fault makes the double misbehave; see the Fault constants.
	Fault Fault
	// Route, when set, is a net/http ServeMux pattern ("DELETE /fhir/Subscription/{id}",
	// "POST /{$}"): the knobs apply to the requests it matches, and the others are
	// answered as without knobs. FaultRefused, a listener's state, takes no route.
	Route string
}

// Validate names the first knob that is out of range.
func (k Knobs) Validate() error {
	switch k.Fault {
	case FaultNone, FaultRefused, FaultHang, FaultHold, FaultReset, FaultMalformed:
	default:
		return fmt.Errorf("knobs: fault %q is not one of refused, hang, hold, reset, malformed", k.Fault)
	}
	if k.Status != 0 && (k.Status < 100 || k.Status > 599) {
		return fmt.Errorf("knobs: status %d is not an HTTP status", k.Status)
	}
	if k.Delay < 0 {
		return fmt.Errorf("knobs: delay %s is negative", k.Delay)
	}
	if k.RetryAfter != "" && k.Status == 0 {
		return fmt.Errorf("knobs: retry-after %q without a status", k.RetryAfter)
	}
	if k.Route != "" {
		if k.Fault == FaultRefused {
			return fmt.Errorf("knobs: refused takes no route (%q)", k.Route)
		}
		if _, err := routeMux(k.Route); err != nil {
			return err
		}
	}
	return nil
}

// routeMux is a ServeMux that matches route only.
func routeMux(route string) (mux *http.ServeMux, err error) {
	defer func() {
		if r := recover(); r != nil {
			mux, err = nil, fmt.Errorf("knobs: route %q: %v", route, r)
		}
	}()
	mux = http.NewServeMux()
	mux.Handle(route, http.NotFoundHandler())
	return mux, nil
}

// matches reports whether r is one of the requests k applies to.
func (k Knobs) matches(r *http.Request) bool {
	if k.Route == "" {
		return true
	}
	mux, err := routeMux(k.Route)
	if err != nil {
		return false
	}
	_, pattern := mux.Handler(r)
	return pattern != ""
}

// Request is what the double saw of one request.
type Request struct {
	Method string
	// Host is the Host the request was sent to (the URL's authority).
	Host     string
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

	mu        sync.Mutex
	knobs     Knobs
	script    []run
	release   chan struct{} // closed when FaultHold is turned off
	held      int
	srv       *http.Server
	log       []Request
	requests  int
	cancelled chan struct{}
	closed    chan struct{}
	once      sync.Once
	// handlerOnly: made by NewHandler, no listener of its own.
	handlerOnly bool
}

// run is a step of a script: knobs for the next n requests.
type run struct {
	k Knobs
	n int
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
	s := &Server{opts: opts, handler: h, release: make(chan struct{}), cancelled: make(chan struct{}, 1024), closed: make(chan struct{})}
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

// NewHandler makes a double that listens nowhere itself: an http.Handler for a
// server of the caller's (a command serves it next to a control API). Addr stays
// empty, and FaultRefused, a listener's state, is refused.
func NewHandler(opts Options, h Handler) (*Server, error) {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if err := opts.Knobs.Validate(); err != nil {
		return nil, err
	}
	if opts.Knobs.Fault == FaultRefused {
		return nil, fmt.Errorf("%s listens nowhere itself: it cannot refuse", opts.Name)
	}
	return &Server{opts: opts, handler: h, knobs: opts.Knobs, handlerOnly: true, release: make(chan struct{}), cancelled: make(chan struct{}, 1024), closed: make(chan struct{})}, nil
}

// serve starts an http.Server on ln; the caller holds mu or owns s alone.
func (s *Server) serve(ln net.Listener) {
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln) //nolint:errcheck // Serve returns http.ErrServerClosed on Close.
}

// URL is the double's root, "http://host:port".
func (s *Server) URL() string { return "http://" + s.Addr }

// SetKnobs changes the faults of the next requests (a script still runs first).
// Turning FaultRefused on closes the listener and every open connection; turning it
// off listens again on the same address. Turning FaultHold off lets the held requests
// go on.
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
	if s.handlerOnly && k.Fault == FaultRefused {
		return fmt.Errorf("%s listens nowhere itself: it cannot refuse", s.opts.Name)
	}
	was := s.knobs.Fault == FaultRefused
	if s.knobs.Fault == FaultHold && k.Fault != FaultHold {
		close(s.release)
		s.release = make(chan struct{})
	}
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

// Set is SetKnobs for a test: knobs the double refuses fail it.
func (s *Server) Set(tb testing.TB, k Knobs) {
	tb.Helper()
	if err := s.SetKnobs(k); err != nil {
		tb.Fatal(err)
	}
}

// Script makes the next requests take ks, one each, before the standing knobs
// again; it replaces a script still running, and no knobs clears it. FaultRefused is
// the listener's state, not a request's, so a script cannot hold it: a script the
// double refuses fails the test.
func (s *Server) Script(tb testing.TB, ks ...Knobs) {
	tb.Helper()
	runs := make([]run, 0, len(ks))
	for _, k := range ks {
		runs = append(runs, run{k, 1})
	}
	if err := s.setScript(runs); err != nil {
		tb.Fatal(err)
	}
}

// Statuses are knobs of each status, for a script of statuses.
func Statuses(statuses ...int) []Knobs {
	ks := make([]Knobs, len(statuses))
	for i, st := range statuses {
		ks[i] = Knobs{Status: st}
	}
	return ks
}

// ScriptTimes makes the next n requests take k (n 0 clears the script), as Script
// does, for a command's control API.
func (s *Server) ScriptTimes(k Knobs, n int) error {
	if n < 0 {
		return fmt.Errorf("knobs: a script of %d requests", n)
	}
	if n == 0 {
		return s.setScript(nil)
	}
	return s.setScript([]run{{k, n}})
}

func (s *Server) setScript(runs []run) error {
	for _, r := range runs {
		if err := r.k.Validate(); err != nil {
			return err
		}
		if r.k.Fault == FaultRefused {
			return fmt.Errorf("knobs: refused cannot be scripted")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = runs
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

// Held counts the requests FaultHang or FaultHold has held so far.
func (s *Server) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// Cancelled receives once for every request whose caller gave up (its context ended)
// before the double answered, while held or delayed.
func (s *Server) Cancelled() <-chan struct{} { return s.cancelled }

// gaveUp records a caller that gave up.
func (s *Server) gaveUp() {
	select {
	case s.cancelled <- struct{}{}:
	default:
	}
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

// ServeHTTP answers one request: the knobs around the profile's Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, s.opts.MaxBodyBytes+1))
	if err != nil {
		return
	}
	tooLong := int64(len(body)) > s.opts.MaxBodyBytes
	if tooLong {
		body = body[:s.opts.MaxBodyBytes]
	}
	req := Request{Method: r.Method, Host: r.Host, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	s.requests++
	if len(s.log) < maxLog {
		s.log = append(s.log, req)
	}
	var k Knobs
	switch {
	case len(s.script) > 0 && s.script[0].k.matches(r):
		k = s.script[0].k
		if s.script[0].n--; s.script[0].n == 0 {
			s.script = s.script[1:]
		}
	case s.knobs.matches(r):
		k = s.knobs
	}
	release := s.release
	if k.Fault == FaultHang {
		release = nil // never
	}
	if k.Fault == FaultHang || k.Fault == FaultHold {
		s.held++
	}
	s.mu.Unlock()

	if k.Fault == FaultHang || k.Fault == FaultHold {
		select {
		case <-r.Context().Done():
			s.gaveUp()
			return
		case <-s.closed:
			return
		case <-release:
			s.mu.Lock()
			k = Knobs{}
			if s.knobs.matches(r) {
				k = s.knobs
			}
			s.mu.Unlock()
		}
	}
	if k.Delay > 0 {
		t := time.NewTimer(k.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			s.gaveUp()
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
	if k.RetryAfter != "" && k.Status != 0 {
		a.Header = a.Header.Clone()
		if a.Header == nil {
			a.Header = http.Header{}
		}
		a.Header.Set("Retry-After", k.RetryAfter)
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
