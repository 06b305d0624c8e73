package tracing_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
	"github.com/ferrofed/ferrofed/test/otelcol"
)

// BenchmarkTracedFederatedSearch: the same federated search over three members through
// two gateways built alike, one with [tracing] at sampling_ratio 1 exporting to a real
// OpenTelemetry Collector (test/otelcol), the other without [tracing]; the requests
// alternate between them so that both see the same machine. It reports the untraced
// gateway's time over the traced one's (throughput ratio, goal >= 0.95) and the traced
// p99 over the untraced p99 (goal <= 1.1), and checks that the collector got spans.
func BenchmarkTracedFederatedSearch(b *testing.B) {
	collector := otelcol.Start(b)
	var tables string
	for _, id := range []string{"a", "b", "c"} {
		m := members.Start(b, members.Options{ID: id, Entries: 10})
		tables += fmt.Sprintf("[[registry.members]]\nid = %q\nquery_endpoint = %q\n", id, m.URL)
	}
	is := issuer.New(b)
	traced := gatewaytest.Start(b, tables+fmt.Sprintf("[tracing]\nendpoint = %q\nsampling_ratio = 1.0\n", collector.Endpoint()), gatewaytest.WithIssuer(is))
	plain := gatewaytest.Start(b, tables, gatewaytest.WithIssuer(is))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	token := "Bearer " + is.Sign(b, "app", issuer.ClientScope)
	get := func(url string) time.Duration {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", token)
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			b.Fatalf("%s answered %d (%v)", url, res.StatusCode, err)
		}
		return time.Since(start)
	}
	const search = "/fhir/Patient?name=smith&_count=10"
	for range 20 {
		get(traced.URL + search)
		get(plain.URL + search)
	}
	b.ResetTimer()
	var tracedTimes, plainTimes []time.Duration
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			tracedTimes = append(tracedTimes, get(traced.URL+search))
			plainTimes = append(plainTimes, get(plain.URL+search))
		} else {
			plainTimes = append(plainTimes, get(plain.URL+search))
			tracedTimes = append(tracedTimes, get(traced.URL+search))
		}
	}
	b.StopTimer()
	sum := func(ds []time.Duration) (s time.Duration) {
		for _, d := range ds {
			s += d
		}
		return s
	}
	p99 := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, len(s)*99/100)]
	}
	b.ReportMetric(float64(sum(plainTimes))/float64(sum(tracedTimes)), "throughput-ratio")
	b.ReportMetric(float64(p99(tracedTimes))/float64(p99(plainTimes)), "p99-ratio")
	b.ReportMetric(float64(sum(tracedTimes)/time.Duration(b.N))/float64(time.Microsecond), "traced-us")
	b.ReportMetric(float64(sum(plainTimes)/time.Duration(b.N))/float64(time.Microsecond), "plain-us")
	// The spans really went out: at least the server span of the last requests.
	collector.WaitSpans(b, 1, 10*time.Second)
}
