package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// runState is what Listen and Run share.
type runState struct {
	mu       sync.Mutex
	listener net.Listener // the tracking listener, before TLS
	tls      *tls.Config
	keys     *KeyPair      // the served key pair when TLS is on (tls.go)
	certPoll time.Duration // how often keys' files are read again; 0 is DefaultCertificatePoll
	running  bool

	// conns tracks every connection's last state, to count those the drain cuts.
	connsMu sync.Mutex
	conns   map[net.Conn]http.ConnState
}

// Listen binds server.listen (and loads the TLS certificates) so that the address is
// known before Run; Run calls it when it was not called.
func (s *Server) Listen() error {
	s.run.mu.Lock()
	defer s.run.mu.Unlock()
	if s.run.listener != nil {
		return nil
	}
	cfg := s.cfg.Load()
	var keys *KeyPair
	if cfg.Server.TLS.Enabled() {
		var err error
		if keys, err = LoadKeyPair(cfg.Server.TLS.CertificateFile, cfg.Server.TLS.KeyFile, s.log.WithName("tls")); err != nil {
			return err
		}
	}
	tlsConfig, err := TLSConfig(cfg.Server.TLS, keys)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("server.listen %s: %w", cfg.Server.Listen, err)
	}
	if keys != nil {
		for _, c := range keys.Collectors() {
			if err := s.metrics.Registry.Register(c); err != nil {
				_ = ln.Close()
				return fmt.Errorf("server: register metrics: %w", err)
			}
		}
	}
	s.run.listener = ln
	s.run.tls = tlsConfig
	s.run.keys = keys
	return nil
}

// Addr is the bound address, or nil before Listen.
func (s *Server) Addr() net.Addr {
	s.run.mu.Lock()
	defer s.run.mu.Unlock()
	if s.run.listener == nil {
		return nil
	}
	return s.run.listener.Addr()
}

// URL is the base URL clients reach the server at, e.g. "https://127.0.0.1:8443/x";
// it is empty before Listen.
func (s *Server) URL() string {
	a := s.Addr()
	if a == nil {
		return ""
	}
	scheme := "http"
	if s.cfg.Load().Server.TLS.Enabled() {
		scheme = "https"
	}
	base := s.cfg.Load().Server.BasePath
	if base == "/" {
		base = ""
	}
	return scheme + "://" + a.String() + base
}

// Run serves until ctx ends, then drains in the four steps of the timeline in gateway/lifecycle/doc.go and returns.
// It returns nil after a drain, whether it completed or cut connections (that is in
// the log and the metrics); an error means the server could not serve.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.run.mu.Lock()
	if s.run.running {
		s.run.mu.Unlock()
		return errors.New("server: Run called twice")
	}
	s.run.running = true
	ln, tlsConfig, keys, certPoll := s.run.listener, s.run.tls, s.run.keys, s.run.certPoll
	s.run.mu.Unlock()
	if keys != nil {
		// The key pair follows its files until Run returns, through the drain.
		if certPoll <= 0 {
			certPoll = DefaultCertificatePoll
		}
		watchCtx, stopWatch := context.WithCancel(context.Background())
		defer stopWatch()
		go keys.Watch(watchCtx, certPoll)
	}

	cfg := s.cfg.Load()
	listenerClosed := make(chan struct{})
	tracked := &trackingListener{Listener: ln, onClose: func() { close(listenerClosed) }}

	// hardCtx is every request's base context: cancelled when the drain gives up on the
	// requests still running, so that their handlers stop working for nobody.
	hardCtx, cut := context.WithCancel(context.WithoutCancel(ctx))
	defer cut()
	s.run.conns = map[net.Conn]http.ConnState{}
	srv := s.httpServer(cfg, tlsConfig, hardCtx)
	serveErr := serve(srv, tracked, tlsConfig != nil)
	s.log.Info("Serving", "address", ln.Addr().String(), "basePath", cfg.Server.BasePath, "tls", tlsConfig != nil)

	bootCtx, stopBoot := context.WithCancel(ctx)
	defer stopBoot()
	bootDone := make(chan struct{})
	go s.boot(bootCtx, bootDone)

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		// The listener failed on its own: nothing to drain towards, but stop the rest.
		stopBoot()
		<-bootDone
		s.state.StartDraining()
		_ = srv.Close()
		s.stopSurfaces(s.cfg.Load().Lifecycle().BindingsDrainTimeout)
		return fmt.Errorf("serve: %w", err)
	}
	<-bootDone
	s.drain(srv, listenerClosed, cut)
	if err := <-serveErr; err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// httpServer is the net/http server of one Run: every request's base context is
// hardCtx.
func (s *Server) httpServer(cfg *config.Config, tlsConfig *tls.Config, hardCtx context.Context) *http.Server {
	return &http.Server{
		Handler:           s.front,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout(),
		// A request head is read whole before any handler sees it: bounded by the
		// query limit plus room for headers, not net/http's default of 1 MiB, so that
		// a flood of oversized queries costs what the limit allows (bounds.go).
		MaxHeaderBytes: MaxHeaderBytes(cfg),
		// An idle keep-alive connection is closed after this; clients reconnect.
		IdleTimeout: 2 * time.Minute,
		TLSConfig:   tlsConfig,
		BaseContext: func(net.Listener) context.Context { return hardCtx },
		ConnState:   s.trackConn,
		ErrorLog:    log.New(logWriter{s.log.V(1)}, "", 0),
	}
}

// serve serves ln with srv on a goroutine of its own; the channel gets what serving
// ended with, nil when Shutdown ended it.
func serve(srv *http.Server, ln net.Listener, useTLS bool) <-chan error {
	serveErr := make(chan error, 1)
	go func() {
		var err error
		if useTLS {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil // Shutdown's doing: not an error
		}
		serveErr <- err
	}()
	return serveErr
}

// boot re-evaluates readiness while booting so that the gate opens the first time every
// check passes, whether or not anything probes.
func (s *Server) boot(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(s.bootPoll)
	defer t.Stop()
	for s.state.Booting() {
		if s.eval.Evaluate(ctx).Ready() {
			s.state.MarkServing()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// drain runs the four steps, writes their outcome to server.termination_message_path,
// then pushes the metrics when metrics.push_url is set; the budgets are read now, so
// that a reload applies to it. Each step begins when the signal ending the one before it
// fired, so that the steps of the termination message add up to the whole drain.
func (s *Server) drain(srv *http.Server, listenerClosed <-chan struct{}, cut context.CancelFunc) {
	budgets := s.cfg.Load().Lifecycle()
	start := time.Now()

	// Step 1: readiness 503 at once; keep accepting and serving for the delay, every
	// answer carrying Connection: close (closeWhileDraining).
	s.state.StartDraining()
	initiated := s.fire(lifecycle.SignalShutdownInitiated, start, "drainDelay", budgets.DrainDelay.String(),
		"shutdownTimeout", budgets.ShutdownTimeout.String(), "bindingsDrainTimeout", budgets.BindingsDrainTimeout.String())
	if budgets.DrainDelay > 0 {
		time.Sleep(budgets.DrainDelay) // the delay is the budget itself, nothing to wait on
	}
	delayElapsed := s.fire(lifecycle.SignalDrainDelayElapsed, initiated)

	// Keep-alives go off only now: turning them off at once would close the idle
	// keep-alive connections at the start of the delay, instead of answering their next
	// request with Connection: close.
	srv.SetKeepAlivesEnabled(false)

	// Steps 2 and 3: Shutdown closes the listener first (ListenerClosed fires from the
	// listener's Close), then waits for the connections to finish their request; it
	// returns as soon as none is left, so an idle gateway does not wait the timeout.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), budgets.ShutdownTimeout)
	defer cancel()
	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- srv.Shutdown(shutdownCtx) }()
	<-listenerClosed
	closed := s.fire(lifecycle.SignalListenerClosed, delayElapsed)

	outcome, cutConns := OutcomeCompleted, 0
	if err := <-shutdownDone; err != nil {
		// The timeout passed: drop what is still open.
		cutConns = s.openConns()
		cut()
		_ = srv.Close()
		outcome = OutcomeCut
		s.metrics.cutConns.Add(float64(cutConns))
		s.log.Info("Shutdown timeout passed: closed the connections still open", "connections", cutConns,
			"shutdownTimeout", budgets.ShutdownTimeout.String())
	}
	s.metrics.drains.WithLabelValues(outcome).Inc()
	drained := s.fire(lifecycle.SignalInFlightDrained, closed, "outcome", outcome, "cutConnections", cutConns)

	// Step 4.
	abandoned := s.stopSurfaces(budgets.BindingsDrainTimeout)
	stopped := s.fire(lifecycle.SignalBindingsStopped, drained, append([]any{"abandoned", abandoned}, s.stopReports()...)...)

	// After the last step, before the exit: tell the runtime how the drain went (the
	// container's termination message), then push the metrics the listener can no
	// longer serve (metrics.push_url; bounded by pushTimeout, logged with its duration).
	cfg := s.cfg.Load()
	msg := lifecycle.TerminationMessage{
		Outcome: outcome,
		Drain:   stopped.Sub(initiated),
		Steps: lifecycle.DrainSteps{
			DrainDelay:     delayElapsed.Sub(initiated),
			ListenerClosed: closed.Sub(delayElapsed),
			InFlight:       drained.Sub(closed),
			Bindings:       stopped.Sub(drained),
		},
		CutConnections: cutConns,
		Abandoned:      abandoned,
		Audit:          s.auditSpools(),
	}
	s.writeTerminationMessage(cfg.Server.TerminationMessagePath, msg)
	s.afterDrain(cfg, start, msg)
	s.log.Info("Drained", "took", time.Since(start).String(), "outcome", outcome)
}

// afterDrain pushes what the closed listener can no longer serve, at once and within
// one bound (pushTimeout): the metrics (metrics.push_url) and, alongside, each part's
// Drained hook (the drain's span and the last spans). Running them side by side keeps
// both within MaxPushTimeout, the room the termination headroom keeps for them.
func (s *Server) afterDrain(cfg *config.Config, start time.Time, msg lifecycle.TerminationMessage) {
	var wg sync.WaitGroup
	var hooks []Registration
	for _, p := range s.parts {
		if p.Drained != nil {
			hooks = append(hooks, p)
		}
	}
	if len(hooks) > 0 {
		timeout := max(pushTimeout(cfg.Server.TerminationGracePeriodSeconds, time.Since(start)), 0)
		ctx, cancel := context.WithTimeoutCause(context.Background(), timeout,
			fmt.Errorf("the push after the drain took its bound (%s)", timeout))
		defer cancel()
		for _, p := range hooks {
			wg.Go(func() { p.Drained(ctx, start, msg) })
		}
	}
	s.pushMetrics(cfg, start)
	wg.Wait()
}

// stopReturnGrace is how long after the bindings budget a Stop may take to return once
// its context ended before it is reported abandoned.
const stopReturnGrace = 50 * time.Millisecond

// stopSurfaces stops every part with a Stop hook in parallel within budget and
// returns the names of those abandoned: still stopping when the budget ran out.
func (s *Server) stopSurfaces(budget time.Duration) []string {
	var stoppers []Registration
	for _, p := range s.parts {
		if p.Stop != nil {
			stoppers = append(stoppers, p)
		}
	}
	if len(stoppers) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	var mu sync.Mutex
	running := map[string]bool{}
	var wg sync.WaitGroup
	for _, sf := range stoppers {
		name := sf.Name
		mu.Lock()
		running[name] = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := sf.Stop(ctx)
			mu.Lock()
			delete(running, name)
			mu.Unlock()
			if err != nil {
				s.log.Error(err, "Surface stopped with an error", "surface", name)
			}
		}()
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
		return nil
	case <-ctx.Done():
	}
	// A Stop that honours its context returns just after the deadline: it stopped as it
	// was told to, and is not reported abandoned.
	select {
	case <-all:
		return nil
	case <-time.After(stopReturnGrace):
	}
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for _, sf := range stoppers {
		if running[sf.Name] {
			out = append(out, sf.Name)
			s.metrics.abandoned.WithLabelValues(sf.Name).Inc()
			s.log.Error(fmt.Errorf("surface %q still stopping after server.bindings_drain_timeout_ms (%s)", sf.Name, budget),
				"Warning: abandoned a surface; what it holds at a remote service (e.g. a subscription) may be left there",
				"surface", sf.Name)
		}
	}
	return out
}

func (s *Server) trackConn(c net.Conn, st http.ConnState) {
	s.run.connsMu.Lock()
	defer s.run.connsMu.Unlock()
	switch st {
	case http.StateClosed, http.StateHijacked:
		delete(s.run.conns, c)
	default:
		s.run.conns[c] = st
	}
}

func (s *Server) openConns() int {
	s.run.connsMu.Lock()
	defer s.run.connsMu.Unlock()
	return len(s.run.conns)
}

// trackingListener reports its first Close: that is the moment the drain's listener
// closed, whoever closed it (http.Server.Shutdown does).
type trackingListener struct {
	net.Listener
	once    sync.Once
	onClose func()
}

func (l *trackingListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(l.onClose)
	return err
}

// logWriter routes net/http's own error log (TLS handshake failures, header timeouts)
// through logr at the level it was given.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info("HTTP server: " + string(trimNewline(p)))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	for len(p) > 0 && (p[len(p)-1] == '\n' || p[len(p)-1] == '\r') {
		p = p[:len(p)-1]
	}
	return p
}
