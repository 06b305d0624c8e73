package otelcol

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// exporter is the OpenTelemetry Go SDK's OTLP/HTTP trace exporter, pointed at c, not
// retrying, so that an export to a collector that is down fails at once.
func exporter(t *testing.T, c *Collector) *otlptrace.Exporter {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(c.TracesURL()),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
		otlptracehttp.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

// provider is a tracer provider exporting to c in batches, shut down (flushed) by
// the returned function.
func provider(t *testing.T, c *Collector) (*sdktrace.TracerProvider, func()) {
	t.Helper()
	res := resource.NewSchemaless(attribute.String("service.name", "ferrofed-otelcol-test"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter(t, c)), sdktrace.WithResource(res))
	return tp, func() {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Fatalf("tracer provider shutdown (its last export): %v", err)
		}
	}
}

func byName(t *testing.T, spans []Span, name string) Span {
	t.Helper()
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q among %s", name, Names(spans))
	return Span{}
}

// TestSpansExportedWithTheSDKComeBackParsed: spans the OpenTelemetry Go SDK exports to
// a real collector over OTLP/HTTP are read back from its file exporter with their ids,
// parent, kind, attributes of each type, event, status and resource.
func TestSpansExportedWithTheSDKComeBackParsed(t *testing.T) {
	c := Start(t)
	tp, shutdown := provider(t, c)
	tracer := tp.Tracer("ferrofed/test/otelcol")

	ctx, parent := tracer.Start(context.Background(), "GET /fhir/Patient", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", "GET"), attribute.Int("http.response.status_code", 200)))
	_, child := tracer.Start(ctx, "member call", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.Bool("ferrofed.retried", true), attribute.Float64("ferrofed.weight", 0.5),
			attribute.StringSlice("ferrofed.members", []string{"a", "b"})))
	child.AddEvent("retry", trace.WithAttributes(attribute.Int("attempt", 2)))
	child.SetStatus(codes.Error, "member timed out")
	child.End()
	parent.End()
	_, other := tracer.Start(context.Background(), "background")
	other.End()
	shutdown()

	spans := c.WaitSpans(t, 3, 15*time.Second)
	if len(spans) != 3 {
		t.Fatalf("%d spans %s, want 3", len(spans), Names(spans))
	}
	p, ch, o := byName(t, spans, "GET /fhir/Patient"), byName(t, spans, "member call"), byName(t, spans, "background")

	if want := parent.SpanContext(); p.TraceID != want.TraceID().String() || p.SpanID != want.SpanID().String() || p.ParentID != "" {
		t.Errorf("parent ids %s/%s parent %q, want %s/%s and no parent", p.TraceID, p.SpanID, p.ParentID, want.TraceID(), want.SpanID())
	}
	if ch.TraceID != p.TraceID || ch.ParentID != p.SpanID || ch.SpanID != child.SpanContext().SpanID().String() {
		t.Errorf("child trace %s parent %s span %s, want trace %s parent %s span %s", ch.TraceID, ch.ParentID, ch.SpanID, p.TraceID, p.SpanID, child.SpanContext().SpanID())
	}
	if o.TraceID == p.TraceID || o.ParentID != "" {
		t.Errorf("the unrelated root span has trace %s parent %q: want a trace of its own", o.TraceID, o.ParentID)
	}
	if p.Kind != "server" || ch.Kind != "client" || o.Kind != "internal" {
		t.Errorf("kinds %s, %s, %s, want server, client, internal", p.Kind, ch.Kind, o.Kind)
	}
	if want := map[string]any{"http.request.method": "GET", "http.response.status_code": int64(200)}; !reflect.DeepEqual(p.Attributes, want) {
		t.Errorf("parent attributes %#v, want %#v", p.Attributes, want)
	}
	if want := map[string]any{"ferrofed.retried": true, "ferrofed.weight": 0.5, "ferrofed.members": []any{"a", "b"}}; !reflect.DeepEqual(ch.Attributes, want) {
		t.Errorf("child attributes %#v, want %#v", ch.Attributes, want)
	}
	if len(ch.Events) != 1 || ch.Events[0].Name != "retry" || ch.Events[0].Attributes["attempt"] != int64(2) || ch.Events[0].Time.IsZero() {
		t.Errorf("child events %+v, want one retry with attempt 2", ch.Events)
	}
	if ch.Status != (Status{Code: "error", Message: "member timed out"}) || p.Status.Code != "unset" {
		t.Errorf("statuses %+v (child), %+v (parent), want error with its message, unset", ch.Status, p.Status)
	}
	if p.Resource["service.name"] != "ferrofed-otelcol-test" || p.Scope != "ferrofed/test/otelcol" {
		t.Errorf("resource %v scope %q", p.Resource, p.Scope)
	}
	if p.Start.IsZero() || p.End.Before(p.Start) || ch.Start.Before(p.Start) {
		t.Errorf("times: parent %s–%s, child from %s", p.Start, p.End, ch.Start)
	}
	raw := c.Raw(t)
	for _, s := range []string{"member timed out", p.TraceID, "ferrofed-otelcol-test"} {
		if !bytes.Contains(raw, []byte(s)) {
			t.Errorf("Raw has no %q", s)
		}
	}
}

// TestACollectorDownRefusesExportsAndComesBack: after Stop and after Kill an export
// fails; after Restart on the same port it goes through, and what was written before
// is still there.
func TestACollectorDownRefusesExportsAndComesBack(t *testing.T) {
	c := Start(t)
	exp := exporter(t, c)
	// Spans made by a provider without a processor, exported by hand: the SDK hands a
	// processor's export error to its global handler, not to the caller.
	tracer := sdktrace.NewTracerProvider().Tracer("ferrofed/test/otelcol")
	export := func(name string) error {
		_, s := tracer.Start(context.Background(), name)
		s.End()
		return exp.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{s.(sdktrace.ReadOnlySpan)})
	}

	if err := export("before"); err != nil {
		t.Fatalf("export to a running collector: %v", err)
	}
	c.WaitSpans(t, 1, 15*time.Second)
	for i, down := range []func(){c.Stop, c.Kill} {
		down()
		if err := export("lost"); err == nil {
			t.Fatalf("down #%d: an export to a stopped collector succeeded", i+1)
		}
		c.Restart(t)
		if err := export("after"); err != nil {
			t.Fatalf("after restart #%d: %v", i+1, err)
		}
		// Written before the next Kill, which loses what the exporter has not flushed.
		c.WaitSpans(t, 2+i, 15*time.Second)
	}
	spans := c.WaitSpans(t, 3, 15*time.Second)
	if got := Names(spans); got != "[before, after, after]" {
		t.Errorf("spans %s, want [before, after, after]", got)
	}
}

// TestParseReadsEveryValueTypeAndLeavesAPartialLine covers what the SDK test does not
// send: bytes, key-value lists, integers written as numbers, an unknown kind, and a last
// line still being written.
func TestParseReadsEveryValueTypeAndLeavesAPartialLine(t *testing.T) {
	data := []byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"g"}}]},"scopeSpans":[{"scope":{"name":"s"},"spans":[` +
		`{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","parentSpanId":"aaa19b7ec3c1b174","name":"a","kind":9,"startTimeUnixNano":"1000","endTimeUnixNano":2000,` +
		`"attributes":[{"key":"b","value":{"bytesValue":"aGk="}},{"key":"kv","value":{"kvlistValue":{"values":[{"key":"n","value":{"intValue":"-3"}}]}}},{"key":"e","value":{}}],` +
		`"status":{"code":1}}]}]}]}` + "\n\n" + `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"partial"`)
	spans, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 1 {
		t.Fatalf("%d spans %s, want 1 (the partial line left out)", len(spans), Names(spans))
	}
	s := spans[0]
	want := map[string]any{"b": []byte("hi"), "kv": map[string]any{"n": int64(-3)}, "e": nil}
	if !reflect.DeepEqual(s.Attributes, want) || s.Kind != "9" || s.Status.Code != "ok" || s.ParentID != "aaa19b7ec3c1b174" ||
		s.Start.UnixNano() != 1000 || s.End.UnixNano() != 2000 || s.Resource["service.name"] != "g" || s.Scope != "s" {
		t.Errorf("parsed %+v", s)
	}
	if _, err := Parse([]byte("not json\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("Parse of a bad line: %v, want an error naming line 1", err)
	}
}

// TestMissingNamesTheCommandThatBuildsIt: without the binary, the skip (or CI's
// failure) says how to build it.
func TestMissingNamesTheCommandThatBuildsIt(t *testing.T) {
	if got := missing(filepath.Join(t.TempDir(), "otelcol")); !strings.Contains(got, "hack/tools.sh otelcol") {
		t.Errorf("missing: %q, want it to name hack/tools.sh otelcol", got)
	}
	if got := missing(Binary()); got != Missing() {
		t.Errorf("missing(Binary()) %q != Missing() %q", got, Missing())
	}
}
