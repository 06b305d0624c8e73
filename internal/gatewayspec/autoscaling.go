package gatewayspec

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// The CEL rules of spec.autoscaling and spec.topologySpreadConstraints, word for word
// (api/v1alpha1/gateway_types.go): the webhook refuses with the same messages.
const (
	replicasAndAutoscalingMessage = "spec.replicas and spec.autoscaling are mutually exclusive: with spec.autoscaling the HorizontalPodAutoscaler sets the number of pods between minReplicas and maxReplicas; remove spec.replicas, or spec.autoscaling"
	autoscalingSpoolClaimMessage  = "spec.autoscaling is not supported with spec.audit.spool.volumeClaimTemplate: the operator picks the spool claims to hand over and delete by spec.replicas, and every scale-down of an autoscaler would hand one over (a Job, then a new volume at the next scale-up); set spec.replicas, or keep the emptyDir spool"
	autoscalingCPURequestMessage  = "spec.autoscaling's CPU target (targetCPUUtilizationPercentage, 80 when no target is set) is a share of the CPU request: spec.resources sets no cpu in requests or limits; add spec.resources.requests.cpu, or leave spec.resources empty for the operator's default requests"
	autoscalingMemRequestMessage  = "spec.autoscaling.targetMemoryUtilizationPercentage is a share of the memory request: spec.resources sets no memory in requests or limits; add spec.resources.requests.memory, or leave spec.resources empty for the operator's default requests"
	maxBelowMinMessage            = "spec.autoscaling.maxReplicas must be at least spec.autoscaling.minReplicas"
	spreadConstraintMessage       = "spec.topologySpreadConstraints: every constraint needs maxSkew of at least 1 and whenUnsatisfiable DoNotSchedule or ScheduleAnyway"
)

// validateAutoscaling is the Go twin of the CEL rules and bounds of spec.autoscaling
// and spec.topologySpreadConstraints, each refusal naming its fields.
func validateAutoscaling(s *ferrofedv1alpha1.GatewaySpec) field.ErrorList {
	errs := validateSpread(s.TopologySpreadConstraints)
	a := s.Autoscaling
	if a == nil {
		return errs
	}
	path := field.NewPath("spec", "autoscaling")
	if s.Replicas != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec", "replicas"), *s.Replicas, replicasAndAutoscalingMessage))
	}
	if s.PersistentSpool() {
		errs = append(errs, field.Invalid(path, "volumeClaimTemplate", autoscalingSpoolClaimMessage))
	}
	for _, b := range []struct {
		name  string
		value *int32
		max   int32
	}{
		{"minReplicas", &a.MinReplicas, ferrofedv1alpha1.MaxAutoscalingReplicas},
		{"maxReplicas", &a.MaxReplicas, ferrofedv1alpha1.MaxAutoscalingReplicas},
		{"targetCPUUtilizationPercentage", a.TargetCPUUtilizationPercentage, 100},
		{"targetMemoryUtilizationPercentage", a.TargetMemoryUtilizationPercentage, 100},
	} {
		if b.value != nil && (*b.value < 1 || *b.value > b.max) {
			errs = append(errs, field.Invalid(path.Child(b.name), *b.value, fmt.Sprintf("spec.autoscaling.%s must be from 1 to %d", b.name, b.max)))
		}
	}
	if a.MaxReplicas < a.MinReplicas {
		errs = append(errs, field.Invalid(path.Child("maxReplicas"), a.MaxReplicas, maxBelowMinMessage))
	}
	if _, cpu := a.CPUTarget(); cpu && !requested(s.Resources, corev1.ResourceCPU) {
		errs = append(errs, field.Invalid(path, "no cpu request", autoscalingCPURequestMessage))
	}
	if a.TargetMemoryUtilizationPercentage != nil && !requested(s.Resources, corev1.ResourceMemory) {
		errs = append(errs, field.Invalid(path, "no memory request", autoscalingMemRequestMessage))
	}
	return errs
}

// requested reports whether the gateway container gets a request of name: spec.resources
// empty (the operator's default requests, cpu and memory), or name in its requests or
// limits (a limit is the request's default).
func requested(r corev1.ResourceRequirements, name corev1.ResourceName) bool {
	if len(r.Requests) == 0 && len(r.Limits) == 0 && len(r.Claims) == 0 {
		return true
	}
	_, inRequests := r.Requests[name]
	_, inLimits := r.Limits[name]
	return inRequests || inLimits
}

// validateSpread is the Go twin of spec.topologySpreadConstraints' bound and rule.
func validateSpread(cs []corev1.TopologySpreadConstraint) field.ErrorList {
	path := field.NewPath("spec", "topologySpreadConstraints")
	if len(cs) > ferrofedv1alpha1.MaxTopologySpreadConstraints {
		return field.ErrorList{field.TooMany(path, len(cs), ferrofedv1alpha1.MaxTopologySpreadConstraints)}
	}
	for i, c := range cs {
		if c.MaxSkew < 1 || (c.WhenUnsatisfiable != corev1.DoNotSchedule && c.WhenUnsatisfiable != corev1.ScheduleAnyway) {
			return field.ErrorList{field.Invalid(path.Index(i), c.TopologyKey, spreadConstraintMessage)}
		}
	}
	return nil
}
