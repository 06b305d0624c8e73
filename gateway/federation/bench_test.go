package federation_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// The benchmarks send their requests to the gateway's own server (the server
// assemble.New builds: recovery, in-flight gauge, access log, request counter,
// readiness gate and request deadline in front of the surface; Gateway.Serve), not to
// the harness's mount without it: the figure is what a client of a deployed gateway
// waits for.

// dialCounter counts the connections a transport opens, so that a benchmark can
// check that every path it compares reuses its connections: a path that dialed per
// request would pay a handshake the other does not.
type dialCounter struct{ n atomic.Int64 }

func (d *dialCounter) wrap(t *http.Transport) *http.Transport {
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.n.Add(1)
		return dial(ctx, network, addr)
	}
	return t
}

// benchClient is the one client every compared path is sent with: keep-alive, enough
// idle connections for the benchmark's one request at a time, dials counted, and
// token (the data plane asks for one) sent on every request, to every path alike.
func benchClient(dials *dialCounter, token string) *http.Client {
	return &http.Client{Transport: bearer{token: token, next: dials.wrap(&http.Transport{MaxIdleConnsPerHost: 4})}}
}

// bearer sends its token with every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (t bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.next.RoundTrip(r)
}

// memberTransport is the member transport the surface makes for itself
// (outbound.NewTransport with federation.MaxMemberHeaderBytes), the connections it
// opens to members counted.
func memberTransport(dials *dialCounter) http.RoundTripper {
	return dials.wrap(outbound.NewTransport(federation.MaxMemberHeaderBytes))
}

// fetch GETs url and reads the whole answer, which must be a 200.
func fetch(client *http.Client, url string) error {
	res, err := client.Get(url)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", url, res.StatusCode)
	}
	if err != nil {
		return fmt.Errorf("GET %s: reading the answer: %w", url, err)
	}
	return nil
}

func timedGet(b *testing.B, client *http.Client, url string) time.Duration {
	start := time.Now()
	if err := fetch(client, url); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// bareHop is the least one more HTTP hop costs on this machine: a net/http server that
// sends each request on to the member with a pooled transport and copies the answer
// back, with none of the gateway's routing, checks or bookkeeping. The gateway's time
// above it is the gateway's own; the hop's time above the direct call is the hop's,
// which no proxy avoids.
func bareHop(b *testing.B, member *members.Server, dials *dialCounter) string {
	client := &http.Client{Transport: dials.wrap(&http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true})}
	hop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+member.Addr+r.URL.RequestURI(), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for k, vs := range r.Header {
			out.Header[k] = vs
		}
		res, err := client.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		for k, vs := range res.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(res.StatusCode)
		_, _ = io.Copy(w, res.Body) // a broken copy shows as a broken answer to fetch
	}))
	b.Cleanup(hop.Close)
	b.Cleanup(client.CloseIdleConnections)
	return hop.URL
}

// BenchmarkFanOut is a federated search over three loopback members that answer after
// 20, 40 and 60 ms. The query can never be faster than its slowest member; the
// overhead-ms metric is what the gateway adds on top of it (goal: at most 2 ms).
//
// Interleaved with the queries, the three members are also asked directly, in
// parallel, as a client doing the fan-out itself would (direct-ms), and the same
// through a bare hop each (bareHop). overhead-vs-direct-ms is the gateway's time over
// the direct fan-out, and floor-vs-direct-ms what one more hop costs on this machine
// after the idle wait, which no gateway avoids. The baseline asks all three because
// the members share this process's timers: asking the slowest alone, its 60 ms timer
// fired about 0.5 ms earlier than when the 20 and 40 ms timers had fired before it
// (measured), a difference that is no part of the gateway's cost and that members in
// processes of their own never see.
func BenchmarkFanOut(b *testing.B) {
	const slowest = 60 * time.Millisecond
	ids := []string{"node-20", "node-40", "node-60"}
	var dials dialCounter
	h := newHarness(b, harnessOptions{transport: memberTransport(&dials)},
		node{id: ids[0], opts: members.Options{Entries: 10, Knobs: double.Knobs{Delay: 20 * time.Millisecond}}},
		node{id: ids[1], opts: members.Options{Entries: 10, Knobs: double.Knobs{Delay: 40 * time.Millisecond}}},
		node{id: ids[2], opts: members.Options{Entries: 10, Knobs: double.Knobs{Delay: slowest}}})
	client := benchClient(&dials, h.Client)
	const search = "/Patient?name=smith"
	url := h.Serve().URL + "/fhir" + search
	var direct, hops []string
	for _, id := range ids {
		direct = append(direct, h.members[id].URL+search)
		hops = append(hops, bareHop(b, h.members[id], &dials)+"/fhir"+search)
	}
	fanOut := func(urls []string) time.Duration {
		start := time.Now()
		errs := make([]error, len(urls))
		var wg sync.WaitGroup
		for i, u := range urls {
			wg.Go(func() { errs[i] = fetch(client, u) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	timedGet(b, client, url) // warm the connection pools
	fanOut(direct)
	fanOut(hops)
	warm := dials.n.Load()
	b.ResetTimer()
	var viaGateway, viaDirect, viaHops time.Duration
	for i := 0; i < b.N; i++ {
		viaGateway += timedGet(b, client, url)
		b.StopTimer()
		viaDirect += fanOut(direct)
		viaHops += fanOut(hops)
		b.StartTimer()
	}
	b.StopTimer()
	if n := dials.n.Load() - warm; n > 0 {
		b.Fatalf("%d connections were dialed during the run: some path did not reuse its connections", n)
	}
	n := time.Duration(b.N)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(viaGateway/n-slowest), "overhead-ms")
	b.ReportMetric(ms(viaDirect/n), "direct-ms")
	b.ReportMetric(ms(viaGateway/n-viaDirect/n), "overhead-vs-direct-ms")
	b.ReportMetric(ms(viaHops/n-viaDirect/n), "floor-vs-direct-ms")
}

// BenchmarkRouted compares a request routed through the gateway to the same request
// sent to the member directly, and to the same request through a bare net/http hop
// (bareHop), interleaved in one run so that all three see the same machine, sent with
// the same client, every connection reused. ratio is gateway time over direct time
// (goal: at most 1.2); floor-ratio is the bare hop's, the least any proxy on this
// machine can do.
//
// It runs for a member that answers at once (then the hop is all there is to
// measure, and the ratio is bounded below by the floor, about 2: the request and the
// answer cross loopback twice), one that takes 1 ms and one that takes 5 ms, as a
// FHIR server answering a read does.
func BenchmarkRouted(b *testing.B) {
	for _, c := range []struct {
		name  string
		delay time.Duration
	}{{"member-0ms", 0}, {"member-1ms", time.Millisecond}, {"member-5ms", 5 * time.Millisecond}} {
		b.Run(c.name, func(b *testing.B) {
			var dials dialCounter
			h := newHarness(b, harnessOptions{transport: memberTransport(&dials)}, node{id: "node-a", opts: members.Options{Knobs: double.Knobs{Delay: c.delay}}})
			client := benchClient(&dials, h.Client)
			const path = "/Patient/node-a-1"
			direct := h.members["node-a"].URL + path
			hop := bareHop(b, h.members["node-a"], &dials) + "/fhir" + path
			routed := h.Serve().URL + "/nodes/node-a/fhir" + path
			for _, u := range []string{direct, hop, routed} {
				timedGet(b, client, u)
			}
			warm := dials.n.Load()
			var viaDirect, viaHop, viaGateway time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				viaDirect += timedGet(b, client, direct)
				viaHop += timedGet(b, client, hop)
				viaGateway += timedGet(b, client, routed)
			}
			b.StopTimer()
			if n := dials.n.Load() - warm; n > 0 {
				b.Fatalf("%d connections were dialed during the run: some path did not reuse its connections", n)
			}
			n := float64(b.N)
			b.ReportMetric(float64(viaDirect.Microseconds())/n, "direct-µs/op")
			b.ReportMetric(float64(viaHop.Microseconds())/n, "floor-µs/op")
			b.ReportMetric(float64(viaGateway.Microseconds())/n, "gateway-µs/op")
			b.ReportMetric(float64(viaHop)/float64(viaDirect), "floor-ratio")
			b.ReportMetric(float64(viaGateway)/float64(viaDirect), "ratio")
		})
	}
}

// stubMembers answers every member call at once with a canned answer, off the network.
type stubMembers struct{ body []byte }

func (s stubMembers) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode:    http.StatusOK,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {fhir.MediaType}, "Content-Length": {strconv.Itoa(len(s.body))}},
		Body:          io.NopCloser(bytes.NewReader(s.body)),
		ContentLength: int64(len(s.body)),
		Request:       req,
	}, nil
}

// discard is a ResponseWriter that keeps nothing, so that the figures are the gateway's.
type discard struct {
	h      http.Header
	status int
}

func (w *discard) Header() http.Header         { return w.h }
func (w *discard) Write(p []byte) (int, error) { return len(p), nil }
func (w *discard) WriteHeader(status int)      { w.status = status }

// BenchmarkGatewayOwnCost is the gateway's own work for one request with nothing on
// the network: the server's handler (every middleware, the gate, the surface) called
// directly, the members answered at once by a stub transport with a searchset of 10
// entries. It is the part of BenchmarkRouted's and BenchmarkFanOut's figures that is
// the gateway's code, steady enough to compare commits by ns/op and allocs/op.
func BenchmarkGatewayOwnCost(b *testing.B) {
	var entries []string
	for i := range 10 {
		entries = append(entries, fmt.Sprintf(`{"fullUrl":"http://member/fhir/Patient/p-%d","resource":{"resourceType":"Patient","id":"p-%d","meta":{"source":"member"}},"search":{"mode":"match"}}`, i, i))
	}
	body := []byte(`{"resourceType":"Bundle","type":"searchset","total":10,"entry":[` + strings.Join(entries, ",") + `]}`)
	// Observations with references in all three forms (relative, absolute to the
	// member, another server's): what the identity rewriting reads and rewrites.
	entries = entries[:0]
	for i := range 10 {
		entries = append(entries, fmt.Sprintf(`{"fullUrl":"http://member/fhir/Observation/o-%d","resource":{"resourceType":"Observation","id":"o-%d","meta":{"source":"member"},`+
			`"status":"final","code":{"text":"heart rate"},"subject":{"reference":"Patient/p-%d"},"performer":[{"reference":"http://member/fhir/Practitioner/pr-1"}],`+
			`"derivedFrom":[{"reference":"http://other.example/fhir/Observation/x"}],"valueQuantity":{"value":72,"unit":"/min"}},"search":{"mode":"match"}}`, i, i, i))
	}
	observations := []byte(`{"resourceType":"Bundle","type":"searchset","total":10,"entry":[` + strings.Join(entries, ",") + `]}`)
	for _, c := range []struct {
		name, path string
		members    int
		body       []byte
	}{
		{"routed", "/nodes/node-0/fhir/Patient/p-1", 1, body},
		{"fan-out-3", "/fhir/Patient?name=smith", 3, body},
		{"fan-out-3-references", "/fhir/Observation?code=x", 3, observations},
	} {
		b.Run(c.name, func(b *testing.B) {
			var nodes []node
			for i := range c.members {
				nodes = append(nodes, node{id: fmt.Sprintf("node-%d", i), url: fmt.Sprintf("http://member-%d.invalid/fhir", i)})
			}
			h := newHarness(b, harnessOptions{transport: stubMembers{body: c.body}}, nodes...)
			handler := h.Assembled.Server.Handler()
			// The first readiness answer opens the gate.
			handler.ServeHTTP(&discard{h: http.Header{}}, httptest.NewRequest(http.MethodGet, testBase+"/health/readiness", nil))
			req := httptest.NewRequest(http.MethodGet, testBase+c.path, nil)
			req.Header.Set("Authorization", "Bearer "+h.Client) // the data plane asks for one
			w := &discard{h: http.Header{}}
			handler.ServeHTTP(w, req)
			if w.status != http.StatusOK {
				b.Fatalf("GET %s answered %d", c.path, w.status)
			}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				handler.ServeHTTP(w, req)
			}
		})
	}
}
