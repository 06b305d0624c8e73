package tracing_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ferrofed/ferrofed/gateway/assemble"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
	"github.com/ferrofed/ferrofed/gateway/server"
	"github.com/ferrofed/ferrofed/gateway/tracing"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

// kept is an in-memory exporter that keeps its spans when the drain shuts it down.
type kept struct{ *tracetest.InMemoryExporter }

func (kept) Shutdown(context.Context) error { return nil }

// A whole gateway, as serve runs it: the probes and /metrics make no span, a
// data-plane and an operator request do, and the drain's span and the span of a
// request that arrived during the drain delay are exported before Run returns.
func TestAWholeGatewayTracesItsRoutesAndItsDrain(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	var during sync.WaitGroup
	var duringStatus int
	var g *gatewaytest.Gateway
	observe := func(sig lifecycle.Signal, _ time.Time) {
		if sig != lifecycle.SignalShutdownInitiated {
			return
		}
		during.Go(func() {
			res, err := g.Get("/fhir/Patient?family=MARKER")
			if err == nil {
				duringStatus = res.StatusCode
				res.Body.Close()
			}
		})
	}
	g = gatewaytest.Start(t, "[tracing]\nendpoint = \"http://127.0.0.1:1\"\n",
		gatewaytest.WithServer("drain_delay_ms = 500\n"),
		gatewaytest.WithAssemble(
			assemble.WithSpanExporter(func(*config.Tracing) (sdktrace.SpanExporter, error) { return kept{mem}, nil }),
			assemble.WithServerOptions(server.WithSignalObserver(observe))))
	for _, p := range []string{"/health", "/health/readiness", "/health/readiness/config", "/metrics"} {
		res, err := g.Get(p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	g.Do(http.MethodGet, "/fhir/metadata", "", nil)
	g.Do(http.MethodGet, "/operator/dependencies", g.Token, nil)
	g.Stop()
	during.Wait()
	var names []string
	for _, s := range mem.GetSpans() {
		names = append(names, s.Name)
	}
	if duringStatus == 0 {
		t.Fatal("the request sent during the drain delay was not answered")
	}
	for _, want := range []string{"GET /fhir/metadata", "GET /operator/dependencies", "GET /fhir/:type", tracing.SpanDrain, tracing.SpanDrainDelay, tracing.SpanDrainBindings} {
		if !slices.Contains(names, want) {
			t.Errorf("no span %q in %q", want, names)
		}
	}
	for _, n := range names {
		if n == "GET /health" || n == "GET /metrics" || n == "GET /health/readiness" || n == "GET /health/readiness/:check" {
			t.Errorf("a probe or a scrape made a span: %q", names)
		}
	}
}

// A federated search over two members, one up and one down: the server span and a
// "member call" client span per member under it, with the member's id and outcome,
// and the member that answered got the traceparent of its own client span.
func TestAFederatedSearchMakesAClientSpanPerMember(t *testing.T) {
	var mu sync.Mutex
	var traceparent string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparent = r.Header.Get("Traceparent")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/fhir+json")
		_, _ = w.Write([]byte(`{"resourceType":"Bundle","type":"searchset","entry":[]}`))
	}))
	defer up.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	mem := tracetest.NewInMemoryExporter()
	g := gatewaytest.Start(t, "[tracing]\nendpoint = \"http://127.0.0.1:1\"\n"+
		"[[registry.members]]\nid = \"m-up\"\nquery_endpoint = \""+up.URL+"/fhir\"\n"+
		"[[registry.members]]\nid = \"m-down\"\nquery_endpoint = \"http://"+down+"/fhir\"\n",
		gatewaytest.WithAssemble(assemble.WithSpanExporter(func(*config.Tracing) (sdktrace.SpanExporter, error) { return kept{mem}, nil })))
	if code, body := g.Do(http.MethodGet, "/fhir/Patient?family=MARKER-NAME&birthdate=1970-01-01", "", nil); code != http.StatusOK {
		t.Fatalf("search: %d %s", code, body)
	}
	g.Stop()
	var server tracetest.SpanStub
	calls := map[string]tracetest.SpanStub{}
	for _, s := range mem.GetSpans() {
		switch s.Name {
		case "GET /fhir/:type":
			server = s
		case tracing.SpanMemberCall:
			for _, kv := range s.Attributes {
				if kv.Key == tracing.AttrMemberID {
					calls[kv.Value.AsString()] = s
				}
			}
		}
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), "MARKER") || strings.Contains(kv.Value.String(), "1970") || strings.Contains(kv.Value.String(), "127.0.0.1") {
				t.Errorf("span %q carries %s=%s", s.Name, kv.Key, kv.Value.String())
			}
		}
	}
	if !server.SpanContext.IsValid() || len(calls) != 2 {
		t.Fatalf("server span %v, member calls %v", server.SpanContext.IsValid(), calls)
	}
	outcomes := map[string]string{}
	for id, c := range calls {
		if c.Parent.SpanID() != server.SpanContext.SpanID() {
			t.Errorf("%s: not a child of the server span", id)
		}
		for _, kv := range c.Attributes {
			if kv.Key == tracing.AttrMemberOutcome {
				outcomes[id] = kv.Value.AsString()
			}
		}
	}
	if outcomes["m-up"] != "ok" || outcomes["m-down"] != "unreachable" {
		t.Errorf("outcomes %v", outcomes)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "00-" + server.SpanContext.TraceID().String() + "-" + calls["m-up"].SpanContext.SpanID().String() + "-01"; traceparent != want {
		t.Errorf("the member got traceparent %q, want %q", traceparent, want)
	}
}
