//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// pushReceiver stands in for a Prometheus Pushgateway: the gateway pods push their whole
// registry to it at the end of their drain (metrics.push_url), since a drained pod's
// listener is closed before ferrofed_drain_total moves. It records, per instance (the
// pod name), the ferrofed_drain_total counts of each push.
type pushReceiver struct {
	url string
	srv *http.Server

	mu     sync.Mutex
	drains map[string][]map[string]float64 // instance → one outcome→count map per push
	errs   []string
}

// startPushReceiver serves on host:0, an address of this machine the pods reach (the
// node's InternalIP on the local cluster), as the token issuer's key set does.
func startPushReceiver(host string) (*pushReceiver, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("listen for metrics pushes on %s: %w", host, err)
	}
	r := &pushReceiver{url: "http://" + ln.Addr().String(), drains: map[string][]map[string]float64{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *pushReceiver) close() { _ = r.srv.Close() }

// serve takes a push: PUT or POST /metrics/job/<job>/instance/<instance>.
func (r *pushReceiver) serve(w http.ResponseWriter, req *http.Request) {
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, "/"), "/")
	if (req.Method != http.MethodPut && req.Method != http.MethodPost) || len(parts) != 5 || parts[0] != "metrics" || parts[1] != "job" || parts[3] != "instance" {
		r.fail(fmt.Sprintf("unexpected push %s %s", req.Method, req.URL.Path))
		http.Error(w, "want PUT /metrics/job/<job>/instance/<instance>", http.StatusBadRequest)
		return
	}
	instance := parts[4]
	counts, err := drainCounts(req)
	if err != nil {
		r.fail(fmt.Sprintf("push of %s: %v", instance, err))
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.drains[instance] = append(r.drains[instance], counts)
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (r *pushReceiver) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, msg)
}

// pushes returns every push of instance, and the malformed pushes seen.
func (r *pushReceiver) pushes(instance string) (drains []map[string]float64, errs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(drains, r.drains[instance]...), append(errs, r.errs...)
}

// drainCounts decodes a pushed body (delimited protobuf as the gateway sends it, or
// text) and returns ferrofed_drain_total by outcome; a push without it is an error.
func drainCounts(req *http.Request) (map[string]float64, error) {
	dec := expfmt.NewDecoder(io.LimitReader(req.Body, 8<<20), expfmt.ResponseFormat(req.Header))
	var counts map[string]float64
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		if mf.GetName() != "ferrofed_drain_total" {
			continue
		}
		counts = map[string]float64{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					counts[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	if counts == nil {
		return nil, errors.New("no ferrofed_drain_total in the push")
	}
	return counts, nil
}

// tomlMetrics is the [metrics] table of the gateway configuration.
func (r *pushReceiver) tomlMetrics() string {
	return fmt.Sprintf("[metrics]\npush_url = %q\npush_job = \"ferrofed-e2e\"\n", r.url)
}

// pushedCompleted checks what a drained pod pushed: exactly one push, saying
// ferrofed_drain_total{outcome="completed"} 1 and no "cut". It returns "" when so,
// else what is wrong.
func (r *pushReceiver) pushedCompleted(pod string) string {
	drains, errs := r.pushes(pod)
	switch {
	case len(errs) > 0:
		return fmt.Sprintf("malformed pushes seen: %v", errs)
	case len(drains) == 0:
		return "no metrics push from it"
	case len(drains) > 1:
		return fmt.Sprintf("%d pushes from it, want 1: %v", len(drains), drains)
	case drains[0]["completed"] != 1 || drains[0]["cut"] != 0:
		return fmt.Sprintf(`it pushed ferrofed_drain_total %v, want {completed: 1, cut: 0}`, drains[0])
	}
	return ""
}
