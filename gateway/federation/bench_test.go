package federation

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/members"
)

// BenchmarkFanOut is a federated search over three loopback members that answer after
// 20, 40 and 60 ms. The query can never be faster than its slowest member; the
// overhead-ms metric is what the gateway adds on top of it (goal: at most 2 ms).
func BenchmarkFanOut(b *testing.B) {
	const slowest = 60 * time.Millisecond
	h := newHarness(b, harnessOptions{},
		node{id: "node-20", opts: members.Options{Delay: 20 * time.Millisecond, Entries: 10}},
		node{id: "node-40", opts: members.Options{Delay: 40 * time.Millisecond, Entries: 10}},
		node{id: "node-60", opts: members.Options{Delay: slowest, Entries: 10}})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	url := h.gw.URL + testBase + "/fhir/Patient?name=smith"
	// The slowest member asked directly, interleaved with the queries: what a client
	// would wait for that member alone on this machine, timer slack included.
	direct := h.members["node-60"].URL + "/Patient?name=smith"
	timed := func(url string) time.Duration {
		start := time.Now()
		res, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			b.Fatalf("status %d", res.StatusCode)
		}
		return time.Since(start)
	}
	timed(url) // warm the connection pools
	timed(direct)
	b.ResetTimer()
	var viaGateway, viaDirect time.Duration
	for i := 0; i < b.N; i++ {
		viaGateway += timed(url)
		b.StopTimer()
		viaDirect += timed(direct)
		b.StartTimer()
	}
	n := time.Duration(b.N)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(viaGateway/n-slowest), "overhead-ms")
	b.ReportMetric(ms(viaDirect/n), "slowest-direct-ms")
	b.ReportMetric(ms(viaGateway/n-viaDirect/n), "overhead-vs-direct-ms")
}

// BenchmarkRouted compares a request routed through the gateway to the same request
// sent to the member directly, interleaved in one run so that both see the same
// machine. ratio is gateway time over direct time (goal: at most 1.2). It runs for a
// member that answers at once (the gateway's hop is then all there is to measure) and
// for one that takes 5 ms, as a FHIR server answering a read does.
func BenchmarkRouted(b *testing.B) {
	for _, c := range []struct {
		name  string
		delay time.Duration
	}{{"member-0ms", 0}, {"member-5ms", 5 * time.Millisecond}} {
		b.Run(c.name, func(b *testing.B) {
			h := newHarness(b, harnessOptions{}, node{id: "node-a", opts: members.Options{Delay: c.delay}})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			direct := h.members["node-a"].URL + "/Patient/node-a-1"
			routed := h.gw.URL + testBase + "/nodes/node-a/fhir/Patient/node-a-1"
			get := func(url string) time.Duration {
				start := time.Now()
				res, err := client.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					b.Fatalf("status %d", res.StatusCode)
				}
				return time.Since(start)
			}
			get(direct)
			get(routed)
			var viaDirect, viaGateway time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				viaDirect += get(direct)
				viaGateway += get(routed)
			}
			n := float64(b.N)
			b.ReportMetric(float64(viaDirect.Microseconds())/n, "direct-µs/op")
			b.ReportMetric(float64(viaGateway.Microseconds())/n, "gateway-µs/op")
			b.ReportMetric(float64(viaGateway)/float64(viaDirect), "ratio")
		})
	}
}
