package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ferrofed/ferrofed/gateway/health"
)

// The probe front answers exactly what the gin routes behind it answer: the same code,
// body and headers, for GET and HEAD, in every phase, counted the same way.
func TestTheProbeFrontAnswersAsTheEngine(t *testing.T) {
	failing := true
	sf := newTestSurface()
	sf.checks = []health.Check{health.NamedCheck("registry", func(context.Context) error {
		if failing {
			return errors.New("loading")
		}
		return nil
	})}
	s, err := New(parse(t, "[server]\nbase_path = \"/x\"\n[health]\ncache_ttl_ms = 0\n"), logr.Discard(), withSurfaces(sf))
	if err != nil {
		t.Fatal(err)
	}
	compare := func(phase string) {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			for _, path := range []string{"/x/health", "/x/health/readiness", "/x/health/readiness?verbose=0", "/x/health/readiness?verbose=1&verbose=0"} {
				front, engine := get(t, s.Handler(), method, path), get(t, s.engine, method, path)
				if front.Code != engine.Code || front.Body.String() != engine.Body.String() {
					t.Errorf("%s: %s %s: front %d %q, engine %d %q", phase, method, path, front.Code, front.Body, engine.Code, engine.Body)
				}
				for _, h := range []string{"Content-Type", "Cache-Control", "Content-Length", "Connection"} {
					if front.Header().Get(h) != engine.Header().Get(h) {
						t.Errorf("%s: %s %s: %s: front %q, engine %q", phase, method, path, h, front.Header().Get(h), engine.Header().Get(h))
					}
				}
			}
		}
	}
	compare("booting, a check failing")
	failing = false
	compare("serving")
	if got := get(t, s.Handler(), http.MethodGet, "/x/health/readiness"); got.Code != http.StatusOK {
		t.Fatalf("readiness while serving: %d %s", got.Code, got.Body)
	}
	s.state.StartDraining()
	compare("draining")
	if got := get(t, s.Handler(), http.MethodGet, "/x/health"); got.Header().Get("Connection") != "close" {
		t.Errorf("a probe while draining: Connection %q, want close", got.Header().Get("Connection"))
	}
	// Only the exact routes are the front's; the engine answers the rest as before.
	for path, code := range map[string]int{"/x/health/": 404, "/health": 404, "/x/health/readiness/registry": 200, "/x/healthz": 404} {
		if got := get(t, s.Handler(), http.MethodGet, path); got.Code != code {
			t.Errorf("GET %s: %d, want %d", path, got.Code, code)
		}
	}
	if got := get(t, s.Handler(), http.MethodPost, "/x/health"); got.Code != 404 {
		t.Errorf("POST /x/health: %d, want 404", got.Code)
	}
	// Counted by code under surface health, the front's answers and the engine's alike.
	if n := testutil.ToFloat64(s.metrics.requests.WithLabelValues("health", "200")); n < 10 {
		t.Errorf(`ferrofed_http_requests_total{surface="health",code="200"} = %v, want every 200 probe counted`, n)
	}
}

// A probe allocates nothing of the server's own: the liveness answer is constant and
// the readiness answer rendered once per report.
func TestAProbeAllocatesNothing(t *testing.T) {
	s, err := New(parse(t, "[health]\ncache_ttl_ms = 60000\n"), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	w := &nopWriter{h: http.Header{}}
	for _, path := range []string{"/health", "/health/readiness"} {
		req, _ := http.NewRequest(http.MethodGet, path, nil)
		s.Handler().ServeHTTP(w, req) // the first readiness evaluates and renders
		if n := testing.AllocsPerRun(1000, func() { s.Handler().ServeHTTP(w, req) }); n != 0 {
			t.Errorf("GET %s: %v allocations per probe, want 0", path, n)
		}
	}
}

func TestAPanickingProbeIsA500(t *testing.T) {
	s, err := New(parse(t, ""), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	f := s.front.(*probeFront)
	f.h = &health.Handlers{State: s.state} // no evaluator: readiness panics
	w := get(t, s.Handler(), http.MethodGet, "/health/readiness")
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("a panicking probe answered %d, want 500", w.Code)
	}
	if n := testutil.ToFloat64(s.metrics.requests.WithLabelValues("health", "500")); n != 1 {
		t.Errorf("the 500 counted %v times, want 1", n)
	}
	if !strings.Contains(get(t, s.Handler(), http.MethodGet, "/health").Body.String(), "alive") {
		t.Error("liveness after a panic of readiness does not answer")
	}
}

// TestReadinessChangesAreCounted: ferrofed_readiness_changes_total counts every change
// of the readiness answer either way, drain included, and no repeated answer: the
// chart's FerrofedReadinessFlapping alert reads it (docs/runbooks/readiness-flapping.md).
func TestReadinessChangesAreCounted(t *testing.T) {
	failing := true
	sf := newTestSurface()
	sf.checks = []health.Check{health.NamedCheck("registry", func(context.Context) error {
		if failing {
			return errors.New("loading")
		}
		return nil
	})}
	s, err := New(parse(t, "[health]\ncache_ttl_ms = 0\n"), logr.Discard(), withSurfaces(sf))
	if err != nil {
		t.Fatal(err)
	}
	ask := func(fail bool) {
		t.Helper()
		failing = fail
		get(t, s.Handler(), http.MethodGet, "/health/readiness")
	}
	changes := func() float64 { return testutil.ToFloat64(s.metrics.readyChange) }
	ask(true) // 0 as it started: no change
	ask(true)
	if got := changes(); got != 0 {
		t.Fatalf("%v changes before the first ready answer, want 0", got)
	}
	for _, fail := range []bool{false, false, true, false, true, true, false} {
		ask(fail)
	}
	if got := changes(); got != 5 {
		t.Fatalf("%v changes after ready, ready, not, ready, not, not, ready, want 5 (a repeat is no change)", got)
	}
	s.state.StartDraining()
	ask(false)
	if got, ready := changes(), testutil.ToFloat64(s.metrics.ready); got != 6 || ready != 0 {
		t.Fatalf("after the drain began: %v changes and readiness %v, want 6 and 0", got, ready)
	}
	if body := get(t, s.Handler(), http.MethodGet, "/metrics").Body.String(); !strings.Contains(body, "ferrofed_readiness_changes_total 6") {
		t.Errorf("/metrics lacks ferrofed_readiness_changes_total 6")
	}
}
