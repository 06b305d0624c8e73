// Package assemble is the gateway's composition root: the one place its parts are made
// from a configuration and put together, called by `ferrofed serve`, by `ferrofed
// config check` and by the tests that need a whole gateway (docs/architecture.md).
package assemble

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrofed/ferrofed/gateway/access"
	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/gateway/bindings/mcsd"
	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/bindings/pmir"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/server"
	"github.com/ferrofed/ferrofed/gateway/storedquery"
	"github.com/ferrofed/ferrofed/gateway/tracing"
)

// Gateway is a gateway put together from its configuration file: every file the
// configuration names read and checked, the parts and the server built, nothing
// listening and nothing sent.
type Gateway struct {
	// Config is the configuration it was built from.
	Config *config.Config
	// Server is the server that listens and drains.
	Server *server.Server

	// federation is the federation surface, always built.
	federation *federation.Surface
	// The parts a configuration may switch off: nil when their table is absent.
	audit     *audit.Trail
	flow      *patient.Flow
	queries   *storedquery.Queries
	feed      *pmir.Feed
	directory *mcsd.Directory
	tracing   *tracing.Tracing
	// parts are what the parts registered with the server, in order.
	parts []server.Registration

	// starts are the parts' processes, in the order Start starts them: the audit
	// spools (opened by Start, never by New: `config check` must not touch a running
	// gateway's spool), the directory's refresh loop, the stored queries' drift check
	// and the PMIR subscription. A part that is switched off has none.
	starts []func() error
}

// Load loads path and builds the gateway from it, exactly as serve runs it. It is
// the one function serve and `config check` both call (check then throws the result
// away), so that no file is accepted by one and refused by the other. The error is a
// *config.Problems when the file is wrong, config.Load's error when it cannot be read,
// and a BuildError naming the part that could not be built otherwise.
func Load(path string, log logr.Logger) (*Gateway, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	return New(cfg, log)
}

// shared is what every part is handed by its constructor, made before any part: the
// dependency report, the operator-token check, the binding metrics and the audit
// recorder (bindings.NoRecorder without [audit]).
type shared struct {
	cfg       *config.Config
	log       logr.Logger
	tracker   *dependencies.Tracker
	operators *auth.Operators
	metrics   *bindings.Metrics
	rec       bindings.Recorder
	opts      options
}

// New builds the gateway from a loaded configuration: every file it names read, nothing
// listening and nothing sent. The error is a BuildError naming the part that could not
// be built.
//
// What every part shares is made first and handed to each constructor. A part the
// configuration switches off is not built, and nothing of it is registered. opts are
// for tests only (Option).
func New(cfg *config.Config, log logr.Logger, opts ...Option) (*Gateway, error) {
	// The operator-token check of every {base}/operator/* route: [[auth.issuers]],
	// their key files read here; the federation's reload swaps it.
	operators, err := auth.NewOperators(cfg.Auth.Issuers, auth.Options{})
	if err != nil {
		return nil, BuildError{fmt.Errorf("the federation surface could not be built: federation: %w", err)}
	}
	sh := shared{cfg: cfg, log: log, tracker: dependencies.NewTracker(), operators: operators,
		metrics: bindings.NewMetrics(), rec: bindings.NoRecorder{}}
	for _, o := range opts {
		o(&sh.opts)
	}
	g := &Gateway{Config: cfg}
	// The traces ([tracing]): built first, so that the bindings' clients trace the
	// exchanges no request made from its provider, and its server span wraps every
	// part's routes (registered first below); its files read here, its export worker
	// started by Start.
	if g.tracing, err = tracing.New(cfg, tracing.Options{Logger: log.WithName("tracing"), Exporter: sh.opts.exporter}); err != nil {
		return nil, BuildError{fmt.Errorf("the tracing could not be built: %w", err)}
	}
	if g.tracing != nil {
		sh.metrics.Tracer = g.tracing.Provider()
	}
	if err := g.buildBindings(&sh); err != nil {
		return nil, err
	}
	parts, err := g.buildParts(sh)
	if err != nil {
		return nil, err
	}
	if g.tracing != nil {
		parts = append([]server.Registration{{Name: "tracing", Trace: g.tracing.Middleware(), Reload: g.tracing.PrepareReload,
			Collectors: g.tracing.Collectors(), Drained: g.tracing.Drained}}, parts...)
	}
	g.parts = parts
	srv, err := server.New(cfg, log, append([]server.Option{server.WithRegistrations(parts...)}, sh.opts.server...)...)
	if err != nil {
		return nil, BuildError{fmt.Errorf("the server could not be built: %w", err)}
	}
	g.Server = srv
	// Start order: the span export first, the audit spools (every other start's exchanges are
	// audited), the directory (which first serves its cache file), the stored
	// queries' drift check, the PMIR subscription last.
	if g.tracing != nil {
		g.starts = append(g.starts, g.tracing.Start)
	}
	if g.audit != nil {
		g.starts = append(g.starts, g.audit.Start)
	}
	if g.directory != nil {
		g.starts = append(g.starts, g.directory.Start)
	}
	if g.queries != nil {
		g.starts = append(g.starts, func() error { g.queries.Start(); return nil })
	}
	if g.feed != nil {
		g.starts = append(g.starts, g.feed.Start)
	}
	return g, nil
}

// buildBindings builds the parts the federation is handed: the audit trail, whose
// recorder every later part records through, and the patient-scoped flow.
func (g *Gateway) buildBindings(sh *shared) error {
	// The audit trail ([audit]): its credential files are read here; the federation
	// and every binding record each access and exchange through it before it is used.
	// Without it, nothing is recorded.
	ao := audit.Options{Logger: sh.log.WithName("audit"), Metrics: sh.metrics, Tracker: sh.tracker, Authorize: sh.operators.Middleware()}
	for _, f := range sh.opts.audit {
		f(&ao)
	}
	trail, err := audit.New(sh.cfg, ao)
	if err != nil {
		return BuildError{fmt.Errorf("the audit trail could not be built: %w", err)}
	}
	if trail != nil {
		g.audit, sh.rec = trail, trail
	}
	if sh.opts.recorder != nil {
		sh.rec = sh.opts.recorder
	}
	// The patient-scoped bindings ([pdqm], [resolver], [consent], [localizer]): their
	// credential files are read here.
	g.flow, err = patient.New(sh.cfg, patient.Options{Recorder: sh.rec, Metrics: sh.metrics, Tracker: sh.tracker,
		Logger: sh.log.WithName("patient")})
	if err != nil {
		return BuildError{fmt.Errorf("the patient-scoped bindings could not be built: %w", err)}
	}
	return nil
}

// buildParts builds the federation and the parts that reach the members through it,
// and returns what each registers with the server, in the order the server runs them.
func (g *Gateway) buildParts(sh shared) ([]server.Registration, error) {
	// The stored queries' store ([stored_queries]), read here: the federation expands
	// `_query` searches with it.
	expander, err := storedquery.Load(sh.cfg, sh.log.WithName("stored_queries"))
	if err != nil {
		return nil, BuildError{fmt.Errorf("the stored queries could not be built: %w", err)}
	}
	fedOpts := federation.Options{Logger: sh.log.WithName("federation"), Tracker: sh.tracker, Operators: sh.operators}
	if g.audit != nil {
		fedOpts.Audit = g.audit
	}
	if g.flow != nil {
		fedOpts.Patient = g.flow
	}
	if expander != nil {
		fedOpts.StoredQueries = expander
	}
	for _, f := range sh.opts.federation {
		f(&fedOpts)
	}
	fed, err := federation.New(sh.cfg, fedOpts)
	if err != nil {
		return nil, BuildError{fmt.Errorf("the federation surface could not be built: %w", err)}
	}
	// Who may use the data plane: the access guard runs in front of every part's
	// data-plane routes, verifying with the issuers the federation's reload keeps
	// current; the federation's loop guard before it (a nested request has no token).
	g.federation = fed
	var patients access.Patients
	if g.flow != nil {
		patients = g.flow
	}
	guard := access.New(sh.cfg, sh.operators.Verifier, patients, fed)
	parts := []server.Registration{{Name: "federation", Guard: fed.LoopGuard, DataPlane: fed.RegisterDataPlane, Operator: fed.RegisterOperator,
		Checks: fed.Checks(), Stop: fed.Stop, Reload: fed.PrepareReload, Collectors: []prometheus.Collector{sh.tracker.Collector()}},
		{Name: "access", Guard: guard.Handler(), Reload: guard.PrepareReload}}
	// The stored queries reach the members through the federation; each exchange
	// with a member about a stored query is audited.
	if expander != nil {
		sqOpts := storedquery.Options{Logger: sh.log.WithName("stored_queries"), Members: fed, Authorize: sh.operators.Middleware()}
		if g.audit != nil || sh.opts.recorder != nil {
			sqOpts.Recorder = sh.rec
		}
		if g.queries, err = storedquery.New(sh.cfg, expander, sqOpts); err != nil {
			return nil, BuildError{fmt.Errorf("the stored queries could not be built: %w", err)}
		}
		parts = append(parts, server.Registration{Name: "stored_queries", Operator: g.queries.RegisterOperator,
			Checks: g.queries.Checks(), Stop: g.queries.Stop, Reload: g.queries.PrepareReload})
	}
	if err := g.buildFeed(sh); err != nil {
		return nil, err
	}
	parts = append(parts, g.auditParts()...)
	// The binding metrics, registered once for every binding.
	parts = append(parts, server.Registration{Name: "bindings", Collectors: []prometheus.Collector{sh.metrics}})
	// The registry from an mCSD directory ([registry.mcsd]): swapped into the
	// federation surface, its exchanges audited.
	if sh.cfg.Registry.MCSD != nil {
		do := mcsd.Options{Config: sh.cfg, Registry: fed, Recorder: sh.rec, Metrics: sh.metrics, Tracker: sh.tracker,
			Logger: sh.log.WithName("directory")}
		for _, f := range sh.opts.directory {
			f(&do)
		}
		g.directory, err = mcsd.New(do)
		if err != nil {
			return nil, BuildError{fmt.Errorf("the directory could not be built: %w", err)}
		}
		parts = append(parts, server.Registration{Name: mcsd.Key, Stop: g.directory.Stop, Reload: g.directory.PrepareReload})
	}
	if g.feed != nil {
		parts = append(parts, server.Registration{Name: pmir.Key, DataPlane: g.feed.RegisterDataPlane, Stop: g.feed.Stop,
			StopReport: g.feed.StopReport, Reload: g.feed.PrepareReload})
	}
	return parts, nil
}

// buildFeed builds the identity feed ([pmir]): its merges and updates clear the
// flow's caches.
func (g *Gateway) buildFeed(sh shared) error {
	if sh.cfg.PMIR == nil {
		return nil
	}
	opts := pmir.Options{Logger: sh.log.WithName("pmir"), Recorder: sh.rec, Metrics: sh.metrics, Tracker: sh.tracker}
	var clear []func()
	if g.flow != nil {
		clear = append(clear, g.flow.InvalidateCaches)
	}
	if clear = append(clear, sh.opts.invalidate...); len(clear) > 0 {
		opts.Invalidate = func() {
			for _, f := range clear {
				f()
			}
		}
	}
	var err error
	if g.feed, err = pmir.New(sh.cfg, opts); err != nil {
		return BuildError{fmt.Errorf("the identity feed could not be built: %w", err)}
	}
	return nil
}

// auditParts are the audit trail's registrations: its operator routes, reload and
// collector, and a stopper per destination, which closes its spool once the feed
// deleted its subscription, so that the delete is audited too.
func (g *Gateway) auditParts() []server.Registration {
	if g.audit == nil {
		return nil
	}
	parts := []server.Registration{{Name: "audit", Operator: g.audit.RegisterOperator, Reload: g.audit.PrepareReload,
		Collectors: []prometheus.Collector{g.audit.Collector()}, AuditSpools: g.audit.SpoolsLeft}}
	stoppers := g.audit.Stoppers()
	if g.feed != nil {
		stoppers = g.feed.StopBefore(stoppers)
	}
	for _, s := range stoppers {
		parts = append(parts, server.Registration{Name: s.Name, Stop: s.Stop, StopReport: s.Report})
	}
	return parts
}

// Start starts the parts' processes (the audit spools and their deliveries, the
// directory's refresh loop, which first serves its cache file, the stored queries'
// drift check and the PMIR subscription, whose exchanges are audited); serve calls it
// once the listener is bound and before the first request is served. Drain step 4
// stops them.
func (g *Gateway) Start() error {
	for _, start := range g.starts {
		if err := start(); err != nil {
			return err
		}
	}
	return nil
}

// BuildError is a configuration config.Load accepted but a part of the gateway refused.
type BuildError struct{ err error }

func (e BuildError) Error() string { return e.err.Error() }
func (e BuildError) Unwrap() error { return e.err }
