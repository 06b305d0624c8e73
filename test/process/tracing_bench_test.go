package process

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/server"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// BenchmarkSIGTERMWithSpansPendingAndASlowCollector: the built binary traces to a
// collector that takes connections and never answers (a collector that is slow past
// every timeout); federated searches over three members make 10,000 spans (a server
// span and three client spans each), far more than the span queue holds, then SIGTERM.
// It reports the time from SIGTERM to the process's exit against the budget the
// operator's grace period keeps for it (the drain's budgets, all 0 but the shutdown
// timeout's idle drain, plus the push bound server.MaxPushTimeout), and the spans the
// gateway logged as not pushed.
func BenchmarkSIGTERMWithSpansPendingAndASlowCollector(b *testing.B) {
	slow, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer slow.Close()
	var held sync.WaitGroup
	var conns []net.Conn
	var mu sync.Mutex
	held.Go(func() {
		for {
			c, err := slow.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // read nothing, answer nothing
			mu.Unlock()
		}
	})
	defer func() {
		slow.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		held.Wait()
	}()
	var tables string
	for _, id := range []string{"a", "b", "c"} {
		m := members.Start(b, members.Options{ID: id, Entries: 2})
		tables += fmt.Sprintf("[[registry.members]]\nid = %q\nquery_endpoint = %q\n", id, m.URL)
	}
	const searches = 2500 // 10,000 spans
	var exitTotal time.Duration
	var notPushed int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		port := freePort(b)
		path := filepath.Join(b.TempDir(), "ferrofed.toml")
		writeFile(b, path, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:%d\"\ntermination_message_path = \"\"\ndrain_delay_ms = 0\nbindings_drain_timeout_ms = 1000\n"+
			"%s[tracing]\nendpoint = \"http://%s\"\nsampling_ratio = 1.0\n", port, tables, slow.Addr()))
		g := serve(b, path)
		base := fmt.Sprintf("http://127.0.0.1:%d/fhir/Patient?name=smith", port)
		var next atomic.Int64
		var work sync.WaitGroup
		for range 8 {
			work.Go(func() {
				for next.Add(1) <= searches {
					res, err := clientGet(base)
					if err != nil {
						b.Error(err)
						return
					}
					_, err = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if err != nil {
						b.Error(err)
						return
					}
					if res.StatusCode != http.StatusOK {
						b.Errorf("search answered %d", res.StatusCode)
						return
					}
				}
			})
		}
		work.Wait()
		b.StartTimer()
		start := time.Now()
		if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			b.Fatal(err)
		}
		select {
		case <-g.exited:
		case <-time.After(60 * time.Second):
			b.Fatal("serve did not exit within 60 s of SIGTERM")
		}
		exitTotal += time.Since(start)
		b.StopTimer()
		if g.err != nil {
			b.Fatalf("serve exited with %v", g.err)
		}
		log := g.stderr.String()
		if !strings.Contains(log, "Could not push the last spans") {
			b.Fatalf("no span was reported left unpushed with the collector silent:\n%s", log)
		}
		var n int64
		if i := strings.Index(log, `"Could not push the last spans`); i >= 0 {
			rest := log[i:]
			if j := strings.Index(rest, `"spans":`); j >= 0 {
				if _, err := fmt.Sscanf(rest[j+len(`"spans":`):], "%d", &n); err != nil {
					b.Fatalf("the unpushed spans' log line has no count: %v", err)
				}
			}
		}
		notPushed += n
	}
	exit := exitTotal / time.Duration(b.N)
	b.ReportMetric(float64(exit.Milliseconds()), "exit-ms")
	b.ReportMetric(float64(server.MaxPushTimeout.Milliseconds()), "push-bound-ms")
	b.ReportMetric(float64(notPushed)/float64(b.N), "spans-not-pushed")
}
