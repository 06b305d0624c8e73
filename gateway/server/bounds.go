package server

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/health"
)

// writeGrace is how long past the request deadline the answer may still be written:
// the 408 or 504 that says the deadline passed is written after it. readGrace is how
// long past it the client's body may still be read (see requestTimeout).
const (
	writeGrace = time.Second
	readGrace  = writeGrace / 2
)

// ShedRetryAfter is the Retry-After of a data-plane request refused because the
// gateway is serving limits.max_in_flight_requests already.
const ShedRetryAfter = "1"

// bounds are the data-plane limits the server enforces itself, read per request (a
// reload may change them), and the requests in flight now.
type bounds struct {
	maxInFlight   atomic.Int64
	maxQueryBytes atomic.Int64
	inFlight      atomic.Int64
}

func (b *bounds) store(cfg *config.Config) {
	l := cfg.Limits.Resolved()
	b.maxInFlight.Store(int64(l.MaxInFlightRequests))
	b.maxQueryBytes.Store(int64(l.MaxQueryBytes))
}

// shed answers 503 with Retry-After, before the gate and before any member is asked,
// a data-plane request that would be one more than limits.max_in_flight_requests.
// Health routes are not behind it: a flood is refused cheaply, and liveness and
// readiness keep answering.
func (s *Server) shed() gin.HandlerFunc {
	return func(c *gin.Context) {
		n := s.bounds.inFlight.Add(1)
		defer s.bounds.inFlight.Add(-1)
		if limit := s.bounds.maxInFlight.Load(); n > limit {
			s.metrics.shed.Inc()
			c.Header("Retry-After", ShedRetryAfter)
			c.Data(http.StatusServiceUnavailable, "application/fhir+json", health.OperationOutcome("throttled",
				fmt.Sprintf("the gateway is serving as many requests as limits.max_in_flight_requests allows (%d); retry after %s s", limit, ShedRetryAfter)))
			c.Abort()
			return
		}
		c.Next()
	}
}

// queryLimit answers 414 a data-plane request whose query string is longer than
// limits.max_query_bytes, before anything reads it.
func (s *Server) queryLimit() gin.HandlerFunc {
	return func(c *gin.Context) {
		if limit := s.bounds.maxQueryBytes.Load(); int64(len(c.Request.URL.RawQuery)) > limit {
			c.Data(http.StatusRequestURITooLong, "application/fhir+json", health.OperationOutcome("too-long",
				"the query string is longer than limits.max_query_bytes ("+strconv.FormatInt(limit, 10)+" bytes)"))
			c.Abort()
			return
		}
		c.Next()
	}
}

// HeaderRoom is what a request head may hold besides its query string: a request
// whose head is longer than limits.max_query_bytes plus HeaderRoom is refused by
// net/http itself (431) before it is read whole; one whose query alone passes the
// limit, by queryLimit (414).
const HeaderRoom = 32 << 10

// MaxHeaderBytes is the request head limit of the listener for cfg.
func MaxHeaderBytes(cfg *config.Config) int {
	return cfg.Limits.Resolved().MaxQueryBytes + HeaderRoom
}

// peerOf is the IP address the request's connection came from.
func peerOf(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
