package bindings

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Every exchange of a binding's client is a client span "binding {key}": under the
// request's span when it has one, else (Metrics.Tracer set) the root of a trace of its
// own; the service receives its traceparent, never the caller's baggage, and the span
// carries the key, the outcome, the status, never the URL or its query.
func TestTheClientTracesEachExchange(t *testing.T) {
	var got []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Clone())
		w.WriteHeader(http.StatusTeapot)
	}))
	defer srv.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	m := NewMetrics()
	m.Tracer = tp
	c, err := NewClient(ClientOptions{Name: "demographics", Table: "pdqm", Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx, server := tp.Tracer("t").Start(context.Background(), "GET /fhir/*path", trace.WithSpanKind(trace.SpanKindServer))
	for _, ctx := range []context.Context{ctx, context.Background()} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/Patient?family=SECRET", nil)
		req.Header.Set("Baggage", "k=SECRET")
		res, err := c.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	server.End()
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	child, root := spans[0], spans[1]
	for i, s := range []tracetest.SpanStub{child, root} {
		if s.Name != "binding demographics" || s.SpanKind != trace.SpanKindClient {
			t.Errorf("span %q kind %v", s.Name, s.SpanKind)
		}
		var attrs []string
		for _, kv := range s.Attributes {
			attrs = append(attrs, string(kv.Key)+"="+kv.Value.String())
		}
		if a := strings.Join(attrs, ","); a != "ferrofed.binding=demographics,http.response.status_code=418,ferrofed.binding.outcome=client_error,http.response.body.size=0" {
			t.Errorf("attributes %s", a)
		}
		if tp := got[i].Get("Traceparent"); !strings.Contains(tp, s.SpanContext.SpanID().String()) || got[i].Get("Baggage") != "" {
			t.Errorf("the service got traceparent %q, baggage %q", tp, got[i].Get("Baggage"))
		}
	}
	if child.Parent.SpanID() != spans[2].SpanContext.SpanID() || root.Parent.IsValid() {
		t.Error("the exchange under a request is not its child, or the one without is not a root")
	}
}

// Without Metrics.Tracer an exchange no request made is not traced, and sends no
// traceparent.
func TestTheClientTracesNothingWithoutASpanOrTracer(t *testing.T) {
	var tp string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { tp = r.Header.Get("Traceparent") }))
	defer srv.Close()
	c, err := NewClient(ClientOptions{Name: "demographics", Table: "pdqm", Metrics: NewMetrics()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.HTTP.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if tp != "" {
		t.Errorf("traceparent %q", tp)
	}
}
