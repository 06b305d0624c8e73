package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/health"
)

// Data-plane prefixes under the base path.
const (
	fhirPrefix  = "/fhir/"
	nodesPrefix = "/nodes/"
)

var notConfigured = health.OperationOutcome("not-supported", "federation not configured")

// buildEngine registers every route. gin panics on colliding routes; that panic becomes
// an error naming the collision, because it is a configuration mistake (a metrics.path
// on a health route), not a bug to crash on.
func (s *Server) buildEngine(cfg *config.Config) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("server: routes collide (check metrics.path and the surfaces' routes): %v", p)
		}
	}()
	e := gin.New()
	// Probes and clients must hit exact paths: a redirect is not a 404.
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = false
	e.ContextWithFallback = true // c.Done()/c.Deadline() follow the request's context
	// Trust no X-Forwarded-For: ClientIP (access log, surfaces) is the peer's address
	// unless a deployment says otherwise, never a header any client can write.
	if err := e.SetTrustedProxies(nil); err != nil {
		return fmt.Errorf("server: trusted proxies: %w", err)
	}
	e.Use(s.recoverer(), s.inFlight(), s.closeWhileDraining(), s.accessLog())
	e.NoRoute(s.count(surfaceNone), func(c *gin.Context) {
		c.Data(http.StatusNotFound, "application/json", []byte(`{"status":"not found"}`+"\n"))
	})

	base := e.Group(cfg.Server.BasePath)

	healthCounted := newCodeCounter(s.metrics.requests, surfaceHealth)
	probes := base.Group("", countWith(healthCounted))
	h := &health.Handlers{State: s.state, Eval: s.eval, Minimal: func() bool { return s.cfg.Load().Health.Minimal }}
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		probes.Handle(m, health.LivenessPath, h.Liveness)
		probes.Handle(m, health.ReadinessPath, h.Readiness)
		probes.Handle(m, health.ReadinessPath+"/:check", h.ReadinessCheck)
	}

	if !cfg.Metrics.Disabled {
		mh := s.metrics.handler()
		base.Group("", s.count(surfaceMetrics)).GET(cfg.Metrics.Path, gin.WrapH(mh))
	}

	// The parts' Trace hooks come first: a request refused by a bound or the gate
	// still has its span.
	traces := s.traceHooks()
	operator := base.Group("/operator", slices.Concat(traces, []gin.HandlerFunc{s.count(surfaceOperator)})...)
	// The query limit and the shedding come before the gate and before any member is
	// asked; health routes are in no such group: a flood never slows liveness down.
	data := base.Group("", slices.Concat(traces, []gin.HandlerFunc{s.count(surfaceDataPlane), s.queryLimit(), s.shed(),
		health.Gate(s.state), s.requestTimeout()})...)
	for _, p := range s.parts {
		if p.Guard != nil {
			data.Use(p.Guard)
		}
	}
	for _, p := range s.parts {
		if p.Operator != nil {
			p.Operator(operator)
		}
		if p.DataPlane != nil {
			p.DataPlane(data)
		}
	}

	// The placeholder data plane keeps the gate in place (and testable) until the
	// federation surface registers the real routes.
	prefix := strings.TrimSuffix(cfg.Server.BasePath, "/")
	var haveFHIR, haveNodes bool
	for _, r := range e.Routes() {
		haveFHIR = haveFHIR || strings.HasPrefix(r.Path, prefix+fhirPrefix)
		haveNodes = haveNodes || strings.HasPrefix(r.Path, prefix+nodesPrefix)
	}
	if !haveFHIR {
		data.Any("/fhir/*path", notConfiguredHandler)
	}
	if !haveNodes {
		data.Any("/nodes/:id/fhir/*path", notConfiguredHandler)
	}
	s.engine = e
	s.front = &probeFront{s: s, engine: e, h: h, counted: healthCounted,
		liveness: prefix + health.LivenessPath, readiness: prefix + health.ReadinessPath}
	return nil
}

// traceHooks are the parts' Trace hooks, in order (none without [tracing]).
func (s *Server) traceHooks() []gin.HandlerFunc {
	var traces []gin.HandlerFunc
	for _, p := range s.parts {
		if p.Trace != nil {
			traces = append(traces, p.Trace)
		}
	}
	return traces
}

func notConfiguredHandler(c *gin.Context) {
	c.Data(http.StatusNotImplemented, "application/fhir+json", notConfigured)
}

// count counts each request of a surface by status code, after it was served.
func (s *Server) count(surface string) gin.HandlerFunc {
	return countWith(newCodeCounter(s.metrics.requests, surface))
}

func countWith(cc *codeCounter) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Next()
		cc.inc(c.Writer.Status())
	}
}

func (s *Server) inFlight() gin.HandlerFunc {
	return func(c *gin.Context) {
		s.metrics.inFlight.Inc()
		defer s.metrics.inFlight.Dec()
		c.Next()
	}
}

// closeWhileDraining asks every client to close its connection once the drain began:
// during the drain delay the listener still accepts and serves, and this is how
// keep-alive clients learn to open their next connection to another replica. On HTTP/2
// (TLS) net/http turns the header into a GOAWAY, to the same effect.
func (s *Server) closeWhileDraining() gin.HandlerFunc {
	return func(c *gin.Context) {
		if s.state.Draining() {
			c.Header("Connection", "close")
		}
	}
}

// requestTimeout gives a data-plane request server.request_timeout_ms as its context
// deadline (read per request: a reload may change it), and the same deadline, with a
// grace, to the connection: reading the client's body stops readGrace past it (a
// body that has not arrived is the handler's 408, net/http's discard of an unread
// rest stops too), and writing the answer writeGrace past it, so that a client that
// reads nothing cannot hold the request past the deadline either. The graces keep
// the context's deadline first: a read that fails on the connection's deadline
// cancels the request's context, which must not pass for a client that left.
func (s *Server) requestTimeout() gin.HandlerFunc {
	return func(c *gin.Context) {
		d := time.Duration(s.requestTimeoutNow.Load())
		ctx, cancel := context.WithTimeout(c.Request.Context(), d)
		defer cancel()
		deadline, _ := ctx.Deadline()
		rc := http.NewResponseController(c.Writer)
		// Not every connection has deadlines (a test's recorder): then the context is
		// the only bound, as before. A request without a body has nothing to read: a
		// read deadline would only cancel its context when its handler runs late.
		if c.Request.ContentLength != 0 {
			_ = rc.SetReadDeadline(deadline.Add(readGrace))
		}
		if rc.SetWriteDeadline(deadline.Add(writeGrace)) == nil {
			// net/http resets the read deadline for the next request on the
			// connection, not the write deadline (no WriteTimeout is set).
			defer rc.SetWriteDeadline(time.Time{}) //nolint:errcheck // the connection may be gone.
		}
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}

// accessLog logs each request at V(1): routine traffic is not worth an Info line. It
// logs the route template ("/fhir/*path"), not the path: FHIR paths and queries carry
// patient identifiers, which have no place in an access log.
func (s *Server) accessLog() gin.HandlerFunc {
	log := s.log.V(1)
	return func(c *gin.Context) {
		if !log.Enabled() {
			c.Next()
			return
		}
		start := time.Now()
		c.Next()
		// peer is the address the connection came from, whatever a client wrote in
		// X-Forwarded-For: the one address no client can forge.
		log.Info("Served request", "method", c.Request.Method, "route", c.FullPath(),
			"status", c.Writer.Status(), "took", time.Since(start).String(), "peer", peerOf(c.Request))
	}
}

// recoverer turns a handler panic into a 500 and a logged error instead of a dropped
// connection. http.ErrAbortHandler is re-raised: it is net/http's way to abort.
func (s *Server) recoverer() gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			if p := recover(); p != nil {
				if err, ok := p.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(p)
				}
				s.log.Error(fmt.Errorf("panic: %v", p), "Handler panicked", "route", c.FullPath())
				if !c.Writer.Written() {
					c.Data(http.StatusInternalServerError, "application/json", []byte(`{"status":"internal error"}`+"\n"))
				}
				c.Abort()
			}
		}()
		c.Next()
	}
}
