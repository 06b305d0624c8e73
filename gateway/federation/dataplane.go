package federation

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/gateway/calllimit"
	"github.com/ferrofed/ferrofed/gateway/capability"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/identity"
	"github.com/ferrofed/ferrofed/gateway/proxy"
	"github.com/ferrofed/ferrofed/gateway/smart"
)

// The data plane's routes (docs/data-plane.md). Each interaction is a route of its
// own, registered for every method so that a wrong one is the interaction's 405, not
// the server's 404:
//
//	/fhir, /fhir/                          404: no route at the FHIR base
//	/fhir/metadata                         GET: the gateway's CapabilityStatement
//	/fhir/.well-known/smart-configuration  GET: SMART discovery (no token asked)
//	/fhir/{type}                           GET: a federated search of an R4 type
//	/fhir/{type}/_search                   POST: the same, with a form body
//	/fhir/{type}/{id}[/_history[/{vid}]]   GET: the read of a federated id, from its member
//	/fhir/{type}/, /fhir/{type}/{id}/*     404 (but _history), /fhir/{type}/_search/*: 404
//
// HEAD is taken wherever GET is, and answers the GET's head.
//	/nodes/{id}/fhir, /nodes/{id}/fhir/*   the routed request, to member {id}
//	/nodes, /nodes/{id}, /nodes/{id}/{other}[/*]   404
//
// gin routes on the raw path, and the data plane reads a path with its empty segments
// dropped ("//" is one "/", as to the members behind it): a path with one
// (/fhir//Patient, /fhir/Patient//) can reach the route of another shape than its
// own. fhirShape places such a path again by its normalised segments; it is the one
// dispatch left, because gin cannot hold a catch-all beside the routes above.

// fhirInteraction answers one interaction under /fhir; segs are the path's segments
// under /fhir, normalised (proxy.CleanPath), with a trailing slash as a last "".
type fhirInteraction func(c *gin.Context, st *settings, segs []string)

// registerFHIR registers the routes under /fhir.
func (s *Surface) registerFHIR(g *gin.RouterGroup) {
	prefix := strings.TrimSuffix(g.BasePath(), "/") + "/fhir"
	for pattern, h := range map[string]fhirInteraction{
		"":                        s.fhirBase,
		"/":                       s.fhirBase,
		"/metadata":               s.fhirMetadata,
		"/" + smart.DiscoveryPath: s.fhirSMART,
		"/metadata/":              s.fhirRead,
		"/:type":                  s.fhirSearch,
		"/:type/":                 s.fhirRead,
		"/:type/_search":          s.fhirPostSearch,
		"/:type/:id":              s.fhirRead,
		"/:type/_search/*rest":    s.fhirNoRoute,
		"/:type/:id/*rest":        s.fhirRead,
	} {
		g.Any("/fhir"+pattern, s.fhir(prefix, h))
	}
}

// fhir is the route of one interaction: the checks every path under /fhir passes
// first (a loop, no registry, an answer the client cannot take, a dot segment), then
// the interaction, or, for a path with empty segments, the one of its normalised shape.
func (s *Surface) fhir(prefix string, h fhirInteraction) gin.HandlerFunc {
	return func(c *gin.Context) {
		st := s.state.Load()
		r := c.Request
		if s.looped(c.Writer, r, st) {
			return
		}
		if len(st.reg.members) == 0 {
			fhir.Write(c.Writer, http.StatusNotImplemented, errNoRegistry)
			return
		}
		if !fhir.Acceptable(r, false) {
			fhir.Write(c.Writer, http.StatusNotAcceptable, fhir.NotAcceptable)
			return
		}
		// The same rule as a routed path's: no dot segment, however hidden.
		raw := strings.TrimPrefix(r.URL.Path, prefix)
		rest, err := proxy.CleanPath(raw)
		if err != nil {
			fhir.Write(c.Writer, http.StatusBadRequest, fhir.Outcome("invalid", err.Error()))
			return
		}
		interaction := h
		if rest != raw && (rest != "" || raw != "/") {
			interaction = s.fhirShape(rest)
		}
		interaction(c, st, strings.Split(strings.TrimPrefix(rest, "/"), "/"))
	}
}

// fhirShape is the interaction of a normalised path that gin routed by its raw form.
func (s *Surface) fhirShape(rest string) fhirInteraction {
	segs := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	switch {
	case rest == "":
		return s.fhirBase
	case len(segs) == 1 && segs[0] == "metadata":
		return s.fhirMetadata
	case len(segs) == 1:
		return s.fhirSearch
	case len(segs) == 2 && segs[1] == "_search":
		return s.fhirPostSearch
	case len(segs) >= 2 && len(segs) <= 4 && segs[1] != "_search":
		return s.fhirRead
	}
	return s.fhirNoRoute
}

func (s *Surface) fhirBase(c *gin.Context, _ *settings, _ []string) {
	fhir.Write(c.Writer, http.StatusNotFound, fhir.Outcome("not-found", "no route at the FHIR base: search {base}/fhir/{type}, or read {base}/fhir/metadata"))
}

func (s *Surface) fhirMetadata(c *gin.Context, st *settings, _ []string) {
	if !fhir.Reads(c.Request) {
		fhir.MethodNotAllowed(c.Writer, fhir.GetOrHead, "/fhir/metadata")
		return
	}
	s.handleMetadata(c, st)
}

// fhirSMART is SMART discovery (gateway/capability), which asks for no token.
func (s *Surface) fhirSMART(c *gin.Context, st *settings, _ []string) {
	capability.ServeSMART(c.Writer, c.Request, st.cfg.Auth)
}

// fhirSearch is GET {base}/fhir/{type}, of a resource type of R4.
func (s *Surface) fhirSearch(c *gin.Context, st *settings, segs []string) {
	if !fhir.R4ResourceType(segs[0]) {
		fhir.Write(c.Writer, http.StatusNotFound, fhir.Outcome("not-found", "no such route under /fhir: the resource type is not one of FHIR R4"))
		return
	}
	if !fhir.Reads(c.Request) {
		fhir.MethodNotAllowed(c.Writer, fhir.GetOrHead, "/fhir/"+segs[0])
		return
	}
	s.handleSearch(c, st, segs[0], c.Request.URL.RawQuery)
}

// fhirPostSearch is POST {base}/fhir/{type}/_search.
func (s *Surface) fhirPostSearch(c *gin.Context, st *settings, segs []string) {
	if !fhir.R4ResourceType(segs[0]) {
		s.fhirNoRoute(c, st, segs)
		return
	}
	if c.Request.Method != http.MethodPost {
		fhir.MethodNotAllowed(c.Writer, http.MethodPost, "/fhir/"+segs[0]+"/_search")
		return
	}
	raw, ok := proxy.ReadForm(c.Writer, c.Request, st.limits.MaxQueryBytes)
	if !ok {
		return
	}
	s.handleSearch(c, st, segs[0], raw)
}

// fhirRead is GET (or HEAD) {base}/fhir/{type}/{id}[/_history[/{vid}]]: the resource
// read from the member its federated id names, in the federated identity
// (docs/data-plane.md, "One identity space").
func (s *Surface) fhirRead(c *gin.Context, st *settings, segs []string) {
	history := len(segs) == 2 || (segs[2] == "_history" && (len(segs) == 3 || (len(segs) == 4 && fhir.ValidID(segs[3]))))
	if !fhir.R4ResourceType(segs[0]) || !history {
		s.fhirNoRoute(c, st, segs)
		return
	}
	if !fhir.Reads(c.Request) {
		fhir.MethodNotAllowed(c.Writer, fhir.GetOrHead, "/fhir/"+strings.Join(segs, "/"))
		return
	}
	id, local, ok := identity.Split(segs[1])
	m := st.reg.byID[id]
	if !ok || m == nil {
		fhir.Write(c.Writer, http.StatusNotFound, fhir.Outcome("not-found", "no such resource: a resource's id here is {member}.{id}, as a search's entries give it"))
		return
	}
	if !s.auditing(c, st, audit.Routed, segs[0], "", []string{m.id})() {
		return
	}
	segs[1] = local
	status, body, err := s.Get(c.Request.Context(), m.id, "/"+strings.Join(segs, "/"), "")
	if err != nil {
		fhir.Write(c.Writer, http.StatusBadGateway, fhir.Outcome("transient", err.Error()))
		return
	}
	gw := fhir.GatewayBase(c.Request, st.cfg.Server.BasePath)
	rw := identity.Rewriter{Member: m.id, Base: strings.TrimSuffix(m.base.String(), "/"), Route: gw + "/nodes/" + m.id + "/fhir", GW: gw}
	a := rw.Answer(status, body, func(t string) string { return scrubMember(m, gw, t) })
	if a.ETag != "" {
		c.Header("ETag", a.ETag)
	}
	if a.LastModified != "" {
		c.Header("Last-Modified", a.LastModified)
	}
	fhir.Write(c.Writer, a.Status, a.Body)
}

func (s *Surface) fhirNoRoute(c *gin.Context, _ *settings, _ []string) {
	fhir.Write(c.Writer, http.StatusNotFound, fhir.Outcome("not-found", "no such route under /fhir"))
}

// routedMethods are the FHIR REST methods only: CONNECT and TRACE have no business at
// a member.
var routedMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
}

// registerNodes registers the routes under /nodes: a member's FHIR API, and a 404 for
// every other path there.
func (s *Surface) registerNodes(g *gin.RouterGroup) {
	g.Any("/nodes/:node/fhir", s.handleNodes)
	g.Any("/nodes/:node/fhir/*path", s.handleNodes)
	for _, pattern := range []string{"/nodes", "/nodes/", "/nodes/:node", "/nodes/:node/", "/nodes/:node/:other", "/nodes/:node/:other/*rest"} {
		g.Any(pattern, s.nodesNoRoute)
	}
}

func (s *Surface) nodesNoRoute(c *gin.Context) {
	if s.looped(c.Writer, c.Request, s.state.Load()) {
		return
	}
	fhir.Write(c.Writer, http.StatusNotFound, fhir.Outcome("not-found", "no such route under /nodes: a member's FHIR API is /nodes/{id}/fhir/"))
}

// handleNodes answers {base}/nodes/{id}/fhir[/*]: the request routed to the member.
func (s *Surface) handleNodes(c *gin.Context) {
	st := s.state.Load()
	if s.looped(c.Writer, c.Request, st) {
		return
	}
	id, path := c.Param("node"), c.Param("path")
	if id == "" {
		s.nodesNoRoute(c)
		return
	}
	if !slices.Contains(routedMethods, c.Request.Method) {
		fhir.MethodNotAllowed(c.Writer, strings.Join(routedMethods, ", "), "/nodes/{id}/fhir")
		return
	}
	if len(st.reg.members) == 0 {
		fhir.Write(c.Writer, http.StatusNotImplemented, errNoRegistry)
		return
	}
	m, ok := st.reg.byID[id]
	if !ok {
		fhir.Write(c.Writer, http.StatusNotFound, fhir.Outcome("not-found", "no member has this id"))
		return
	}
	if !fhir.Acceptable(c.Request, true) {
		fhir.Write(c.Writer, http.StatusNotAcceptable, fhir.NotAcceptable)
		return
	}
	path, err := proxy.CleanPath(path)
	if err != nil {
		fhir.Write(c.Writer, http.StatusBadRequest, fhir.Outcome("invalid", err.Error()))
		return
	}
	s.routeTo(c, st, m, path)
}

// routeTo sends the routed request on to m once it holds its call and its audit
// record is stored.
func (s *Surface) routeTo(c *gin.Context, st *settings, m *member, path string) {
	cs := s.newCalls(st, nil)
	done, ok := cs.Lim.Admit(1)
	if !ok {
		calllimit.Shed(c.Writer, 1, cs.Lim)
		return
	}
	defer done()
	// A routed answer is streamed as it comes: its record is stored before the member
	// is asked.
	if !s.auditing(c, st, audit.Routed, strings.SplitN(strings.TrimPrefix(path, "/"), "/", 2)[0], c.Request.URL.RawQuery, []string{m.id})() {
		return
	}
	s.caller.route(c.Writer, c.Request, m, path, calllimit.Budget(c.Request.Context(), st.requestTimeout), routedBase{
		gateway: fhir.GatewayBase(c.Request, st.cfg.Server.BasePath),
		prefix:  strings.TrimSuffix(st.cfg.Server.BasePath, "/") + "/nodes/" + m.id + "/fhir",
		calls:   cs,
		trusted: st.trusted,
	})
}
