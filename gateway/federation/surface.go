package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/health"
)

// Options tune a Surface. The zero value is production's.
type Options struct {
	// Logger receives the surface's logs; default logr.Discard().
	Logger logr.Logger
	// Registerer, when set, gets the ferrofed_dependency_state collector. Without it,
	// register Collector() where the metrics are served.
	Registerer prometheus.Registerer
	// Transport carries every member call; default a pooled transport of the surface's
	// own (closed by Stop).
	Transport http.RoundTripper
	// Auth tunes the operator token verifier (tests set its clock and JWKS client).
	Auth auth.Options
}

// Surface is the federation surface of the gateway's server: the data plane
// ({base}/fhir/{Type}, {base}/nodes/{id}/fhir/*), the operator routes
// ({base}/operator/dependencies, {base}/operator/probe) behind operator tokens, and
// the readiness checks "registry", "clients" and, when health.member_ready_check is
// on, "members". It satisfies server.Surface and server.Reloader.
type Surface struct {
	log     logr.Logger
	tracker *dependencies.Tracker
	caller  *caller
	opts    Options
	state   atomic.Pointer[settings]
}

// settings is everything a reload replaces at once: a request reads one snapshot and
// never sees half of two configurations.
type settings struct {
	cfg      *config.Config
	reg      *registry
	verifier *auth.Verifier
	// requestTimeout is server.request_timeout_ms resolved, read on every request.
	requestTimeout time.Duration
}

// New builds the surface from a validated configuration. It fails when the registry
// or an issuer's key file cannot be loaded; nothing is sent to a member or an issuer.
func New(cfg *config.Config, opts Options) (*Surface, error) {
	if cfg == nil {
		return nil, errors.New("federation: no configuration")
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.Transport == nil {
		opts.Transport = newTransport()
	}
	st, err := buildSettings(cfg, opts)
	if err != nil {
		return nil, err
	}
	s := &Surface{
		log:     opts.Logger,
		tracker: dependencies.NewTracker(st.reg.endpointIDs()...),
		opts:    opts,
	}
	s.caller = &caller{client: newClient(opts.Transport), tracker: s.tracker, log: opts.Logger}
	s.state.Store(st)
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(s.tracker.Collector()); err != nil {
			return nil, fmt.Errorf("federation: register the dependency metric: %w", err)
		}
	}
	return s, nil
}

func buildSettings(cfg *config.Config, opts Options) (*settings, error) {
	reg, err := loadRegistry(cfg.Registry)
	if err != nil {
		return nil, fmt.Errorf("federation: %w", err)
	}
	v, err := auth.New(cfg.Auth.Issuers, opts.Auth)
	if err != nil {
		return nil, fmt.Errorf("federation: %w", err)
	}
	return &settings{cfg: cfg, reg: reg, verifier: v, requestTimeout: cfg.Lifecycle().RequestTimeout}, nil
}

// Name names the surface in the server's logs.
func (s *Surface) Name() string { return "federation" }

// Tracker is the dependency tracker, for bindings that report their own state into
// the same report.
func (s *Surface) Tracker() *dependencies.Tracker { return s.tracker }

// Collector exports the dependency states as ferrofed_dependency_state. Register it
// once (or pass Options.Registerer instead).
func (s *Surface) Collector() prometheus.Collector { return s.tracker.Collector() }

// Authorize is the operator-token middleware with the current issuers, for other
// surfaces' /operator/* routes: every operator route needs the same token.
func (s *Surface) Authorize() gin.HandlerFunc {
	return auth.Middleware(func() *auth.Verifier { return s.state.Load().verifier })
}

// Reload applies a reloaded configuration: the registry (a member kept keeps its
// state in the report, a new one is unknown, a removed one leaves it) and the
// issuers. On error the surface keeps what it had.
func (s *Surface) Reload(cfg *config.Config) error {
	st, err := buildSettings(cfg, s.opts)
	if err != nil {
		return err
	}
	s.tracker.SetEndpoints(st.reg.endpointIDs())
	s.state.Store(st)
	s.log.Info("Applied the reloaded registry and issuers", "members", len(st.reg.members), "issuers", len(cfg.Auth.Issuers))
	return nil
}

// Stop is drain step 4: by then every client request has finished, so what is left
// are idle keep-alive connections to members.
func (s *Surface) Stop(ctx context.Context) error {
	s.caller.client.CloseIdleConnections()
	return nil
}

// Checks are the readiness checks the surface adds. No member's state is among them
// unless health.member_ready_check asks for it: one member's outage shows in
// meta.federation and the dependency report, never as an unready gateway.
func (s *Surface) Checks() []health.Check {
	st := s.state.Load()
	if !st.cfg.Registry.Configured() {
		return nil
	}
	checks := []health.Check{
		health.NamedCheck("registry", func(context.Context) error {
			if st := s.state.Load(); st.reg == nil || len(st.reg.members) == 0 {
				return errors.New("no member registry loaded")
			}
			return nil
		}),
		health.NamedCheck("clients", func(context.Context) error {
			if s.caller == nil || s.caller.client == nil {
				return errors.New("member clients not built")
			}
			return nil
		}),
	}
	if st.cfg.Health.MemberReadyCheck {
		// The gateway sends no request of its own, so the members start unknown and
		// this check fails until a client request (at boot: POST
		// {base}/operator/probe, which the readiness gate does not hold) sees one up.
		checks = append(checks, health.NamedCheck("members", func(context.Context) error {
			if !s.tracker.AnyEndpointUp() {
				return errors.New("no member endpoint observed up")
			}
			return nil
		}))
	}
	return checks
}

// RegisterDataPlane registers the federated search and the routed requests. The
// group carries the server's readiness gate and request deadline.
func (s *Surface) RegisterDataPlane(g *gin.RouterGroup) {
	g.GET("/fhir/:type", s.handleSearch)
	// The FHIR REST methods only: CONNECT and TRACE have no business at a member.
	for _, m := range routedMethods {
		g.Handle(m, "/nodes/:id/fhir/*path", s.handleRoute)
	}
}

var routedMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
}

// RegisterOperator registers the dependency report and the ask-all probe, each behind
// an operator token. The token check is on a group of the surface's own so that the
// server's shared operator group is left as it was given.
func (s *Surface) RegisterOperator(g *gin.RouterGroup) {
	op := g.Group("", s.Authorize())
	op.GET("/dependencies", s.handleDependencies)
	op.POST("/probe", s.handleProbe)
}

// budget is how long the members of one request may take: the request timeout,
// bounded by the client request's own deadline (the server sets one), less a small
// reserve so that the merged answer is written before that deadline and not after.
func budget(ctx context.Context, requestTimeout time.Duration) time.Duration {
	d := requestTimeout
	if dl, ok := ctx.Deadline(); ok {
		if rem := time.Until(dl); rem < d {
			d = rem
		}
	}
	return d - min(d/10, 100*time.Millisecond)
}

func writeFHIR(w http.ResponseWriter, status int, v any) {
	var body []byte
	var err error
	if m, ok := v.(json.Marshaler); ok {
		// Called directly: json.Marshal would re-scan what MarshalJSON wrote.
		body, err = m.MarshalJSON()
	} else {
		body, err = json.Marshal(v)
	}
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"exception"}]}`)
	}
	h := w.Header()
	h.Set("Content-Type", FHIRJSON)
	// With its length known the answer goes out as one body, not as chunks written
	// (and read) piecemeal plus a last one of its own.
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client may be gone.
}

var errNoRegistry = operationOutcome("not-supported", "federation not configured: no [[registry.members]]")

func (s *Surface) handleSearch(c *gin.Context) {
	st := s.state.Load()
	resourceType := c.Param("type")
	if !ValidResourceType(resourceType) {
		writeFHIR(c.Writer, http.StatusBadRequest, operationOutcome("invalid", "the resource type must match [A-Z][A-Za-z]+"))
		return
	}
	if len(st.reg.members) == 0 {
		writeFHIR(c.Writer, http.StatusNotImplemented, errNoRegistry)
		return
	}
	ctx := c.Request.Context()
	b := s.caller.search(ctx, st.reg, budget(ctx, st.requestTimeout), "/"+resourceType, c.Request.URL.RawQuery)
	if errors.Is(ctx.Err(), context.Canceled) {
		return // the client left: nobody to answer.
	}
	writeFHIR(c.Writer, http.StatusOK, b)
}

func (s *Surface) handleRoute(c *gin.Context) {
	st := s.state.Load()
	m, ok := st.reg.byID[c.Param("id")]
	if !ok {
		writeFHIR(c.Writer, http.StatusNotFound, operationOutcome("not-found", "no member has this id"))
		return
	}
	path, ok := routedPath(c.Param("path"))
	if !ok {
		writeFHIR(c.Writer, http.StatusBadRequest, operationOutcome("invalid", "the path must not contain . or .. segments"))
		return
	}
	s.caller.route(c.Writer, c.Request, m, path, budget(c.Request.Context(), st.requestTimeout))
}

func (s *Surface) handleDependencies(c *gin.Context) {
	body, err := json.Marshal(s.tracker.Report())
	if err != nil {
		c.AbortWithStatus(http.StatusInternalServerError)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Data(http.StatusOK, "application/json", body)
}

// probeAnswer is the body of POST {base}/operator/probe.
type probeAnswer struct {
	Members []ProbeRecord `json:"members"`
}

func (s *Surface) handleProbe(c *gin.Context) {
	st := s.state.Load()
	ctx := c.Request.Context()
	records := s.caller.probe(ctx, st.reg, budget(ctx, st.requestTimeout))
	if errors.Is(ctx.Err(), context.Canceled) {
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, probeAnswer{Members: records})
}
