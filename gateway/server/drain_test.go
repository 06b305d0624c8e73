package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
	"github.com/ferrofed/ferrofed/test/double"
)

// signalRecorder records the drain signals in the order they fired, with their time.
type signalRecorder struct {
	mu    sync.Mutex
	order []lifecycle.Signal
	at    map[lifecycle.Signal]time.Time
}

func (r *signalRecorder) observe(sig lifecycle.Signal, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = map[lifecycle.Signal]time.Time{}
	}
	r.order = append(r.order, sig)
	r.at[sig] = at
}

func (r *signalRecorder) get() ([]lifecycle.Signal, map[lifecycle.Signal]time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order), r.at
}

// running is a server serving on a real loopback listener.
type running struct {
	s      *Server
	url    string
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // what Run returned, once done
	rec    *signalRecorder
	// terminationLog is the server's termination message file, a file of the test's
	// own unless toml sets server.termination_message_path.
	terminationLog string
}

func start(t *testing.T, toml string, log logr.Logger, opts ...Option) *running {
	t.Helper()
	rec := &signalRecorder{}
	prefix := "[server]\nlisten = \"127.0.0.1:0\"\n"
	terminationLog := ""
	if !strings.Contains(toml, "termination_message_path") {
		terminationLog = filepath.Join(t.TempDir(), "termination-log")
		prefix += fmt.Sprintf("termination_message_path = %q\n", terminationLog)
	}
	cfg := parse(t, prefix+toml)
	s, err := New(cfg, log, append(opts, WithSignalObserver(rec.observe), WithBootPoll(5*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{s: s, url: s.URL(), cancel: cancel, done: make(chan struct{}), rec: rec, terminationLog: terminationLog}
	go func() { r.err = s.Run(ctx); close(r.done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return")
		}
	})
	r.waitReady(t)
	return r
}

// waitReady polls readiness until it answers 200: it is what a balancer does.
func (r *running) waitReady(t *testing.T) {
	t.Helper()
	c := newClient()
	double.Eventually(t, "ready", func() bool {
		resp, err := c.Get(r.url + "/health/readiness")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// terminationMessage reads the one line the drain wrote to r.terminationLog, parses it
// as the operator will, and requires its durations to be those of the drain's signals
// as the observer saw them: each step from the signal before it, truncated to whole
// milliseconds, and the drain from ShutdownInitiated to BindingsStopped.
func (r *running) terminationMessage(t *testing.T) lifecycle.TerminationMessage {
	t.Helper()
	data, err := os.ReadFile(r.terminationLog)
	if err != nil {
		t.Fatalf("no termination message: %v", err)
	}
	if strings.Count(string(data), "\n") != 1 || !strings.HasSuffix(string(data), "\n") || len(data) > lifecycle.MaxTerminationMessageBytes {
		t.Fatalf("the termination message is not one line within %d bytes: %q", lifecycle.MaxTerminationMessageBytes, data)
	}
	m, err := lifecycle.ParseTerminationMessage(data)
	if err != nil {
		t.Fatalf("the termination message does not parse: %v\n%s", err, data)
	}
	_, at := r.rec.get()
	between := func(from, to lifecycle.Signal) time.Duration {
		if at[from].IsZero() || at[to].IsZero() {
			t.Fatalf("%s or %s never fired", from, to)
		}
		return at[to].Sub(at[from]).Truncate(time.Millisecond)
	}
	want := lifecycle.DrainSteps{
		DrainDelay:     between(lifecycle.SignalShutdownInitiated, lifecycle.SignalDrainDelayElapsed),
		ListenerClosed: between(lifecycle.SignalDrainDelayElapsed, lifecycle.SignalListenerClosed),
		InFlight:       between(lifecycle.SignalListenerClosed, lifecycle.SignalInFlightDrained),
		Bindings:       between(lifecycle.SignalInFlightDrained, lifecycle.SignalBindingsStopped),
	}
	if m.Steps != want {
		t.Fatalf("the message's steps are %+v, the signals' %+v\n%s", m.Steps, want, data)
	}
	if d := between(lifecycle.SignalShutdownInitiated, lifecycle.SignalBindingsStopped); m.Drain != d {
		t.Fatalf("the message's drain is %s, the signals' %s\n%s", m.Drain, d, data)
	}
	return m
}

// newClient is a client with its own connection pool and no proxy.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}, Timeout: 10 * time.Second}
}

type answer struct {
	code   int
	body   string
	close  bool
	reused bool
	err    error
}

func call(c *http.Client, url string) answer {
	var reused bool
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	return answer{code: resp.StatusCode, body: readAll(resp.Body), close: resp.Close, reused: reused}
}

// TestDrainServesTheDelayThenClosesAndFinishesInFlight follows kube-apiserver's graceful
// termination test: readiness fails at once, the listener keeps serving through the
// delay with Connection: close, then refuses new connections while the request in
// flight finishes, and every signal fires in order.
func TestDrainServesTheDelayThenClosesAndFinishesInFlight(t *testing.T) {
	const delay = 200 * time.Millisecond
	sf := newTestSurface()
	var stopped bool
	sf.stop = func(context.Context) error { stopped = true; return nil }
	r := start(t, fmt.Sprintf("drain_delay_ms = %d\nrequest_timeout_ms = 5000\nbindings_drain_timeout_ms = 1000\n", delay.Milliseconds()),
		logr.Discard(), withSurfaces(sf))

	// A keep-alive client with one idle connection in its pool.
	keepAlive := newClient()
	if a := call(keepAlive, r.url+"/fhir/fast"); a.code != 200 || a.close {
		t.Fatalf("before the drain: %+v", a)
	}

	// One request in flight, blocked until released.
	blocked := make(chan answer, 1)
	go func() { blocked <- call(newClient(), r.url+"/fhir/block") }()
	<-sf.entered

	r.cancel()
	<-r.s.Signaled(lifecycle.SignalShutdownInitiated)
	initiated := time.Now()

	if a := call(newClient(), r.url+"/health/readiness"); a.code != 503 || !strings.Contains(a.body, `"phase":"draining"`) {
		t.Fatalf("readiness at once: %+v", a)
	}
	if a := call(newClient(), r.url+"/health"); a.code != 200 {
		t.Fatalf("liveness while draining: %+v", a)
	}
	if a := call(keepAlive, r.url+"/fhir/fast"); a.err != nil || a.code != 200 || !a.reused || !a.close {
		t.Fatalf("reused connection during the delay: %+v (want 200, reused, Connection: close)", a)
	}
	if a := call(newClient(), r.url+"/fhir/fast"); a.err != nil || a.code != 200 || !a.close {
		t.Fatalf("new connection during the delay: %+v (want 200, Connection: close)", a)
	}
	if since := time.Since(initiated); since >= delay {
		t.Fatalf("the checks inside the delay took %s, longer than the delay itself: inconclusive", since)
	}

	<-r.s.Signaled(lifecycle.SignalListenerClosed)
	if conn, err := net.DialTimeout("tcp", r.s.Addr().String(), time.Second); err == nil {
		conn.Close()
		t.Fatal("a new connection was accepted after the listener closed")
	}
	select {
	case <-r.done:
		t.Fatal("Run returned with a request in flight")
	default:
	}

	close(sf.release)
	if a := <-blocked; a.err != nil || a.code != 200 || a.body != "released" {
		t.Fatalf("the in-flight request: %+v", a)
	}
	select {
	case <-r.done:
		if err := r.err; err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not return after the last request finished")
	}
	if took := time.Since(initiated); took > delay+time.Second {
		t.Fatalf("the drain took %s with nothing left in flight", took)
	}

	order, at := r.rec.get()
	if !slices.Equal(order, lifecycle.DrainSignals) {
		t.Fatalf("signals fired %v, want %v", order, lifecycle.DrainSignals)
	}
	if gap := at[lifecycle.SignalDrainDelayElapsed].Sub(at[lifecycle.SignalShutdownInitiated]); gap < delay {
		t.Fatalf("the delay lasted %s, want at least %s", gap, delay)
	}
	if !stopped {
		t.Fatal("the surface was not stopped")
	}
	if drainMetric(r.s, OutcomeCompleted) != 1 || drainMetric(r.s, OutcomeCut) != 0 {
		t.Fatal("drain outcome metric is not completed")
	}
	m := r.terminationMessage(t)
	if m.Outcome != lifecycle.DrainCompleted || m.CutConnections != 0 || len(m.Abandoned) != 0 || m.AbandonedOmitted != 0 {
		t.Fatalf("termination message %+v, want completed with nothing cut or abandoned", m)
	}
	if m.Steps.DrainDelay < delay || m.Drain < delay || m.Drain > delay+time.Second {
		t.Fatalf("termination message %+v: the drain delay was %s, the whole drain under %s", m, delay, delay+time.Second)
	}
}

func TestDrainOfAnIdleGatewayDoesNotWaitTheTimeout(t *testing.T) {
	r := start(t, "request_timeout_ms = 10000\n", logr.Discard())
	begin := time.Now()
	r.cancel()
	if <-r.done; r.err != nil {
		t.Fatal(r.err)
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Fatalf("an idle drain took %s", took)
	}
}

func TestDrainCutsARequestLongerThanTheShutdownTimeout(t *testing.T) {
	const shutdown, bindings = 300 * time.Millisecond, 300 * time.Millisecond
	sf := newTestSurface()
	t.Cleanup(func() { close(sf.release) }) // the handler ignores its context; free it at the end
	r := start(t, fmt.Sprintf("request_timeout_ms = %d\nbindings_drain_timeout_ms = %d\n", shutdown.Milliseconds(), bindings.Milliseconds()),
		logr.Discard(), withSurfaces(sf))

	blocked := make(chan answer, 1)
	go func() { blocked <- call(newClient(), r.url+"/fhir/block") }()
	<-sf.entered
	begin := time.Now()
	r.cancel()

	select {
	case <-r.done:
		if err := r.err; err != nil {
			t.Fatal(err)
		}
	case <-time.After(shutdown + bindings + 2*time.Second):
		t.Fatal("Run did not return within shutdown timeout + bindings budget + margin")
	}
	if took, budget := time.Since(begin), shutdown+bindings+time.Second; took > budget {
		t.Fatalf("Run took %s, budget %s", took, budget)
	}
	if a := <-blocked; a.err == nil {
		t.Fatalf("the request longer than the shutdown timeout was not cut: %+v", a)
	}
	if drainMetric(r.s, OutcomeCut) != 1 || testutil.ToFloat64(r.s.metrics.cutConns) < 1 {
		t.Fatal("drain outcome metric is not cut")
	}
	order, _ := r.rec.get()
	if !slices.Equal(order, lifecycle.DrainSignals) {
		t.Fatalf("signals fired %v", order)
	}
	m := r.terminationMessage(t)
	if m.Outcome != lifecycle.DrainCut || m.CutConnections != int(testutil.ToFloat64(r.s.metrics.cutConns)) || len(m.Abandoned) != 0 {
		t.Fatalf("termination message %+v, want cut with the %v cut connections", m, testutil.ToFloat64(r.s.metrics.cutConns))
	}
	// Step 3 waited out the shutdown timeout (it began a moment before the listener
	// closed, hence the slack).
	if m.Steps.InFlight < shutdown-50*time.Millisecond || m.Steps.InFlight > shutdown+time.Second {
		t.Fatalf("step 3 took %s in the message, the shutdown timeout is %s", m.Steps.InFlight, shutdown)
	}
}

func TestDrainAbandonsASurfaceThatDoesNotStop(t *testing.T) {
	const bindings = 200 * time.Millisecond
	stuck := newTestSurface()
	stuck.name = "pmir"
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	stuck.stop = func(context.Context) error { <-never; return nil } // ignores ctx
	polite := newTestSurface()
	polite.name = "audit"
	var politeErr error
	polite.stop = func(ctx context.Context) error { <-ctx.Done(); politeErr = ctx.Err(); return nil }
	logs := &logSink{}
	r := start(t, fmt.Sprintf("bindings_drain_timeout_ms = %d\n", bindings.Milliseconds()), logs.logger(), withSurfaces(stuck, emptyRoutes{polite}))

	begin := time.Now()
	r.cancel()
	if <-r.done; r.err != nil {
		t.Fatal(r.err)
	}
	if took := time.Since(begin); took > bindings+time.Second {
		t.Fatalf("Run took %s with a %s bindings budget", took, bindings)
	}
	line := logs.find("abandoned", `"surface"="pmir"`)
	if line == "" || !strings.Contains(line, "may be left there") {
		t.Fatalf("no warning names the abandoned surface: %v", logs.lines)
	}
	if logs.find("abandoned", `"surface"="audit"`) != "" {
		t.Fatal("the surface that honoured its context was reported abandoned")
	}
	if !errors.Is(politeErr, context.DeadlineExceeded) {
		t.Fatalf("the polite surface's ctx ended with %v", politeErr)
	}
	if v := testutil.ToFloat64(r.s.metrics.abandoned.WithLabelValues("pmir")); v != 1 {
		t.Fatalf("abandoned metric %v", v)
	}
	m := r.terminationMessage(t)
	if m.Outcome != lifecycle.DrainCompleted || !slices.Equal(m.Abandoned, []string{"pmir"}) || m.AbandonedOmitted != 0 {
		t.Fatalf("termination message %+v, want completed with pmir abandoned", m)
	}
	if m.Steps.Bindings < bindings || m.Steps.Bindings > bindings+time.Second {
		t.Fatalf("step 4 took %s in the message, the bindings budget is %s", m.Steps.Bindings, bindings)
	}
	if line := logs.find("Wrote the drain's outcome to server.termination_message_path", `\"abandoned\":[\"pmir\"]`); line == "" {
		t.Fatalf("the written message is not logged: %v", logs.lines)
	}
}

// The termination message never fails the drain: where it cannot be written the drain
// logs it once, naming the key, and completes as it would have.
func TestTheTerminationMessageIsSkippedWhereItCannotBeWritten(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, path string
		words      []string // in the one log line about it
	}{
		{"a directory that does not exist is skipped", filepath.Join(dir, "no-such-dir", "termination-log"),
			[]string{"Skipped the termination message: its directory does not exist", `"directory"="` + filepath.Join(dir, "no-such-dir") + `"`}},
		{"a path that is a directory is a failed write", dir, []string{"Could not write the termination message", "is a directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &logSink{}
			r := start(t, fmt.Sprintf("termination_message_path = %q\n", tt.path), logs.logger())
			begin := time.Now()
			r.cancel()
			if <-r.done; r.err != nil {
				t.Fatal(r.err)
			}
			if took := time.Since(begin); took > 2*time.Second {
				t.Fatalf("an idle drain took %s", took)
			}
			if n := logs.count(`"key"="server.termination_message_path"`); n != 1 {
				t.Fatalf("%d log lines name server.termination_message_path, want 1: %v", n, logs.lines)
			}
			if line := logs.find(append([]string{`"key"="server.termination_message_path"`}, tt.words...)...); line == "" {
				t.Fatalf("no log line says %q: %v", tt.words, logs.lines)
			}
			if logs.find(`"msg"="Drained"`, `"outcome"="completed"`) == "" {
				t.Fatalf("the drain did not end as usual: %v", logs.lines)
			}
			if _, err := os.Stat(filepath.Dir(tt.path)); tt.path != dir && !os.IsNotExist(err) {
				t.Fatalf("the missing directory was made: %v", err)
			}
		})
	}

	t.Run("an empty path writes nothing and says nothing", func(t *testing.T) {
		logs := &logSink{}
		r := start(t, "termination_message_path = \"\"\n", logs.logger())
		r.cancel()
		if <-r.done; r.err != nil {
			t.Fatal(r.err)
		}
		if logs.find("termination") != "" {
			t.Fatalf("a drain without a termination message path logged about it: %v", logs.lines)
		}
	})

	t.Run("an existing file is truncated, not appended to", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "termination-log")
		if err := os.WriteFile(path, []byte(strings.Repeat("old message\n", 100)), 0o600); err != nil {
			t.Fatal(err)
		}
		r := start(t, fmt.Sprintf("termination_message_path = %q\n", path), logr.Discard())
		r.terminationLog = path
		r.cancel()
		if <-r.done; r.err != nil {
			t.Fatal(r.err)
		}
		if m := r.terminationMessage(t); m.Outcome != lifecycle.DrainCompleted {
			t.Fatalf("termination message %+v", m)
		}
	})
}

// emptyRoutes wraps a surface without routes, so that two surfaces do not collide.
type emptyRoutes struct{ *testSurface }

func (emptyRoutes) RegisterDataPlane(*gin.RouterGroup) {}
func (emptyRoutes) RegisterOperator(*gin.RouterGroup)  {}

// TestSlowLorisIsCutAtTheReadHeaderTimeout: clients that dribble their headers are cut at
// server.read_header_timeout_ms while normal requests keep being served.
func TestSlowLorisIsCutAtTheReadHeaderTimeout(t *testing.T) {
	const rht = 300 * time.Millisecond
	r := start(t, fmt.Sprintf("read_header_timeout_ms = %d\n", rht.Milliseconds()), logr.Discard())
	addr := r.s.Addr().String()

	const loris = 5
	cutAfter := make(chan time.Duration, loris)
	for range loris {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		begin := time.Now()
		go func() { // dribble one header line every 50 ms for up to 5 s
			fmt.Fprint(conn, "GET /health HTTP/1.1\r\nHost: x\r\n")
			for i := 0; i < 100; i++ {
				time.Sleep(50 * time.Millisecond)
				if _, err := fmt.Fprintf(conn, "X-Dribble-%d: y\r\n", i); err != nil {
					return
				}
			}
		}()
		go func() { // the server closes the connection: the read ends
			_, _ = bufio.NewReader(conn).ReadString('\n')
			cutAfter <- time.Since(begin)
		}()
	}

	// Normal requests keep succeeding while the slow clients hang on.
	c := newClient()
	for i := 0; i < 20; i++ {
		if a := call(c, r.url+"/health"); a.err != nil || a.code != 200 {
			t.Fatalf("a normal request during the slow-loris: %+v", a)
		}
		time.Sleep(10 * time.Millisecond) // spread the normal requests over the header timeout
	}

	for range loris {
		select {
		case d := <-cutAfter:
			// Cut at the header timeout, not when the dribble would end (5 s): the
			// upper bound is loose so that a loaded machine cannot fail it.
			if d < rht-50*time.Millisecond || d > 3*time.Second {
				t.Errorf("a slow client was cut after %s, want the header timeout %s (well before the dribble's 5 s)", d, rht)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a slow client was never cut")
		}
	}
	if a := call(c, r.url+"/health"); a.code != 200 {
		t.Fatalf("after: %+v", a)
	}
}

func TestHeadOnARealListenerHasNoBody(t *testing.T) {
	r := start(t, "", logr.Discard())
	c := newClient()
	for _, p := range []string{"/health", "/health/readiness", "/health/readiness/config"} {
		get, err := c.Get(r.url + p)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(get.Body)
		get.Body.Close()
		head, err := c.Head(r.url + p)
		if err != nil {
			t.Fatal(err)
		}
		headBody := readAll(head.Body)
		head.Body.Close()
		if head.StatusCode != get.StatusCode || head.ContentLength != int64(len(body)) ||
			head.Header.Get("Content-Type") != get.Header.Get("Content-Type") || headBody != "" {
			t.Fatalf("%s: HEAD %d len %d body %q; GET %d len %d", p, head.StatusCode, head.ContentLength, headBody, get.StatusCode, len(body))
		}
	}
}

// TestDrainSignalsFireAtMostOnce: firing a signal again, after the drain or from many
// goroutines at once, neither panics nor reaches the observer or the log a second time,
// and the order the observer saw stays the drain's.
func TestDrainSignalsFireAtMostOnce(t *testing.T) {
	t.Run("a signal fired from many goroutines is first exactly once", func(t *testing.T) {
		sig := newNamedSignal(lifecycle.SignalListenerClosed)
		var firsts sync.WaitGroup
		var mu sync.Mutex
		n := 0
		for range 16 {
			firsts.Add(1)
			go func() {
				defer firsts.Done()
				if sig.signal() {
					mu.Lock()
					n++
					mu.Unlock()
				}
			}()
		}
		firsts.Wait()
		if n != 1 {
			t.Fatalf("%d calls reported firing first, want 1", n)
		}
		select {
		case <-sig.signaled():
		default:
			t.Fatal("the channel is not closed after the signal fired")
		}
	})

	t.Run("signalling every step again after a drain is harmless", func(t *testing.T) {
		logs := &logSink{}
		r := start(t, "", logs.logger())
		r.cancel()
		if <-r.done; r.err != nil {
			t.Fatal(r.err)
		}
		// Again, in reverse: each must be a no-op.
		for _, sig := range slices.Backward(lifecycle.DrainSignals) {
			r.s.fire(sig, time.Now(), "again", true)
		}
		order, _ := r.rec.get()
		if !slices.Equal(order, lifecycle.DrainSignals) {
			t.Fatalf("the observer saw %v, want %v once each", order, lifecycle.DrainSignals)
		}
		for _, sig := range lifecycle.DrainSignals {
			select {
			case <-r.s.Signaled(sig):
			default:
				t.Fatalf("Signaled(%s) is not closed", sig)
			}
			if n := logs.count("Drain step finished", `"signal"="`+string(sig)+`"`); n != 1 {
				t.Fatalf("%s logged %d times, want 1", sig, n)
			}
		}
		if logs.find(`"again"=true`) != "" {
			t.Fatal("a second fire reached the log")
		}
	})

	t.Run("a name that is not a drain signal never fires", func(t *testing.T) {
		s, err := New(parse(t, ""), logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.Signaled("NoSuchSignal"):
			t.Fatal("an unknown signal reads as fired")
		default:
		}
	})
}
