// Package otelcol runs a real OpenTelemetry Collector for a test: bin/otelcol, built
// from the collector's Go modules by `hack/tools.sh otelcol` (hack/otelcol), with an
// OTLP/HTTP receiver on a free loopback port and the contrib file exporter writing what
// it receives, as OTLP JSON lines, to a file of the test's. Spans reads that file back
// as Span values; Raw gives its bytes, for a scan of everything that left the process.
//
// Without bin/otelcol a test cannot prove anything, so it never passes quietly: as with
// the control plane (test/controlplane), under CI=true it fails, naming what builds the
// collector; elsewhere it skips with the same words.
package otelcol

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/controlplane"
	"github.com/ferrofed/ferrofed/test/double"
)

// stopWithin is how long Stop waits for a graceful exit (the file exporter flushes on
// it) before it kills the process.
const stopWithin = 10 * time.Second

// Binary is bin/otelcol.
func Binary() string { return filepath.Join(controlplane.Root(), "bin", "otelcol") }

// Missing is "" when bin/otelcol is there, else a sentence saying what builds it.
func Missing() string { return missing(Binary()) }

func missing(bin string) string {
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Sprintf("no OpenTelemetry Collector: %s is missing (build it with hack/tools.sh otelcol; make test does this first)", bin)
	}
	return ""
}

// Collector is one running bin/otelcol of a test. Its methods are safe for concurrent
// use.
type Collector struct {
	bin, dir, config, out, log string
	endpoint                   string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start runs a collector for the test and returns it once its OTLP/HTTP receiver
// answers; it is stopped at the test's end. Without bin/otelcol it fails (CI=true) or
// skips the test.
func Start(t testing.TB) *Collector {
	t.Helper()
	controlplane.SkipOrFail(t, Missing())
	dir := t.TempDir()
	c := &Collector{
		bin:    Binary(),
		dir:    dir,
		config: filepath.Join(dir, "otelcol.yaml"),
		out:    filepath.Join(dir, "traces.jsonl"),
		log:    filepath.Join(dir, "otelcol.log"),
	}
	t.Cleanup(c.Stop)
	// A free port is found by listening on it and closing it, so another process may
	// take it before the collector does: then the collector exits and Start tries again.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		c.endpoint = fmt.Sprintf("http://127.0.0.1:%d", port)
		if err := os.WriteFile(c.config, []byte(config(port, c.out)), 0o600); err != nil {
			t.Fatal(err)
		}
		c.run(t)
		if c.waitReady(t) {
			return c
		}
		if attempt == 3 || !strings.Contains(c.Log(), "address already in use") {
			t.Fatalf("otelcol exited before its receiver answered at %s; its log:\n%s", c.endpoint, c.Log())
		}
	}
}

// config is the collector's configuration: the OTLP receiver over HTTP only, on the
// loopback port given; the file exporter, appending OTLP JSON lines and flushing every
// 50 ms; one traces pipeline from one to the other; no internal metrics (whose default
// is a Prometheus endpoint on a fixed port) and a quiet log.
func config(port int, out string) string {
	return fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
exporters:
  file:
    path: %q
    format: json
    append: true
    flush_interval: 50ms
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
`, port, out)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// run starts the process, its output appended to the log file.
func (c *Collector) run(t testing.TB) {
	t.Helper()
	log, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(c.bin, "--config", c.config)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		t.Fatalf("start %s: %v", c.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(done)
	}()
	c.mu.Lock()
	c.cmd, c.done = cmd, done
	c.mu.Unlock()
}

// waitReady waits until the receiver answers (its traces route takes POST only, so a GET
// is answered 405 without a batch reaching the file) and reports true, or until the
// process exits and reports false.
func (c *Collector) waitReady(t testing.TB) bool {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	exited := false
	// About 0.3 s on an idle machine; double.Eventually's bound, 15 s, is the limit.
	double.Eventually(t, "otelcol's receiver answers at "+c.Endpoint(), func() bool {
		if !c.running() {
			exited = true
			return true
		}
		resp, err := client.Get(c.Endpoint() + "/v1/traces")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	}, func() string { return "; its log:\n" + c.Log() })
	return !exited
}

func (c *Collector) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// Endpoint is the receiver's OTLP/HTTP base URL, http://127.0.0.1:<port>: an exporter
// posts traces to Endpoint()+"/v1/traces" (TracesURL).
func (c *Collector) Endpoint() string { return c.endpoint }

// TracesURL is Endpoint()+"/v1/traces", the URL an OTLP/HTTP trace exporter posts to.
func (c *Collector) TracesURL() string { return c.endpoint + "/v1/traces" }

// Log is what the collector printed (warnings and errors only).
func (c *Collector) Log() string {
	b, _ := os.ReadFile(c.log)
	return string(b)
}

// Raw is every byte the file exporter wrote so far, across restarts: for a scan of all
// that reached the collector (patient data must not).
func (c *Collector) Raw(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(c.out)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return b
}

// Spans parses what the file exporter wrote so far. A line still being written is left
// for a later call.
func (c *Collector) Spans(t testing.TB) []Span {
	t.Helper()
	spans, err := Parse(c.Raw(t))
	if err != nil {
		t.Fatalf("%s: %v", c.out, err)
	}
	return spans
}

// WaitSpans waits until at least n spans were written, within timeout, and returns
// them all; it fails the test with what it has otherwise.
func (c *Collector) WaitSpans(t testing.TB, n int, timeout time.Duration) []Span {
	t.Helper()
	var spans []Span
	double.EventuallyWithin(t, timeout, fmt.Sprintf("otelcol wrote %d spans", n), func() bool {
		spans = c.Spans(t)
		return len(spans) >= n
	}, func() string {
		return fmt.Sprintf("; it wrote %d: %s; its log:\n%s", len(spans), Names(spans), c.Log())
	})
	return spans
}

// Stop ends the collector gracefully (SIGTERM: the file exporter flushes what it
// holds), killing it if it has not exited within 10 s; its file stays readable. It does
// nothing to a collector that is not running; Start registers it for the test's end.
func (c *Collector) Stop() { c.signal(syscall.SIGTERM, stopWithin) }

// Kill ends the collector at once (SIGKILL), as a crash would: spans it received but
// had not yet flushed (at most 50 ms' worth) are lost. Its file stays readable.
func (c *Collector) Kill() { c.signal(syscall.SIGKILL, stopWithin) }

func (c *Collector) signal(sig syscall.Signal, within time.Duration) {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(within):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart starts the collector again after Stop or Kill, on the same port and
// appending to the same file, and returns once its receiver answers: a collector that
// comes back. The port may have been taken meanwhile; then the test fails.
func (c *Collector) Restart(t testing.TB) {
	t.Helper()
	if c.running() {
		t.Fatal("otelcol.Restart: the collector is still running; Stop or Kill it first")
	}
	c.run(t)
	if !c.waitReady(t) {
		t.Fatalf("otelcol exited on restart before its receiver answered at %s; its log:\n%s", c.endpoint, c.Log())
	}
}

// Names lists the spans' names, for a failure message.
func Names(spans []Span) string {
	var b bytes.Buffer
	for i, s := range spans {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s.Name)
	}
	return "[" + b.String() + "]"
}
