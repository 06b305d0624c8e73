// Package health holds the gateway's health checks, the readiness gate, the probe
// handlers and their cached, bounded evaluation.
//
// Readiness is the AND of named checks, "config" first. An Evaluator runs them in
// parallel, each within health.check_timeout_ms (one that does not answer fails closed
// with "<check>_timeout"), and reuses the report for health.cache_ttl_ms; concurrent
// probes share one evaluation, so a probe flood costs at most one per TTL. The public
// body carries reason codes only; the full errors go to the log. Liveness depends on
// nothing. State is the process phase; Gate closes the data plane until the first time
// every check passed, with one atomic load per request.
package health

import "context"

// Check is one named readiness subsystem. Readiness is the AND of a list of them.
// Check must honour ctx: it runs within health.check_timeout_ms and a check that has
// not answered by then fails closed with the reason "<name>_timeout".
type Check interface {
	// Name is the check's key in the readiness body and its sub-path
	// ({base}/health/readiness/{name}).
	Name() string
	// Check returns nil when the subsystem is ready, else an error whose text is a
	// short, public reason (no URL, address or credential).
	Check(ctx context.Context) error
}

// CheckFunc adapts a function to a Check.
type CheckFunc struct {
	CheckName string
	Fn        func(ctx context.Context) error
}

func (c CheckFunc) Name() string                    { return c.CheckName }
func (c CheckFunc) Check(ctx context.Context) error { return c.Fn(ctx) }
