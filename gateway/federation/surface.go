package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/gateway/calllimit"
	"github.com/ferrofed/ferrofed/gateway/capability"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/health"
	"github.com/ferrofed/ferrofed/gateway/proxy"
)

// Options tune a Surface. The zero value is production's.
type Options struct {
	// Logger receives the surface's logs; default logr.Discard().
	Logger logr.Logger
	// Transport carries every member call; default a pooled transport of the surface's
	// own (closed by Stop).
	Transport http.RoundTripper
	// Tracker is the dependency report the member calls observe into; required. The
	// surface keeps its member endpoints in step with the registry.
	Tracker *dependencies.Tracker
	// Operators is the operator-token check of [[auth.issuers]]; required. The surface
	// guards its operator routes with it, and its reload swaps the check's verifier.
	Operators *auth.Operators
	// Audit records every access of the data plane before it is made (audit.go);
	// absent (nil) without [audit].
	Audit Auditor
	// Patient plans patient-scoped searches (patient.go); absent (nil) when no
	// patient-scoped binding is configured.
	Patient PatientFlow
	// StoredQueries expands `_query` searches (members.go); nil without [stored_queries].
	StoredQueries QueryExpander
}

// Auditor records the accesses of the data plane: *audit.Trail.
type Auditor interface {
	// Begin queues the access's record and returns the wait for it to be stored.
	Begin(a audit.Access) (wait func(ctx context.Context) error)
	// Refuses is true when a request whose record could not be stored is refused.
	Refuses() bool
}

// Surface is the federation surface of the gateway's server: the data plane
// ({base}/fhir/{Type}, {base}/nodes/{id}/fhir/*), the operator routes
// ({base}/operator/dependencies, {base}/operator/probe) behind operator tokens, and
// the readiness checks "registry", "clients" and, when health.member_ready_check is
// on, "members". The composition root registers its methods with the server.
type Surface struct {
	log     logr.Logger
	tracker *dependencies.Tracker
	caller  *caller
	opts    Options
	state   atomic.Pointer[settings]
	// ownKey is the page token key the process made for itself, used while
	// federation.page_token_key_file is unset (kept across reloads, so that a reload
	// does not break the next links already handed out).
	ownKey tokenKey
	caps   capability.Cache
	// ownVia is the Via id the process made for itself, used while forwarding.via_id
	// is unset (kept across reloads).
	ownVia string
	// lim bounds the member calls (limits.go); replaced by a reload that changes the
	// call limits.
	lim atomic.Pointer[limiter]
	// directory are the members last accepted from [registry.mcsd] (nil before the
	// first): a reload of a configuration with [registry.mcsd] keeps serving them.
	directory atomic.Pointer[[]config.Member]
}

// settings is everything a reload replaces at once: a request reads one snapshot and
// never sees half of two configurations.
type settings struct {
	cfg      *config.Config
	reg      *registry
	verifier *auth.Verifier
	// requestTimeout is server.request_timeout_ms resolved, read on every request.
	requestTimeout time.Duration
	// fed is the [federation] table, defaults applied.
	fed config.Federation
	// key authenticates page tokens: the key file's, else the process's own.
	key tokenKey
	// ownKey is true when key is the process's own.
	ownKey bool
	// limits is the [limits] table, defaults applied.
	limits config.Limits
	// trusted are forwarding.trusted_proxies, parsed.
	trusted []netip.Prefix
}

// New builds the surface from a validated configuration. It fails when the registry
// or an issuer's key file cannot be loaded; nothing is sent to a member or an issuer.
func New(cfg *config.Config, opts Options) (*Surface, error) {
	if cfg == nil {
		return nil, errors.New("federation: no configuration")
	}
	if opts.Tracker == nil || opts.Operators == nil {
		return nil, errors.New("federation: no dependency tracker or operator-token check")
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.Transport == nil {
		opts.Transport = newTransport()
	}
	own, err := newRandomKey()
	if err != nil {
		return nil, fmt.Errorf("federation: make a page token key: %w", err)
	}
	st, err := buildSettings(cfg, func() (*auth.Verifier, error) { return opts.Operators.Verifier(), nil }, own)
	if err != nil {
		return nil, err
	}
	opts.Tracker.SetEndpoints(st.reg.endpointIDs())
	s := &Surface{
		log:     opts.Logger,
		tracker: opts.Tracker,
		opts:    opts,
		ownKey:  own,
		ownVia:  newViaID(),
	}
	s.useLimits(st.limits)
	if st.ownKey {
		s.log.Info("Made a page token key of its own: next links of this process are not accepted by any other; set federation.page_token_key_file to one key for every replica")
	}
	s.caller = &caller{client: newClient(opts.Transport), tracker: s.tracker, log: opts.Logger}
	s.state.Store(st)
	return s, nil
}

// buildSettings builds the state of cfg; verifier gives the issuers' verifier, read
// after the registry.
func buildSettings(cfg *config.Config, verifier func() (*auth.Verifier, error), own tokenKey) (*settings, error) {
	reg, err := loadRegistry(cfg.Registry)
	if err != nil {
		return nil, fmt.Errorf("federation: %w", err)
	}
	v, err := verifier()
	if err != nil {
		return nil, fmt.Errorf("federation: %w", err)
	}
	st := &settings{cfg: cfg, reg: reg, verifier: v, requestTimeout: cfg.Lifecycle().RequestTimeout, fed: cfg.Federation, key: own, ownKey: true,
		limits: cfg.Limits.Resolved()}
	if st.trusted, err = cfg.Forwarding.TrustedPrefixes(); err != nil {
		return nil, fmt.Errorf("federation: %w", err)
	}
	if n := len(reg.members); n > st.limits.MaxRegistryMembers {
		return nil, fmt.Errorf("federation: registry.members: lists %d members, more than limits.max_registry_members (%d)", n, st.limits.MaxRegistryMembers)
	}
	// A Config assembled in code (tests, the operator) has no defaults applied.
	if st.fed.MaxCount <= 0 || st.fed.MaxCount > config.MaxCountLimit {
		st.fed.MaxCount = config.DefaultMaxCount
	}
	if st.fed.DefaultCount <= 0 || st.fed.DefaultCount > st.fed.MaxCount {
		st.fed.DefaultCount = min(config.DefaultCount, st.fed.MaxCount)
	}
	if f := cfg.Federation.PageTokenKeyFile; f != "" {
		k, err := config.ReadPageTokenKey(f)
		if err != nil {
			return nil, fmt.Errorf("federation: %w", err)
		}
		st.key, st.ownKey = k, false
	}
	return st, nil
}

// PrepareReload builds the surface's state for a reloaded configuration, its registry
// and its issuers (their key files read), and applies nothing; the function it returns
// applies it: a member kept keeps its state in the report, a new one is unknown, a
// removed one leaves it. On error the surface keeps what it had. It is the surface's
// half of the server's all-or-nothing reload (the Reload hook of its server.Registration).
func (s *Surface) PrepareReload(cfg *config.Config) (func(), error) {
	if ms := s.directory.Load(); ms != nil && cfg.Registry.MCSD != nil {
		withDir := *cfg
		withDir.Registry.Members = *ms
		cfg = &withDir
	}
	st, err := buildSettings(cfg, func() (*auth.Verifier, error) { return s.opts.Operators.Prepare(cfg.Auth.Issuers) }, s.ownKey)
	if err != nil {
		return nil, err
	}
	return func() {
		if st.ownKey && !s.state.Load().ownKey {
			s.log.Info("Uses a page token key of its own from now on: federation.page_token_key_file was removed")
		}
		s.tracker.SetEndpoints(st.reg.endpointIDs())
		s.useLimits(st.limits)
		s.opts.Operators.Use(st.verifier)
		s.state.Store(st)
		s.log.Info("Applied the reloaded registry and issuers", "members", len(st.reg.members), "issuers", len(cfg.Auth.Issuers))
	}, nil
}

// PrepareDirectory builds the surface's state for members read from the [registry.mcsd]
// directory, with the rest of the configuration in force, and applies nothing; the
// function it returns swaps the registry in at once (a request reads the old or the
// new one, never half of each): a member kept keeps its state in the report, a new
// one is unknown, a removed one leaves it. The caller has checked members by the
// rules of config (config.MemberProblems, Validate); the error is what the surface
// refuses beyond them (limits.max_registry_members), and the surface then keeps what
// it had.
func (s *Surface) PrepareDirectory(members []config.Member) (func(), error) {
	cur := s.state.Load()
	r := cur.cfg.Registry
	r.Members = members
	reg, err := loadRegistry(r)
	if err != nil {
		return nil, fmt.Errorf("federation: %w", err)
	}
	if n := len(reg.members); n > cur.limits.MaxRegistryMembers {
		return nil, fmt.Errorf("federation: the directory names %d members, more than limits.max_registry_members (%d)", n, cur.limits.MaxRegistryMembers)
	}
	// Only the registry changes: the issuers' verifier (and the keys it fetched) and
	// every other setting are the ones in force when the swap happens, a reload that
	// came in between included.
	return func() {
		kept := members
		s.directory.Store(&kept)
		// The flow maps and localizes by the new members' identifier_system and
		// home_community_id before a request can plan for them: until the state
		// below is stored, a member the swap adds is asked by no one, and one it
		// removes is excluded by the step that needs its key.
		if s.opts.Patient != nil {
			s.opts.Patient.UseMembers(members)
		}
		// New ids are known (unknown) before a request can reach them.
		s.tracker.SetEndpoints(reg.endpointIDs())
		for {
			cur := s.state.Load()
			cfg := *cur.cfg
			cfg.Registry.Members = members
			st := *cur
			st.cfg, st.reg = &cfg, reg
			if s.state.CompareAndSwap(cur, &st) {
				break
			}
		}
	}, nil
}

// DirectoryMembers are the members last accepted from the directory, nil before the
// first; read only.
func (s *Surface) DirectoryMembers() []config.Member {
	if ms := s.directory.Load(); ms != nil {
		return *ms
	}
	return nil
}

// Reload prepares and applies a reloaded configuration at once; on error the surface
// keeps what it had.
func (s *Surface) Reload(cfg *config.Config) error {
	apply, err := s.PrepareReload(cfg)
	if err != nil {
		return err
	}
	apply()
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

// RegisterDataPlane registers the federated search and the routed requests, one
// route per interaction (dataplane.go). The group carries the server's readiness gate
// and request deadline.
//
// Every path under /fhir and /nodes is the surface's, so that whatever is not a
// success there is an OperationOutcome (docs/data-plane.md): an unknown route a 404, a
// method a 405, XML a 406.
func (s *Surface) RegisterDataPlane(g *gin.RouterGroup) {
	s.registerFHIR(g)
	s.registerNodes(g)
}

// RegisterOperator registers the dependency report and the ask-all probe, each behind
// an operator token. The token check is on a group of the surface's own so that the
// server's shared operator group is left as it was given.
func (s *Surface) RegisterOperator(g *gin.RouterGroup) {
	op := g.Group("", s.opts.Operators.Middleware())
	op.GET("/dependencies", s.handleDependencies)
	op.POST("/probe", s.handleProbe)
}

var errNoRegistry = fhir.Outcome("not-supported", "federation not configured: no [[registry.members]]")

// looped answers 508 Loop Detected a request that has been through this gateway
// already: its Via names the gateway's own id, which every member request carries.
// A member that is the gateway (or leads back to it) then costs one nested request,
// not thousands.
// LoopGuard answers 508 to a request that has been through this gateway already, in
// front of every data-plane route and of the access guard (a nested request has no token).
func (s *Surface) LoopGuard(c *gin.Context) {
	if s.looped(c.Writer, c.Request, s.state.Load()) {
		c.Abort()
	}
}

func (s *Surface) looped(w http.ResponseWriter, r *http.Request, st *settings) bool {
	if !proxy.ViaCarries(r.Header.Values("Via"), s.viaID(st)) {
		return false
	}
	fhir.Write(w, http.StatusLoopDetected, fhir.Outcome("processing",
		"the request has been through this gateway already (its Via names "+s.viaID(st)+"): a member leads back to the gateway"))
	return true
}

func sortPositions(reg *registry, ps []*position) {
	order := make(map[string]int, len(reg.members))
	for i, m := range reg.members {
		order[m.id] = i
	}
	slices.SortFunc(ps, func(a, b *position) int { return order[a.m.id] - order[b.m.id] })
}

// handleMetadata answers the gateway's CapabilityStatement (gateway/capability).
func (s *Surface) handleMetadata(c *gin.Context, st *settings) {
	ctx := c.Request.Context()
	now := time.Now()
	common, answered, ok := s.caps.Cached(st.reg, st.fed.CapabilityTTL(), now)
	if !ok {
		cs := s.newCalls(st, c.Request.Header.Values("Via"))
		done, ok := cs.Lim.Admit(len(st.reg.members))
		if !ok {
			calllimit.Shed(c.Writer, len(st.reg.members), cs.Lim)
			return
		}
		_, statements := s.caller.metadata(ctx, cs, st.reg, calllimit.Budget(ctx, st.requestTimeout))
		done()
		if errors.Is(ctx.Err(), context.Canceled) {
			return
		}
		common, answered = s.caps.Store(st.reg, statements, now)
	}
	g := capability.Gateway{Base: fhir.GatewayBase(c.Request, st.cfg.Server.BasePath), Members: len(st.reg.members), Answered: answered, Auth: st.cfg.Auth}
	fhir.Write(c.Writer, http.StatusOK, capability.Statement(g, common, now))
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
	cs := s.newCalls(st, c.Request.Header.Values("Via"))
	done, ok := cs.Lim.Admit(len(st.reg.members))
	if !ok {
		calllimit.Shed(c.Writer, len(st.reg.members), cs.Lim)
		return
	}
	defer done()
	records, statements := s.caller.metadata(ctx, cs, st.reg, calllimit.Budget(ctx, st.requestTimeout))
	if errors.Is(ctx.Err(), context.Canceled) {
		return
	}
	s.caps.Store(st.reg, statements, time.Now())
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, probeAnswer{Members: records})
}
