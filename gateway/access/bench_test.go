package access_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

// BenchmarkVerifiedSearch compares a federated search on a required data plane, with
// a verified token whose scopes are decided, to the same search on an open data plane
// (two gateways over the same two members, built by the composition root), interleaved
// in one run with one client so that both see the same machine. ratio is the required
// gateway's throughput over the open one's (goal: at least 0.97).
func BenchmarkVerifiedSearch(b *testing.B) {
	a := members.Start(b, members.Options{ID: "a", Entries: 10})
	c := members.Start(b, members.Options{ID: "c", Entries: 10})
	tables := fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n[[registry.members]]\nid = \"c\"\nquery_endpoint = %q\n", a.URL, c.URL)
	required := gatewaytest.Start(b, tables)
	open := gatewaytest.Start(b, tables+"[auth]\ndata_plane = \"open\"\n")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	token := "Bearer " + required.Issuer.Sign(b, "app", "user/Patient.rs user/Observation.rs openid")
	get := func(url, authz string) time.Duration {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
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
	for range 20 { // warm both: connections, key sets, caches
		get(required.URL+search, token)
		get(open.URL+search, "")
	}
	b.ResetTimer()
	var req, opn time.Duration
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			req += get(required.URL+search, token)
			opn += get(open.URL+search, "")
		} else {
			opn += get(open.URL+search, "")
			req += get(required.URL+search, token)
		}
	}
	b.StopTimer()
	n := time.Duration(b.N)
	b.ReportMetric(float64(opn)/float64(req), "ratio")
	b.ReportMetric(float64(req/n)/float64(time.Microsecond), "required-us")
	b.ReportMetric(float64(opn/n)/float64(time.Microsecond), "open-us")
}
