package federation_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// fetchGzip GETs url with the bearer token asking for gzip and reads the answer as a client does, decoded;
// it must be a 200 of at least want bytes.
func fetchGzip(b *testing.B, client *http.Client, url, token string, want int) time.Duration {
	start := time.Now()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	var body io.Reader = res.Body
	if res.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(res.Body)
		if err != nil {
			b.Fatal(err)
		}
		body = zr
	}
	n, err := io.Copy(io.Discard, body)
	if err != nil || res.StatusCode != 200 || n < int64(want) || res.Header.Get("Content-Encoding") != "gzip" {
		b.Fatalf("GET %s: %d, %d bytes, %q, %v", url, res.StatusCode, n, res.Header.Get("Content-Encoding"), err)
	}
	return time.Since(start)
}

// BenchmarkRoutedGzip is a routed search whose answer is a searchset of 1 MiB, every
// fullUrl on the member's own base, asked with Accept-Encoding: gzip: through the
// gateway (which asks the member for identity, rewrites the member's base and gzips
// at BestSpeed towards the client) against the same request sent to the member
// directly (which gzips it itself, at the level of the sub-benchmark), interleaved in
// one run, the same client, connections reused. The client decodes the answer on
// both paths.
//
// added-µs/op is the gateway's time over the direct one, ratio gateway over direct;
// allocs/op and B/op are the routed request's alone (the direct one runs with the
// timer stopped), the client's and the member's included, all in this process.
func BenchmarkRoutedGzip(b *testing.B) {
	const size = 1 << 20
	for _, level := range []int{gzip.BestSpeed, gzip.DefaultCompression} {
		b.Run(fmt.Sprintf("member-gzip-level-%d", level), func(b *testing.B) {
			var dials dialCounter
			base := bigMember(b, size, level, false)
			h := newHarness(b, harnessOptions{transport: memberTransport(&dials)}, node{id: "node-x", url: base})
			client := benchClient(&dials, h.Client)
			direct := base + "/Patient"
			routed := h.Serve().URL + "/nodes/node-x/fhir/Patient"
			fetchGzip(b, client, direct, h.Client, size)
			fetchGzip(b, client, routed, h.Client, size)
			warm := dials.n.Load()
			var viaDirect, viaGateway time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				viaDirect += fetchGzip(b, client, direct, h.Client, size)
				b.StartTimer()
				viaGateway += fetchGzip(b, client, routed, h.Client, size)
			}
			b.StopTimer()
			if n := dials.n.Load() - warm; n > 0 {
				b.Fatalf("%d connections were dialed during the run: some path did not reuse its connections", n)
			}
			n := float64(b.N)
			b.ReportMetric(float64(viaDirect.Microseconds())/n, "direct-µs/op")
			b.ReportMetric(float64(viaGateway.Microseconds())/n, "gateway-µs/op")
			b.ReportMetric(float64((viaGateway-viaDirect).Microseconds())/n, "added-µs/op")
			b.ReportMetric(float64(viaGateway)/float64(viaDirect), "ratio")
		})
	}
}

// BenchmarkRoutedGzipOwnCost is the gateway's own work for the routed answer of
// BenchmarkRoutedGzip with nothing on the network: the server's handler called
// directly, the member answered at once by a stub transport with the 1 MiB page in
// identity (known length: the streaming rewriter), the client asking for gzip.
func BenchmarkRoutedGzipOwnCost(b *testing.B) {
	const member = "http://member-0.invalid/fhir"
	var page bytes.Buffer
	fmt.Fprintf(&page, `{"resourceType":"Bundle","type":"searchset","entry":[`)
	for i := 0; page.Len() < 1<<20; i++ {
		if i > 0 {
			page.WriteByte(',')
		}
		fmt.Fprintf(&page, `{"fullUrl":"%s/Patient/p-%d","resource":{"resourceType":"Patient","id":"p-%d","name":[{"family":"Family-%d"}],"link":[{"other":{"reference":"%s/Patient/q-%d"},"type":"seealso"}]},"search":{"mode":"match"}}`,
			member, i, i, i, member, i)
	}
	page.WriteString("]}")
	h := newHarness(b, harnessOptions{transport: stubMembers{body: page.Bytes()}}, node{id: "node-0", url: member})
	handler := h.Assembled.Server.Handler()
	handler.ServeHTTP(&discard{h: http.Header{}}, httptest.NewRequest(http.MethodGet, testBase+"/health/readiness", nil))
	req := httptest.NewRequest(http.MethodGet, testBase+"/nodes/node-0/fhir/Patient", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("Authorization", "Bearer "+h.Client)
	w := &discard{h: http.Header{}}
	handler.ServeHTTP(w, req)
	if w.h.Get("Content-Encoding") != "gzip" {
		b.Fatalf("the answer is not gzipped: %v", w.h)
	}
	b.SetBytes(int64(page.Len()))
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		handler.ServeHTTP(w, req)
	}
}
