package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/health"
)

// parse builds a validated configuration from TOML text.
func parse(t testing.TB, text string) *config.Config {
	t.Helper()
	// These tests build no access guard (gateway/access is the composition root's
	// part), so their data plane is written open and needs no issuer.
	cfg, err := config.Parse([]byte(text+"\n[auth]\ndata_plane = \"open\"\n"), "test.toml", config.Options{})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	// A test's drain never writes the termination message of the machine running it
	// (/dev/termination-log, when run as root); start gives each drain a file of its own.
	if cfg.Server.TerminationMessagePath == config.DefaultTerminationMessagePath {
		cfg.Server.TerminationMessagePath = ""
	}
	return cfg
}

// logSink collects log lines, for assertions on what the server logged.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{Verbosity: 1})
}

// count is how many lines contain every one of substrings.
func (l *logSink) count(substrings ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, line := range l.lines {
		for _, s := range substrings {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		n++
	}
	return n
}

func (l *logSink) find(substrings ...string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for _, line := range l.lines {
		for _, s := range substrings {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		return line
	}
	return ""
}

// testSurface is a Surface with a data-plane route, an operator route, a check the test
// controls and a Stop the test controls.
type testSurface struct {
	name    string
	checks  []health.Check
	stop    func(ctx context.Context) error
	entered chan struct{} // closed when /fhir/block is entered
	release chan struct{} // /fhir/block answers once closed
	once    sync.Once
}

func newTestSurface() *testSurface {
	return &testSurface{name: "test", entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *testSurface) Name() string { return s.name }
func (s *testSurface) RegisterDataPlane(g *gin.RouterGroup) {
	g.GET("/fhir/fast", func(c *gin.Context) { c.String(200, "fast") })
	g.GET("/fhir/block", func(c *gin.Context) {
		s.once.Do(func() { close(s.entered) })
		<-s.release // ignores its context on purpose: the drain must cope with such a handler
		c.String(200, "released")
	})
	g.GET("/fhir/deadline", func(c *gin.Context) {
		d, ok := c.Request.Context().Deadline()
		c.String(200, "%v %s", ok, time.Until(d).Round(time.Second))
	})
}
func (s *testSurface) RegisterOperator(g *gin.RouterGroup) {
	g.GET("/ping", func(c *gin.Context) { c.String(200, "pong") })
}
func (s *testSurface) Checks() []health.Check { return s.checks }
func (s *testSurface) Stop(ctx context.Context) error {
	if s.stop != nil {
		return s.stop(ctx)
	}
	return nil
}

func get(t testing.TB, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w
}

func TestRoutesLiveUnderTheBasePath(t *testing.T) {
	sf := newTestSurface()
	sf.checks = []health.Check{health.NamedCheck("registry", func(context.Context) error { return errors.New("loading") })}
	s, err := New(parse(t, "[server]\nbase_path = \"/x\"\n"), logr.Discard(), withSurfaces(sf))
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	tests := []struct {
		method, path string
		code         int
	}{
		{"GET", "/x/health", 200},
		{"HEAD", "/x/health", 200},
		{"GET", "/x/health/readiness", 503},
		{"GET", "/x/health/readiness/config", 200},
		{"GET", "/x/health/readiness/registry", 503},
		{"GET", "/x/health/readiness/nope", 404},
		{"GET", "/x/operator/ping", 200},
		{"GET", "/x/metrics", 200},
		{"GET", "/x/fhir/fast", 503},
		{"GET", "/health", 404},
		{"GET", "/health/readiness", 404},
		{"GET", "/fhir/fast", 404},
		{"GET", "/", 404},
		{"GET", "/x", 404},
		{"GET", "/x/", 404},
		{"GET", "/x/health/", 404},
		{"GET", "/xy/health", 404},
		{"GET", "/x/other", 404},
		{"POST", "/x/health", 404},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			if w := get(t, h, tt.method, tt.path); w.Code != tt.code {
				t.Fatalf("got %d %s, want %d", w.Code, w.Body, tt.code)
			}
		})
	}
}

func TestGate(t *testing.T) {
	ready := make(chan struct{})
	sf := newTestSurface()
	sf.checks = []health.Check{health.NamedCheck("registry", func(context.Context) error {
		select {
		case <-ready:
			return nil
		default:
			return errors.New("loading")
		}
	})}
	s, err := New(parse(t, "[health]\ncache_ttl_ms = 1\n"), logr.Discard(), withSurfaces(sf))
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	t.Run("the data plane answers 503 with Retry-After: 5 and an OperationOutcome before ready", func(t *testing.T) {
		w := get(t, h, "GET", "/fhir/fast")
		if w.Code != 503 || w.Header().Get("Retry-After") != "5" || !strings.Contains(w.Body.String(), `"resourceType":"OperationOutcome"`) {
			t.Fatalf("got %d %v %s", w.Code, w.Header(), w.Body)
		}
	})
	t.Run("health, operator and metrics bypass the gate", func(t *testing.T) {
		for _, p := range []string{"/health", "/operator/ping", "/metrics"} {
			if w := get(t, h, "GET", p); w.Code != 200 {
				t.Errorf("%s: %d", p, w.Code)
			}
		}
	})
	close(ready)
	time.Sleep(2 * time.Millisecond) // let the 1 ms cache entry expire
	if w := get(t, h, "GET", "/health/readiness"); w.Code != 200 {
		t.Fatalf("readiness %d %s", w.Code, w.Body)
	}
	t.Run("once ready the data plane is routed", func(t *testing.T) {
		if w := get(t, h, "GET", "/fhir/fast"); w.Code != 200 {
			t.Fatalf("got %d", w.Code)
		}
	})
	t.Run("a data-plane request has server.request_timeout_ms as its deadline", func(t *testing.T) {
		if w := get(t, h, "GET", "/fhir/deadline"); w.Body.String() != "true 30s" {
			t.Fatalf("got %q", w.Body)
		}
	})
	t.Run("a readiness failure after ready does not close the gate again", func(t *testing.T) {
		if w := get(t, h, "GET", "/fhir/fast"); w.Code != 200 {
			t.Fatalf("got %d", w.Code)
		}
	})
}

func TestPlaceholderDataPlane(t *testing.T) {
	s, err := New(parse(t, ""), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	for _, p := range []string{"/fhir/Patient", "/nodes/a/fhir/Patient/1"} {
		if w := get(t, h, "GET", p); w.Code != 503 {
			t.Errorf("%s before ready: %d", p, w.Code)
		}
	}
	get(t, h, "GET", "/health/readiness")
	for _, p := range []string{"/fhir/Patient", "/nodes/a/fhir/Patient/1"} {
		w := get(t, h, "POST", p)
		if w.Code != 501 || !strings.Contains(w.Body.String(), "federation not configured") {
			t.Errorf("%s after ready: %d %s", p, w.Code, w.Body)
		}
	}
}

func TestMetrics(t *testing.T) {
	s, err := New(parse(t, "[metrics]\npath = \"/m\"\n"), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	get(t, s.Handler(), "GET", "/health/readiness")
	get(t, s.Handler(), "GET", "/fhir/x")
	w := get(t, s.Handler(), "GET", "/m")
	for _, want := range []string{
		"ferrofed_readiness 1",
		`ferrofed_phase{phase="serving"} 1`,
		`ferrofed_readiness_check_evaluations_total{check="config"} 1`,
		`ferrofed_http_requests_total{code="501",surface="data_plane"} 1`,
		`ferrofed_drain_total{outcome="completed"} 0`,
		"ferrofed_http_requests_in_flight 1",
	} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	off, err := New(parse(t, "[metrics]\ndisabled = true\n"), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if w := get(t, off.Handler(), "GET", "/metrics"); w.Code != 404 {
		t.Fatalf("disabled metrics answered %d", w.Code)
	}
	if _, err := config.Parse([]byte("[metrics]\npath = \"/health\"\n"), "t.toml", config.Options{}); err == nil {
		t.Fatal("a metrics.path on a health route was accepted")
	}
	// A Config assembled in code is not validated; its routes still must not collide.
	onHealth := parse(t, "")
	onHealth.Metrics.Path = "/health"
	if _, err := New(onHealth, logr.Discard()); err == nil {
		t.Fatal("a metrics.path on a health route was accepted")
	}
}

// collected is a surface without routes that exports one gauge of its own.
type collected struct {
	emptyRoutes
	gauge prometheus.Gauge
}

func (c collected) Collector() prometheus.Collector { return c.gauge }

func newCollected(name string) collected {
	sf := newTestSurface()
	sf.name = name
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "ferrofed_test_surface_gauge", Help: "A surface's own gauge."})
	g.Set(7)
	return collected{emptyRoutes{sf}, g}
}

// TestASurfaceExportsItsMetricsThroughCollected: Collected is the one way a surface's
// metrics reach the server's registry; they are served beside the server's own, and two
// surfaces exporting the same metric are a construction error that names the surface.
func TestASurfaceExportsItsMetricsThroughCollected(t *testing.T) {
	s, err := New(parse(t, ""), logr.Discard(), withSurfaces(newCollected("federation")))
	if err != nil {
		t.Fatal(err)
	}
	body := get(t, s.Handler(), "GET", "/metrics").Body.String()
	for _, want := range []string{"ferrofed_test_surface_gauge 7", "ferrofed_readiness ", "go_goroutines ", "process_"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	_, err = New(parse(t, ""), logr.Discard(), withSurfaces(newCollected("federation"), newCollected("audit")))
	if err == nil || !strings.Contains(err.Error(), `surface "audit"`) {
		t.Fatalf("two surfaces exporting one metric: New returned %v, want an error naming surface \"audit\"", err)
	}
}

func TestTheRequestCounterCountsEveryRequestOfACode(t *testing.T) {
	s, err := New(parse(t, ""), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	get(t, s.Handler(), "GET", "/health/readiness")
	// The counters are kept per surface and code after the first request: the later
	// ones, and another surface with the same code, count on their own series.
	for range 3 {
		get(t, s.Handler(), "GET", "/fhir/x")
	}
	get(t, s.Handler(), "GET", "/nowhere")
	get(t, s.Handler(), "GET", "/nowhere")
	w := get(t, s.Handler(), "GET", "/metrics")
	for _, want := range []string{
		`ferrofed_http_requests_total{code="501",surface="data_plane"} 3`,
		`ferrofed_http_requests_total{code="404",surface="none"} 2`,
		`ferrofed_http_requests_total{code="200",surface="health"} 1`,
	} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, w.Body)
		}
	}
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ferrofed.toml")
	logs := &logSink{}
	s, err := New(parse(t, "[server]\nlisten = \"127.0.0.1:0\"\n"), logs.logger())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("an invalid file is refused with the messages of config check and the old configuration keeps serving", func(t *testing.T) {
		if err := os.WriteFile(path, []byte("[server]\nrequest_timeout_ms = 2000\nshutdown_timeout_ms = 1000\n[auth]\ndata_plane = \"open\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		before := s.Config()
		if err := s.ReloadFile(path); err == nil {
			t.Fatal("accepted")
		}
		if s.Config() != before {
			t.Fatal("the configuration changed")
		}
		if logs.find("server.shutdown_timeout_ms", "server.request_timeout_ms", "line 3") == "" {
			t.Fatalf("no log names both keys: %v", logs.lines)
		}
	})
	t.Run("Reload validates a configuration it is handed", func(t *testing.T) {
		bad := parse(t, "")
		short := int64(1)
		bad.Server.ShutdownTimeoutMS = &short
		before := s.Config()
		if _, err := s.Reload(bad); err == nil || s.Config() != before {
			t.Fatalf("an invalid configuration was applied: %v", err)
		}
	})
	t.Run("keys that need a restart are logged, the rest applies", func(t *testing.T) {
		if err := os.WriteFile(path, []byte("[server]\nlisten = \"127.0.0.1:1\"\nrequest_timeout_ms = 2000\n[health]\nminimal = true\n[auth]\ndata_plane = \"open\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := s.ReloadFile(path); err != nil {
			t.Fatal(err)
		}
		if got := s.Config().Lifecycle().RequestTimeout; got != 2*time.Second {
			t.Fatalf("request timeout %s", got)
		}
		if logs.find("changed but needs a restart: server.listen") == "" {
			t.Fatalf("no restart log: %v", logs.lines)
		}
		if w := get(t, s.Handler(), "GET", "/health/readiness"); strings.Contains(w.Body.String(), "checks") {
			t.Fatalf("minimal mode did not apply: %s", w.Body)
		}
	})
}

func TestRestartKeys(t *testing.T) {
	base := func() *config.Config { return parse(t, "") }
	tests := []struct {
		name   string
		change func(*config.Config)
		want   []string
	}{
		{"nothing changed", func(*config.Config) {}, nil},
		{"budgets apply live", func(c *config.Config) { v := int64(1); c.Server.DrainDelayMS = &v; c.Health.CacheTTLMS = 5 }, nil},
		{"listen", func(c *config.Config) { c.Server.Listen = "127.0.0.1:9" }, []string{"server.listen"}},
		{"base path", func(c *config.Config) { c.Server.BasePath = "/b" }, []string{"server.base_path"}},
		{"read header timeout", func(c *config.Config) { c.Server.ReadHeaderTimeoutMS = 1 }, []string{"server.read_header_timeout_ms"}},
		{"tls paths", func(c *config.Config) {
			c.Server.TLS = config.TLS{CertificateFile: "c.pem", KeyFile: "k.pem", ClientCAFile: "ca.pem"}
		}, []string{"server.tls.certificate_file", "server.tls.key_file", "server.tls.client_ca_file"}},
		{"the healthcheck identity is read by the healthcheck", func(c *config.Config) { c.Server.TLS.HealthcheckIdentityFile = "id.pem" }, nil},
		{"metrics", func(c *config.Config) { c.Metrics.Path = "/m" }, []string{"metrics"}},
		{"the metrics push applies at the drain", func(c *config.Config) { c.Metrics.PushURL = "http://p:9091"; c.Metrics.PushJob = "j" }, nil},
		{"a first member", func(c *config.Config) {
			c.Registry.Members = []config.Member{{ID: "a", QueryEndpoint: "http://127.0.0.1:1/fhir"}}
		}, []string{"registry.members (adding the first or removing the last)"}},
		{"member ready check", func(c *config.Config) { c.Health.MemberReadyCheck = true }, []string{"health.member_ready_check"}},
		{"the patient-scoped bindings are built at start", func(c *config.Config) {
			c.PDQm = &config.PDQm{BindingService: config.BindingService{URL: "http://m/fhir"}}
			c.Consent = &config.Consent{BindingService: config.BindingService{URL: "http://p"}, Protocol: "authzen"}
		}, []string{"pdqm", "consent"}},
		{"adding [tracing] needs a restart", func(c *config.Config) { c.Tracing = &config.Tracing{Endpoint: "http://otel:4318"} },
			[]string{"tracing (adding or removing the table)"}},
		{"a member's domain", func(c *config.Config) {
			c.Registry.Members = []config.Member{{ID: "a", QueryEndpoint: "http://127.0.0.1:1/fhir", IdentifierSystem: "urn:oid:1"}}
		}, []string{"registry.members (adding the first or removing the last)", "registry.members[].identifier_system, home_community_id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := base()
			tt.change(n)
			if got := RestartKeys(base(), n); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// drainMetric reads ferrofed_drain_total{outcome}.
func drainMetric(s *Server, outcome string) float64 {
	return testutil.ToFloat64(s.metrics.drains.WithLabelValues(outcome))
}

func readAll(r io.Reader) string { b, _ := io.ReadAll(r); return string(b) }

// panicking is a surface whose operator routes panic with the value the path names.
type panicking struct{ *testSurface }

func (panicking) RegisterDataPlane(*gin.RouterGroup) {}
func (panicking) RegisterOperator(g *gin.RouterGroup) {
	g.GET("/bug", func(*gin.Context) { panic("a bug") })
	g.GET("/abort", func(*gin.Context) { panic(http.ErrAbortHandler) })
	g.GET("/abort-wrapped", func(*gin.Context) { panic(fmt.Errorf("client gone: %w", http.ErrAbortHandler)) })
}

// TestAHandlerPanicIsA500ButAnAbortStaysAnAbort: a panicking handler answers 500 and is
// logged; http.ErrAbortHandler, bare or wrapped, is re-raised for net/http to abort the
// connection, as net/http means it.
func TestAHandlerPanicIsA500ButAnAbortStaysAnAbort(t *testing.T) {
	logs := &logSink{}
	s, err := New(parse(t, ""), logs.logger(), withSurfaces(panicking{newTestSurface()}))
	if err != nil {
		t.Fatal(err)
	}
	if w := get(t, s.Handler(), "GET", "/operator/bug"); w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), "internal error") {
		t.Fatalf("a panicking handler answered %d %q, want 500", w.Code, w.Body)
	}
	if logs.find("Handler panicked", "a bug") == "" {
		t.Fatalf("the panic was not logged: %v", logs.lines)
	}
	for _, path := range []string{"/operator/abort", "/operator/abort-wrapped"} {
		func() {
			defer func() {
				p := recover()
				err, ok := p.(error)
				if !ok || !errors.Is(err, http.ErrAbortHandler) {
					t.Errorf("%s: the handler's panic surfaced as %v, want http.ErrAbortHandler", path, p)
				}
			}()
			get(t, s.Handler(), "GET", path)
		}()
	}
}
