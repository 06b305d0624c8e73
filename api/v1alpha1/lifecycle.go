package v1alpha1

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// Defaults of the spec, the same values as the +default markers: the
// apiserver applies the markers, these apply to objects built in Go (tests, tools)
// that never went through an apiserver.
const (
	DefaultReplicas                  int32 = 1
	DefaultBasePath                        = "/"
	DefaultPort                      int32 = 8080
	DefaultConfigMapKey                    = "ferrofed.toml"
	DefaultClientCAKey                     = "ca.crt"
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

// ReplicasOrDefault is spec.replicas with its default applied.
func (s *GatewaySpec) ReplicasOrDefault() int32 { return ptr.Deref(s.Replicas, DefaultReplicas) }

// PortOrDefault is spec.port with its default applied.
func (s *GatewaySpec) PortOrDefault() int32 {
	if s.Port == 0 {
		return DefaultPort
	}
	return s.Port
}

// BasePathOrDefault is spec.basePath with its default applied.
func (s *GatewaySpec) BasePathOrDefault() string {
	if s.BasePath == "" {
		return DefaultBasePath
	}
	return s.BasePath
}

// ClientCertificatesRequired reports whether the listener requires client
// certificates (spec.tls.clientCASecret): the probes are then exec probes.
func (s *GatewaySpec) ClientCertificatesRequired() bool {
	return s.TLS != nil && s.TLS.ClientCASecret != nil
}

// KeyOrDefault is the key with its default applied.
func (r *SecretKeyRef) KeyOrDefault() string {
	if r.Key == "" {
		return DefaultClientCAKey
	}
	return r.Key
}

// ReadinessPoll is periodSeconds × failureThreshold of the readiness probe: how long
// the kubelet needs, at worst, to see a draining pod unready.
func (s *GatewaySpec) ReadinessPoll() time.Duration {
	r := s.Probes.Readiness
	return lifecycle.ReadinessPoll(ptr.Deref(r.PeriodSeconds, DefaultReadinessPeriodSeconds),
		ptr.Deref(r.FailureThreshold, DefaultReadinessFailureThreshold))
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
func (s *GatewaySpec) Budgets() lifecycle.Budgets {
	l := s.Lifecycle
	return lifecycle.Budgets{
		RequestTimeout:                durationPtr(l.RequestTimeout),
		DrainDelay:                    durationPtr(l.DrainDelay),
		ShutdownTimeout:               durationPtr(l.ShutdownTimeout),
		BindingsDrainTimeout:          durationPtr(l.BindingsDrainTimeout),
		TerminationHeadroom:           durationPtr(l.TerminationHeadroom),
		TerminationGracePeriodSeconds: l.TerminationGracePeriodSeconds,
		ReadinessPoll:                 s.ReadinessPoll(),
	}
}

// Plan is the spec's lifecycle plan: made once per reconcile and per admission, and
// handed to the renderer, the Deployment builder and the status.
func (s *GatewaySpec) Plan() lifecycle.Plan { return s.Budgets().Plan() }

// ValidateLifecycle runs lifecycle.Budgets.Validate on the spec's budgets and returns
// its problems as field errors on the spec's field paths.
func (s *GatewaySpec) ValidateLifecycle() field.ErrorList {
	var errs field.ErrorList
	for _, p := range s.Budgets().Validate(LifecycleFields) {
		errs = append(errs, field.Invalid(problemPath(p.Field), p.Value, p.Message))
	}
	return errs
}

// LifecycleWarnings are lifecycle's warnings on the spec's budgets.
func (s *GatewaySpec) LifecycleWarnings() []string {
	return s.Budgets().Warnings(LifecycleFields)
}

func problemPath(name string) *field.Path {
	parts := strings.Split(name, ".")
	return field.NewPath(parts[0], parts[1:]...)
}

// Breakdown is where a plan's grace period comes from, for the status.
func Breakdown(p lifecycle.Plan) GracePeriodBreakdown {
	return GracePeriodBreakdown{
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
