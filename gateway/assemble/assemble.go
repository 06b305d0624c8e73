// Package assemble is the gateway's composition root: the one place its parts are made
// from a configuration and put together, called by `ferrofed serve`, by `ferrofed
// config check` and by the tests that need a whole gateway (docs/architecture.md).
package assemble

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

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
)

// Gateway is a gateway put together from its configuration file: every file the
// configuration names read and checked, the parts and the server built, nothing
// listening and nothing sent.
type Gateway struct {
	// Config is the configuration it was built from.
	Config *config.Config
	// Server is the server that listens and drains.
	Server *server.Server

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

// New builds the gateway from a loaded configuration: every file it names read, nothing
// listening and nothing sent. The error is a BuildError naming the part that could not
// be built.
//
// What every part shares is made first and handed to each constructor: the dependency
// report, the operator-token check, the binding metrics and the audit recorder. A part
// the configuration switches off is not built, and nothing of it is registered.
func New(cfg *config.Config, log logr.Logger) (*Gateway, error) {
	tracker := dependencies.NewTracker()
	// The operator-token check of every {base}/operator/* route: [[auth.issuers]],
	// their key files read here; the federation's reload swaps it.
	operators, err := auth.NewOperators(cfg.Auth.Issuers, auth.Options{})
	if err != nil {
		return nil, BuildError{fmt.Errorf("the federation surface could not be built: federation: %w", err)}
	}
	authorize := operators.Middleware()
	metrics := bindings.NewMetrics()
	g := &Gateway{Config: cfg}
	var parts []server.Registration
	var stoppers []bindings.Stopper

	// The audit trail ([audit]): its credential files are read here; the federation
	// and every binding record each access and exchange through it before it is used.
	// Without it, nothing is recorded.
	var rec bindings.Recorder = bindings.NoRecorder{}
	trail, err := audit.New(cfg, audit.Options{Logger: log.WithName("audit"), Metrics: metrics, Tracker: tracker, Authorize: authorize})
	if err != nil {
		return nil, BuildError{fmt.Errorf("the audit trail could not be built: %w", err)}
	}
	if trail != nil {
		rec = trail
	}
	// The patient-scoped bindings ([pdqm], [resolver], [consent], [localizer]): their
	// credential files are read here.
	flow, err := patient.New(cfg, patient.Options{Recorder: rec, Metrics: metrics, Tracker: tracker, Logger: log.WithName("patient")})
	if err != nil {
		return nil, BuildError{fmt.Errorf("the patient-scoped bindings could not be built: %w", err)}
	}
	// The stored queries' store ([stored_queries]), read here: the federation expands
	// `_query` searches with it.
	expander, err := storedquery.Load(cfg, log.WithName("stored_queries"))
	if err != nil {
		return nil, BuildError{fmt.Errorf("the stored queries could not be built: %w", err)}
	}
	fedOpts := federation.Options{Logger: log.WithName("federation"), Tracker: tracker, Operators: operators, Patient: flow}
	if trail != nil {
		fedOpts.Audit = trail
	}
	if expander != nil {
		fedOpts.StoredQueries = expander
	}
	fed, err := federation.New(cfg, fedOpts)
	if err != nil {
		return nil, BuildError{fmt.Errorf("the federation surface could not be built: %w", err)}
	}
	parts = append(parts, server.Registration{Name: "federation", DataPlane: fed.RegisterDataPlane, Operator: fed.RegisterOperator,
		Checks: fed.Checks(), Stop: fed.Stop, Reload: fed.PrepareReload, Collectors: []prometheus.Collector{tracker.Collector()}})
	// The stored queries reach the members through the federation; each exchange
	// with a member about a stored query is audited.
	var queries *storedquery.Queries
	if expander != nil {
		sqOpts := storedquery.Options{Logger: log.WithName("stored_queries"), Members: fed, Authorize: authorize}
		if trail != nil {
			sqOpts.Recorder = trail
		}
		if queries, err = storedquery.New(cfg, expander, sqOpts); err != nil {
			return nil, BuildError{fmt.Errorf("the stored queries could not be built: %w", err)}
		}
		parts = append(parts, server.Registration{Name: "stored_queries", Operator: queries.RegisterOperator,
			Checks: queries.Checks(), Stop: queries.Stop, Reload: queries.PrepareReload})
	}
	// The identity feed ([pmir]): its merges and updates clear the flow's caches.
	var feed *pmir.Feed
	if cfg.PMIR != nil {
		pmirOpts := pmir.Options{Logger: log.WithName("pmir"), Recorder: rec, Metrics: metrics, Tracker: tracker}
		if flow != nil {
			pmirOpts.Invalidate = flow.InvalidateCaches
		}
		if feed, err = pmir.New(cfg, pmirOpts); err != nil {
			return nil, BuildError{fmt.Errorf("the identity feed could not be built: %w", err)}
		}
	}
	if trail != nil {
		parts = append(parts, server.Registration{Name: "audit", Operator: trail.RegisterOperator, Reload: trail.PrepareReload,
			Collectors: []prometheus.Collector{trail.Collector()}})
		stoppers = trail.Stoppers()
		// The audit destinations close their spools once the feed deleted its
		// subscription, so that the delete is audited too.
		if feed != nil {
			stoppers = feed.StopBefore(stoppers)
		}
	}
	for _, s := range stoppers {
		parts = append(parts, server.Registration{Name: s.Name, Stop: s.Stop, StopReport: s.Report})
	}
	// The binding metrics, registered once for every binding.
	parts = append(parts, server.Registration{Name: "bindings", Collectors: []prometheus.Collector{metrics}})
	// The registry from an mCSD directory ([registry.mcsd]): swapped into the
	// federation surface, its exchanges audited.
	var dir *mcsd.Directory
	if cfg.Registry.MCSD != nil {
		dir, err = mcsd.New(mcsd.Options{Config: cfg, Registry: fed, Recorder: rec, Metrics: metrics, Tracker: tracker, Logger: log.WithName("directory")})
		if err != nil {
			return nil, BuildError{fmt.Errorf("the directory could not be built: %w", err)}
		}
		parts = append(parts, server.Registration{Name: mcsd.Key, Stop: dir.Stop, Reload: dir.PrepareReload})
	}
	if feed != nil {
		parts = append(parts, server.Registration{Name: pmir.Key, DataPlane: feed.RegisterDataPlane, Stop: feed.Stop,
			StopReport: feed.StopReport, Reload: feed.PrepareReload})
	}
	srv, err := server.New(cfg, log, server.WithRegistrations(parts...))
	if err != nil {
		return nil, BuildError{fmt.Errorf("the server could not be built: %w", err)}
	}
	g.Server = srv
	// Start order: the audit spools first (every other start's exchanges are
	// audited), the directory (which first serves its cache file), the stored
	// queries' drift check, the PMIR subscription last.
	if trail != nil {
		g.starts = append(g.starts, trail.Start)
	}
	if dir != nil {
		g.starts = append(g.starts, dir.Start)
	}
	if queries != nil {
		g.starts = append(g.starts, func() error { queries.Start(); return nil })
	}
	if feed != nil {
		g.starts = append(g.starts, feed.Start)
	}
	return g, nil
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
