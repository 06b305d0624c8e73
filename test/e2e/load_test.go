//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// loadSpec is a bounded load: rps requests a second to url, slowRPS of them a second to
// slowURL (answers that take longer than the drain delay), until the context ends or
// maxLength passes, and never more than maxLength × (rps + slowRPS) requests.
type loadSpec struct {
	url       string
	slowURL   string
	rps       int
	slowRPS   int
	maxLength time.Duration
	timeout   time.Duration // per request
}

// loadResult counts what the load saw. A failure is any request that got no answer, or
// an answer other than 200.
type loadResult struct {
	requests, failures         int64
	slowRequests, slowFailures int64
	longest                    time.Duration
	elapsed                    time.Duration // from the first request sent to the last one ended
	examples                   []string      // the first failures, with their time
	byKind                     map[string]int64
}

func (r loadResult) String() string {
	kinds := make([]string, 0, len(r.byKind))
	for k, n := range r.byKind {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("%d requests in %s (%.0f/s; %d slow), %d failed (%d slow) [%s], longest %s",
		r.requests, r.elapsed.Round(time.Second), r.rate(), r.slowRequests, r.failures, r.slowFailures, strings.Join(kinds, " "), r.longest.Round(time.Millisecond))
}

// rate is the requests sent per second, over the time the load ran.
func (r loadResult) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.requests) / r.elapsed.Seconds()
}

// runLoad sends the load and returns when every request it started has ended. Half the
// fast requests reuse keep-alive connections (the gateway's `Connection: close` during
// the drain moves them), half open a new connection each (they meet the Service routing
// of the moment, so a listener closed too early shows as refused connections).
func runLoad(ctx context.Context, spec loadSpec) loadResult {
	ctx, cancel := context.WithTimeout(ctx, spec.maxLength)
	defer cancel()
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	keepAlive := &http.Client{Timeout: spec.timeout, Transport: &http.Transport{
		DialContext: dialer.DialContext, MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second,
	}}
	fresh := &http.Client{Timeout: spec.timeout, Transport: &http.Transport{
		DialContext: dialer.DialContext, DisableKeepAlives: true,
	}}
	var (
		res      loadResult
		mu       sync.Mutex
		wg       sync.WaitGroup
		longest  atomic.Int64
		inFlight = make(chan struct{}, 4096) // bounds concurrent requests
	)
	res.byKind = map[string]int64{}
	fail := func(slow bool, kind, detail string) {
		mu.Lock()
		defer mu.Unlock()
		res.failures++
		if slow {
			res.slowFailures++
		}
		res.byKind[kind]++
		if len(res.examples) < 10 {
			res.examples = append(res.examples, time.Now().Format("15:04:05.000")+" "+detail)
		}
	}
	do := func(client *http.Client, url string, slow bool) {
		defer wg.Done()
		defer func() { <-inFlight }()
		start := time.Now()
		// The request is not tied to ctx: a started request runs to its answer.
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			kind := "error"
			switch {
			case strings.Contains(err.Error(), "refused"):
				kind = "refused"
			case strings.Contains(err.Error(), "reset"):
				kind = "reset"
			case strings.Contains(err.Error(), "EOF"):
				kind = "eof"
			case strings.Contains(err.Error(), "Timeout") || strings.Contains(err.Error(), "timeout"):
				kind = "timeout"
			}
			fail(slow, kind, err.Error())
			return
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if d := time.Since(start); int64(d) > longest.Load() {
			longest.Store(int64(d))
		}
		switch {
		case err != nil:
			fail(slow, "body", fmt.Sprintf("%s: body: %v", url, err))
		case resp.StatusCode != http.StatusOK:
			fail(slow, fmt.Sprintf("status-%d", resp.StatusCode), fmt.Sprintf("%s: status %d", url, resp.StatusCode))
		}
	}
	maxRequests := int64(spec.maxLength.Seconds()+1) * int64(spec.rps+spec.slowRPS)
	tick := time.NewTicker(10 * time.Millisecond) // 100 ticks a second
	defer tick.Stop()
	var sent, slowSent float64
	begin := time.Now()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case now := <-tick.C:
			el := now.Sub(begin).Seconds()
			for sent < el*float64(spec.rps) && res.requests < maxRequests {
				sent++
				res.requests++
				client := keepAlive
				if res.requests%2 == 0 {
					client = fresh
				}
				inFlight <- struct{}{}
				wg.Add(1)
				go do(client, spec.url, false)
			}
			for spec.slowURL != "" && slowSent < el*float64(spec.slowRPS) {
				slowSent++
				res.requests++
				res.slowRequests++
				inFlight <- struct{}{}
				wg.Add(1)
				go do(fresh, spec.slowURL, true)
			}
		}
	}
	sentFor := time.Since(begin)
	wg.Wait()
	res.elapsed = sentFor
	keepAlive.CloseIdleConnections()
	res.longest = time.Duration(longest.Load())
	return res
}
