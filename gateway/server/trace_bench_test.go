package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"
)

// dataPlaneServer is the whole engine (every middleware of the data plane, the gate
// open) with one data-plane route and the registrations given.
func dataPlaneServer(tb testing.TB, parts ...Registration) http.Handler {
	tb.Helper()
	cfg := parse(tb, "[server]\nlisten = \"127.0.0.1:0\"\ntermination_message_path = \"\"\n")
	route := Registration{Name: "bench", DataPlane: func(g *gin.RouterGroup) {
		g.GET("/fhir/*path", func(c *gin.Context) { c.Status(http.StatusOK) })
	}}
	s, err := New(cfg, logr.Discard(), WithRegistrations(append([]Registration{route}, parts...)...))
	if err != nil {
		tb.Fatal(err)
	}
	s.state.MarkServing()
	return s.Handler()
}

// BenchmarkDataPlaneRequest is one data-plane request through the whole engine, as
// serve runs it without [tracing] (no Trace hook is registered, so nothing is added to
// the path): its allocs/op are what they were before tracing existed (run the same
// benchmark on an older commit to compare). with_a_trace_hook shows what the hook's
// place in the chain costs by itself (a hook that only calls Next).
func BenchmarkDataPlaneRequest(b *testing.B) {
	for _, bc := range []struct {
		name  string
		parts []Registration
	}{
		{"no_tracing", nil},
		{"with_a_trace_hook", []Registration{{Name: "tracing", Trace: func(c *gin.Context) { c.Next() }}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := dataPlaneServer(b, bc.parts...)
			req := httptest.NewRequest(http.MethodGet, "/fhir/Patient?family=x", nil)
			w := &nopWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, req)
			}
		})
	}
}

func TestTheTraceHookRunsOnTheDataPlaneOnly(t *testing.T) {
	var traced []string
	hook := Registration{Name: "tracing", Trace: func(c *gin.Context) { traced = append(traced, c.FullPath()); c.Next() }}
	h := dataPlaneServer(t, hook)
	for _, p := range []string{"/health", "/health/readiness", "/health/readiness/config", "/metrics", "/nowhere", "/fhir/Patient"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
	}
	if len(traced) != 1 || traced[0] != "/fhir/*path" {
		t.Fatalf("the trace hook ran for %q, want the data-plane route only", traced)
	}
}
