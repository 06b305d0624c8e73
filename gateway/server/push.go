package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus/push"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// MaxPushTimeout bounds the metrics push at the end of the drain, and the parts'
// Drained hooks run alongside it (the last spans, gateway/tracing) within the same
// bound: side by side, they fit together in the termination headroom the grace
// period leaves after the drain (lifecycle.DefaultTerminationHeadroom, 5 s, by
// default) with room for the exit, and the operator's derivation needs no more.
const MaxPushTimeout = 2 * time.Second

// pushTimeout is how long the push at the end of the drain may take: MaxPushTimeout, or
// half of what is left of the grace period (server.termination_grace_period_seconds,
// counted from the start of the drain, when SIGTERM came) if that is shorter. Zero or
// less means no time is left.
func pushTimeout(graceSeconds *int64, sinceDrainStart time.Duration) time.Duration {
	t := MaxPushTimeout
	if graceSeconds != nil {
		t = min(t, (time.Duration(*graceSeconds)*time.Second-sinceDrainStart)/2)
	}
	return t
}

// pushMetrics pushes the whole registry once to metrics.push_url, grouped by job and
// instance (the hostname: the pod name on Kubernetes). It is the drain's last act
// (the last metrics are pushed before exit, after the drain timeline in gateway/lifecycle/doc.go): the listener closed before
// ferrofed_drain_total moved, so no scrape can see the outcome. It is logged with its
// duration whether it succeeded or not, and never outlasts pushTimeout.
func (s *Server) pushMetrics(cfg *config.Config, drainStart time.Time) {
	m := cfg.Metrics
	if m.PushURL == "" {
		return
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		s.log.Error(err, "Could not read the hostname: the metrics push is grouped under instance \"unknown\"")
		host = "unknown"
	}
	kv := []any{"url", m.PushURL, "job", m.PushJob, "instance", host}
	timeout := pushTimeout(cfg.Server.TerminationGracePeriodSeconds, time.Since(drainStart))
	if timeout <= 0 {
		s.log.Error(fmt.Errorf("no time left of server.termination_grace_period_seconds (%d s)", *cfg.Server.TerminationGracePeriodSeconds),
			"Skipped the metrics push: the last metrics of this process are lost", kv...)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	begin := time.Now()
	// Our own client: no keep-alive to leave behind, and the timeout holds even if the
	// context were ignored.
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true,
		MaxResponseHeaderBytes: 64 << 10}} // the gateway's cap on every answer head it reads
	err = push.New(m.PushURL, m.PushJob).Gatherer(s.metrics.Registry).Grouping("instance", host).Client(client).PushContext(ctx)
	kv = append(kv, "took", time.Since(begin).String(), "timeout", timeout.String())
	if err != nil {
		s.log.Error(err, "Metrics push failed: the last metrics of this process are lost", kv...)
		return
	}
	s.log.Info("Pushed the last metrics", kv...)
}
