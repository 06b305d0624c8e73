// Package lifecycle holds the drain budgets of a gateway process, the rules that make
// them fit together, and the grace-period formula derived from them.
//
// It is the one place these rules live: `ferrofed config check`, the gateway at start
// and on reload, the operator's controller and its admission webhook all call it, and
// the CRD's CEL rules mirror it (a shared table test holds them in agreement).
// Everything here is pure: no clock, no environment, no I/O.
package lifecycle

import (
	"fmt"
	"math"
	"time"
)

const (
	// DefaultRequestTimeout is the longest a client request may run when nothing is set.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultDrainDelay is step 1 of the drain when nothing is set: the listener closes
	// at once, right for a single process with nothing in front of it.
	DefaultDrainDelay = time.Duration(0)
	// DefaultBindingsDrainTimeout is step 4 of the drain when nothing is set.
	DefaultBindingsDrainTimeout = 5 * time.Second
	// DefaultTerminationHeadroom is the room left after the drain for the last metrics
	// and spans to be pushed before the runtime's SIGKILL.
	DefaultTerminationHeadroom = 5 * time.Second
	// MaxBudget bounds every single budget. Longer values are refused: they are typos
	// (seconds written as milliseconds) far more often than intent.
	MaxBudget = time.Hour
)

// Budgets are the durations that govern how a gateway stops. A nil pointer means the
// value was not set and its default applies; see Resolve.
type Budgets struct {
	// RequestTimeout is the longest a client request may run.
	RequestTimeout *time.Duration
	// DrainDelay is step 1: how long the listener keeps accepting after readiness
	// turned 503.
	DrainDelay *time.Duration
	// ShutdownTimeout is step 3: how long in-flight requests get to finish. Unset, it
	// equals RequestTimeout.
	ShutdownTimeout *time.Duration
	// BindingsDrainTimeout is step 4: how long the bindings get to stop their processes.
	BindingsDrainTimeout *time.Duration
	// TerminationHeadroom is the room after the drain before the runtime kills the process.
	TerminationHeadroom *time.Duration
	// TerminationGracePeriodSeconds is an explicit grace period that replaces the
	// derived one. It must outlast the drain.
	TerminationGracePeriodSeconds *int64
}

// Resolved are Budgets with every default applied.
type Resolved struct {
	RequestTimeout       time.Duration
	DrainDelay           time.Duration
	ShutdownTimeout      time.Duration
	BindingsDrainTimeout time.Duration
	TerminationHeadroom  time.Duration
	// ExplicitGracePeriodSeconds is the explicit grace period, or nil.
	ExplicitGracePeriodSeconds *int64
}

// Resolve applies the defaults: an unset shutdown timeout equals the request timeout.
func (b Budgets) Resolve() Resolved {
	r := Resolved{
		RequestTimeout:             orDefault(b.RequestTimeout, DefaultRequestTimeout),
		DrainDelay:                 orDefault(b.DrainDelay, DefaultDrainDelay),
		BindingsDrainTimeout:       orDefault(b.BindingsDrainTimeout, DefaultBindingsDrainTimeout),
		TerminationHeadroom:        orDefault(b.TerminationHeadroom, DefaultTerminationHeadroom),
		ExplicitGracePeriodSeconds: b.TerminationGracePeriodSeconds,
	}
	r.ShutdownTimeout = orDefault(b.ShutdownTimeout, r.RequestTimeout)
	return r
}

func orDefault(d *time.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return *d
}

// Drain is the longest the drain itself may take: delay + shutdown + bindings.
func (r Resolved) Drain() time.Duration {
	return r.DrainDelay + r.ShutdownTimeout + r.BindingsDrainTimeout
}

// DerivedGracePeriodSeconds is ceil(drainDelay + shutdownTimeout + bindingsDrainTimeout
// + terminationHeadroom) in whole seconds, the formula the operator writes into the pod.
func (r Resolved) DerivedGracePeriodSeconds() int64 {
	return ceilSeconds(r.Drain() + r.TerminationHeadroom)
}

// GracePeriodSeconds is the explicit grace period when one is set, else the derived one.
func (r Resolved) GracePeriodSeconds() int64 {
	if r.ExplicitGracePeriodSeconds != nil {
		return *r.ExplicitGracePeriodSeconds
	}
	return r.DerivedGracePeriodSeconds()
}

const maxDurationSeconds = int64(math.MaxInt64 / int64(time.Second))

func ceilSeconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds()))
}

// ReadinessPoll is how long a balancer that polls readiness every periodSeconds needs,
// at worst, to see a 503 failureThreshold times in a row: the drain delay that covers it.
func ReadinessPoll(periodSeconds, failureThreshold int32) time.Duration {
	return time.Duration(periodSeconds) * time.Duration(failureThreshold) * time.Second
}

// Fields names each budget the way the caller's users spell it, so that a problem names
// the key of a TOML file or the field path of a resource.
type Fields struct {
	RequestTimeout                string
	DrainDelay                    string
	ShutdownTimeout               string
	BindingsDrainTimeout          string
	TerminationHeadroom           string
	TerminationGracePeriodSeconds string
}

// TOMLFields are the keys of ferrofed.toml.
var TOMLFields = Fields{
	RequestTimeout:                "server.request_timeout_ms",
	DrainDelay:                    "server.drain_delay_ms",
	ShutdownTimeout:               "server.shutdown_timeout_ms",
	BindingsDrainTimeout:          "server.bindings_drain_timeout_ms",
	TerminationHeadroom:           "termination headroom",
	TerminationGracePeriodSeconds: "server.termination_grace_period_seconds",
}

// Problem is one rule a set of budgets breaks.
type Problem struct {
	// Field is the field the problem is reported on; Message names every field involved.
	Field   string
	Value   string
	Message string
}

func (p Problem) Error() string { return p.Field + ": " + p.Message }

// Validate returns every rule the budgets break, each naming the fields involved:
// every budget is non-negative and at most MaxBudget, the request timeout is positive,
// the shutdown timeout is not shorter than the request timeout, and an explicit grace
// period outlasts the drain (delay + shutdown + bindings).
func (b Budgets) Validate(f Fields) []Problem {
	var out []Problem
	r := b.Resolve()
	bounded := []struct {
		name     string
		value    *time.Duration
		positive bool
	}{
		{f.RequestTimeout, b.RequestTimeout, true},
		{f.DrainDelay, b.DrainDelay, false},
		{f.ShutdownTimeout, b.ShutdownTimeout, false},
		{f.BindingsDrainTimeout, b.BindingsDrainTimeout, false},
		{f.TerminationHeadroom, b.TerminationHeadroom, false},
	}
	boundsOK := true
	for _, d := range bounded {
		if d.value == nil {
			continue
		}
		switch {
		case *d.value < 0:
			out = append(out, Problem{d.name, d.value.String(), "must not be negative"})
			boundsOK = false
		case d.positive && *d.value == 0:
			out = append(out, Problem{d.name, d.value.String(), "must be greater than zero"})
			boundsOK = false
		case *d.value > MaxBudget:
			out = append(out, Problem{d.name, d.value.String(), fmt.Sprintf("must be at most %s", MaxBudget)})
			boundsOK = false
		}
	}
	if b.ShutdownTimeout != nil && r.ShutdownTimeout < r.RequestTimeout {
		out = append(out, Problem{f.ShutdownTimeout, r.ShutdownTimeout.String(), fmt.Sprintf(
			"%s (%s) must not be shorter than %s (%s): a request accepted just before the listener closes may run for the whole request timeout",
			f.ShutdownTimeout, r.ShutdownTimeout, f.RequestTimeout, r.RequestTimeout)})
	}
	if g := b.TerminationGracePeriodSeconds; g != nil {
		switch {
		case *g < 0:
			out = append(out, Problem{f.TerminationGracePeriodSeconds, fmt.Sprint(*g), "must not be negative"})
		// A grace period past what a Duration holds (~292 years) outlasts any drain;
		// converting it would wrap.
		case boundsOK && *g <= maxDurationSeconds && time.Duration(*g)*time.Second <= r.Drain():
			out = append(out, Problem{f.TerminationGracePeriodSeconds, fmt.Sprint(*g), fmt.Sprintf(
				"%s (%ds) must be greater than %s + %s + %s (%s)",
				f.TerminationGracePeriodSeconds, *g, f.DrainDelay, f.ShutdownTimeout, f.BindingsDrainTimeout, r.Drain())})
		}
	}
	return out
}

// Warnings are budgets that fit together but are likely to drop requests or lose
// telemetry: a drain delay shorter than the readiness poll that removes the pod from its
// balancer, and headroom under DefaultTerminationHeadroom. readinessPoll is zero when
// no balancer polls.
func (b Budgets) Warnings(f Fields, readinessPoll time.Duration) []string {
	r := b.Resolve()
	var out []string
	if r.DrainDelay < readinessPoll {
		out = append(out, fmt.Sprintf(
			"%s (%s) is shorter than the readiness poll (%s = periodSeconds × failureThreshold): requests routed before the balancer sees the 503 may be refused",
			f.DrainDelay, r.DrainDelay, readinessPoll))
	}
	// With an explicit grace period the headroom is what it leaves after the drain.
	headroom, name := r.TerminationHeadroom, f.TerminationHeadroom
	if g := r.ExplicitGracePeriodSeconds; g != nil {
		headroom, name = DefaultTerminationHeadroom, f.TerminationGracePeriodSeconds
		if *g <= maxDurationSeconds {
			headroom = time.Duration(*g)*time.Second - r.Drain()
		}
	}
	if headroom < DefaultTerminationHeadroom {
		out = append(out, fmt.Sprintf(
			"%s leaves %s of headroom after the drain, under %s: the last metrics and spans may not be pushed before the kill",
			name, headroom, DefaultTerminationHeadroom))
	}
	return out
}
