package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/health"
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
	// Patient is the flow of patient-scoped searches (patient.go); nil when no
	// patient-scoped binding is configured.
	Patient *patient.Flow
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
	caps   capabilities
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
		s.opts.Patient.UseMembers(members)
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

// RegisterDataPlane registers the federated search and the routed requests. The
// group carries the server's readiness gate and request deadline.
//
// Every path under /fhir and /nodes is the surface's, so that whatever is not a
// success there is an OperationOutcome (docs/data-plane.md): an unknown route a 404, a
// method a 405, XML a 406.
func (s *Surface) RegisterDataPlane(g *gin.RouterGroup) {
	g.Any("/fhir", s.handleFHIR)
	g.Any("/fhir/*rest", s.handleFHIR)
	g.Any("/nodes", s.handleNodes)
	g.Any("/nodes/*rest", s.handleNodes)
}

// The FHIR REST methods only: CONNECT and TRACE have no business at a member.

var routedMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
}

// RegisterOperator registers the dependency report and the ask-all probe, each behind
// an operator token. The token check is on a group of the surface's own so that the
// server's shared operator group is left as it was given.
func (s *Surface) RegisterOperator(g *gin.RouterGroup) {
	op := g.Group("", s.opts.Operators.Middleware())
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

// handleFHIR answers every path under {base}/fhir.
func (s *Surface) handleFHIR(c *gin.Context) {
	st := s.state.Load()
	r := c.Request
	if s.looped(c.Writer, r, st) {
		return
	}
	if len(st.reg.members) == 0 {
		writeFHIR(c.Writer, http.StatusNotImplemented, errNoRegistry)
		return
	}
	if !acceptable(r, false) {
		writeFHIR(c.Writer, http.StatusNotAcceptable, notAcceptable)
		return
	}
	// The same rule as a routed path's: no dot segment, however hidden.
	rest, err := memberPath(c.Param("rest"))
	if err != nil {
		writeFHIR(c.Writer, http.StatusBadRequest, operationOutcome("invalid", err.Error()))
		return
	}
	rest = strings.TrimPrefix(rest, "/")
	segs := strings.Split(rest, "/")
	switch {
	case rest == "":
		writeFHIR(c.Writer, http.StatusNotFound, operationOutcome("not-found", "no route at the FHIR base: search {base}/fhir/{type}, or read {base}/fhir/metadata"))
	case len(segs) == 1 && segs[0] == "metadata":
		if r.Method != http.MethodGet {
			methodNotAllowed(c.Writer, http.MethodGet, "/fhir/metadata")
			return
		}
		s.handleMetadata(c, st)
	case !ValidResourceType(segs[0]):
		if len(segs) == 1 {
			writeFHIR(c.Writer, http.StatusBadRequest, operationOutcome("invalid", "the resource type must match [A-Z][A-Za-z]+"))
			return
		}
		writeFHIR(c.Writer, http.StatusNotFound, operationOutcome("not-found", "no such route under /fhir"))
	case len(segs) == 1:
		if r.Method != http.MethodGet {
			methodNotAllowed(c.Writer, http.MethodGet, "/fhir/"+segs[0])
			return
		}
		s.handleSearch(c, st, segs[0], r.URL.RawQuery)
	case len(segs) == 2 && segs[1] == "_search":
		if r.Method != http.MethodPost {
			methodNotAllowed(c.Writer, http.MethodPost, "/fhir/"+segs[0]+"/_search")
			return
		}
		raw, ok := readForm(c.Writer, r, st.limits.MaxQueryBytes)
		if !ok {
			return
		}
		s.handleSearch(c, st, segs[0], raw)
	case len(segs) == 2:
		if r.Method != http.MethodGet {
			methodNotAllowed(c.Writer, http.MethodGet, "/fhir/"+segs[0]+"/"+segs[1])
			return
		}
		writeFHIR(c.Writer, http.StatusBadRequest, operationOutcome("not-supported", fmt.Sprintf(
			"a resource is read from the member that holds it: GET %s/nodes/{id}/fhir/%s/%s, with {id} the member's id (an entry's fullUrl names it)",
			gatewayBase(r, st.cfg.Server.BasePath), segs[0], segs[1])))
	default:
		writeFHIR(c.Writer, http.StatusNotFound, operationOutcome("not-found", "no such route under /fhir"))
	}
}

// looped answers 508 Loop Detected a request that has been through this gateway
// already: its Via names the gateway's own id, which every member request carries.
// A member that is the gateway (or leads back to it) then costs one nested request,
// not thousands.
func (s *Surface) looped(w http.ResponseWriter, r *http.Request, st *settings) bool {
	if !viaCarries(r.Header.Values("Via"), s.viaID(st)) {
		return false
	}
	writeFHIR(w, http.StatusLoopDetected, operationOutcome("processing",
		"the request has been through this gateway already (its Via names "+s.viaID(st)+"): a member leads back to the gateway"))
	return true
}

// readForm reads a form-encoded POST _search body of at most maxFormBytes, joined
// after the URL's query (FHIR allows parameters in both). Anything else is answered
// here; a body that does not arrive within the request's deadline is a 408.
func readForm(w http.ResponseWriter, r *http.Request, maxFormBytes int) (string, bool) {
	ct := r.Header.Get("Content-Type")
	if mt, _, _ := strings.Cut(ct, ";"); strings.TrimSpace(strings.ToLower(mt)) != "application/x-www-form-urlencoded" {
		writeFHIR(w, http.StatusUnsupportedMediaType, operationOutcome("not-supported", "POST _search takes a form-encoded body (application/x-www-form-urlencoded)"))
		return "", false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(maxFormBytes)+1))
	if err != nil {
		w.Header().Set("Connection", "close") // the rest of the body is never read
		if bodyTimedOut(r.Context(), err) {
			writeFHIR(w, http.StatusRequestTimeout, operationOutcome("timeout", "the form body did not arrive within server.request_timeout_ms"))
			return "", false
		}
		writeFHIR(w, http.StatusBadRequest, operationOutcome("invalid", "the form body could not be read"))
		return "", false
	}
	if len(body) > maxFormBytes {
		writeFHIR(w, http.StatusRequestEntityTooLarge, operationOutcome("too-long", fmt.Sprintf("the form body is longer than limits.max_query_bytes (%d bytes)", maxFormBytes)))
		return "", false
	}
	raw := strings.TrimSpace(string(body))
	if q := r.URL.RawQuery; q != "" {
		if raw == "" {
			return q, true
		}
		raw = q + "&" + raw
	}
	return raw, true
}

// handleSearch answers one page of a federated search of resourceType with the raw
// query (or form) raw.
func (s *Surface) handleSearch(c *gin.Context, st *settings, resourceType, raw string) {
	r := c.Request
	if x := s.opts.StoredQueries; x != nil {
		expanded, status, msg := x.Expand(resourceType, raw)
		if status != 0 {
			code := "invalid"
			if status == http.StatusNotFound {
				code = "not-found"
			}
			writeFHIR(c.Writer, status, paramOutcome(code, "_query", msg))
			return
		}
		raw = expanded
	}
	q, qerr := parseSearch(resourceType, raw, st.fed.DefaultCount, st.fed.MaxCount, st.limits.MaxQueryBytes)
	if qerr != nil {
		writeFHIR(c.Writer, qerr.status, qerr.outcome)
		return
	}
	gw := gatewayBase(r, st.cfg.Server.BasePath)
	prefer := r.Header.Values("Prefer")
	ctx := r.Context()
	srch := &search{c: s.caller, cs: s.newCalls(st, r.Header.Values("Via")), reg: st.reg, resourceType: resourceType, prefer: prefer, gw: gw}
	var tokenTotal *int
	var self string
	// admitted is true once the request holds its place in the member-call queue.
	admitted := false
	if q.page != "" {
		t, err := st.key.decode(q.page, st.reg, st.fed.MaxCount)
		if err == nil && t.Type != resourceType {
			err = errBadToken{"it continues a search of another resource type"}
		}
		if err != nil {
			writeFHIR(c.Writer, http.StatusBadRequest, paramOutcome("invalid", "_page", err.Error()))
			return
		}
		srch.count, srch.sortRaw = t.Count, t.Sort
		srch.sort, _ = parseSort(resourceType, t.Sort)
		tokenTotal = t.Total
		for _, tm := range t.Members {
			p := &position{m: st.reg.byID[tm.ID], cursor: tm.Cursor, offset: tm.Offset, remaining: -1}
			if tm.Remaining != nil {
				p.remaining = *tm.Remaining
			}
			srch.positions = append(srch.positions, p)
		}
		// Positions are served in registry order, whatever order the token lists.
		sortPositions(st.reg, srch.positions)
		self = "_page=" + escapeQuery(q.page)
	} else {
		srch.first = true
		srch.count, srch.sort, srch.sortRaw, srch.summaryCount = q.count, q.sort, q.sortRaw, q.summaryCount
		mq := q.memberQuery()
		cursor := "/" + resourceType
		if mq != "" {
			cursor += "?" + mq
		}
		for _, m := range st.reg.members {
			srch.positions = append(srch.positions, &position{m: m, cursor: cursor, remaining: -1})
		}
		self = mq
		if s.opts.Patient != nil {
			// A patient-scoped search is admitted by the fan-out it would have without
			// the flow, before the flow spends a binding call: a request the queue
			// sheds costs no exchange. What the flow drops is given back at once.
			all := len(srch.positions)
			release, ok := srch.cs.lim.admit(all)
			if !ok {
				shed(c.Writer, all, srch.cs.lim)
				return
			}
			defer func() { release() }()
			// The flow and the fan-out share the request's budget: the fan-out gets
			// what the flow left.
			pctx, cancel := context.WithTimeout(ctx, st.requestTimeout)
			defer cancel()
			ctx = pctx
			if s.planPatient(ctx, c, st, srch, q, resourceType) {
				return
			}
			release = srch.cs.lim.keep(all, len(srch.positions))
			admitted = true
		}
	}
	srch.maxExtras = st.limits.MaxAnswerEntries - srch.count
	if !admitted {
		done, ok := srch.cs.lim.admit(len(srch.positions))
		if !ok {
			shed(c.Writer, len(srch.positions), srch.cs.lim)
			return
		}
		defer done()
	}
	stored := s.auditing(c, st, audit.Search, resourceType, raw, positionIDs(srch.positions))
	res := srch.run(ctx, budget(ctx, st.requestTimeout), wantsStrict(prefer), st.key, tokenTotal)
	if errors.Is(ctx.Err(), context.Canceled) {
		return // the client left: nobody to answer.
	}
	if !stored() {
		return
	}
	if res.status != http.StatusOK {
		writeFHIR(c.Writer, res.status, res.outcome)
		return
	}
	selfURL := gw + "/fhir/" + resourceType
	if self != "" {
		selfURL += "?" + self
	}
	b := Bundle{LastUpdated: time.Now(), Records: res.records, Strict: st.fed.StrictFHIR, Total: res.total, Links: []Link{{Relation: "self", URL: selfURL}}, Entry: res.entries}
	if res.next != "" {
		b.Links = append(b.Links, Link{Relation: "next", URL: gw + "/fhir/" + resourceType + "?_page=" + res.next})
	}
	writeFHIR(c.Writer, http.StatusOK, b)
}

func sortPositions(reg *registry, ps []*position) {
	order := make(map[string]int, len(reg.members))
	for i, m := range reg.members {
		order[m.id] = i
	}
	slices.SortFunc(ps, func(a, b *position) int { return order[a.m.id] - order[b.m.id] })
}

// handleMetadata answers the gateway's CapabilityStatement.
func (s *Surface) handleMetadata(c *gin.Context, st *settings) {
	ctx := c.Request.Context()
	now := time.Now()
	common, answered, ok := s.caps.cached(st.reg, time.Duration(st.fed.CapabilityTTLMS)*time.Millisecond, now)
	if !ok {
		cs := s.newCalls(st, c.Request.Header.Values("Via"))
		done, ok := cs.lim.admit(len(st.reg.members))
		if !ok {
			shed(c.Writer, len(st.reg.members), cs.lim)
			return
		}
		_, statements := s.caller.metadata(ctx, cs, st.reg, budget(ctx, st.requestTimeout))
		done()
		if errors.Is(ctx.Err(), context.Canceled) {
			return
		}
		s.caps.store(st.reg, statements, now)
		common, answered, _ = s.caps.cached(st.reg, time.Hour, now)
	}
	writeFHIR(c.Writer, http.StatusOK, capabilityStatement(gatewayBase(c.Request, st.cfg.Server.BasePath), common, answered, len(st.reg.members), now))
}

// handleNodes answers every path under {base}/nodes: {id}/fhir/* is routed to the
// member, anything else is a FHIR 404.
func (s *Surface) handleNodes(c *gin.Context) {
	st := s.state.Load()
	if s.looped(c.Writer, c.Request, st) {
		return
	}
	id, after, _ := strings.Cut(strings.TrimPrefix(c.Param("rest"), "/"), "/")
	path, ok := strings.CutPrefix(after, "fhir")
	if id == "" || !ok || (path != "" && path[0] != '/') {
		writeFHIR(c.Writer, http.StatusNotFound, operationOutcome("not-found", "no such route under /nodes: a member's FHIR API is /nodes/{id}/fhir/"))
		return
	}
	if !slices.Contains(routedMethods, c.Request.Method) {
		methodNotAllowed(c.Writer, strings.Join(routedMethods, ", "), "/nodes/{id}/fhir")
		return
	}
	if len(st.reg.members) == 0 {
		writeFHIR(c.Writer, http.StatusNotImplemented, errNoRegistry)
		return
	}
	m, ok := st.reg.byID[id]
	if !ok {
		writeFHIR(c.Writer, http.StatusNotFound, operationOutcome("not-found", "no member has this id"))
		return
	}
	if !acceptable(c.Request, true) {
		writeFHIR(c.Writer, http.StatusNotAcceptable, notAcceptable)
		return
	}
	path, err := memberPath(path)
	if err != nil {
		writeFHIR(c.Writer, http.StatusBadRequest, operationOutcome("invalid", err.Error()))
		return
	}
	cs := s.newCalls(st, nil)
	done, ok := cs.lim.admit(1)
	if !ok {
		shed(c.Writer, 1, cs.lim)
		return
	}
	defer done()
	// A routed answer is streamed as it comes: its record is stored before the member
	// is asked.
	if !s.auditing(c, st, audit.Routed, strings.SplitN(strings.TrimPrefix(path, "/"), "/", 2)[0], c.Request.URL.RawQuery, []string{m.id})() {
		return
	}
	s.caller.route(c.Writer, c.Request, m, path, budget(c.Request.Context(), st.requestTimeout), routedBase{
		gateway: gatewayBase(c.Request, st.cfg.Server.BasePath),
		prefix:  strings.TrimSuffix(st.cfg.Server.BasePath, "/") + "/nodes/" + m.id + "/fhir",
		calls:   cs,
		trusted: st.trusted,
	})
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
	done, ok := cs.lim.admit(len(st.reg.members))
	if !ok {
		shed(c.Writer, len(st.reg.members), cs.lim)
		return
	}
	defer done()
	records, statements := s.caller.metadata(ctx, cs, st.reg, budget(ctx, st.requestTimeout))
	if errors.Is(ctx.Err(), context.Canceled) {
		return
	}
	s.caps.store(st.reg, statements, time.Now())
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, probeAnswer{Members: records})
}
