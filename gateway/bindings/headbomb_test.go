package bindings

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ferrofed/ferrofed/gateway/dependencies"
)

// bombBytes is the head a bombing service sends: under Go's default cap (10 MiB),
// so that a client without a cap of its own reads it whole.
const bombBytes = 8 << 20

// headBomb is a service on loopback that answers every request with a 200 whose head
// is bombBytes of headers (issue 30). It returns its URL.
func headBomb(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	line := "X-Bomb: " + strings.Repeat("b", 1014) + "\r\n"
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
					if _, err := bw.WriteString("Content-Length: 2\r\n\r\n{}"); err != nil {
						return
					}
					if bw.Flush() != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestAHeaderBombIsTheBindingsFailure: a service whose answer head is 8 MiB is that
// binding's failure: named, failing (server_error in the metrics), its audit outcome
// a serious failure, and no more of it read than the cap.
func TestAHeaderBombIsTheBindingsFailure(t *testing.T) {
	url := headBomb(t)
	m := NewMetrics()
	tr := dependencies.NewTracker()
	c, err := NewClient(ClientOptions{Name: "resolver", Table: "resolver", Timeout: 10 * time.Second, Metrics: m, Tracker: tr, Rule: dependencies.FromHTTP})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	req, _ := http.NewRequest(http.MethodGet, url+"/Patient", nil)
	ex := c.Do(context.Background(), req)
	runtime.ReadMemStats(&after)
	if !ex.HeadTooLarge || !ex.Answered || !ex.TooLarge || ex.Status != 0 || ex.Body != nil {
		t.Fatalf("exchange %+v", ex)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2<<20 {
		t.Fatalf("the client allocated %d KiB for one header bomb", alloc>>10)
	}
	if f := ex.FailureOf("resolver", "x"); f.Status != http.StatusBadGateway || f.Diagnostics != "the resolver answered with headers longer than 64 KiB" {
		t.Fatalf("failure %+v", f)
	}
	if s, ok := ex.State(true); !ok || s != dependencies.Failing || ex.AuditOutcome() != "8" {
		t.Fatalf("state %q %v, audit outcome %s", s, ok, ex.AuditOutcome())
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("resolver", OutcomeServerError)); got != 1 {
		t.Fatalf("server_error counted %v times", got)
	}
	if s := tr.Report().Services["resolver"]; s != dependencies.Failing {
		t.Fatalf("the tracker says %q", s)
	}
}

// BenchmarkHeaderBombs runs 50 exchanges at once with a service whose every answer
// head is 8 MiB, through a binding's client and, as the baseline in the same run,
// through the same client without the cap (Go's default: the old code). It reports
// the peak heap in use while they ran (sampled every millisecond).
func BenchmarkHeaderBombs(b *testing.B) {
	url := headBomb(b)
	for _, capped := range []bool{true, false} {
		name := "capped"
		if !capped {
			name = "uncapped-baseline"
		}
		b.Run(name, func(b *testing.B) {
			c, err := NewClient(ClientOptions{Name: "resolver", Table: "resolver", Timeout: 30 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			tr := c.HTTP.Transport.(observed).base.(*http.Transport)
			tr.MaxIdleConnsPerHost = 64
			if !capped {
				tr.MaxResponseHeaderBytes = 0
			}
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
						req, _ := http.NewRequest(http.MethodGet, url+"/Patient", nil)
						if ex := c.Do(context.Background(), req); ex.HeadTooLarge != capped {
							b.Errorf("capped %v, exchange %+v", capped, ex.HeadTooLarge)
						}
					})
				}
				wg.Wait()
				close(done)
			}
			b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
		})
	}
}
