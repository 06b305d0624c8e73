package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/health"
)

// nopWriter is a ResponseWriter that allocates nothing, so that the figures measure the
// router and the gate, not the recorder.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *nopWriter) WriteHeader(int)             {}

// gateRouters are the same gin router with and without the readiness gate in front of
// the data-plane route, the gate open (serving).
func gateRouters() (without, with *gin.Engine) {
	gin.SetMode(gin.ReleaseMode)
	st := health.NewState(nil)
	st.MarkServing()
	h := func(c *gin.Context) { c.Status(http.StatusOK) }
	without = gin.New()
	without.GET("/fhir/*path", h)
	with = gin.New()
	with.GET("/fhir/*path", health.Gate(st), h)
	return without, with
}

// BenchmarkReadinessGate reports the gate's cost: compare with_gate to without_gate of
// the same run (goal: ≤ 20 ns/op more, 0 allocs/op more).
func BenchmarkReadinessGate(b *testing.B) {
	without, with := gateRouters()
	req := httptest.NewRequest(http.MethodGet, "/fhir/Patient", nil)
	for _, bc := range []struct {
		name string
		r    *gin.Engine
	}{{"without_gate", without}, {"with_gate", with}} {
		b.Run(bc.name, func(b *testing.B) {
			w := &nopWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				bc.r.ServeHTTP(w, req)
			}
		})
	}
}

func TestTheGateAllocatesNothing(t *testing.T) {
	without, with := gateRouters()
	req := httptest.NewRequest(http.MethodGet, "/fhir/Patient", nil)
	w := &nopWriter{h: http.Header{}}
	base := testing.AllocsPerRun(1000, func() { without.ServeHTTP(w, req) })
	gated := testing.AllocsPerRun(1000, func() { with.ServeHTTP(w, req) })
	if gated != base {
		t.Fatalf("the open gate allocates: %v allocs/op with it, %v without", gated, base)
	}
}
