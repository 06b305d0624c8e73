package mcsd_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/mcsd"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/test/doubles/mcsdsupplier"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

const benchMembers = 5000

// benchGateway is a gateway whose directory names 5,000 members, spread over 4
// loopback member listeners, loaded once.
func benchGateway(b *testing.B) (g *gateway, change func()) {
	b.Helper()
	g = newGateway(b, gatewayOptions{
		tables: fmt.Sprintf("[limits]\nmax_registry_members = %d\nmax_queued_member_calls = %d\n", benchMembers, benchMembers),
		// A 5,000-member directory created a moment ago is all within the 60 s
		// lookback: without it, a refresh reads what changed since the last one only,
		// as it does in a steady state.
		limits: mcsd.Limits{Lookback: -1},
	})
	var urls []string
	for i := range 4 {
		m := members.Start(b, members.Options{ID: fmt.Sprintf("l%d", i), Entries: -1})
		urls = append(urls, m.URL)
	}
	for i := range benchMembers {
		id := fmt.Sprintf("m-%05d", i)
		g.double.MustPut(b, mcsdsupplier.Endpoint("ep-"+id, urls[i%len(urls)]), mcsdsupplier.Organization("org-"+id, system, id, "ep-"+id))
	}
	if o := g.refresh(); o.State != dependencies.Up || o.Members != benchMembers {
		b.Fatalf("the initial load: %+v", o)
	}
	n := 0
	change = func() {
		n++
		g.double.MustPut(b, mcsdsupplier.Endpoint("ep-m-00000", urls[n%len(urls)]))
	}
	return g, change
}

// BenchmarkDirectoryRefresh is one ITI-91 refresh of a 5,000-member directory in
// which one Endpoint changed: the history read (two exchanges, audited), the
// candidate built, checked (the members' rules and the whole configuration) and
// swapped in. Time and allocations per refresh; the double answers in-process, so
// its allocations are in the figure too.
func BenchmarkDirectoryRefresh(b *testing.B) {
	g, change := benchGateway(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		change()
		b.StartTimer()
		if o := g.dir.Refresh(context.Background()); !o.Swapped {
			b.Fatalf("%+v", o)
		}
	}
	b.StopTimer()
	b.ReportMetric(benchMembers, "members")
}

// BenchmarkQueryDuringRefresh is the latency of a federated search over the
// 5,000-member registry while refreshes (one change each) run back to back, against
// the same searches with no refresh, in the same run: the ratio of their medians is
// the cost a refresh puts on the data plane.
func BenchmarkQueryDuringRefresh(b *testing.B) {
	g, change := benchGateway(b)
	search := func() time.Duration {
		start := time.Now()
		res, err := g.Get("/fhir/Observation?_count=10")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body) //nolint:errcheck // timed only.
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("the search answered %d", res.StatusCode)
		}
		return time.Since(start)
	}
	search() // warm the connection pools
	var quiet, busy []time.Duration
	var refreshes atomic.Int64
	b.ResetTimer()
	// Each op is 3 searches without a refresh and 3 during refreshes, interleaved,
	// so that even one op (the default -benchtime on a slow machine) gives medians.
	for range b.N {
		for range 3 {
			quiet = append(quiet, search())
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					change()
					if o := g.dir.Refresh(context.Background()); o.Swapped {
						refreshes.Add(1)
					}
				}
			})
			busy = append(busy, search())
			close(stop)
			wg.Wait()
		}
	}
	b.StopTimer()
	median := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	q, r := median(quiet), median(busy)
	b.ReportMetric(float64(q.Microseconds())/1000, "quiet-p50-ms")
	b.ReportMetric(float64(r.Microseconds())/1000, "refreshing-p50-ms")
	b.ReportMetric(float64(r)/float64(q), "ratio")
	b.ReportMetric(float64(refreshes.Load())/float64(len(busy)), "refreshes/search")
}
