package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// memory is an exporter per endpoint, so that a reload's swap can be seen.
type memory struct {
	mu   sync.Mutex
	by   map[string]*tracetest.InMemoryExporter
	fail map[string]bool
}

func newMemory() *memory {
	return &memory{by: map[string]*tracetest.InMemoryExporter{}, fail: map[string]bool{}}
}

func (m *memory) exporter(t *config.Tracing) (sdktrace.SpanExporter, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail[t.Endpoint] {
		return nil, &config.FileError{Key: "tracing.ca_file", Err: context.Canceled}
	}
	if m.by[t.Endpoint] == nil {
		m.by[t.Endpoint] = tracetest.NewInMemoryExporter()
	}
	return keepOnShutdown{m.by[t.Endpoint]}, nil
}

// keepOnShutdown keeps what the in-memory exporter holds when it is shut down (it
// would forget it), so that a test reads what a drain or a reload exported.
type keepOnShutdown struct{ *tracetest.InMemoryExporter }

func (keepOnShutdown) Shutdown(context.Context) error { return nil }

func (m *memory) spans(endpoint string) tracetest.SpanStubs {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.by[endpoint]; e != nil {
		return e.GetSpans()
	}
	return nil
}

func parse(t *testing.T, tracing string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte("[auth]\ndata_plane = \"open\"\n"+tracing), "t.toml", config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

const endpointA = "http://collector-a:4318"

func newTracing(t *testing.T, m *memory, extra string) *Tracing {
	t.Helper()
	tr, err := New(parse(t, "[tracing]\nendpoint = \""+endpointA+"\"\n"+extra), Options{Logger: logr.Discard(), Exporter: m.exporter})
	if err != nil || tr == nil {
		t.Fatalf("New: %v, %v", tr, err)
	}
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = tr.queue.close(context.Background()) })
	return tr
}

func flush(t *testing.T, tr *Tracing) {
	t.Helper()
	if err := tr.queue.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// engine is the server's shape: the middleware on the data-plane and operator
// groups, none on the probes and metrics.
func engine(tr *Tracing) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	ok := func(c *gin.Context) { c.String(http.StatusOK, "ok") }
	e.GET("/health", ok)
	e.GET("/health/readiness", ok)
	e.GET("/metrics", ok)
	data := e.Group("", tr.Middleware())
	data.GET("/fhir/:type/:id", ok)
	data.GET("/fhir/:type", func(c *gin.Context) { c.String(http.StatusBadGateway, "members down") })
	e.Group("/operator", tr.Middleware()).GET("/stored-queries", ok)
	return e
}

func serveReq(e http.Handler, method, target string, h http.Header) {
	r := httptest.NewRequest(method, target, nil)
	for k, v := range h {
		r.Header[k] = v
	}
	e.ServeHTTP(httptest.NewRecorder(), r)
}

func attr(s tracetest.SpanStub, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func TestServerSpansAreNamedByRouteAndCarryNoValue(t *testing.T) {
	m := newMemory()
	tr := newTracing(t, m, "")
	e := engine(tr)
	serveReq(e, http.MethodGet, "/fhir/Patient/pat-123?family=Marker-Smith&birthdate=1970-01-01&family=x&J%C3%B6rg=1", nil)
	serveReq(e, http.MethodGet, "/fhir/Observation?subject=Patient/pat-123", nil)
	serveReq(e, http.MethodGet, "/operator/stored-queries", nil)
	for _, p := range []string{"/health", "/health/readiness", "/metrics"} {
		serveReq(e, http.MethodGet, p, nil)
	}
	flush(t, tr)
	spans := m.spans(endpointA)
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	want := []string{"GET /fhir/:type/:id", "GET /fhir/:type", "GET /operator/stored-queries"}
	if !slices.Equal(names, want) {
		t.Fatalf("spans %q, want %q (no span for the probes or /metrics)", names, want)
	}
	read := spans[0]
	if read.SpanKind != trace.SpanKindServer {
		t.Errorf("kind %v", read.SpanKind)
	}
	for k, v := range map[attribute.Key]string{AttrMethod: "GET", AttrRoute: "/fhir/:type/:id", AttrScheme: "http"} {
		if got, _ := attr(read, k); got.AsString() != v {
			t.Errorf("%s = %q, want %q", k, got.String(), v)
		}
	}
	if got, _ := attr(read, AttrStatusCode); got.AsInt64() != 200 {
		t.Errorf("status %v", got.String())
	}
	if got, _ := attr(read, AttrQueryParameters); !slices.Equal(got.AsStringSlice(), []string{"(other)", "birthdate", "family"}) {
		t.Errorf("parameter names %q", got.AsStringSlice())
	}
	if spans[1].Status.Code.String() != "Error" {
		t.Errorf("a 502 has status %v", spans[1].Status)
	}
	for _, s := range spans {
		if dump := strings.Join([]string{s.Name, attrString(s.Attributes)}, " "); strings.Contains(dump, "pat-123") ||
			strings.Contains(dump, "Marker") || strings.Contains(dump, "1970") || strings.Contains(dump, "Jörg") {
			t.Errorf("a span carries a value: %s", dump)
		}
	}
}

func attrString(kvs []attribute.KeyValue) string {
	var b strings.Builder
	for _, kv := range kvs {
		b.WriteString(string(kv.Key) + "=" + kv.Value.String() + " ")
	}
	return b.String()
}

func TestTheServerSpanJoinsTheCallersTraceAndDropsBaggage(t *testing.T) {
	m := newMemory()
	tr := newTracing(t, m, "sampling_ratio = 0.0\n")
	e := engine(tr)
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	h := http.Header{"Traceparent": {"00-" + traceID + "-" + parentID + "-01"}, "Tracestate": {"vendor=x"},
		"Baggage": {"patient=pat-123"}}
	serveReq(e, http.MethodGet, "/fhir/Patient/1", h)
	// An unsampled caller's trace is not kept, whatever the ratio; a new trace with ratio 0 neither.
	serveReq(e, http.MethodGet, "/fhir/Patient/2", http.Header{"Traceparent": {"00-" + traceID + "-" + parentID + "-00"}})
	serveReq(e, http.MethodGet, "/fhir/Patient/3", nil)
	flush(t, tr)
	spans := m.spans(endpointA)
	if len(spans) != 1 {
		t.Fatalf("%d spans, want the sampled caller's only", len(spans))
	}
	s := spans[0]
	if s.SpanContext.TraceID().String() != traceID || s.Parent.SpanID().String() != parentID || !s.Parent.IsRemote() {
		t.Errorf("trace %s parent %s, want the caller's", s.SpanContext.TraceID(), s.Parent.SpanID())
	}
	if s.SpanContext.TraceState().String() != "vendor=x" {
		t.Errorf("tracestate %q", s.SpanContext.TraceState().String())
	}
	if strings.Contains(attrString(s.Attributes), "patient") {
		t.Errorf("baggage reached the span: %v", s.Attributes)
	}
}

func TestTheFilterDropsWhatTheAllowListDoesNotKnow(t *testing.T) {
	m := newMemory()
	tr := newTracing(t, m, "")
	tr.routes.add("GET /fhir/*path") // as the middleware does for the routes it serves
	ctx, server := tr.tracer.Start(context.Background(), "GET /fhir/*path")
	// Made past the allow-list on purpose: the filter in front of the exporter is
	// the second layer.
	_, s := tr.tracer.Start(ctx, "GET /fhir/Patient/pat-123", trace.WithAttributes(
		attribute.String("patient.id", "pat-123"), AttrMemberID.String("m1"), attribute.String("url.full", "https://member/fhir?x=1")))
	s.AddEvent("exception", trace.WithAttributes(attribute.String("exception.message", "token abc")))
	s.AddEvent("merge", trace.WithAttributes(attribute.String("patient.id", "pat-123"), AttrMemberID.String("m1")))
	s.AddLink(trace.LinkFromContext(ctx, attribute.String("patient.id", "pat-123")))
	s.RecordError(context.Canceled)
	s.End()
	server.End()
	_, c := Client(ctx, SpanMemberCall, AttrMemberID.String("m2"), attribute.String("url.full", "https://member"))
	c.End()
	flush(t, tr)
	spans := m.spans(endpointA)
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	f := spans[0]
	if f.Name != redactedName || attrString(f.Attributes) != "ferrofed.member.id=m1 " || len(f.Links) != 0 || f.Status.Description != "" {
		t.Errorf("filtered span: %q %q links %d status %q", f.Name, attrString(f.Attributes), len(f.Links), f.Status.Description)
	}
	if len(f.Events) != 1 || f.Events[0].Name != "merge" || attrString(f.Events[0].Attributes) != "ferrofed.member.id=m1 " {
		t.Errorf("events %+v", f.Events)
	}
	if spans[1].Name != "GET /fhir/*path" {
		t.Errorf("an allowed server span renamed: %q", spans[1].Name)
	}
	if c := spans[2]; c.Name != SpanMemberCall || attrString(c.Attributes) != "ferrofed.member.id=m2 " || c.SpanKind != trace.SpanKindClient {
		t.Errorf("client span %q %q", c.Name, attrString(c.Attributes))
	}
	if got := spans[0].Resource.Attributes(); !slices.Contains(got, attribute.String("service.name", "ferrofed")) {
		t.Errorf("resource %v", got)
	}
}

func TestClientWithoutASpanCostsNothing(t *testing.T) {
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, s := Client(ctx, SpanMemberCall)
		s.End()
		if c != ctx {
			t.Fatal("a new context")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations without tracing", allocs)
	}
	h := http.Header{}
	Inject(ctx, h)
	if len(h) != 0 {
		t.Errorf("injected %v without a span", h)
	}
}

func TestTheDrainIsASpanWithItsSteps(t *testing.T) {
	m := newMemory()
	tr := newTracing(t, m, "sampling_ratio = 0.0\n") // the drain is kept whatever the ratio
	start := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	msg := lifecycle.TerminationMessage{Outcome: lifecycle.DrainCut, Drain: 10 * time.Second, CutConnections: 3,
		Abandoned: []string{"identity_registry"},
		Steps:     lifecycle.DrainSteps{DrainDelay: 2 * time.Second, ListenerClosed: time.Millisecond, InFlight: 5 * time.Second, Bindings: 2999 * time.Millisecond}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	tr.Drained(ctx, start, msg)
	spans := m.spans(endpointA)
	if len(spans) != 5 {
		t.Fatalf("%d spans", len(spans))
	}
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	d := byName[SpanDrain]
	if !d.StartTime.Equal(start) || !d.EndTime.Equal(start.Add(10*time.Second)) || d.Status.Code.String() != "Error" {
		t.Errorf("drain %s..%s %v", d.StartTime, d.EndTime, d.Status)
	}
	if v, _ := attr(d, AttrDrainCutConnections); v.AsInt64() != 3 {
		t.Errorf("cut %v", v.String())
	}
	if v, _ := attr(d, AttrDrainAbandoned); !slices.Equal(v.AsStringSlice(), []string{"identity_registry"}) {
		t.Errorf("abandoned %v", v.String())
	}
	at := start
	for _, step := range []struct {
		name string
		took time.Duration
	}{{SpanDrainDelay, 2 * time.Second}, {SpanDrainListenerClosed, time.Millisecond}, {SpanDrainInFlight, 5 * time.Second}, {SpanDrainBindings, 2999 * time.Millisecond}} {
		s := byName[step.name]
		if s.Parent.SpanID() != d.SpanContext.SpanID() || !s.StartTime.Equal(at) || s.EndTime.Sub(s.StartTime) != step.took {
			t.Errorf("%s: parent %s, %s..%s", step.name, s.Parent.SpanID(), s.StartTime, s.EndTime)
		}
		at = at.Add(step.took)
	}
	// After the drain, a span ending late is counted, not queued.
	_, late := tr.tracer.Start(context.Background(), SpanDrain)
	late.End()
	if got := testutil.ToFloat64(tr.queue.dropped.WithLabelValues(DroppedShutdown)); got != 1 {
		t.Errorf("dropped at shutdown %v, want 1", got)
	}
}

func TestAReloadSwapsTheExporterAndARefusalKeepsIt(t *testing.T) {
	m := newMemory()
	tr := newTracing(t, m, "")
	span := func(name string) {
		tr.routes.add(name)
		_, s := tr.tracer.Start(context.Background(), name)
		s.End()
	}
	span("GET /before")
	const endpointB, endpointC = "http://collector-b:4318", "http://collector-c:4318"
	m.fail[endpointC] = true
	if _, err := tr.PrepareReload(parse(t, "[tracing]\nendpoint = \""+endpointC+"\"\n")); err == nil {
		t.Fatal("a reload whose exporter cannot be built was accepted")
	}
	span("GET /refused")
	apply, err := tr.PrepareReload(parse(t, "[tracing]\nendpoint = \""+endpointB+"\"\nsampling_ratio = 1\nservice_name = \"gw-b\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	apply()
	deadline := time.Now().Add(5 * time.Second)
	for len(m.spans(endpointA)) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	span("GET /after")
	flush(t, tr)
	names := func(ss tracetest.SpanStubs) (out []string) {
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return out
	}
	if a, b := names(m.spans(endpointA)), names(m.spans(endpointB)); !slices.Equal(a, []string{"GET /before", "GET /refused"}) || !slices.Equal(b, []string{"GET /after"}) {
		t.Fatalf("old endpoint %q, new %q", a, b)
	}
	if got := m.spans(endpointB)[0].Resource.Attributes(); !slices.Contains(got, attribute.String("service.name", "gw-b")) {
		t.Errorf("resource after the reload %v", got)
	}
	// A reload that removes the table keeps the running exporter (a restart applies it).
	apply, err = tr.PrepareReload(parse(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	apply()
	span("GET /kept")
	flush(t, tr)
	if b := names(m.spans(endpointB)); !slices.Equal(b, []string{"GET /after", "GET /kept"}) {
		t.Fatalf("after removing the table: %q", b)
	}
}

func lifecycleCompleted() lifecycle.TerminationMessage {
	return lifecycle.TerminationMessage{Outcome: lifecycle.DrainCompleted, Drain: time.Second, Abandoned: []string{}}
}
