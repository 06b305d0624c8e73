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

// NamedCheck is a Check named name whose Check is check, as k8s healthz's NamedCheck:
// the way to declare a check without a type of its own.
func NamedCheck(name string, check func(ctx context.Context) error) Check {
	return namedCheck{name: name, check: check}
}

type namedCheck struct {
	name  string
	check func(ctx context.Context) error
}

func (c namedCheck) Name() string                    { return c.name }
func (c namedCheck) Check(ctx context.Context) error { return c.check(ctx) }

// CheckStatus is how one check ended in one evaluation; the readiness body carries it
// as the check's value ("checks":{"config":"ok"}). It is not the process phase, which
// State holds.
type CheckStatus string

const (
	// CheckOK is a check that returned nil within its budget.
	CheckOK CheckStatus = "ok"
	// CheckFailed is a check that returned an error (or panicked) within its budget.
	CheckFailed CheckStatus = "failed"
	// CheckTimedOut is a check that had not answered by health.check_timeout_ms, or
	// whose caller stopped waiting: it fails closed.
	CheckTimedOut CheckStatus = "timeout"
)
