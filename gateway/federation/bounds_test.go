package federation_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/proxy"
	"github.com/ferrofed/ferrofed/gateway/searchquery"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

// The tests of this file attack the gateway's own server (gateway/server with the
// federation surface, on loopback) the ways issue 11 found it broken: each would fail
// on the commit before the bounds.

// uploadMember is a member that reads a routed request's whole body before it
// answers (201 to a POST, an empty searchset to a GET), and counts the bodies it could
// not read: a gateway that closed the member's connection mid-body.
type uploadMember struct {
	*httptest.Server
	brokenBodies atomic.Int64
}

func startUploadMember(t *testing.T) *uploadMember {
	t.Helper()
	m := &uploadMember{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			m.brokenBodies.Add(1)
			return
		}
		w.Header().Set("Content-Type", fhir.MediaType)
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"resourceType":"Patient","id":"1"}`)
			return
		}
		_, _ = io.WriteString(w, `{"resourceType":"Bundle","type":"searchset","total":0}`)
	}))
	t.Cleanup(m.Close)
	return m
}

// rawAnswer is what a raw client read back.
type rawAnswer struct {
	status int
	header http.Header
	body   string
	// closed: the gateway closed the connection after its answer; after is what the
	// read after the answer returned.
	closed bool
	after  error
}

// rawSend opens a connection to the gateway at base, writes head, then each part
// after gap (stopping when a write fails), and reads the answer, all within wait. With
// halfClose the client's side is shut for writing after the last part.
func rawSend(t *testing.T, base, head string, parts []string, gap time.Duration, halfClose bool, wait time.Duration) rawAnswer {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(wait)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	go func() {
		for _, p := range parts {
			time.Sleep(gap)
			if _, err := io.WriteString(conn, p); err != nil {
				return
			}
		}
		if halfClose {
			_ = conn.(*net.TCPConn).CloseWrite()
		}
	}()
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within %s: %v", wait, err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	a := rawAnswer{status: res.StatusCode, header: res.Header, body: string(body)}
	_, err = br.ReadByte()
	// A server that closes with the client's unread bytes in its buffer resets the
	// connection instead of a FIN: closed, either way.
	a.closed, a.after = errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET), err
	return a
}

func (h *harness) wantUp(t *testing.T, gw *gatewaytest.Gateway, id string) {
	t.Helper()
	h.wantStates(map[string]string{id + "-query": "up"})
	res, err := gw.Get("/health/readiness")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("readiness answered %d: %s", res.StatusCode, body)
	}
}

// Finding 1: a client's broken upload was blamed on the member, and with
// health.member_ready_check on, readiness turned 503.
func TestAClientsBrokenRequestNeverChangesTheMembersState(t *testing.T) {
	m := startUploadMember(t)
	h := newHarness(t, harnessOptions{requestTimeout: 600 * time.Millisecond, memberReady: true}, node{id: "node-a", url: m.URL + "/fhir"})
	// The member is seen up once, by a request that works: then the gateway is ready.
	if res, body := h.get("/nodes/node-a/fhir/Patient"); res.StatusCode != 200 {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	gw := h.Serve()
	h.wantUp(t, gw, "node-a")

	post := func(framing string) string {
		return "POST " + testBase + "/nodes/node-a/fhir/Patient HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Bearer " + gw.Client + "\r\nContent-Type: " + fhir.MediaType + "\r\n" + framing + "\r\n"
	}
	cases := []struct {
		name      string
		head      string
		parts     []string
		gap       time.Duration
		halfClose bool
		status    int // 0: the client is gone, no answer is read
	}{
		{"a malformed chunk size", post("Transfer-Encoding: chunked\r\n"), []string{"zz\r\n{}\r\n0\r\n\r\n"}, 0, false, http.StatusBadRequest},
		{"a chunked body cut off", post("Transfer-Encoding: chunked\r\n"), []string{"40\r\n{\"resourceType\""}, 0, true, http.StatusBadRequest},
		{"a body shorter than its Content-Length", post("Content-Length: 1000\r\n"), []string{`{"resourceType":"Patient"}`}, 0, true, http.StatusBadRequest},
		{"a body dribbled past the request deadline", post("Content-Length: 1000\r\n"), slices.Repeat([]string{" "}, 100), 50 * time.Millisecond, false, http.StatusRequestTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := rawSend(t, gw.URL, c.head, c.parts, c.gap, c.halfClose, 10*time.Second)
			if a.status != c.status || !strings.Contains(a.body, `"OperationOutcome"`) {
				t.Fatalf("answered %d %s, want %d and an OperationOutcome", a.status, a.body, c.status)
			}
			if !a.closed {
				t.Fatalf("the connection stayed open after a body that was never read whole (the read after the answer: %v)", a.after)
			}
			h.wantUp(t, gw, "node-a")
		})
	}

	t.Run("a client that leaves in the middle of the answer", func(t *testing.T) {
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/octet-stream")
			for i := 0; i < 200; i++ {
				if _, err := w.Write(make([]byte, 64<<10)); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				time.Sleep(5 * time.Millisecond)
			}
		}))
		defer slow.Close()
		h2 := newHarness(t, harnessOptions{memberReady: true}, node{id: "node-s", url: slow.URL + "/fhir"})
		if res, _ := h2.get("/nodes/node-s/fhir/Binary/1"); res.StatusCode != 200 {
			t.Fatalf("%d", res.StatusCode)
		}
		gw2 := h2.Serve()
		res, err := gw2.Get("/nodes/node-s/fhir/Binary/1")
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("%v %v", res, err)
		}
		if _, err := io.ReadFull(res.Body, make([]byte, 100<<10)); err != nil {
			t.Fatal(err)
		}
		res.Body.Close() // the client leaves; the gateway's write fails
		time.Sleep(200 * time.Millisecond)
		h2.wantUp(t, gw2, "node-s")
	})
}

// Finding 2: a routed request whose body never arrives outlived request_timeout_ms.
// Since issue 30 a body within limits.max_routed_body_buffer_bytes is read before the
// member is asked: the member never sees a request whose body never came.
func TestARoutedBodyThatNeverArrivesIsA408AndTheMemberIsNeverAsked(t *testing.T) {
	var asked atomic.Int64
	m := startUploadMember(t)
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		m.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(counting.Close)
	const timeout = 500 * time.Millisecond
	h := newHarness(t, harnessOptions{requestTimeout: timeout}, node{id: "node-a", url: counting.URL + "/fhir"})
	gw := h.Serve()
	head := "POST " + testBase + "/nodes/node-a/fhir/Patient HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Bearer " + gw.Client + "\r\nContent-Type: " + fhir.MediaType + "\r\nContent-Length: 100\r\n\r\n"
	a := rawSend(t, gw.URL, head, []string{`{"resource`}, 0, false, 20*timeout)
	if a.status != http.StatusRequestTimeout || !strings.Contains(a.body, "did not arrive within server.request_timeout_ms") {
		t.Fatalf("answered %d %s, want 408", a.status, a.body)
	}
	if !a.closed {
		t.Fatal("the client's connection stayed open")
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the member was asked %d times for a body that never came", n)
	}
	h.wantStates(map[string]string{"node-a-query": "unknown"})
}

// A body longer than limits.max_routed_body_buffer_bytes takes its slots once that
// much has arrived and streams the rest: when the rest never comes, the member was
// sent the part that came and then loses its connection, its state unchanged.
func TestARoutedBodyPastTheBufferThatStopsIsA408AndTheMembersConnectionIsClosed(t *testing.T) {
	m := startUploadMember(t)
	const timeout = 500 * time.Millisecond
	h := newHarness(t, harnessOptions{requestTimeout: timeout, tables: "[limits]\nmax_routed_body_buffer_bytes = 16\n"}, node{id: "node-a", url: m.URL + "/fhir"})
	gw := h.Serve()
	head := "POST " + testBase + "/nodes/node-a/fhir/Patient HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Bearer " + gw.Client + "\r\nContent-Type: " + fhir.MediaType + "\r\nContent-Length: 100\r\n\r\n"
	a := rawSend(t, gw.URL, head, []string{`{"resourceType":"Patient",`}, 0, false, 20*timeout)
	if a.status != http.StatusRequestTimeout || !strings.Contains(a.body, "did not arrive within server.request_timeout_ms") {
		t.Fatalf("answered %d %s, want 408", a.status, a.body)
	}
	if !a.closed {
		t.Fatal("the client's connection stayed open")
	}
	double.Eventually(t, "the member's connection is closed, not waiting for the rest of the body", func() bool { return m.brokenBodies.Load() != 0 })
	h.wantStates(map[string]string{"node-a-query": "unknown"})
}

// The same deadline covers writing the answer: a client that reads nothing of a
// large routed answer is cut off, and the member keeps its state.
func TestAClientThatReadsNothingIsCutOffAtTheRequestDeadline(t *testing.T) {
	var memberCut atomic.Bool
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		chunk := make([]byte, 64<<10)
		for range 1024 { // 64 MiB, far more than the sockets between hold
			if _, err := w.Write(chunk); err != nil {
				memberCut.Store(true)
				return
			}
		}
	}))
	defer big.Close()
	const timeout = 500 * time.Millisecond
	h := newHarness(t, harnessOptions{requestTimeout: timeout}, node{id: "node-b", url: big.URL + "/fhir"})
	gw := h.Serve()
	u, _ := url.Parse(gw.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET "+testBase+"/nodes/node-b/fhir/Binary/1 HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Bearer "+gw.Client+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * timeout) // reading nothing, well past the deadline and its grace
	// What the sockets held is there to read; then the connection ends, cut.
	if err := conn.SetReadDeadline(time.Now().Add(20 * timeout)); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection was still open after %d bytes", n)
	}
	if n >= 64<<20 {
		t.Fatalf("the whole answer was written (%d bytes) to a client that read nothing in time", n)
	}
	h.wantStates(map[string]string{"node-b-query": "up"})
}

// emptyEntriesMember answers every search with a searchset of as many `{}` entries as
// fit in size bytes.
func emptyEntriesMember(t *testing.T, size int) *httptest.Server {
	t.Helper()
	const head, tail = `{"resourceType":"Bundle","type":"searchset","entry":[`, `{}]}`
	body := []byte(head + strings.Repeat("{},", (size-len(head)-len(tail))/3) + tail)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", fhir.MediaType)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

// Finding 3: four members each answering 16 MiB of `{}` entries took one search to
// 2.27 GB.
func TestMembersAnsweringMillionsOfEmptyEntriesAreRefusedWithoutKeepingThem(t *testing.T) {
	var nodes []node
	for i := range 4 {
		nodes = append(nodes, node{id: fmt.Sprintf("node-%d", i), url: emptyEntriesMember(t, config.DefaultMaxMemberBodyBytes-1024).URL + "/fhir"})
	}
	h := newHarness(t, harnessOptions{requestTimeout: 20 * time.Second}, nodes...)
	gw := h.Serve()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := gw.Get("/fhir/Patient")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	runtime.ReadMemStats(&after)
	if res.StatusCode != http.StatusBadGateway || strings.Count(string(body), "limits.max_member_entries") != 4 {
		t.Fatalf("answered %d %s, want 502 naming limits.max_member_entries for each member", res.StatusCode, body)
	}
	// The four bodies are read (64 MiB); what was kept of them is nothing. Before
	// the bound one search allocated more than 1 GiB for its entries.
	const bound = 512 << 20
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > bound {
		t.Fatalf("one search allocated %d MiB, more than %d MiB", alloc>>20, bound>>20)
	} else {
		t.Logf("one search over 4 members of 16 MiB of {} entries allocated %d MiB", alloc>>20)
	}
}

// concurrencyHost is one loopback server that serves many members (/m{i}/fhir) and
// records the most calls it had in flight at once, in total and per member.
type concurrencyHost struct {
	*httptest.Server
	mu             sync.Mutex
	now, peak      int
	perNow, perMax map[string]int
}

func startConcurrencyHost(t *testing.T, delay time.Duration) *concurrencyHost {
	t.Helper()
	c := &concurrencyHost{perNow: map[string]int{}, perMax: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		c.mu.Lock()
		c.now++
		c.peak = max(c.peak, c.now)
		c.perNow[id]++
		c.perMax[id] = max(c.perMax[id], c.perNow[id])
		c.mu.Unlock()
		time.Sleep(delay)
		c.mu.Lock()
		c.now--
		c.perNow[id]--
		c.mu.Unlock()
		w.Header().Set("Content-Type", fhir.MediaType)
		_, _ = io.WriteString(w, `{"resourceType":"Bundle","type":"searchset","total":0}`)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *concurrencyHost) peaks() (total, perMember int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.perMax {
		perMember = max(perMember, n)
	}
	return c.peak, perMember
}

// searchAll sends n searches of path to gw at once and returns their statuses.
func searchAll(t *testing.T, gw *gatewaytest.Gateway, path string, n int) []int {
	t.Helper()
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := gw.Get(path)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			statuses[i] = res.StatusCode
		})
	}
	wg.Wait()
	return statuses
}

// Finding 4: fan-out had no limit: 300 searches on 2,000 members opened 13,535
// connections to one member host.
func TestAFanOutNeverHasMoreMemberCallsInFlightThanItsLimits(t *testing.T) {
	t.Run("in total", func(t *testing.T) {
		host := startConcurrencyHost(t, 20*time.Millisecond)
		var nodes []node
		for i := range 50 {
			nodes = append(nodes, node{id: fmt.Sprintf("m%d", i), url: fmt.Sprintf("%s/m%d/fhir", host.URL, i)})
		}
		h := newHarness(t, harnessOptions{requestTimeout: 10 * time.Second, tables: "[limits]\nmax_member_calls = 8\nmax_member_calls_per_member = 2\n"}, nodes...)
		gw := h.Serve()
		for _, s := range searchAll(t, gw, "/fhir/Patient", 6) {
			if s != 200 {
				t.Fatalf("a search answered %d", s)
			}
		}
		total, per := host.peaks()
		if total > 8 || per > 2 {
			t.Fatalf("the member host had %d calls in flight at once (%d to one member), more than 8 (2)", total, per)
		}
		t.Logf("peak member calls in flight: %d in total, %d to one member", total, per)
	})
	t.Run("to one member", func(t *testing.T) {
		host := startConcurrencyHost(t, 20*time.Millisecond)
		h := newHarness(t, harnessOptions{requestTimeout: 10 * time.Second, tables: "[limits]\nmax_member_calls_per_member = 2\n"},
			node{id: "m0", url: host.URL + "/m0/fhir"})
		gw := h.Serve()
		statuses := append(searchAll(t, gw, "/fhir/Patient", 10), searchAll(t, gw, "/nodes/m0/fhir/Patient", 10)...)
		for _, s := range statuses {
			if s != 200 {
				t.Fatalf("a request answered %d", s)
			}
		}
		if _, per := host.peaks(); per > 2 {
			t.Fatalf("the member had %d calls in flight at once, more than 2", per)
		}
	})
}

// A request whose fan-out would take the member calls still to make past
// limits.max_queued_member_calls is shed before any member is asked.
func TestAFanOutPastTheQueueIsShedBeforeAnyMemberIsAsked(t *testing.T) {
	var nodes []node
	for i := range 10 {
		nodes = append(nodes, node{id: fmt.Sprintf("node-%d", i), opts: members.Options{Knobs: double.Knobs{Delay: 200 * time.Millisecond}}})
	}
	h := newHarness(t, harnessOptions{requestTimeout: 5 * time.Second,
		tables: "[limits]\nmax_registry_members = 10\nmax_member_calls = 10\nmax_member_calls_per_member = 10\nmax_queued_member_calls = 10\n"}, nodes...)
	gw := h.Serve()
	var served, shed atomic.Int64
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			res, err := gw.Get("/fhir/Patient")
			if err != nil {
				t.Error(err)
				return
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			switch {
			case res.StatusCode == 200:
				served.Add(1)
			case res.StatusCode == 503 && res.Header.Get("Retry-After") == "1" && strings.Contains(string(body), "limits.max_queued_member_calls allows (10)"):
				shed.Add(1)
			default:
				t.Errorf("answered %d %s", res.StatusCode, body)
			}
		})
	}
	wg.Wait()
	var asked int64
	for _, m := range h.members {
		asked += int64(m.Requests())
	}
	if served.Load() == 0 || shed.Load() == 0 || asked != 10*served.Load() {
		t.Fatalf("%d served, %d shed, the members asked %d times: want some of each, 10 calls per served search", served.Load(), shed.Load(), asked)
	}
}

// Liveness stays answered while a flood of searches is shed: the in-flight limit
// refuses what it cannot serve before any member is asked, and the health routes are
// not behind it. The liveness p99 is logged, not asserted.
func TestLivenessIsAnsweredWhileAFloodIsShed(t *testing.T) {
	var nodes []node
	for i := range 8 {
		nodes = append(nodes, node{id: fmt.Sprintf("node-%d", i), opts: members.Options{Knobs: double.Knobs{Delay: 100 * time.Millisecond}}})
	}
	h := newHarness(t, harnessOptions{requestTimeout: 5 * time.Second, tables: "[limits]\nmax_in_flight_requests = 4\n"}, nodes...)
	gw := h.Serve()

	stop := make(chan struct{})
	var latencies []time.Duration
	livenessFailed := 0
	var probes sync.WaitGroup
	probes.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			start := time.Now()
			res, err := gw.Get("/health")
			if err != nil {
				livenessFailed++
				continue
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			latencies = append(latencies, time.Since(start))
			if res.StatusCode != 200 {
				livenessFailed++
			}
		}
	})

	var ok, shed, other atomic.Int64
	for range 3 { // three waves of forty searches: bounded
		var wg sync.WaitGroup
		for range 40 {
			wg.Go(func() {
				res, err := gw.Get("/fhir/Patient")
				if err != nil {
					other.Add(1)
					return
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				switch {
				case res.StatusCode == 200:
					ok.Add(1)
				case res.StatusCode == 503 && res.Header.Get("Retry-After") == "1" && strings.Contains(string(body), "limits.max_in_flight_requests"):
					shed.Add(1)
				default:
					other.Add(1)
				}
			})
		}
		wg.Wait()
	}
	close(stop)
	probes.Wait()

	if shed.Load() == 0 || ok.Load() == 0 || other.Load() != 0 {
		t.Fatalf("%d searches served, %d shed with Retry-After, %d otherwise: want some of each of the first two, none else", ok.Load(), shed.Load(), other.Load())
	}
	if livenessFailed != 0 || len(latencies) == 0 {
		t.Fatalf("liveness failed %d times of %d", livenessFailed, len(latencies)+livenessFailed)
	}
	// A shed search asked no member: each member saw the served ones only.
	var asked int64
	for _, m := range h.members {
		asked += int64(m.Requests())
	}
	if want := ok.Load() * int64(len(nodes)); asked != want {
		t.Fatalf("the members were asked %d times, want %d (8 per served search)", asked, want)
	}
	slices.Sort(latencies)
	t.Logf("%d searches served, %d shed; liveness answered %d probes, p50 %s, p99 %s", ok.Load(), shed.Load(), len(latencies),
		latencies[len(latencies)/2], latencies[len(latencies)*99/100])
}

// Finding 5: a member that leads back to the gateway made one search nest 9,996
// requests.
func TestAMemberThatLeadsBackToTheGatewayCostsOneNestedRequest(t *testing.T) {
	var target atomic.Pointer[url.URL]
	var through atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A proxy config check cannot see through; it gives up after 20 requests so
		// that a gateway without loop detection still ends the test.
		if through.Add(1) > 20 {
			http.Error(w, "too many", http.StatusInternalServerError)
			return
		}
		httputil.NewSingleHostReverseProxy(target.Load()).ServeHTTP(w, r)
	}))
	defer proxy.Close()
	h := newHarness(t, harnessOptions{requestTimeout: 5 * time.Second},
		node{id: "node-a", opts: members.Options{Entries: 1}}, node{id: "loop", url: proxy.URL + testBase + "/fhir"})
	gw := h.Serve()
	u, _ := url.Parse(gw.URL)
	u.Path = ""
	target.Store(u)

	res, err := gw.Get("/fhir/Patient")
	if err != nil {
		t.Fatal(err)
	}
	var b searchAnswer
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if err := json.Unmarshal(body, &b); err != nil || res.StatusCode != 200 {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	if n := through.Load(); n != 1 {
		t.Fatalf("the loop went through the proxy %d times, want 1", n)
	}
	var loop *federation.Record
	for i, r := range b.Meta.Federation {
		if r.ID == "loop" {
			loop = &b.Meta.Federation[i]
		}
	}
	if loop == nil || loop.Status != http.StatusLoopDetected || b.matches() != 1 {
		t.Fatalf("records %+v, %d matches", b.Meta.Federation, b.matches())
	}

	// Routed, the nested request's 508 comes back.
	through.Store(0)
	res, err = gw.Get("/nodes/loop/fhir/Patient")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusLoopDetected || !strings.Contains(string(body), "OperationOutcome") || through.Load() != 1 {
		t.Fatalf("routed: %d %s after %d requests through the proxy", res.StatusCode, body, through.Load())
	}
}

// Finding 10: spoofed forwarding headers reached members unchanged, and the real peer
// was recorded nowhere.
func TestARoutedRequestNamesTheRealPeerNotWhatTheClientClaims(t *testing.T) {
	spoof := http.Header{
		"X-Forwarded-For": {"6.6.6.6"}, "Forwarded": {"for=6.6.6.6;host=evil.example"},
		"X-Real-Ip": {"6.6.6.6"}, "X-Forwarded-Host": {"evil.example"}, "True-Client-Ip": {"6.6.6.6"},
	}

	t.Run("from an untrusted peer", func(t *testing.T) {
		var logMu sync.Mutex
		var logs []string
		log := funcr.New(func(prefix, args string) {
			logMu.Lock()
			logs = append(logs, args)
			logMu.Unlock()
		}, funcr.Options{Verbosity: 1})
		h := newHarness(t, harnessOptions{log: log}, node{id: "node-a"})
		gw := h.Serve()
		got := routedWith(t, gw, spoof, h.members["node-a"])
		for k, vs := range got.Header {
			for _, v := range vs {
				if strings.Contains(v, "6.6.6.6") || strings.Contains(v, "evil.example") {
					t.Fatalf("the member was sent %s: %s", k, v)
				}
			}
		}
		if got.Header.Get("X-Forwarded-For") != "127.0.0.1" || got.Header.Get("X-Real-Ip") != "127.0.0.1" ||
			!strings.HasPrefix(got.Header.Get("Forwarded"), "for=127.0.0.1;") || !strings.HasPrefix(got.Header.Get("Via"), "1.1 ferrofed-") {
			t.Fatalf("the member was sent %v", got.Header)
		}
		logMu.Lock()
		defer logMu.Unlock()
		if !slices.ContainsFunc(logs, func(l string) bool {
			return strings.Contains(l, `"msg"="Served request"`) && strings.Contains(l, `"route"="/api/nodes/:node/fhir/*path"`) && strings.Contains(l, `"peer"="127.0.0.1"`)
		}) {
			t.Fatalf("no access log line names the peer: %q", logs)
		}
	})
	t.Run("from a trusted proxy", func(t *testing.T) {
		h := newHarness(t, harnessOptions{tables: "[forwarding]\ntrusted_proxies = [\"127.0.0.0/8\"]\nvia_id = \"gw-test\"\n"}, node{id: "node-a"})
		gw := h.Serve()
		got := routedWith(t, gw, spoof, h.members["node-a"])
		if got.Header.Get("X-Forwarded-For") != "6.6.6.6, 127.0.0.1" || got.Header.Get("X-Real-Ip") != "6.6.6.6" ||
			!strings.HasPrefix(got.Header.Get("Forwarded"), "for=6.6.6.6;host=evil.example, for=127.0.0.1;") ||
			got.Header.Get("Via") != "1.1 gw-test" || got.Header.Get("X-Forwarded-Host") == "evil.example" {
			t.Fatalf("the member was sent %v", got.Header)
		}
	})
}

// routedWith sends a routed GET with header to gw and returns what m saw of it.
func routedWith(t *testing.T, gw *gatewaytest.Gateway, header http.Header, m *members.Server) members.Request {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, gw.URL+"/nodes/node-a/fhir/Patient", nil)
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := gw.Send(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("answered %d", res.StatusCode)
	}
	return m.LastRequest()
}

// Finding 10: a member's 101 Switching Protocols reached a client that never asked to
// upgrade, and hung it.
func TestAMembersUnaskedSwitchingProtocolsIsABadGatewayAnswer(t *testing.T) {
	held := make(chan struct{})
	defer close(held)
	switcher := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = buf.Flush()
		select { // the switched connection is held open, as a real upgrade is
		case <-held:
		case <-time.After(30 * time.Second):
		}
	}))
	defer switcher.Close()
	h := newHarness(t, harnessOptions{requestTimeout: 10 * time.Second}, node{id: "node-u", url: switcher.URL + "/fhir"})
	gw := h.Serve()
	// Each request is given up after 5 s.
	get := func(path string) (*reply, []byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gw.URL+path, nil)
		res, err := gw.Send(req)
		if err != nil {
			return nil, nil, err
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return replyOf(res), body, nil
	}

	res, body, err := get("/nodes/node-u/fhir/Patient")
	if err != nil {
		t.Fatalf("the routed request hung: %v", err)
	}
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "answered HTTP 101") {
		t.Fatalf("routed: %d %s", res.StatusCode, body)
	}

	res, body, err = get("/fhir/Patient")
	if err != nil {
		t.Fatalf("the search hung: %v", err)
	}
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "answered HTTP 101") {
		t.Fatalf("search: %d %s", res.StatusCode, body)
	}
	// It answered: it is up, however wrong the answer.
	h.wantStates(map[string]string{"node-u-query": "up"})
}

// Finding 10: search query strings had no length limit (100 searches of 900 KB took
// the gateway from 61 MB to 915 MB): net/http read a head of up to 1 MiB whole.
func TestAQueryLongerThanTheLimitIs414BeforeAnyMemberIsAsked(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a"})
	gw := h.Serve()
	// Past the limit: 414. Past the limit and the head's room for headers (the 900 KB
	// of the finding): net/http refuses the head before it is read whole, 431.
	for _, c := range []struct {
		query  string
		status int
		says   string
	}{
		{"name=" + strings.Repeat("a", config.DefaultMaxQueryBytes), http.StatusRequestURITooLong, "limits.max_query_bytes (16384 bytes)"},
		{"name=" + strings.Repeat("a", 900<<10), http.StatusRequestHeaderFieldsTooLarge, ""},
	} {
		for _, path := range []string{"/fhir/Patient?", "/nodes/node-a/fhir/Patient?"} {
			res, err := gw.Get(path + c.query)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != c.status || !strings.Contains(string(body), c.says) {
				t.Fatalf("%s (%d bytes): %d %s", path, len(c.query), res.StatusCode, body)
			}
		}
	}
	if n := h.members["node-a"].Requests(); n != 0 {
		t.Fatalf("the member was asked %d times", n)
	}
	// A query of exactly the limit is served.
	res, err := gw.Get("/fhir/Patient?name=" + strings.Repeat("a", config.DefaultMaxQueryBytes-len("name=")))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("a query of the limit answered %d", res.StatusCode)
	}
}

func TestTheSmallestQueryLimitHoldsANextLink(t *testing.T) {
	if n := len("_page=") + searchquery.MaxPageTokenBytes; n > config.MinQueryBytes {
		t.Fatalf("a next link's query is up to %d bytes, more than the lowest limits.max_query_bytes (%d)", n, config.MinQueryBytes)
	}
}

func TestViaCarriesReadsEveryEntry(t *testing.T) {
	cases := []struct {
		values []string
		want   bool
	}{
		{nil, false},
		{[]string{"1.1 gw-a"}, true},
		{[]string{"1.0 fred, 1.1 gw-a (ferrofed)"}, true},
		{[]string{"1.1 proxy", "HTTP/1.1 gw-a:8080"}, false},
		{[]string{"1.1 gw-ab"}, false},
		{[]string{"gw-a"}, false},
	}
	for _, c := range cases {
		if got := proxy.ViaCarries(c.values, "gw-a"); got != c.want {
			t.Errorf("proxy.ViaCarries(%q) = %v, want %v", c.values, got, c.want)
		}
	}
}

// Issue 30: a routed call waits for its slots at most limits.member_call_wait_ms; past
// it the client is answered 503 with Retry-After and an OperationOutcome, the member is
// never asked and keeps its state. Before, it waited the whole request budget for a
// 504.
func TestARoutedCallThatGetsNoSlotWithinTheWaitIs503AndTheMemberKeepsItsState(t *testing.T) {
	h := newHarness(t, harnessOptions{requestTimeout: 5 * time.Second,
		tables: "[limits]\nmax_member_calls_per_member = 1\nmember_call_wait_ms = 100\n"},
		node{id: "node-a", opts: members.Options{Knobs: double.Knobs{Delay: 1500 * time.Millisecond}}})
	first := make(chan int, 1)
	go func() {
		res, _, err := h.do(t.Context(), http.MethodGet, "/nodes/node-a/fhir/Patient/1", "", nil)
		if err != nil {
			first <- 0
			return
		}
		first <- res.StatusCode
	}()
	for h.members["node-a"].Requests() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	res, body := h.get("/nodes/node-a/fhir/Patient/2")
	took := time.Since(start)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != federation.ShedRetryAfter ||
		!strings.Contains(string(body), `"code":"throttled"`) || !strings.Contains(string(body), "limits.member_call_wait_ms") {
		t.Fatalf("answered %d (Retry-After %q) %s after %s; want 503, Retry-After: 1, a throttled OperationOutcome", res.StatusCode, res.Header.Get("Retry-After"), body, took)
	}
	if strings.Contains(string(body), h.members["node-a"].URL) {
		t.Fatalf("the answer names the member's address: %s", body)
	}
	if n := h.members["node-a"].Requests(); n != 1 {
		t.Fatalf("the member was asked %d times, want once", n)
	}
	if s := <-first; s != 200 {
		t.Fatalf("the call that held the slot answered %d", s)
	}
	h.wantStates(map[string]string{"node-a-query": "up"})
}

// Issue 30: a call left with less than its least useful budget (limits.min_member_call_ms,
// or half its budget) once it has its slots is never sent. Before, a call that waited
// for the slot until 200 ms of its budget were left was sent, timed out, and marked the
// member down though the member answered every call it had time for.
//
// The budget is 1.4 s (1.5 s less the answer's margin); the least useful part of it
// 400 ms, so the second call waits until 1 s; the first holds the slot 1.2 s.
func TestACallLeftWithTooLittleBudgetIsNeverSentAndTheMemberStaysUp(t *testing.T) {
	h := newHarness(t, harnessOptions{requestTimeout: 1500 * time.Millisecond,
		tables: "[limits]\nmax_member_calls_per_member = 1\nmember_call_wait_ms = 3600000\nmin_member_call_ms = 400\n"},
		node{id: "node-a", opts: members.Options{Knobs: double.Knobs{Delay: 1200 * time.Millisecond}}})
	first := make(chan int, 1)
	go func() {
		res, _, err := h.do(t.Context(), http.MethodGet, "/nodes/node-a/fhir/Patient/1", "", nil)
		if err != nil {
			first <- 0
			return
		}
		first <- res.StatusCode
	}()
	for h.members["node-a"].Requests() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	res, body := h.get("/nodes/node-a/fhir/Patient/2")
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != federation.ShedRetryAfter || !strings.Contains(string(body), "limits.min_member_call_ms") {
		t.Fatalf("answered %d %s; want 503 with Retry-After naming limits.min_member_call_ms", res.StatusCode, body)
	}
	if s := <-first; s != 200 {
		t.Fatalf("the call that held the slot answered %d", s)
	}
	if n := h.members["node-a"].Requests(); n != 1 {
		t.Fatalf("the member was asked %d times, want once", n)
	}
	h.wantStates(map[string]string{"node-a-query": "up"})
}
