package health

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

func init() { gin.SetMode(gin.ReleaseMode) }

func ok(name string) Check {
	return NamedCheck(name, func(context.Context) error { return nil })
}

func failing(name, why string) Check {
	return NamedCheck(name, func(context.Context) error { return errors.New(why) })
}

// counting counts its evaluations.
type counting struct {
	name string
	n    atomic.Int64
	err  error
	wait time.Duration
}

func (c *counting) Name() string { return c.name }
func (c *counting) Check(ctx context.Context) error {
	c.n.Add(1)
	if c.wait > 0 {
		time.Sleep(c.wait) // simulated work: keeps the evaluation in flight while probes pile up
	}
	return c.err
}

func TestRunChecksFailsClosedOnTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	checks := []Check{
		ok("config"),
		NamedCheck("registry", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }),
		// A check that ignores its context must still fail at the budget.
		NamedCheck("clients", func(context.Context) error { <-release; return nil }),
		failing("stored_queries", "store unreadable"),
	}
	start := time.Now()
	got := RunChecks(context.Background(), checks, 50*time.Millisecond)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("RunChecks took %s with a 50ms budget", took)
	}
	want := []struct {
		name   string
		status CheckStatus
		reason string
	}{
		{"config", CheckOK, ""},
		{"registry", CheckTimedOut, "registry_timeout"},
		{"clients", CheckTimedOut, "clients_timeout"},
		{"stored_queries", CheckFailed, "stored_queries_failed"},
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].Status != w.status || got[i].Reason != w.reason {
			t.Errorf("result %d = %+v, want %+v", i, got[i], w)
		}
	}
	if got[3].Err == nil || got[3].Err.Error() != "store unreadable" {
		t.Errorf("the full error is kept for the log, got %v", got[3].Err)
	}
}

func TestAHungCheckRunsOnceAtATime(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var calls atomic.Int64
	hung := NamedCheck("registry", func(context.Context) error { calls.Add(1); <-release; return nil })
	e, _ := NewEvaluator([]Check{hung}, Settings{CheckTimeout: 20 * time.Millisecond})
	for i := range 5 {
		if r := e.Evaluate(context.Background()); r.Reasons()[0] != "registry_timeout" {
			t.Fatalf("evaluation %d: %v", i, r.Reasons())
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("a check that never returns was started %d times, want 1", n)
	}
}

func TestRunChecksTurnsAPanicIntoAFailure(t *testing.T) {
	got := RunChecks(context.Background(), []Check{NamedCheck("boom", func(context.Context) error { panic("x") })}, time.Second)
	if got[0].Status != CheckFailed || got[0].Reason != "boom_failed" {
		t.Fatalf("got %+v", got[0])
	}
}

func TestEvaluatorCachesWithinTheTTL(t *testing.T) {
	c := &counting{name: "config"}
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e, err := NewEvaluator([]Check{c}, Settings{CheckTimeout: time.Second, CacheTTL: time.Second}, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if !e.Evaluate(context.Background()).Ready() {
			t.Fatal("not ready")
		}
	}
	if n := c.n.Load(); n != 1 {
		t.Fatalf("50 sequential probes within the TTL ran %d evaluations, want 1", n)
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	e.Evaluate(context.Background())
	if n := c.n.Load(); n != 2 {
		t.Fatalf("a probe after the TTL ran %d evaluations in all, want 2", n)
	}
}

func TestEvaluatorCoalescesConcurrentProbes(t *testing.T) {
	c := &counting{name: "config", wait: 50 * time.Millisecond}
	var reports atomic.Int64
	e, _ := NewEvaluator([]Check{c}, Settings{CheckTimeout: time.Second, CacheTTL: time.Minute},
		OnReport(func(*Report) { reports.Add(1) }))
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !e.Evaluate(context.Background()).Ready() {
				t.Error("not ready")
			}
		}()
	}
	wg.Wait()
	if n := c.n.Load(); n != 1 {
		t.Fatalf("200 concurrent probes ran %d evaluations, want 1", n)
	}
	if n := reports.Load(); n != 1 {
		t.Fatalf("OnReport ran %d times, want 1", n)
	}
}

func TestEvaluatorWithoutTTLStillCoalesces(t *testing.T) {
	c := &counting{name: "config", wait: 50 * time.Millisecond}
	e, _ := NewEvaluator([]Check{c}, Settings{CheckTimeout: time.Second})
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() { defer wg.Done(); e.Evaluate(context.Background()) }()
	}
	wg.Wait()
	if n := c.n.Load(); n > 2 {
		t.Fatalf("20 concurrent probes with no TTL ran %d evaluations", n)
	}
}

func TestNewEvaluatorRefusesBadNames(t *testing.T) {
	for _, checks := range [][]Check{{ok("")}, {ok("a/b")}, {ok("x"), ok("x")}} {
		if _, err := NewEvaluator(checks, Settings{}); err == nil {
			t.Errorf("NewEvaluator(%v) accepted", checks)
		}
	}
}

func TestReadinessBody(t *testing.T) {
	okReport := &Report{Results: []Result{{Name: "config", Status: CheckOK}, {Name: "registry", Status: CheckOK}}}
	badReport := &Report{Results: []Result{{Name: "config", Status: CheckOK}, {Name: "registry", Status: CheckTimedOut, Reason: "registry_timeout"}}}
	tests := []struct {
		name    string
		phase   lifecycle.Phase
		report  *Report
		minimal bool
		code    int
		body    string
	}{
		{"every check passed is ready, checks in order", lifecycle.PhaseServing, okReport, false, 200,
			`{"status":"ready","phase":"serving","checks":{"config":"ok","registry":"ok"}}`},
		{"a failing check is unready and named in reasons", lifecycle.PhaseServing, badReport, false, 503,
			`{"status":"unready","phase":"serving","checks":{"config":"ok","registry":"timeout"},"reasons":["registry_timeout"]}`},
		{"draining is unready whatever the checks", lifecycle.PhaseDraining, okReport, false, 503,
			`{"status":"unready","phase":"draining","checks":{"config":"ok","registry":"ok"},"reasons":["draining"]}`},
		{"no report is never success", lifecycle.PhaseBooting, nil, false, 503,
			`{"status":"unready","phase":"booting","checks":{},"reasons":["no_report"]}`},
		{"minimal keeps status and phase", lifecycle.PhaseServing, badReport, true, 503,
			`{"status":"unready","phase":"serving"}`},
		{"minimal when ready", lifecycle.PhaseServing, okReport, true, 200,
			`{"status":"ready","phase":"serving"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := ReadinessBody(tt.phase, tt.report, tt.minimal)
			if code != tt.code || strings.TrimSpace(string(body)) != tt.body {
				t.Fatalf("got %d %s\nwant %d %s", code, body, tt.code, tt.body)
			}
			if !json.Valid(body) {
				t.Fatalf("invalid JSON %s", body)
			}
		})
	}
}

// router mounts the probe handlers and a gated data-plane route the way the server does.
func router(t *testing.T, checks []Check, s Settings, minimal bool) (*gin.Engine, *State, *Evaluator) {
	t.Helper()
	e, err := NewEvaluator(checks, s)
	if err != nil {
		t.Fatal(err)
	}
	st := NewState(nil)
	h := &Handlers{State: st, Eval: e, Minimal: func() bool { return minimal }}
	r := gin.New()
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		r.Handle(m, LivenessPath, h.Liveness)
		r.Handle(m, ReadinessPath, h.Readiness)
		r.Handle(m, ReadinessPath+"/:check", h.ReadinessCheck)
	}
	r.GET("/fhir/*path", Gate(st), func(c *gin.Context) { c.String(200, "routed") })
	return r, st, e
}

func do(r http.Handler, method, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w
}

func TestProbeRoutes(t *testing.T) {
	fast := Settings{CheckTimeout: 50 * time.Millisecond, CacheTTL: time.Minute}
	t.Run("readiness answers 200 and marks the process serving", func(t *testing.T) {
		r, st, _ := router(t, []Check{ok("config")}, fast, false)
		w := do(r, "GET", "/health/readiness")
		if w.Code != 200 || st.Phase() != lifecycle.PhaseServing {
			t.Fatalf("got %d %s, phase %s", w.Code, w.Body, st.Phase())
		}
		if got := strings.TrimSpace(w.Body.String()); got != `{"status":"ready","phase":"serving","checks":{"config":"ok"}}` {
			t.Fatalf("body %s", got)
		}
	})
	t.Run("a check past its budget fails closed with <check>_timeout", func(t *testing.T) {
		slow := NamedCheck("registry", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		r, st, _ := router(t, []Check{ok("config"), slow}, fast, false)
		w := do(r, "GET", "/health/readiness")
		if w.Code != 503 || !strings.Contains(w.Body.String(), `"reasons":["registry_timeout"]`) {
			t.Fatalf("got %d %s", w.Code, w.Body)
		}
		if st.Phase() != lifecycle.PhaseBooting {
			t.Fatalf("phase %s, want booting", st.Phase())
		}
	})
	t.Run("HEAD answers the same status and headers without a body", func(t *testing.T) {
		r, _, _ := router(t, []Check{ok("config"), failing("registry", "down")}, fast, false)
		get := do(r, "GET", "/health/readiness")
		head := do(r, "HEAD", "/health/readiness")
		if head.Code != get.Code || head.Header().Get("Content-Type") != get.Header().Get("Content-Type") ||
			head.Header().Get("Content-Length") != get.Header().Get("Content-Length") {
			t.Fatalf("HEAD %d %v, GET %d %v", head.Code, head.Header(), get.Code, get.Header())
		}
		for _, p := range []string{"/health", "/health/readiness/config"} {
			if g, h := do(r, "GET", p), do(r, "HEAD", p); g.Code != h.Code || g.Header().Get("Content-Length") != h.Header().Get("Content-Length") {
				t.Fatalf("%s: HEAD %d, GET %d", p, h.Code, g.Code)
			}
		}
	})
	t.Run("verbose=0 and minimal mode answer status and phase only", func(t *testing.T) {
		r, _, _ := router(t, []Check{ok("config")}, fast, false)
		if w := do(r, "GET", "/health/readiness?verbose=0"); strings.TrimSpace(w.Body.String()) != `{"status":"ready","phase":"serving"}` {
			t.Fatalf("verbose=0: %s", w.Body)
		}
		r, _, _ = router(t, []Check{ok("config")}, fast, true)
		if w := do(r, "GET", "/health/readiness?verbose=1"); strings.TrimSpace(w.Body.String()) != `{"status":"ready","phase":"serving"}` {
			t.Fatalf("minimal: %s", w.Body)
		}
	})
	t.Run("each check has its own sub-path and an unknown one is 404", func(t *testing.T) {
		r, _, _ := router(t, []Check{ok("config"), failing("registry", "down")}, fast, false)
		if w := do(r, "GET", "/health/readiness/config"); w.Code != 200 {
			t.Fatalf("config: %d %s", w.Code, w.Body)
		}
		w := do(r, "GET", "/health/readiness/registry")
		if w.Code != 503 || !strings.Contains(w.Body.String(), "registry_failed") {
			t.Fatalf("registry: %d %s", w.Code, w.Body)
		}
		if strings.Contains(w.Body.String(), "down") {
			t.Fatalf("the check's error text leaked into the body: %s", w.Body)
		}
		if w := do(r, "GET", "/health/readiness/nope"); w.Code != 404 {
			t.Fatalf("unknown: %d", w.Code)
		}
	})
	t.Run("liveness depends on no check and not on the drain", func(t *testing.T) {
		r, st, _ := router(t, []Check{failing("config", "x")}, fast, false)
		if w := do(r, "GET", "/health"); w.Code != 200 || strings.TrimSpace(w.Body.String()) != `{"status":"alive"}` {
			t.Fatalf("got %d %s", w.Code, w.Body)
		}
		st.StartDraining()
		if w := do(r, "GET", "/health"); w.Code != 200 {
			t.Fatalf("draining: %d", w.Code)
		}
	})
	t.Run("draining turns readiness 503 at once without evaluating", func(t *testing.T) {
		c := &counting{name: "config"}
		r, st, _ := router(t, []Check{c}, fast, false)
		do(r, "GET", "/health/readiness")
		st.StartDraining()
		w := do(r, "GET", "/health/readiness")
		if w.Code != 503 || !strings.Contains(w.Body.String(), `"phase":"draining"`) {
			t.Fatalf("got %d %s", w.Code, w.Body)
		}
		if c.n.Load() != 1 {
			t.Fatalf("the drain evaluated checks %d times", c.n.Load())
		}
	})
	t.Run("the gate refuses the data plane before ready and opens after", func(t *testing.T) {
		gate := make(chan struct{})
		ready := NamedCheck("config", func(context.Context) error {
			select {
			case <-gate:
				return nil
			default:
				return errors.New("not yet")
			}
		})
		r, st, _ := router(t, []Check{ready}, Settings{CheckTimeout: time.Second}, false)
		w := do(r, "GET", "/fhir/Patient")
		if w.Code != 503 || w.Header().Get("Retry-After") != "5" || !strings.Contains(w.Body.String(), `"resourceType":"OperationOutcome"`) {
			t.Fatalf("got %d %v %s", w.Code, w.Header(), w.Body)
		}
		close(gate)
		do(r, "GET", "/health/readiness")
		if w := do(r, "GET", "/fhir/Patient"); w.Code != 200 {
			t.Fatalf("after ready: %d", w.Code)
		}
		st.StartDraining()
		if w := do(r, "GET", "/fhir/Patient"); w.Code != 200 {
			t.Fatalf("the data plane serves during the drain: %d", w.Code)
		}
	})
}

func TestADrainWhileBootingKeepsTheGateClosed(t *testing.T) {
	r, st, _ := router(t, []Check{failing("config", "x")}, Settings{CheckTimeout: time.Second}, false)
	st.StartDraining()
	if w := do(r, "GET", "/fhir/Patient"); w.Code != 503 {
		t.Fatalf("the data plane of a never-ready process opened in the drain: %d", w.Code)
	}
}

func TestStateNeverLeavesDraining(t *testing.T) {
	var seen []lifecycle.Phase
	s := NewState(func(p lifecycle.Phase) { seen = append(seen, p) })
	if !s.Booting() || s.Phase() != lifecycle.PhaseBooting {
		t.Fatal("a new state is booting")
	}
	s.MarkServing()
	s.MarkServing()
	s.StartDraining()
	s.MarkServing()
	s.StartDraining()
	if s.Phase() != lifecycle.PhaseDraining || len(seen) != 2 {
		t.Fatalf("phase %s, changes %v", s.Phase(), seen)
	}
}

func BenchmarkReadinessProbeFlood(b *testing.B) {
	ttl := 20 * time.Millisecond
	var evals atomic.Int64
	e, _ := NewEvaluator([]Check{ok("config"), ok("registry")}, Settings{CheckTimeout: 100 * time.Millisecond, CacheTTL: ttl},
		OnReport(func(*Report) { evals.Add(1) }))
	st := NewState(nil)
	h := &Handlers{State: st, Eval: e}
	r := gin.New()
	r.GET(ReadinessPath, h.Readiness)
	req := httptest.NewRequest("GET", ReadinessPath, nil)
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
		}
	})
	b.StopTimer()
	ttls := float64(time.Since(start)) / float64(ttl)
	if ttls < 1 {
		ttls = 1
	}
	b.ReportMetric(float64(evals.Load())/ttls, "evaluations/TTL")
}

// TestNamedCheckIsItsNameAndItsFunction: the check answers with its name and hands the
// evaluation's context to its function, whose error it returns as is.
func TestNamedCheckIsItsNameAndItsFunction(t *testing.T) {
	type key struct{}
	why := errors.New("store unreadable")
	var got any
	c := NamedCheck("stored_queries", func(ctx context.Context) error { got = ctx.Value(key{}); return why })
	if c.Name() != "stored_queries" {
		t.Fatalf("Name() = %q", c.Name())
	}
	if err := c.Check(context.WithValue(context.Background(), key{}, "evaluation")); !errors.Is(err, why) {
		t.Fatalf("Check() = %v, want %v", err, why)
	}
	if got != "evaluation" {
		t.Fatalf("the function got the context value %v, not the evaluation's", got)
	}
}

// TestCheckStatusesAreTheWireValues: the readiness body shows each status as the value
// probes and dashboards already parse; renaming the Go constants must not change them.
func TestCheckStatusesAreTheWireValues(t *testing.T) {
	for status, wire := range map[CheckStatus]string{CheckOK: "ok", CheckFailed: "failed", CheckTimedOut: "timeout"} {
		_, body := CheckBody(lifecycle.PhaseServing, Result{Name: "config", Status: status})
		if want := `"status":"` + wire + `"`; !strings.Contains(string(body), want) {
			t.Errorf("%s: body %s lacks %s", status, body, want)
		}
	}
}
