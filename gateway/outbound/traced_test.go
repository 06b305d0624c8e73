package outbound

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ferrofed/ferrofed/gateway/tracing"
)

func TestTracedSendsTraceparentOfItsClientSpanAndNoBaggage(t *testing.T) {
	var got http.Header
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(http.StatusTeapot)
	}))
	defer member.Close()
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(mem))
	ctx, server := tp.Tracer("t").Start(context.Background(), "GET /fhir/:type")
	rt := &Traced{Base: http.DefaultTransport, Name: tracing.SpanMemberCall, Attributes: func(*http.Request) []attribute.KeyValue {
		return []attribute.KeyValue{tracing.AttrMemberID.String("m1"), attribute.String("url.full", member.URL)}
	}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, member.URL+"/Patient?family=x", nil)
	req.Header.Set("Baggage", "patient=1")
	res, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	server.End()
	spans := mem.GetSpans()
	if len(spans) != 2 || spans[0].Name != tracing.SpanMemberCall {
		t.Fatalf("spans %v", spans)
	}
	client := spans[0]
	want := "00-" + client.SpanContext.TraceID().String() + "-" + client.SpanContext.SpanID().String() + "-01"
	if got.Get("Traceparent") != want || got.Get("Baggage") != "" {
		t.Errorf("the member got traceparent %q (want %q), baggage %q", got.Get("Traceparent"), want, got.Get("Baggage"))
	}
	if client.Parent.SpanID() != spans[1].SpanContext.SpanID() {
		t.Error("the client span is not the server span's child")
	}
	var attrs []string
	for _, kv := range client.Attributes {
		attrs = append(attrs, string(kv.Key)+"="+kv.Value.String())
	}
	if strings.Join(attrs, ",") != "ferrofed.member.id=m1,http.response.status_code=418" {
		t.Errorf("attributes %q", attrs)
	}
	if req.Header.Get("Traceparent") != "" {
		t.Error("the caller's request was changed")
	}
}

func TestTracedWithoutASpanSendsTheRequestAsItIs(t *testing.T) {
	var got http.Header
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer member.Close()
	rt := &Traced{Base: http.DefaultTransport, Name: tracing.SpanMemberCall}
	req, _ := http.NewRequest(http.MethodGet, member.URL, nil)
	res, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got.Get("Traceparent") != "" {
		t.Errorf("traceparent %q without a span", got.Get("Traceparent"))
	}
}
