package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"
)

// The health routes' own cost, measured against a bare net/http server answering the
// same bodies with the same headers, both on loopback in this process and driven by the
// same small keep-alive HTTP/1.1 client (cheap enough not to hide the servers' cost, as
// net/http's client would). Each round runs the bare server and the gateway one after
// the other, in alternating order, so that a machine shared with other work loads both
// alike; the figures are ratios of one run.

// healthClients is how many keep-alive connections ask at once (wrk's -c).
const healthClients = 32

// rawClient is one keep-alive HTTP/1.1 connection that sends one prepared request and
// reads its answer: the status line, the headers up to Content-Length, the body.
type rawClient struct {
	conn net.Conn
	r    *bufio.Reader
	req  []byte
}

func dialRaw(addr, path string) (*rawClient, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &rawClient{conn: conn, r: bufio.NewReaderSize(conn, 4096),
		req: []byte("GET " + path + " HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\n\r\n")}, nil
}

var contentLength = []byte("content-length:")

// do sends the request and reads the answer; it returns the status code.
func (c *rawClient) do() (int, error) {
	if _, err := c.conn.Write(c.req); err != nil {
		return 0, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 {
		return 0, fmt.Errorf("status line %q", line)
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("status line %q", line)
	}
	n := -1
	for {
		line, err = c.r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(line) <= 2 {
			break
		}
		if len(line) > len(contentLength) && bytes.EqualFold(line[:len(contentLength)], contentLength) {
			n, err = strconv.Atoi(string(bytes.TrimSpace(line[len(contentLength):])))
			if err != nil {
				return 0, fmt.Errorf("header %q", line)
			}
		}
	}
	if n < 0 {
		return 0, errors.New("no Content-Length")
	}
	_, err = c.r.Discard(n)
	return code, err
}

// phase is what one target answered in one round: its requests' latencies and the
// wall time they took.
type phase struct {
	latencies []time.Duration
	elapsed   time.Duration
}

// hammer sends perClient requests on each of clients connections to addr+path at once.
func hammer(tb testing.TB, addr, path string, clients, perClient int) phase {
	tb.Helper()
	conns := make([]*rawClient, clients)
	for i := range conns {
		c, err := dialRaw(addr, path)
		if err != nil {
			tb.Fatal(err)
		}
		conns[i] = c
	}
	defer func() {
		for _, c := range conns {
			c.conn.Close()
		}
	}()
	lat := make([][]time.Duration, clients)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	begin := time.Now()
	for i, c := range conns {
		lat[i] = make([]time.Duration, 0, perClient)
		wg.Go(func() {
			for range perClient {
				t0 := time.Now()
				code, err := c.do()
				if err == nil && code != http.StatusOK {
					err = fmt.Errorf("%s answered %d", path, code)
				}
				if err != nil {
					errs <- err
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	p := phase{elapsed: time.Since(begin)}
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatal(err)
	}
	for _, l := range lat {
		p.latencies = append(p.latencies, l...)
	}
	return p
}

// tally is the phases of one target across rounds.
type tally struct {
	latencies []time.Duration
	elapsed   time.Duration
}

func (t *tally) add(p phase) {
	t.latencies = append(t.latencies, p.latencies...)
	t.elapsed += p.elapsed
}

func (t *tally) rps() float64 { return float64(len(t.latencies)) / t.elapsed.Seconds() }

func (t *tally) p99() time.Duration { return p99(t.latencies) }

func p99(latencies []time.Duration) time.Duration {
	s := slices.Clone(latencies)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)*99/100]
}

// pairs are the ratios of paired phases (the gateway's to the bare server's, loaded to
// idle), one per round. Their median is the figure: a burst of someone else's work on a
// shared machine spoils the round it lands in, not the median, and the spread
// (min..max) says how noisy the run was.
type pairs struct{ throughput, p99 []float64 }

func (p *pairs) add(subject, baseline phase) {
	p.throughput = append(p.throughput, (float64(len(subject.latencies))/subject.elapsed.Seconds())/
		(float64(len(baseline.latencies))/baseline.elapsed.Seconds()))
	p.p99 = append(p.p99, float64(p99(subject.latencies))/float64(p99(baseline.latencies)))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func report(b *testing.B, name string, xs []float64) {
	b.ReportMetric(median(xs), name)
	b.ReportMetric(slices.Min(xs), name+"_min")
	b.ReportMetric(slices.Max(xs), name+"_max")
}

// benchGateway runs the real server on loopback with toml (listen and the termination
// message path are set here) and returns its host:port once it is ready.
func benchGateway(tb testing.TB, toml string, opts ...Option) string {
	tb.Helper()
	cfg := parse(tb, "[server]\nlisten = \"127.0.0.1:0\"\ntermination_message_path = \"\"\n"+toml)
	s, err := New(cfg, logr.Discard(), append(opts, WithBootPoll(5*time.Millisecond))...)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	tb.Cleanup(func() { cancel(); <-done })
	addr := s.Addr().String()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c, err := dialRaw(addr, "/health/readiness"); err == nil {
			code, err := c.do()
			c.conn.Close()
			if err == nil && code == http.StatusOK {
				return addr
			}
		}
		if time.Now().After(deadline) {
			tb.Fatal("the gateway never got ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fetch answers one GET of addr+path: its body and headers, for the bare server to copy.
func fetch(tb testing.TB, addr, path string) ([]byte, http.Header) {
	tb.Helper()
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Get("http://" + addr + path)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return body, resp.Header
}

// bareServer answers every path in bodies with that body and the gateway's headers,
// from a plain net/http server with the same ReadHeaderTimeout: the floor.
func bareServer(tb testing.TB, bodies map[string][]byte) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	lengths := map[string]string{}
	for p, b := range bodies {
		lengths[p] = strconv.Itoa(len(b))
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := bodies[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Length", lengths[r.URL.Path])
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	})}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// BenchmarkHealthRoutesAgainstBare reports, for {base}/health and
// {base}/health/readiness, the gateway's throughput and p99 with healthClients
// keep-alive clients as ratios to the bare net/http server of the same run, the median
// of 20 paired rounds per iteration (goals: throughput ≥ 0.95×, p99 ≤ 1.2×).
func BenchmarkHealthRoutesAgainstBare(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	gw := benchGateway(b, "")
	routes := []string{"/health", "/health/readiness"}
	bodies := map[string][]byte{}
	for _, r := range routes {
		bodies[r], _ = fetch(b, gw, r)
	}
	bare := bareServer(b, bodies)
	// Many short rounds rather than a few long ones: a burst of someone else's work on
	// the machine then lands on both targets alike.
	const rounds, perClient = 20, 25
	for _, route := range routes {
		b.Run(route, func(b *testing.B) {
			var g, f tally
			var ratios pairs
			hammer(b, gw, route, healthClients, 50) // warm both: connections, caches
			hammer(b, bare, route, healthClients, 50)
			for range b.N {
				for i := range rounds {
					// Alternate the order, so neither always runs second.
					var fp, gp phase
					if i%2 == 0 {
						fp = hammer(b, bare, route, healthClients, perClient)
						gp = hammer(b, gw, route, healthClients, perClient)
					} else {
						gp = hammer(b, gw, route, healthClients, perClient)
						fp = hammer(b, bare, route, healthClients, perClient)
					}
					f.add(fp)
					g.add(gp)
					ratios.add(gp, fp)
				}
			}
			b.ReportMetric(f.rps(), "bare_req/s")
			b.ReportMetric(g.rps(), "gateway_req/s")
			b.ReportMetric(float64(f.p99().Microseconds()), "bare_p99_µs")
			b.ReportMetric(float64(g.p99().Microseconds()), "gateway_p99_µs")
			report(b, "throughput_ratio", ratios.throughput)
			report(b, "p99_ratio", ratios.p99)
		})
	}
}

// slowSurface serves GET /fhir/slow after slowDelay (or its context's end): a
// data-plane request that holds its connection and goroutine, as a member's answer
// does.
type slowSurface struct{ testSurface }

// slowDelay is how long a slow request takes: a member that answers in half a second,
// so that 256 of them in flight are 512 requests/s. It measures what many requests in
// flight (their goroutines, connections, timers and tracking) cost a probe, not a
// saturated CPU: no server answers its probes on time from a CPU it has not got.
const slowDelay = 500 * time.Millisecond

func (s *slowSurface) RegisterDataPlane(g *gin.RouterGroup) {
	g.GET("/fhir/slow", func(c *gin.Context) {
		t := time.NewTimer(slowDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.Request.Context().Done():
		}
		c.Data(http.StatusOK, "application/fhir+json", []byte(`{"resourceType":"Bundle","type":"searchset","total":0}`+"\n"))
	})
}

// slowLoad keeps n slow data-plane requests in flight on addr until stop is called:
// each of n connections asks /fhir/slow again as soon as it is answered. The
// connections start spread over one slowDelay, so that the requests arrive and end at
// a steady rate (n per slowDelay) as a real client population's do, not in waves of n
// at once.
func slowLoad(tb testing.TB, addr string, n int) (stop func() int) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	served := 0
	for i := range n {
		c, err := dialRaw(addr, "/fhir/slow")
		if err != nil {
			tb.Fatal(err)
		}
		wg.Go(func() {
			defer c.conn.Close()
			time.Sleep(time.Duration(i) * slowDelay / time.Duration(n))
			for ctx.Err() == nil {
				if code, err := c.do(); err != nil || code != http.StatusOK {
					return
				}
				mu.Lock()
				served++
				mu.Unlock()
			}
		})
	}
	return func() int {
		cancel()
		wg.Wait()
		return served
	}
}

// BenchmarkLivenessUnderSlowLoad reports the liveness p99 while 256 slow data-plane
// requests are in flight as a ratio to its p99 idle, the median of rounds of one idle
// and one loaded phase each (goal ≤ 2×).
func BenchmarkLivenessUnderSlowLoad(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	gw := benchGateway(b, "", withSurfaces(&slowSurface{testSurface{name: "slow"}}))
	const inFlight, probes = 256, 500
	var idle, loaded tally
	var ratios pairs
	slowServed := 0
	hammer(b, gw, "/health", 1, 100)
	const rounds = 4
	for range b.N {
		for range rounds {
			ip := hammer(b, gw, "/health", 1, probes)
			stop := slowLoad(b, gw, inFlight)
			time.Sleep(2 * slowDelay) // every connection started, every slow request in flight
			lp := hammer(b, gw, "/health", 1, probes)
			slowServed += stop()
			idle.add(ip)
			loaded.add(lp)
			ratios.add(lp, ip)
		}
	}
	b.ReportMetric(float64(idle.p99().Microseconds()), "idle_p99_µs")
	b.ReportMetric(float64(loaded.p99().Microseconds()), "loaded_p99_µs")
	report(b, "p99_ratio", ratios.p99)
	b.ReportMetric(float64(slowServed)/float64(b.N*rounds), "slow_served/round")
}
