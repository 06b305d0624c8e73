package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// Defaults of the spec, the same values as the +kubebuilder:default markers: the
// apiserver applies the markers, these apply to objects built in Go (tests, tools)
// that never went through an apiserver.
const (
	DefaultReplicas                  int32 = 1
	DefaultBasePath                        = "/"
	DefaultPort                      int32 = 8080
	DefaultConfigMapKey                    = "ferrofed.toml"
	DefaultReadinessPeriodSeconds    int32 = 5
	DefaultReadinessFailureThreshold int32 = 2
	DefaultReadinessTimeoutSeconds   int32 = 1
	DefaultStartupPeriodSeconds      int32 = 2
	DefaultStartupFailureThreshold   int32 = 30
	DefaultStartupTimeoutSeconds     int32 = 1
	DefaultLivenessPeriodSeconds     int32 = 10
	DefaultLivenessFailureThreshold  int32 = 3
	DefaultLivenessTimeoutSeconds    int32 = 1
)

// LifecycleFields names the budgets by their field paths in a Gateway, for
// lifecycle.Budgets.Validate and Warnings.
var LifecycleFields = lifecycle.Fields{
	RequestTimeout:                "spec.lifecycle.requestTimeout",
	DrainDelay:                    "spec.lifecycle.drainDelay",
	ShutdownTimeout:               "spec.lifecycle.shutdownTimeout",
	BindingsDrainTimeout:          "spec.lifecycle.bindingsDrainTimeout",
	TerminationHeadroom:           "spec.lifecycle.terminationHeadroom",
	TerminationGracePeriodSeconds: "spec.lifecycle.terminationGracePeriodSeconds",
}

// derivedGraceField names the derived grace period in problems. A problem with it is
// reported on spec.lifecycle.terminationHeadroom, the one field that can fix it.
const derivedGraceField = "the derived terminationGracePeriodSeconds, ceil(drain + spec.lifecycle.terminationHeadroom),"

func orInt32(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// ReadinessPoll is periodSeconds × failureThreshold of the readiness probe: how long
// the kubelet needs, at worst, to see a draining pod unready.
func (s *GatewaySpec) ReadinessPoll() time.Duration {
	r := s.Probes.Readiness
	return lifecycle.ReadinessPoll(orInt32(r.PeriodSeconds, DefaultReadinessPeriodSeconds),
		orInt32(r.FailureThreshold, DefaultReadinessFailureThreshold))
}

func durationPtr(d *metav1.Duration) *time.Duration {
	if d == nil {
		return nil
	}
	v := d.Duration
	return &v
}

// Budgets are the spec's drain budgets for gateway/lifecycle: an unset drainDelay is
// the readiness poll, every other unset field is left to lifecycle's defaults (the same
// values as the CRD's), and terminationGracePeriodSeconds is the explicit one or nil.
func (s *GatewaySpec) Budgets() lifecycle.Budgets {
	l := s.Lifecycle
	b := lifecycle.Budgets{
		RequestTimeout:                durationPtr(l.RequestTimeout),
		DrainDelay:                    durationPtr(l.DrainDelay),
		ShutdownTimeout:               durationPtr(l.ShutdownTimeout),
		BindingsDrainTimeout:          durationPtr(l.BindingsDrainTimeout),
		TerminationHeadroom:           durationPtr(l.TerminationHeadroom),
		TerminationGracePeriodSeconds: l.TerminationGracePeriodSeconds,
	}
	if b.DrainDelay == nil {
		poll := s.ReadinessPoll()
		b.DrainDelay = &poll
	}
	return b
}

// PodBudgets are Budgets with the grace period the pod actually gets, explicit or
// derived. Validating them refuses a derived grace period that does not outlast the
// drain (headroom 0s on a whole-second drain), as `config check` on the rendered
// ferrofed.toml, which carries that grace period, would.
func (s *GatewaySpec) PodBudgets() lifecycle.Budgets {
	b := s.Budgets()
	g := b.Resolve().GracePeriodSeconds()
	b.TerminationGracePeriodSeconds = &g
	return b
}

// ValidateLifecycle runs lifecycle.Budgets.Validate on the pod's budgets and returns
// its problems as field errors on the spec's field paths.
func (s *GatewaySpec) ValidateLifecycle() field.ErrorList {
	fields := LifecycleFields
	if s.Lifecycle.TerminationGracePeriodSeconds == nil {
		fields.TerminationGracePeriodSeconds = derivedGraceField
	}
	var errs field.ErrorList
	for _, p := range s.PodBudgets().Validate(fields) {
		value := p.Value
		if p.Field == derivedGraceField {
			value = s.Budgets().Resolve().TerminationHeadroom.String() // the field it is reported on
		}
		errs = append(errs, field.Invalid(problemPath(p.Field), value, p.Message))
	}
	return errs
}

// LifecycleWarnings are lifecycle's warnings on the spec's budgets (the explicit grace
// period only, so that a headroom under 5s is seen even where the derived grace
// period's rounding up hides it).
func (s *GatewaySpec) LifecycleWarnings() []string {
	return s.Budgets().Warnings(LifecycleFields, s.ReadinessPoll())
}

func problemPath(name string) *field.Path {
	if name == derivedGraceField {
		name = LifecycleFields.TerminationHeadroom
	}
	parts := strings.Split(name, ".")
	return field.NewPath(parts[0], parts[1:]...)
}

// GracePeriod is the grace period the pod gets and its breakdown, for the Deployment
// and the status.
func (s *GatewaySpec) GracePeriod() (int64, GracePeriodBreakdown) {
	r := s.Budgets().Resolve()
	return r.GracePeriodSeconds(), GracePeriodBreakdown{
		DrainDelay:           r.DrainDelay.String(),
		DrainDelayDerived:    s.Lifecycle.DrainDelay == nil,
		ShutdownTimeout:      r.ShutdownTimeout.String(),
		BindingsDrainTimeout: r.BindingsDrainTimeout.String(),
		TerminationHeadroom:  r.TerminationHeadroom.String(),
		Explicit:             r.ExplicitGracePeriodSeconds != nil,
	}
}

// wholeMilliseconds reports whether d is a whole number of milliseconds, the unit of
// ferrofed.toml.
func wholeMilliseconds(d time.Duration) bool {
	return d%time.Millisecond == 0
}
