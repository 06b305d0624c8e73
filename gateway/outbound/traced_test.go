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
	"go.opentelemetry.io/otel/trace"

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
	if strings.Join(attrs, ",") != "ferrofed.member.id=m1,http.response.status_code=418,http.response.body.size=0" {
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

// A routed request carries the client's headers: under a span they give way to the
// member call's traceparent, without baggage; without one they go as they came. The
// span ends with the outcome, status and bytes.
func TestMemberSpanOnReplacesTheClientsTraceHeaders(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(mem))
	client := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, traced := range []bool{true, false} {
		ctx := context.Background()
		var server interface{ End(...trace.SpanEndOption) }
		if traced {
			ctx, server = tp.Tracer("t").Start(ctx, "GET /nodes/:node/fhir/*path")
		}
		out, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://member.invalid/fhir/Patient?family=x", nil)
		out.Header.Set("Traceparent", client)
		out.Header.Set("Baggage", "patient=1")
		span := MemberSpanOn(out, "m1")
		EndMemberSpan(span, Call{Status: 200}, 42)
		tp0 := out.Header.Get("Traceparent")
		if !traced {
			if tp0 != client || out.Header.Get("Baggage") == "" || span.IsRecording() {
				t.Errorf("untraced: traceparent %q, baggage %q", tp0, out.Header.Get("Baggage"))
			}
			continue
		}
		server.End()
		spans := mem.GetSpans()
		if len(spans) != 2 || spans[0].Name != tracing.SpanMemberCall || !strings.Contains(tp0, spans[0].SpanContext.SpanID().String()) || out.Header.Get("Baggage") != "" {
			t.Fatalf("traced: traceparent %q, baggage %q, spans %d", tp0, out.Header.Get("Baggage"), len(spans))
		}
		var attrs []string
		for _, kv := range spans[0].Attributes {
			attrs = append(attrs, string(kv.Key)+"="+kv.Value.String())
		}
		if a := strings.Join(attrs, ","); a != "ferrofed.member.id=m1,ferrofed.member.outcome=ok,http.response.status_code=200,http.response.body.size=42" {
			t.Errorf("attributes %s", a)
		}
	}
}
