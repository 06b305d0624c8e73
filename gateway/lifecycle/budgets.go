package lifecycle

import (
	"fmt"
	"math"
	"time"
)

const (
	// DefaultRequestTimeout is the longest a client request may run when nothing is set.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultBindingsDrainTimeout is step 4 of the drain when nothing is set.
	DefaultBindingsDrainTimeout = 5 * time.Second
	// DefaultTerminationHeadroom is the room left after the drain for the last metrics
	// and spans to be pushed before the runtime's SIGKILL.
	DefaultTerminationHeadroom = 5 * time.Second
	// MaxBudget bounds every single budget. Longer values are refused: they are typos
	// (seconds written as milliseconds) far more often than intent.
	MaxBudget = time.Hour
)

// Budgets are the durations that govern how a gateway stops, as the user set them. A
// nil pointer means the value was not set and its default applies; see Plan.
type Budgets struct {
	// RequestTimeout is the longest a client request may run.
	RequestTimeout *time.Duration
	// DrainDelay is step 1: how long the listener keeps accepting after readiness
	// turned 503. Unset, it is ReadinessPoll.
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

	// ReadinessPoll is not a budget but an input: how long whatever balances the gateway
	// needs, at worst, to see its readiness 503 (ReadinessPoll(periodSeconds,
	// failureThreshold) of a Kubernetes readiness probe), zero when nothing polls it (a
	// process run by hand or by compose). An unset DrainDelay is one readiness poll,
	// so that the balancer has stopped routing before the listener closes; Warnings
	// compares a set DrainDelay with it.
	ReadinessPoll time.Duration
}

// Plan is what Budgets resolve to: every budget with its default applied, the grace
// period the runtime will really give the process, and where the values that were not
// set came from. It is computed once (per load, per reconcile, per admission) and
// handed to everything that needs a budget, so that no two places derive it apart.
type Plan struct {
	RequestTimeout       time.Duration
	DrainDelay           time.Duration
	ShutdownTimeout      time.Duration
	BindingsDrainTimeout time.Duration
	TerminationHeadroom  time.Duration
	// GracePeriodSeconds is the grace period the runtime gives: the explicit one, else
	// ceil(Drain() + TerminationHeadroom).
	GracePeriodSeconds int64
	// GracePeriodExplicit reports that GracePeriodSeconds was set, not derived.
	GracePeriodExplicit bool
	// DrainDelayFromPoll reports that DrainDelay was unset and is the readiness poll.
	DrainDelayFromPoll bool
	// ReadinessPoll is the input the plan was made with.
	ReadinessPoll time.Duration
}

// Plan applies the defaults: an unset drain delay is the readiness poll, an unset
// shutdown timeout equals the request timeout, and the grace period is the explicit
// one or ceil(delay + shutdown + bindings + headroom) in whole seconds.
func (b Budgets) Plan() Plan {
	p := Plan{
		RequestTimeout:       orDefault(b.RequestTimeout, DefaultRequestTimeout),
		DrainDelay:           orDefault(b.DrainDelay, b.ReadinessPoll),
		BindingsDrainTimeout: orDefault(b.BindingsDrainTimeout, DefaultBindingsDrainTimeout),
		TerminationHeadroom:  orDefault(b.TerminationHeadroom, DefaultTerminationHeadroom),
		DrainDelayFromPoll:   b.DrainDelay == nil,
		ReadinessPoll:        b.ReadinessPoll,
	}
	p.ShutdownTimeout = orDefault(b.ShutdownTimeout, p.RequestTimeout)
	if g := b.TerminationGracePeriodSeconds; g != nil {
		p.GracePeriodSeconds, p.GracePeriodExplicit = *g, true
	} else {
		p.GracePeriodSeconds = ceilSeconds(p.Drain() + p.TerminationHeadroom)
	}
	return p
}

func orDefault(d *time.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return *d
}

// Drain is the longest the drain itself may take: delay + shutdown + bindings.
func (p Plan) Drain() time.Duration {
	return p.DrainDelay + p.ShutdownTimeout + p.BindingsDrainTimeout
}

// maxDurationSeconds is the longest grace period a time.Duration holds (~292 years).
const maxDurationSeconds = math.MaxInt64 / int64(time.Second)

// gracePeriod is GracePeriodSeconds as a duration, and false when it is past what a
// Duration holds (it then outlasts any drain; converting it would wrap).
func (p Plan) gracePeriod() (time.Duration, bool) {
	if p.GracePeriodSeconds > maxDurationSeconds {
		return 0, false
	}
	return time.Duration(p.GracePeriodSeconds) * time.Second, true
}

// Headroom is what the grace period leaves after the drain: TerminationHeadroom, or,
// with an explicit grace period, the grace period minus the drain.
func (p Plan) Headroom() time.Duration {
	if !p.GracePeriodExplicit {
		return p.TerminationHeadroom
	}
	g, ok := p.gracePeriod()
	if !ok {
		return MaxBudget // any headroom past the longest budget reads the same
	}
	return g - p.Drain()
}

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

// TOMLFields are the keys of ferrofed.toml. The headroom is no key: a process never
// sets it, so it keeps its default, and a derived grace period always outlasts the drain.
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
	// Field is the field the problem is reported on, the one a user changes to fix it;
	// Message names every field involved.
	Field   string
	Value   string
	Message string
}

func (p Problem) Error() string { return p.Field + ": " + p.Message }

// Validate returns every rule the budgets break, each naming the fields involved:
//   - every budget is non-negative and at most MaxBudget, and the request timeout is
//     positive (the readiness poll is the caller's input, bounded where it is set: the
//     CRD's probe fields cap it at an hour);
//   - the shutdown timeout is not shorter than the request timeout;
//   - the grace period the runtime will give outlasts the drain (delay + shutdown +
//     bindings). An explicit one is reported on its own field; a derived one,
//     ceil(drain + headroom), fails only with a headroom of 0 on a drain of whole
//     seconds, and is reported on the headroom, the one field that fixes it.
func (b Budgets) Validate(f Fields) []Problem {
	var out []Problem
	p := b.Plan()
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
	if b.ShutdownTimeout != nil && p.ShutdownTimeout < p.RequestTimeout {
		out = append(out, Problem{f.ShutdownTimeout, p.ShutdownTimeout.String(), fmt.Sprintf(
			"%s (%s) must not be shorter than %s (%s): a request accepted just before the listener closes may run for the whole request timeout",
			f.ShutdownTimeout, p.ShutdownTimeout, f.RequestTimeout, p.RequestTimeout)})
	}
	grace, fits := p.gracePeriod()
	switch {
	case p.GracePeriodExplicit && p.GracePeriodSeconds < 0:
		out = append(out, Problem{f.TerminationGracePeriodSeconds, fmt.Sprint(p.GracePeriodSeconds), "must not be negative"})
	case !boundsOK || !fits || grace > p.Drain():
	case p.GracePeriodExplicit:
		out = append(out, Problem{f.TerminationGracePeriodSeconds, fmt.Sprint(p.GracePeriodSeconds), fmt.Sprintf(
			"%s (%ds) must be greater than %s + %s + %s (%s)",
			f.TerminationGracePeriodSeconds, p.GracePeriodSeconds, f.DrainDelay, f.ShutdownTimeout, f.BindingsDrainTimeout, p.Drain())})
	default:
		out = append(out, Problem{f.TerminationHeadroom, p.TerminationHeadroom.String(), fmt.Sprintf(
			"%s (%s) makes the derived grace period, ceil(%s + %s + %s + %s) = %ds, no longer than the drain (%s): the kill would land while the drain may still run; set %s above 0s",
			f.TerminationHeadroom, p.TerminationHeadroom, f.DrainDelay, f.ShutdownTimeout, f.BindingsDrainTimeout,
			f.TerminationHeadroom, p.GracePeriodSeconds, p.Drain(), f.TerminationHeadroom)})
	}
	return out
}

// Warnings are budgets that fit together but are likely to drop requests or lose
// telemetry: a drain delay shorter than the readiness poll that removes the process
// from its balancer, and a grace period that leaves under DefaultTerminationHeadroom
// after the drain.
func (b Budgets) Warnings(f Fields) []string {
	p := b.Plan()
	var out []string
	if p.DrainDelay < p.ReadinessPoll {
		out = append(out, fmt.Sprintf(
			"%s (%s) is shorter than the readiness poll (%s = periodSeconds × failureThreshold): requests routed before the balancer sees the 503 may be refused",
			f.DrainDelay, p.DrainDelay, p.ReadinessPoll))
	}
	name := f.TerminationHeadroom
	if p.GracePeriodExplicit {
		name = f.TerminationGracePeriodSeconds
	}
	if h := p.Headroom(); h < DefaultTerminationHeadroom {
		out = append(out, fmt.Sprintf(
			"%s leaves %s of headroom after the drain, under %s: the last metrics and spans may not be pushed before the kill",
			name, h, DefaultTerminationHeadroom))
	}
	return out
}
