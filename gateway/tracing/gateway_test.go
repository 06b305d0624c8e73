package tracing_test

import (
	"context"
	"net/http"
	"slices"
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
