// Package rollout drives and watches rolling restarts of gateway pods on a real
// cluster: a bounded load through the gateway's Service, the FHIR member test servers
// as pods, a recorder of how each gateway pod ended, and a token issuer the pods can
// reach. test/e2e asserts on what it measures; `make demo` (hack/demo) shows it live.
// Nothing here is used by the gateway or the operator themselves.
package rollout

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

// LoadSpec is a bounded load: RPS requests a second to URL, SlowRPS of them a second
// to SlowURL (answers that take longer than the drain delay), until the context ends or
// MaxLength passes, and never more than MaxLength × (RPS + SlowRPS) requests.
type LoadSpec struct {
	URL       string
	SlowURL   string
	RPS       int
	SlowRPS   int
	MaxLength time.Duration
	Timeout   time.Duration // per request
	// Token, when set, is sent as every request's bearer token (Authorization:
	// Bearer): the data plane asks for one unless auth.data_plane = "open".
	Token string
	// Progress, when set, is kept up to date while the load runs (for a live line).
	Progress *Progress
}

// Progress counts the requests a running load sent and those that failed so far.
type Progress struct {
	Sent, Failed atomic.Int64
}

// LoadResult counts what the load saw. A failure is any request that got no answer, or
// an answer other than 200.
type LoadResult struct {
	Requests, Failures         int64
	SlowRequests, SlowFailures int64
	Longest                    time.Duration
	Elapsed                    time.Duration // from the first request sent to the last one ended
	Examples                   []string      // the first failures, with their time
	ByKind                     map[string]int64
}

func (r LoadResult) String() string {
	kinds := make([]string, 0, len(r.ByKind))
	for k, n := range r.ByKind {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("%d requests in %s (%.0f/s; %d slow), %d failed (%d slow) [%s], longest %s",
		r.Requests, r.Elapsed.Round(time.Second), r.Rate(), r.SlowRequests, r.Failures, r.SlowFailures, strings.Join(kinds, " "), r.Longest.Round(time.Millisecond))
}

// Rate is the requests sent per second, over the time the load ran.
func (r LoadResult) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// RunLoad sends the load and returns when every request it started has ended. Half the
// fast requests reuse keep-alive connections (the gateway's `Connection: close` during
// the drain moves them), half open a new connection each (they meet the Service routing
// of the moment, so a listener closed too early shows as refused connections).
func RunLoad(ctx context.Context, spec LoadSpec) LoadResult {
	ctx, cancel := context.WithTimeout(ctx, spec.MaxLength)
	defer cancel()
	progress := spec.Progress
	if progress == nil {
		progress = &Progress{}
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	keepAlive := &http.Client{Timeout: spec.Timeout, Transport: &http.Transport{
		DialContext: dialer.DialContext, MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second,
	}}
	fresh := &http.Client{Timeout: spec.Timeout, Transport: &http.Transport{
		DialContext: dialer.DialContext, DisableKeepAlives: true,
	}}
	var (
		res      LoadResult
		mu       sync.Mutex
		wg       sync.WaitGroup
		longest  atomic.Int64
		inFlight = make(chan struct{}, 4096) // bounds concurrent requests
	)
	res.ByKind = map[string]int64{}
	fail := func(slow bool, kind, detail string) {
		progress.Failed.Add(1)
		mu.Lock()
		defer mu.Unlock()
		res.Failures++
		if slow {
			res.SlowFailures++
		}
		res.ByKind[kind]++
		if len(res.Examples) < 10 {
			res.Examples = append(res.Examples, time.Now().Format("15:04:05.000")+" "+detail)
		}
	}
	do := func(client *http.Client, url string, slow bool) {
		defer wg.Done()
		defer func() { <-inFlight }()
		start := time.Now()
		// The request is not tied to ctx: a started request runs to its answer.
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if spec.Token != "" {
			req.Header.Set("Authorization", "Bearer "+spec.Token)
		}
		resp, err := client.Do(req)
		if err != nil {
			fail(slow, errorKind(err), err.Error())
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
	maxRequests := int64(spec.MaxLength.Seconds()+1) * int64(spec.RPS+spec.SlowRPS)
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
			for sent < el*float64(spec.RPS) && res.Requests < maxRequests {
				sent++
				res.Requests++
				progress.Sent.Add(1)
				client := keepAlive
				if res.Requests%2 == 0 {
					client = fresh
				}
				inFlight <- struct{}{}
				wg.Add(1)
				go do(client, spec.URL, false)
			}
			for spec.SlowURL != "" && slowSent < el*float64(spec.SlowRPS) && res.Requests < maxRequests {
				slowSent++
				res.Requests++
				res.SlowRequests++
				progress.Sent.Add(1)
				inFlight <- struct{}{}
				wg.Add(1)
				go do(fresh, spec.SlowURL, true)
			}
		}
	}
	sentFor := time.Since(begin)
	wg.Wait()
	res.Elapsed = sentFor
	keepAlive.CloseIdleConnections()
	res.Longest = time.Duration(longest.Load())
	return res
}

// errorKind names a failed request's error for the counts by kind.
func errorKind(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "refused"):
		return "refused"
	case strings.Contains(msg, "reset"):
		return "reset"
	case strings.Contains(msg, "EOF"):
		return "eof"
	case strings.Contains(msg, "Timeout") || strings.Contains(msg, "timeout"):
		return "timeout"
	}
	return "error"
}
