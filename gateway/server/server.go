// Package server is the gateway's HTTP server: the gin engine and its routes under
// server.base_path, the readiness gate in front of the data plane, the four-step drain,
// TLS on the listener (its key pair reloaded when its files change, tls.go),
// configuration reload and the Prometheus metrics.
//
// # Routes (all under server.base_path; every other path answers 404)
//
//	/health                     liveness: 200 {"status":"alive"}, depends on nothing
//	/health/readiness           readiness: AND of the checks ("config", then the parts')
//	/health/readiness/{check}   one check alone
//	/operator/*                 the parts' operator routes: no gate, their own auth
//	/fhir/*, /nodes/{id}/fhir/* the data plane: behind the readiness gate (503, Retry-After: 5)
//	{metrics.path}              Prometheus metrics (default /metrics), unless metrics.disabled
//
// Health, operator and metrics routes bypass the gate. In front of the gate, the data
// plane answers 414 a query longer than limits.max_query_bytes and sheds (503,
// Retry-After: 1) a request past limits.max_in_flight_requests; its request deadline
// (server.request_timeout_ms) is also the connection's read deadline while a body is
// read, and, 1 s later, its write deadline (bounds.go). Until a Registration adds the
// data plane, /fhir/* and /nodes/{id}/fhir/* answer 501 "federation not configured"
// once the gateway is ready.
//
// # Metrics
//
// Served at {base}{metrics.path} on the main listener from a registry of the server's
// own (never the global one):
//
//	ferrofed_readiness                          gauge 0/1, the last readiness answer
//	ferrofed_readiness_changes_total            counter, changes of ferrofed_readiness either way
//	ferrofed_phase{phase}                       gauge, 1 for the current phase
//	ferrofed_http_requests_in_flight            gauge
//	ferrofed_http_requests_total{surface,code}  counter; surface is health, operator, data_plane, metrics or none
//	ferrofed_data_plane_shed_total              counter, data-plane requests refused 503 past limits.max_in_flight_requests
//	ferrofed_drain_total{outcome}               counter; outcome is completed or cut
//	ferrofed_drain_cut_connections_total        counter
//	ferrofed_drain_bindings_abandoned_total{surface}  counter
//	ferrofed_readiness_check_evaluations_total{check} counter (evaluations, not cached answers)
//	ferrofed_readiness_check_failures_total{check,reason} counter
//	ferrofed_tls_certificate_expiry_seconds     gauge, NotAfter of the served certificate (Unix s), with TLS only
//	ferrofed_tls_certificate_reloads_total{outcome} counter; outcome is loaded or failed
//	ferrofed_tracing_spans_dropped_total{reason} counter, with [tracing] (gateway/tracing)
//
// plus the Go runtime and process collectors, and those the registrations carry (the
// dependency states, the binding metrics).
//
// # Drain
//
// Run drains on context cancellation (the serve command cancels on SIGTERM or SIGINT)
// in the steps of gateway/lifecycle/doc.go's timeline, each a lifecycle.Signal observable by tests (Signaled,
// WithSignalObserver) and logged with its duration; see drain.go. After the last step
// the outcome is written, one line (lifecycle.TerminationMessage), to
// server.termination_message_path, the container's termination message file
// (termination.go; a write that cannot be made is logged and skipped). Then,
// when metrics.push_url is set, the whole registry is pushed once (Pushgateway
// protocol, job metrics.push_job, instance the hostname) within MaxPushTimeout: the
// drain outcome cannot be scraped from a listener that has closed; see push.go.
package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/health"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// Registration is one part's place in the server (the federation, a binding, the
// stored queries), made by the composition root (docs/architecture.md). Every field
// but Name is optional: a part has only the hooks it needs.
type Registration struct {
	// Name names the part in the logs, the drain's termination message and the
	// abandoned metric ("federation", a binding's report key).
	Name string
	// DataPlane registers routes on the data-plane group: under {base}, behind the
	// readiness gate and the request deadline.
	DataPlane func(g *gin.RouterGroup)
	// Guard, when set, runs on the data-plane group in front of every part's routes
	// (after the gate and the request deadline): who may use the data plane at all.
	Guard gin.HandlerFunc
	// Operator registers routes on the operator group, {base}/operator: no gate, the
	// part applies the operator-token check itself.
	Operator func(g *gin.RouterGroup)
	// Checks are the readiness checks the part adds (e.g. registry, clients).
	Checks []health.Check
	// Stop is drain step 4 for the part, a stopper named Name: it is given the
	// bindings budget as its context's deadline, and a Stop still running when the
	// budget ran out is abandoned by that name.
	Stop func(ctx context.Context) error
	// StopReport, when set, gives the key/value pairs the log line of drain step 4
	// carries for the part (the audit spool: the records still undelivered at exit).
	// It is asked once step 4 ended, abandoned parts included.
	StopReport func() []any
	// AuditSpools, when set, says what each of the part's audit spools still held,
	// undelivered, when step 4 closed it (the audit trail's, one entry per spool): the
	// drain's termination message carries them as its "audit" (docs/audit-spool.md,
	// "Hand-over"). It is asked once step 4 ended, as StopReport.
	AuditSpools func() []lifecycle.SpoolLeft
	// Reload applies a reloaded configuration. A reload is all or nothing, so it
	// comes in two steps: Reload builds everything the part needs for cfg (already
	// validated) and applies none of it; an error refuses the whole reload, every
	// part and the server keeping what they had. The apply function it returns swaps
	// what was built in; it cannot fail, and is called only once every part prepared.
	Reload func(cfg *config.Config) (apply func(), err error)
	// Collectors are the part's metrics, registered on the server's registry.
	Collectors []prometheus.Collector
	// Trace, when set, runs first on the data-plane and operator groups, in front of
	// their counters, bounds, gate and guards (the server span of gateway/tracing):
	// never on the probes, /metrics or an unknown route. Without it nothing is added
	// to any request's path.
	Trace gin.HandlerFunc
	// Drained, when set, is told how the drain went once step 4 ended and the
	// termination message was written (start is when it began), and runs alongside
	// the metrics push within the same bound (pushTimeout), ctx's deadline: the
	// tracing part records the drain's span and pushes its last spans.
	Drained func(ctx context.Context, start time.Time, m lifecycle.TerminationMessage)
}

// Option tunes New.
type Option func(*Server)

// WithRegistrations adds parts, in order: their checks follow "config" in that order,
// their routes are registered in that order, and a reload prepares them in that order.
func WithRegistrations(r ...Registration) Option {
	return func(srv *Server) { srv.parts = append(srv.parts, r...) }
}

// WithSignalObserver calls f as each drain signal fires, with the time it fired; tests
// use it to assert the order and timing of the drain.
func WithSignalObserver(f func(lifecycle.Signal, time.Time)) Option {
	return func(srv *Server) { srv.observer = f }
}

// WithBootPoll sets how often Run re-evaluates readiness while booting, so that the
// gate opens without waiting for a probe (default 100 ms; the cache TTL still bounds
// how often checks actually run).
func WithBootPoll(d time.Duration) Option { return func(srv *Server) { srv.bootPoll = d } }

// Server is one gateway's HTTP server. Create it with New, bind with Listen (or let Run
// do it), and Run it until its context ends.
type Server struct {
	log logr.Logger
	cfg atomic.Pointer[config.Config]
	// requestTimeoutNow is cfg's resolved request timeout, stored with it: read on
	// every data-plane request.
	requestTimeoutNow atomic.Int64
	// bounds are cfg's data-plane limits, stored with it (bounds.go).
	bounds   bounds
	parts    []Registration
	observer func(lifecycle.Signal, time.Time)
	bootPoll time.Duration

	state   *health.State
	eval    *health.Evaluator
	metrics *Metrics
	engine  *gin.Engine
	// front answers the probes ahead of engine (probes.go): what the listener serves.
	front http.Handler

	// lastReasons is the last logged set of failing reasons, so that a failure is logged
	// in full when it starts or changes, not on every evaluation.
	reasonsMu   sync.Mutex
	lastReasons string

	// signals are the drain's named signals, each firing at most once (signals.go).
	signals *drainSignals

	run runState
}

// New builds the server for cfg (already validated by config.Load or config.Parse).
// It registers every route; an error means two routes collide (for instance a
// metrics.path on a health route).
func New(cfg *config.Config, log logr.Logger, opts ...Option) (*Server, error) {
	if cfg == nil {
		return nil, errors.New("server: no configuration")
	}
	gin.SetMode(gin.ReleaseMode)
	s := &Server{log: log, bootPoll: 100 * time.Millisecond, signals: newDrainSignals()}
	for _, o := range opts {
		o(s)
	}
	s.storeConfig(cfg)
	s.logWarnings(cfg)
	s.metrics = newMetrics()
	for _, p := range s.parts {
		for _, c := range p.Collectors {
			if err := s.metrics.Registry.Register(c); err != nil {
				return nil, fmt.Errorf("server: register the metrics of surface %q: %w", p.Name, err)
			}
		}
	}
	s.state = health.NewState(func(p lifecycle.Phase) {
		s.metrics.setPhase(p)
		s.log.Info("Phase changed", "phase", p)
	})

	checks := []health.Check{health.ConfigCheck(func() bool { return s.cfg.Load() != nil })}
	for _, p := range s.parts {
		checks = append(checks, p.Checks...)
	}
	eval, err := health.NewEvaluator(checks, healthSettings(cfg), health.OnReport(s.observeReport))
	if err != nil {
		return nil, err
	}
	s.eval = eval
	if err := s.buildEngine(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

func healthSettings(cfg *config.Config) health.Settings {
	return health.Settings{CheckTimeout: cfg.Health.CheckTimeout(), CacheTTL: cfg.Health.CacheTTL()}
}

// observeReport counts the evaluation and logs failures in full: the public body only
// carries reason codes.
func (s *Server) observeReport(r *health.Report) {
	s.metrics.observeReport(r)
	s.metrics.setReady(r.Ready() && !s.state.Draining())
	key := strings.Join(r.Reasons(), ",")
	s.reasonsMu.Lock()
	changed := key != s.lastReasons
	s.lastReasons = key
	s.reasonsMu.Unlock()
	log := s.log.V(1)
	if changed {
		log = s.log
	}
	for _, res := range r.Results {
		if !res.OK() {
			log.Info("Readiness check failed", "check", res.Name, "reason", res.Reason, "error", errString(res.Err), "took", res.Took)
		}
	}
	if changed && key == "" {
		s.log.Info("Readiness checks passed", "checks", s.eval.Names())
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// storeConfig makes cfg the configuration serving now.
func (s *Server) storeConfig(cfg *config.Config) {
	s.requestTimeoutNow.Store(int64(cfg.Lifecycle().RequestTimeout))
	s.bounds.store(cfg)
	s.cfg.Store(cfg)
}

// Config is the configuration serving now.
func (s *Server) Config() *config.Config { return s.cfg.Load() }

// Phase is the process phase.
func (s *Server) Phase() lifecycle.Phase { return s.state.Phase() }

// Metrics are the server's metrics; tests read them through Metrics().Registry.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Handler is the server's whole HTTP handler (what the listener serves).
func (s *Server) Handler() http.Handler { return s.front }

// RestartKeys are the keys whose change a reload cannot apply: they shape the listener
// or the routes, built once at start.
func RestartKeys(old, new *config.Config) []string {
	var keys []string
	if old.Server.Listen != new.Server.Listen {
		keys = append(keys, "server.listen")
	}
	if old.Server.BasePath != new.Server.BasePath {
		keys = append(keys, "server.base_path")
	}
	if old.Server.ReadHeaderTimeoutMS != new.Server.ReadHeaderTimeoutMS {
		keys = append(keys, "server.read_header_timeout_ms")
	}
	// The key pair's files are read again when their contents change (tls.go), but the
	// paths, like the client CA, are read at start. healthcheck_identity_file is read by
	// `ferrofed healthcheck` alone.
	if old.Server.TLS.CertificateFile != new.Server.TLS.CertificateFile {
		keys = append(keys, "server.tls.certificate_file")
	}
	if old.Server.TLS.KeyFile != new.Server.TLS.KeyFile {
		keys = append(keys, "server.tls.key_file")
	}
	if old.Server.TLS.ClientCAFile != new.Server.TLS.ClientCAFile {
		keys = append(keys, "server.tls.client_ca_file")
	}
	// The 414 of limits.max_query_bytes follows a reload; the request head limit made
	// of it is the listener's, set at start.
	if MaxHeaderBytes(old) != MaxHeaderBytes(new) {
		keys = append(keys, "limits.max_query_bytes (the request head limit; the 414 applies at once)")
	}
	// metrics.push_url and push_job are read when the drain pushes: a reload applies them.
	if old.Metrics.Disabled != new.Metrics.Disabled || old.Metrics.Path != new.Metrics.Path {
		keys = append(keys, "metrics")
	}
	// The readiness checks are built once at start from these two.
	if old.Registry.Configured() != new.Registry.Configured() {
		keys = append(keys, "registry.members (adding the first or removing the last)")
	}
	if old.Health.MemberReadyCheck != new.Health.MemberReadyCheck {
		keys = append(keys, "health.member_ready_check")
	}
	// The patient-scoped bindings, their clients and the members' domains and
	// communities they read are built once at start (gateway/bindings/patient).
	for _, t := range []struct {
		key      string
		old, new any
	}{{"pdqm", old.PDQm, new.PDQm}, {"resolver", old.Resolver, new.Resolver}, {"consent", old.Consent, new.Consent}, {"localizer", old.Localizer, new.Localizer}} {
		if !reflect.DeepEqual(t.old, t.new) {
			keys = append(keys, t.key)
		}
	}
	// The server spans' middleware is installed at start, or not at all.
	if (old.Tracing == nil) != (new.Tracing == nil) {
		keys = append(keys, "tracing (adding or removing the table)")
	}
	if memberBindingKeys(old) != memberBindingKeys(new) {
		keys = append(keys, "registry.members[].identifier_system, home_community_id")
	}
	return keys
}

// memberBindingKeys are the members' binding keys, by member id, as one comparable string.
func memberBindingKeys(c *config.Config) string {
	var b strings.Builder
	for _, m := range c.Registry.Members {
		if m.IdentifierSystem != "" || m.HomeCommunityID != "" {
			fmt.Fprintf(&b, "%q=%q,%q;", m.ID, m.IdentifierSystem, m.HomeCommunityID)
		}
	}
	return b.String()
}

// Reload applies a new configuration, all of it or none of it. It validates cfg
// first, then has every part with a Reload hook prepare it (the registry,
// the issuers and their key files); only when all of that succeeded does anything
// change: the configuration, the request timeout, the drain and health budgets and
// minimal mode at once, then each surface's prepared state. A refusal at any step
// changes nothing and is logged as "Reload refused: <reason>, kept the running
// configuration". Keys that need a restart are logged as such, never silently
// ignored. It returns the keys that need a restart.
func (s *Server) Reload(cfg *config.Config) ([]string, error) {
	if ps := cfg.Validate(config.Options{}); len(ps) > 0 {
		err := &config.Problems{Source: "reloaded configuration", List: ps}
		s.refused(err)
		return nil, err
	}
	var applies []func()
	var parts []string
	for _, p := range s.parts {
		if p.Reload == nil {
			continue
		}
		apply, err := p.Reload(cfg)
		if err != nil {
			err = fmt.Errorf("surface %s: %w", p.Name, err)
			s.refused(err)
			return nil, err
		}
		applies = append(applies, apply)
		parts = append(parts, p.Name)
	}
	// Nothing below can fail: the reload is applied whole.
	old := s.cfg.Load()
	restart := RestartKeys(old, cfg)
	for _, k := range restart {
		s.log.Info("Configuration changed but needs a restart: "+k, "key", k)
	}
	s.storeConfig(cfg)
	s.eval.SetSettings(healthSettings(cfg))
	for _, apply := range applies {
		apply()
	}
	s.log.Info("Reloaded configuration: applied the server's settings and every surface's",
		"surfaces", parts, "requestTimeout", cfg.Lifecycle().RequestTimeout.String(), "restartNeeded", restart)
	s.logWarnings(cfg)
	return restart, nil
}

// logWarnings logs each warning of cfg (config.Config.Warnings: a token sent in clear
// by allow_insecure, a certificate near its expiry), at start and at every reload,
// with the words `config check` prints.
func (s *Server) logWarnings(cfg *config.Config) {
	for _, w := range cfg.Warnings() {
		s.log.Info("Warning: "+w.String(), "key", w.Key, "line", w.Line)
	}
}

// refused logs a refused reload: each problem on its own line, then the whole report
// as the reason.
func (s *Server) refused(err error) {
	var ps *config.Problems
	if errors.As(err, &ps) {
		for _, p := range ps.List {
			s.log.Info("Refused reloaded configuration: "+p.String(), "key", p.Key, "line", p.Line)
		}
	}
	reason := strings.ReplaceAll(err.Error(), "\n  ", "; ")
	s.log.Error(err, "Reload refused: "+reason+", kept the running configuration")
}

// ReloadFile loads path as serve does and applies it. An invalid file is refused, logged
// with the same messages `config check` prints, and the old configuration keeps serving.
// The TLS key pair's files are read again first, whatever the configuration's fate.
func (s *Server) ReloadFile(path string) error {
	_ = s.ReloadKeyPair("configuration reload (SIGHUP)") // a failure is logged; the last good pair keeps serving
	cfg, err := config.Load(path)
	if err != nil {
		s.refused(err)
		return fmt.Errorf("reload %s: %w", path, err)
	}
	_, err = s.Reload(cfg)
	return err
}
