package federation_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/outbound"
)

// bombBytes is the head a bombing member sends: under Go's default cap (10 MiB), so
// that without a cap of the gateway's own it is read whole.
const bombBytes = 8 << 20

// headBomb is a member on loopback that answers every request with a 200 whose head
// is bombBytes of headers (issue 30), then an empty body. It returns its FHIR base.
func headBomb(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	line := "X-Bomb: " + strings.Repeat("b", 1014) + "\r\n" // 1 KiB a header
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					// One request's head (the gateway's GETs carry no body).
					for {
						l, err := br.ReadString('\n')
						if err != nil {
							return
						}
						if l == "\r\n" {
							break
						}
					}
					bw := bufio.NewWriterSize(c, 64<<10)
					if _, err := bw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/fhir+json\r\n"); err != nil {
						return
					}
					for n := 0; n < bombBytes; n += len(line) {
						if _, err := bw.WriteString(line); err != nil {
							return
						}
					}
					body := `{"resourceType":"Bundle","type":"searchset","entry":[]}`
					fmt.Fprintf(bw, "Content-Length: %d\r\n\r\n%s", len(body), body)
					if bw.Flush() != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/fhir"
}

// TestAMembersHeaderBombIsThatMembersFailure: a member whose answer head is 8 MiB is
// that member's failure (named, its part left out, its state down), federated and
// routed, and the gateway reads no more of it than its cap.
func TestAMembersHeaderBombIsThatMembersFailure(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "bomb", url: headBomb(t)}, node{id: "node-b"})
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	res, body := h.get("/fhir/Patient")
	if res.StatusCode != 200 || !strings.Contains(string(body), "member bomb answered with headers longer than 64 KiB") ||
		!strings.Contains(string(body), `"id":"bomb","outcome":"unreachable"`) {
		t.Fatalf("federated: %d %.3000s", res.StatusCode, body)
	}
	res, body = h.get("/nodes/bomb/fhir/Patient")
	if res.StatusCode != 502 || outcomeOf(t, body).Issue[0].Diagnostics != "member bomb answered with headers longer than 64 KiB" {
		t.Fatalf("routed: %d %s", res.StatusCode, body)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// Two bombs of 8 MiB: read whole, each would be far more than that allocated.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Fatalf("the gateway allocated %d KiB for two header bombs", alloc>>10)
	}
	h.wantStates(map[string]string{"bomb-query": "down", "node-b-query": "up"})
}

// BenchmarkHeaderBombs runs 50 federated searches at once to a member whose every
// answer head is 8 MiB, through the gateway's member transport and, as the baseline
// in the same run, through the same transport without the cap (Go's default: the old
// code). It reports the peak heap in use while they ran (sampled every millisecond).
func BenchmarkHeaderBombs(b *testing.B) {
	for _, c := range []struct {
		name  string
		limit int64
	}{{"capped", federation.MaxMemberHeaderBytes}, {"uncapped-baseline", 0}} {
		b.Run(c.name, func(b *testing.B) {
			tr := outbound.NewTransport(federation.MaxMemberHeaderBytes)
			tr.MaxResponseHeaderBytes = c.limit
			h := newHarness(b, harnessOptions{transport: tr, requestTimeout: 30 * time.Second,
				tables: "[limits]\nmax_member_calls_per_member = 64\n"}, node{id: "bomb", url: headBomb(b)})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			var peak atomic.Uint64
			for b.Loop() {
				runtime.GC()
				var base runtime.MemStats
				runtime.ReadMemStats(&base)
				done := make(chan struct{})
				go func() {
					var m runtime.MemStats
					for {
						select {
						case <-done:
							return
						case <-time.After(time.Millisecond):
						}
						runtime.ReadMemStats(&m)
						if d := m.HeapInuse - min(base.HeapInuse, m.HeapInuse); d > peak.Load() {
							peak.Store(d)
						}
					}
				}()
				var wg sync.WaitGroup
				for range 50 {
					wg.Go(func() {
						req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, h.URL+"/fhir/Patient", nil)
						res, err := client.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						res.Body.Close()
					})
				}
				wg.Wait()
				close(done)
			}
			b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
		})
	}
}

// TestAMembersHeadCountsInTheSearchBytes: an answer's head is taken from
// limits.max_search_bytes as its body is, so that a member cannot carry what the
// budget refuses in its body in its headers instead.
func TestAMembersHeadCountsInTheSearchBytes(t *testing.T) {
	body := `{"resourceType":"Bundle","type":"searchset","entry":[]}`
	pad := strings.Repeat("h", 4000)
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", fhir.MediaType)
		if r.URL.Query().Get("pad") != "" {
			w.Header().Set("X-Pad", pad)
		}
		_, _ = w.Write([]byte(body))
	}))
	defer member.Close()
	h := newHarness(t, harnessOptions{maxBody: 4096, tables: "[limits]\nmax_search_bytes = 4096\n"},
		node{id: "node-x", url: member.URL + "/fhir"})
	res, out := h.get("/fhir/Patient")
	if res.StatusCode != 200 || !strings.Contains(string(out), `"outcome":"ok"`) {
		t.Fatalf("without the pad: %d %s", res.StatusCode, out)
	}
	res, out = h.get("/fhir/Patient?pad=1")
	if res.StatusCode != 502 || !strings.Contains(string(out), "member node-x answered HTTP 200, but its answer would take the request past limits.max_search_bytes") {
		t.Fatalf("with 4000 bytes of headers: %d %s", res.StatusCode, out)
	}
}
