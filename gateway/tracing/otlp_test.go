package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is a loopback OTLP/HTTP endpoint that decodes what it is sent.
type receiver struct {
	mu      sync.Mutex
	raw     [][]byte
	reqs    []*collectortrace.ExportTraceServiceRequest
	headers []http.Header
	paths   []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body, _ = io.ReadAll(zr)
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.raw, rc.reqs = append(rc.raw, body), append(rc.reqs, &req)
	rc.headers, rc.paths = append(rc.headers, r.Header.Clone()), append(rc.paths, r.URL.Path)
	rc.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func TestTheOTLPExporterPostsProtobufWithTheHeadersFileReadAtEachExport(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	headers := filepath.Join(t.TempDir(), "headers")
	if err := os.WriteFile(headers, []byte("Authorization: Bearer first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvPodName, "gw-0")
	t.Setenv(EnvPodNamespace, "clinical")
	t.Setenv(EnvGatewayName, "edge\n") // not printable: left out
	cfg := parse(t, "[tracing]\nendpoint = \""+srv.URL+"/base\"\nheaders_file = \""+headers+"\"\nservice_name = \"ferrofed-test\"\n")
	tr, err := New(cfg, Options{Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	_ = tr.Start()
	e := engine(tr)
	serveReq(e, http.MethodGet, "/fhir/Patient/MARKER-ID?family=MARKER-NAME&birthdate=MARKER-DATE", http.Header{"Baggage": {"x=MARKER-BAGGAGE"}})
	flush(t, tr)
	if err := os.WriteFile(headers, []byte("Authorization: Bearer rotated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serveReq(e, http.MethodGet, "/operator/stored-queries", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	tr.Drained(ctx, time.Now().Add(-time.Second), lifecycleCompleted())
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.reqs) != 2 {
		t.Fatalf("%d exports", len(rc.reqs))
	}
	if rc.paths[0] != "/base/v1/traces" || rc.headers[0].Get("Authorization") != "Bearer first" || rc.headers[1].Get("Authorization") != "Bearer rotated" {
		t.Errorf("paths %q, tokens %q, %q", rc.paths, rc.headers[0].Get("Authorization"), rc.headers[1].Get("Authorization"))
	}
	res := rc.reqs[0].ResourceSpans[0]
	got := map[string]string{}
	for _, kv := range res.Resource.Attributes {
		got[kv.Key] = kv.Value.GetStringValue()
	}
	if got["service.name"] != "ferrofed-test" || got["k8s.pod.name"] != "gw-0" || got["k8s.namespace.name"] != "clinical" || got["ferrofed.gateway.name"] != "" {
		t.Errorf("resource %v", got)
	}
	if name := res.ScopeSpans[0].Spans[0].Name; name != "GET /fhir/:type/:id" {
		t.Errorf("span %q", name)
	}
	// Every byte exported, scanned for the markers the request carried.
	for _, raw := range rc.raw {
		if bytes.Contains(raw, []byte("MARKER")) {
			t.Fatalf("an exported byte carries a marker value: %q", raw)
		}
	}
	var names []string
	for _, rs := range rc.reqs[1].ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				names = append(names, s.Name)
			}
		}
	}
	if len(names) != 6 || names[0] != "GET /operator/stored-queries" || names[5] != SpanDrain {
		t.Errorf("the last export %q, want the operator span, the four steps and the drain", names)
	}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func TestWithTheCollectorDownSpansAreDroppedCountedAndMemoryBounded(t *testing.T) {
	cfg := parse(t, "[tracing]\nendpoint = \"http://"+closedPort(t)+"\"\ntimeout_ms = 200\n")
	tr, err := New(cfg, Options{Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	_ = tr.Start()
	e := engine(tr)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 50000
	q := strings.Repeat("x", 200)
	for range n {
		serveReq(e, http.MethodGet, "/fhir/Patient/1?_"+q+"=1", nil)
		if len(tr.queue.ch) > QueueSize {
			t.Fatal("the queue outgrew its bound")
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapInuse) - int64(before.HeapInuse); grown > 32<<20 {
		t.Errorf("the heap grew by %d MiB with %d spans and the collector down", grown>>20, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	tr.Drained(ctx, time.Now(), lifecycleCompleted())
	var total float64
	for _, r := range []string{DroppedQueueFull, DroppedExportFailed, DroppedShutdown} {
		total += testutil.ToFloat64(tr.queue.dropped.WithLabelValues(r))
	}
	// Every span (the requests' and the drain's five) was dropped, and counted.
	if total != n+5 || testutil.ToFloat64(tr.queue.dropped.WithLabelValues(DroppedExportFailed)) == 0 {
		t.Errorf("dropped %v (export_failed %v, queue_full %v), want %d", total,
			testutil.ToFloat64(tr.queue.dropped.WithLabelValues(DroppedExportFailed)),
			testutil.ToFloat64(tr.queue.dropped.WithLabelValues(DroppedQueueFull)), n+5)
	}
}

func TestAnHTTPSEndpointIsVerifiedWithTheCAFile(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewTLSServer(rc)
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pemOf(srv.Certificate().Raw), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, extra string
		exports     int
	}{{"without the CA", "", 0}, {"with the CA", "ca_file = \"" + ca + "\"\n", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			rc.mu.Lock()
			rc.reqs = nil
			rc.mu.Unlock()
			tr, err := New(parse(t, "[tracing]\nendpoint = \""+srv.URL+"\"\n"+tc.extra), Options{Logger: logr.Discard()})
			if err != nil {
				t.Fatal(err)
			}
			_ = tr.Start()
			serveReq(engine(tr), http.MethodGet, "/fhir/Patient/1", nil)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			tr.Drained(ctx, time.Now(), lifecycleCompleted())
			rc.mu.Lock()
			defer rc.mu.Unlock()
			if len(rc.reqs) != tc.exports {
				t.Fatalf("%d exports, want %d", len(rc.reqs), tc.exports)
			}
		})
	}
}

func pemOf(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
