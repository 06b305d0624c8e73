package federation_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// BenchmarkFederatedPage is one page of a federated search of three members that
// answer 20 entries each after 1 ms, through the gateway's server (_count=60, so
// that the gateway's page carries all 60), against the same three pages asked of
// the members directly and in parallel, as a client doing the fan-out itself would:
// interleaved in one run, one client, every connection reused. ratio is gateway time
// over direct time (goal: at most 1.1). floor-ratio is the same three pages each sent
// through a bare net/http hop (bareHop), in parallel, over direct time: what one more
// hop costs on this machine, which no gateway avoids.
//
// Patient is the page of Patients; Observation the page of Observations each with a
// subject reference, which the gateway rewrites into the federated identity, with
// every id (docs/data-plane.md, "One identity space").
func BenchmarkFederatedPage(b *testing.B) {
	for _, search := range []string{"/Patient?_count=60", "/Observation?_count=60"} {
		b.Run(strings.Split(search[1:], "?")[0], func(b *testing.B) { benchmarkFederatedPage(b, search) })
	}
}

func benchmarkFederatedPage(b *testing.B, search string) {
	ids := []string{"node-a", "node-b", "node-c"}
	var nodes []node
	for _, id := range ids {
		nodes = append(nodes, node{id: id, opts: members.Options{Entries: 20, NumericIDs: true, Subjects: true, Knobs: double.Knobs{Delay: time.Millisecond}}})
	}
	var dials dialCounter
	h := newHarness(b, harnessOptions{transport: memberTransport(&dials)}, nodes...)
	client := benchClient(&dials, h.Client)
	gateway := h.Serve().URL + "/fhir" + search
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
	if n := countMatches(b, client, gateway); n != 60 {
		b.Fatalf("the gateway's page holds %d matches, want 60", n)
	}
	fanOut(direct)
	fanOut(hops)
	warm := dials.n.Load()
	var viaGateway, viaDirect, viaHops time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		viaGateway += timedGet(b, client, gateway)
		viaDirect += fanOut(direct)
		viaHops += fanOut(hops)
	}
	b.StopTimer()
	if n := dials.n.Load() - warm; n > 0 {
		b.Fatalf("%d connections were dialed during the run: some path did not reuse its connections", n)
	}
	n := float64(b.N)
	b.ReportMetric(float64(viaGateway.Microseconds())/n, "gateway-µs/op")
	b.ReportMetric(float64(viaDirect.Microseconds())/n, "direct-µs/op")
	b.ReportMetric(float64(viaGateway)/float64(viaDirect), "ratio")
	b.ReportMetric(float64(viaHops)/float64(viaDirect), "floor-ratio")
}

// countMatches GETs one gateway page and counts its matches.
func countMatches(b *testing.B, client *http.Client, url string) int {
	res, err := client.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	var page searchAnswer
	if err := json.NewDecoder(res.Body).Decode(&page); err != nil {
		b.Fatal(err)
	}
	return page.matches()
}

// nextOf reads a page and returns its next link ("" for none) and its match count.
func nextOf(client *http.Client, url string) (string, int, error) {
	res, err := client.Get(url)
	if err != nil {
		return "", 0, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return "", 0, err
	}
	if res.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("GET %s: %d %s", url, res.StatusCode, body)
	}
	var page searchAnswer
	if err := json.Unmarshal(body, &page); err != nil {
		return "", 0, err
	}
	return page.link("next"), page.matches(), nil
}

// walkAll follows next links from url and returns how many matches it read.
func walkAll(client *http.Client, url string) (int, error) {
	total := 0
	for i := 0; url != "" && i < 100; i++ {
		next, n, err := nextOf(client, url)
		if err != nil {
			return 0, err
		}
		total += n
		url = next
	}
	return total, nil
}

// BenchmarkPagingWalk walks every page of a search of 67 matches over three members
// (62, 3 and 2; each answering after 1 ms) with _count=10: through the gateway (7
// pages, one after the other), against a client walking each member's own pages of
// 10 directly, the three members in parallel (7, 1 and 1 pages). ratio is the
// gateway's total time over the direct walk's.
func BenchmarkPagingWalk(b *testing.B) {
	var nodes []node
	for i, n := range []int{62, 3, 2} {
		nodes = append(nodes, node{id: fmt.Sprintf("node-%d", i), opts: members.Options{Entries: n, NumericIDs: true, Knobs: double.Knobs{Delay: time.Millisecond}}})
	}
	var dials dialCounter
	h := newHarness(b, harnessOptions{transport: memberTransport(&dials)}, nodes...)
	client := benchClient(&dials, h.Client)
	const search = "/Patient?_count=10"
	gateway := h.Serve().URL + "/fhir" + search
	var direct []string
	for _, n := range nodes {
		direct = append(direct, h.members[n.id].URL+search)
	}
	walkDirect := func() (time.Duration, error) {
		start := time.Now()
		counts := make([]int, len(direct))
		errs := make([]error, len(direct))
		var wg sync.WaitGroup
		for i, u := range direct {
			wg.Go(func() { counts[i], errs[i] = walkAll(client, u) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return 0, err
		}
		if sum := counts[0] + counts[1] + counts[2]; sum != 67 {
			return 0, fmt.Errorf("the direct walk read %d matches", sum)
		}
		return time.Since(start), nil
	}
	walkGateway := func() (time.Duration, error) {
		start := time.Now()
		n, err := walkAll(client, gateway)
		if err == nil && n != 67 {
			err = fmt.Errorf("the gateway walk read %d matches", n)
		}
		return time.Since(start), err
	}
	if _, err := walkGateway(); err != nil {
		b.Fatal(err)
	}
	if _, err := walkDirect(); err != nil {
		b.Fatal(err)
	}
	warm := dials.n.Load()
	var viaGateway, viaDirect time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g, err := walkGateway()
		if err != nil {
			b.Fatal(err)
		}
		d, err := walkDirect()
		if err != nil {
			b.Fatal(err)
		}
		viaGateway += g
		viaDirect += d
	}
	b.StopTimer()
	if n := dials.n.Load() - warm; n > 0 {
		b.Fatalf("%d connections were dialed during the run", n)
	}
	n := float64(b.N)
	b.ReportMetric(float64(viaGateway.Microseconds())/n/1000, "gateway-ms/walk")
	b.ReportMetric(float64(viaDirect.Microseconds())/n/1000, "direct-ms/walk")
	b.ReportMetric(float64(viaGateway)/float64(viaDirect), "ratio")
}
