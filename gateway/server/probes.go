package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrofed/ferrofed/gateway/health"
)

// probeFront answers GET and HEAD of {base}/health and {base}/health/readiness ahead of
// the gin engine, and hands every other request to it. A probe is what the gateway
// answers most, and what must be answered while the data plane is busy: the kubelet
// restarts a pod whose liveness probe times out. Measured against a bare net/http
// handler (BenchmarkHealthRoutesAgainstBare), gin's routing, its context and the
// middleware chain were most of the difference; here the probe does, in this order,
// what that chain did for it, without its per-request work: recover a panic into a 500,
// count the request in flight, ask the client to close while draining, answer, count
// the answer by code (ferrofed_http_requests_total{surface="health"}) and log it at
// V(1). The engine keeps the same routes, for {base}/health/readiness/{check} and so
// that a colliding metrics.path is still refused.
type probeFront struct {
	s         *Server
	engine    *gin.Engine
	h         *health.Handlers
	liveness  string // {base}/health
	readiness string // {base}/health/readiness
	counted   *codeCounter
}

var connectionClose = []string{"close"}

func (f *probeFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var serve func(http.ResponseWriter, *http.Request) int
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		switch r.URL.Path {
		case f.liveness:
			serve = f.h.ServeLiveness
		case f.readiness:
			serve = f.h.ServeReadiness
		}
	}
	if serve == nil {
		f.engine.ServeHTTP(w, r)
		return
	}
	s := f.s
	s.metrics.inFlight.Inc()
	defer s.metrics.inFlight.Dec()
	defer func() {
		if p := recover(); p != nil {
			if err, ok := p.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(p)
			}
			s.log.Error(fmt.Errorf("panic: %v", p), "Handler panicked", "route", r.URL.Path)
			// The answer may be half written; net/http closes such a connection.
			w.WriteHeader(http.StatusInternalServerError)
			f.counted.inc(http.StatusInternalServerError)
		}
	}()
	if s.state.Draining() {
		w.Header()["Connection"] = connectionClose
	}
	log := s.log.V(1)
	var start time.Time
	if log.Enabled() {
		start = time.Now()
	}
	code := serve(w, r)
	f.counted.inc(code)
	if log.Enabled() {
		log.Info("Served request", "method", r.Method, "route", r.URL.Path,
			"status", code, "took", time.Since(start).String(), "remote", remoteIP(r.RemoteAddr))
	}
}

// remoteIP is the peer's address without its port, as gin's ClientIP gives it when no
// proxy is trusted.
func remoteIP(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// codeCounter counts requests of one surface by status code. Each code's counter is
// looked up once and kept: a lookup by label values formats the code and hashes both
// labels, on every request otherwise.
type codeCounter struct {
	vec    *prometheus.CounterVec
	byCode [600]atomic.Pointer[prometheus.Counter]
}

func newCodeCounter(requests *prometheus.CounterVec, surface string) *codeCounter {
	return &codeCounter{vec: requests.MustCurryWith(prometheus.Labels{"surface": surface})}
}

func (cc *codeCounter) inc(code int) {
	if code < 0 || code >= len(cc.byCode) {
		cc.vec.WithLabelValues(strconv.Itoa(code)).Inc()
		return
	}
	counter := cc.byCode[code].Load()
	if counter == nil {
		ctr := cc.vec.WithLabelValues(strconv.Itoa(code))
		counter = &ctr
		cc.byCode[code].Store(counter)
	}
	(*counter).Inc()
}
