// Package gatewayspec maps a Gateway's spec (api/v1alpha1) onto the gateway's own
// rules: its drain budgets onto gateway/lifecycle's plan, the rest onto the
// ferrofed.toml gateway/config renders and checks, and the operator's image policy. The
// webhook (internal/webhook) and the controllers call the same functions, so that
// admission and a reconcile cannot disagree about a Gateway.
package gatewayspec

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
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

// ReadinessPoll is periodSeconds × failureThreshold of the readiness probe: how long
// the kubelet needs, at worst, to see a draining pod unready.
func ReadinessPoll(s *ferrofedv1alpha1.GatewaySpec) time.Duration {
	r := s.Probes.Readiness
	return lifecycle.ReadinessPoll(ptr.Deref(r.PeriodSeconds, ferrofedv1alpha1.DefaultReadinessPeriodSeconds),
		ptr.Deref(r.FailureThreshold, ferrofedv1alpha1.DefaultReadinessFailureThreshold))
}

func durationPtr(d *metav1.Duration) *time.Duration {
	if d == nil {
		return nil
	}
	v := d.Duration // a copy: the budgets never alias the spec
	return &v
}

// Budgets maps the spec's drain budgets onto gateway/lifecycle's, with the readiness
// poll as lifecycle's input: every rule and default (an unset drainDelay is one poll)
// is lifecycle's, applied by Budgets.Plan.
func Budgets(s *ferrofedv1alpha1.GatewaySpec) lifecycle.Budgets {
	l := s.Lifecycle
	return lifecycle.Budgets{
		RequestTimeout:                durationPtr(l.RequestTimeout),
		DrainDelay:                    durationPtr(l.DrainDelay),
		ShutdownTimeout:               durationPtr(l.ShutdownTimeout),
		BindingsDrainTimeout:          durationPtr(l.BindingsDrainTimeout),
		TerminationHeadroom:           durationPtr(l.TerminationHeadroom),
		TerminationGracePeriodSeconds: l.TerminationGracePeriodSeconds,
		ReadinessPoll:                 ReadinessPoll(s),
	}
}

// Plan is the spec's lifecycle plan: made once per reconcile and per admission, and
// handed to the renderer, the Deployment builder and the status.
func Plan(s *ferrofedv1alpha1.GatewaySpec) lifecycle.Plan { return Budgets(s).Plan() }

// ValidateLifecycle runs lifecycle.Budgets.Validate on the spec's budgets and returns
// its problems as field errors on the spec's field paths.
func ValidateLifecycle(s *ferrofedv1alpha1.GatewaySpec) field.ErrorList {
	var errs field.ErrorList
	for _, p := range Budgets(s).Validate(LifecycleFields) {
		errs = append(errs, field.Invalid(problemPath(p.Field), p.Value, p.Message))
	}
	return errs
}

// LifecycleWarnings are lifecycle's warnings on the spec's budgets.
func LifecycleWarnings(s *ferrofedv1alpha1.GatewaySpec) []string {
	return Budgets(s).Warnings(LifecycleFields)
}

func problemPath(name string) *field.Path {
	parts := strings.Split(name, ".")
	return field.NewPath(parts[0], parts[1:]...)
}

// Breakdown is where a plan's grace period comes from, for the status.
func Breakdown(p lifecycle.Plan) ferrofedv1alpha1.GracePeriodBreakdown {
	return ferrofedv1alpha1.GracePeriodBreakdown{
		DrainDelay:           p.DrainDelay.String(),
		DrainDelayDerived:    p.DrainDelayFromPoll,
		ShutdownTimeout:      p.ShutdownTimeout.String(),
		BindingsDrainTimeout: p.BindingsDrainTimeout.String(),
		TerminationHeadroom:  p.TerminationHeadroom.String(),
		Explicit:             p.GracePeriodExplicit,
	}
}

// wholeMilliseconds reports whether d is a whole number of milliseconds, the unit of
// ferrofed.toml.
func wholeMilliseconds(d time.Duration) bool {
	return d%time.Millisecond == 0
}
