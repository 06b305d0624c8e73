// Package assemble is the gateway's composition root: the one place its parts are made
// from a configuration and put together, called by `ferrofed serve`, by `ferrofed
// config check` and by the tests that need a whole gateway (docs/architecture.md).
package assemble

import (
	"fmt"

	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/gateway/bindings/mcsd"
	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/bindings/pmir"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/server"
	"github.com/ferrofed/ferrofed/gateway/storedquery"
)

// Gateway is a gateway put together from its configuration file: every file the
// configuration names read and checked, the surfaces and the server built, nothing
// listening and nothing sent.
type Gateway struct {
	// Config is the configuration it was built from.
	Config *config.Config
	// Server is the server that listens and drains.
	Server *server.Server

	// audit is the audit trail; nil without [audit]. Its spools are opened by start,
	// never by assemble: `config check` must not touch a running gateway's spool.
	audit *audit.Trail
	// directory reads the registry from [registry.mcsd]; nil without it. Its refresh
	// loop is started by start, never by assemble.
	directory *mcsd.Directory
	// feed is the PMIR identity feed; nil without [pmir]. start starts its
	// subscription, never assemble.
	feed *pmir.Feed
	// queries are the stored queries; nil without [stored_queries]. Their drift check
	// is started by start.
	queries *storedquery.Queries
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
func New(cfg *config.Config, log logr.Logger) (*Gateway, error) {
	// The federation surface: the data plane, the operator routes and the dependency
	// report; its metrics reach the server's registry through server.Collected.
	// The audit trail ([audit]): its credential files are read here; the federation
	// records every access through it before the access is made.
	// One set of binding metrics for every binding: the trail exports it, or, without
	// [audit], the flow's surface does.
	metrics := bindings.NewMetrics()
	trail, flow, queries, err := buildBindings(cfg, log, metrics)
	if err != nil {
		return nil, err
	}
	fedOpts := federation.Options{Logger: log.WithName("federation"), Audit: trail, Patient: flow}
	if queries != nil {
		fedOpts.StoredQueries = queries
	}
	fed, err := federation.New(cfg, fedOpts)
	if err != nil {
		return nil, BuildError{fmt.Errorf("the federation surface could not be built: %w", err)}
	}
	// The identity feed ([pmir]): its merges and updates clear the flow's caches.
	// One surface registers the binding metrics: the trail's, else the flow's, else
	// the feed's, else the directory's.
	feedExports := trail == nil && flow == nil
	feed, err := pmir.New(cfg, pmir.Options{Logger: log.WithName("pmir"), Recorder: trail, Metrics: metrics,
		ExportMetrics: feedExports, Invalidate: flow.InvalidateCaches})
	if err != nil {
		return nil, BuildError{fmt.Errorf("the identity feed could not be built: %w", err)}
	}
	// The bindings report into the federation's dependency report, and their
	// operator routes take the same operator token.
	trail.Attach(fed.Tracker(), fed.Authorize())
	flow.Attach(fed.Tracker())
	feed.Attach(fed.Tracker())
	surfaces := []server.Surface{fed}
	if queries != nil {
		queries.Attach(fed, fed.Authorize())
		surfaces = append(surfaces, queries)
	}
	// The audit destinations close their spools once the feed deleted its
	// subscription, so that the delete is audited too.
	for _, b := range feed.StopBefore(trail.Surfaces()) {
		surfaces = append(surfaces, b)
	}
	exported := trail != nil || (feed != nil && feedExports)
	if trail == nil {
		if b := flow.Surface(metrics); b != nil {
			surfaces = append(surfaces, b)
			exported = true
		}
	}
	// The registry from an mCSD directory ([registry.mcsd]): swapped into the
	// federation surface, its exchanges audited through the trail.
	var dir *mcsd.Directory
	if cfg.Registry.MCSD != nil {
		dir, err = mcsd.New(mcsd.Options{Config: cfg, Registry: fed, Recorder: trail, Metrics: metrics, Logger: log.WithName("directory")})
		if err != nil {
			return nil, BuildError{fmt.Errorf("the directory could not be built: %w", err)}
		}
		dir.Attach(fed.Tracker())
		var m *bindings.Metrics
		if !exported {
			m = metrics
		}
		surfaces = append(surfaces, dir.Surface(m))
	}
	if b := feed.Surface(); b != nil {
		surfaces = append(surfaces, b)
	}
	srv, err := server.New(cfg, log, server.WithSurfaces(surfaces...))
	if err != nil {
		return nil, BuildError{fmt.Errorf("the server could not be built: %w", err)}
	}
	return &Gateway{Config: cfg, Server: srv, audit: trail, directory: dir, feed: feed, queries: queries}, nil
}

// Start starts the bindings' processes (the audit spools and their deliveries, the
// directory's refresh loop, which first serves its cache file, the PMIR
// subscription, whose exchanges are audited, and the stored queries' drift check);
// serve calls it once the listener is bound and before the first request is served.
// Drain step 4 stops them.
func (g *Gateway) Start() error {
	if err := g.audit.Start(); err != nil {
		return err
	}
	if g.directory != nil {
		if err := g.directory.Start(); err != nil {
			return err
		}
	}
	g.queries.Start()
	return g.feed.Start()
}

// BuildError is a configuration config.Load accepted but a part of the gateway refused.
type BuildError struct{ err error }

func (e BuildError) Error() string { return e.err.Error() }
func (e BuildError) Unwrap() error { return e.err }

// buildBindings builds the audit trail, the patient-scoped flow and the stored
// queries, in that order: each later one audits its exchanges through the trail.
func buildBindings(cfg *config.Config, log logr.Logger, metrics *bindings.Metrics) (*audit.Trail, *patient.Flow, *storedquery.Queries, error) {
	trail, err := audit.New(cfg, audit.Options{Logger: log.WithName("audit"), Metrics: metrics})
	if err != nil {
		return nil, nil, nil, BuildError{fmt.Errorf("the audit trail could not be built: %w", err)}
	}
	// The patient-scoped bindings ([pdqm], [resolver], [consent], [localizer]): their
	// credential files are read here; each exchange is audited through the trail.
	flow, err := patient.New(cfg, patient.Options{Recorder: trail, Metrics: metrics, Logger: log.WithName("patient")})
	if err != nil {
		return nil, nil, nil, BuildError{fmt.Errorf("the patient-scoped bindings could not be built: %w", err)}
	}
	// The stored queries ([stored_queries]): their store is read here; each exchange
	// with a member about a stored query is audited through the trail.
	sqOpts := storedquery.Options{Logger: log.WithName("stored_queries")}
	if trail != nil {
		sqOpts.Recorder = trail
	}
	queries, err := storedquery.New(cfg, sqOpts)
	if err != nil {
		return nil, nil, nil, BuildError{fmt.Errorf("the stored queries could not be built: %w", err)}
	}
	return trail, flow, queries, nil
}
