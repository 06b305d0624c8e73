package operator_test

import (
	"context"
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// TestCRDDefaultsAreTheGoDefaults pins the +kubebuilder:default markers to the Go
// constants the builders and the webhook use for unset fields, so that an object the
// apiserver defaulted and one built in Go mean the same (the admission table sends the
// webhook objects built in Go).
func TestCRDDefaultsAreTheGoDefaults(t *testing.T) {
	needControlPlane(t)
	gw := newGateway("cel-only", "defaults", nil)
	if err := k8s.Create(context.Background(), gw, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	s, l, p := gw.Spec, gw.Spec.Lifecycle, gw.Spec.Probes
	checks := []struct {
		field     string
		got, want any
	}{
		// Not defaulted in the object, so that spec.autoscaling can be set without it;
		// ReplicasOrDefault reads it as DefaultReplicas.
		{"replicas is unset (1 in Go)", s.Replicas == nil && s.ReplicasOrDefault() == ferrofedv1alpha1.DefaultReplicas, true},
		{"basePath", s.BasePath, ferrofedv1alpha1.DefaultBasePath},
		{"port", s.Port, ferrofedv1alpha1.DefaultPort},
		{"lifecycle.requestTimeout", l.RequestTimeout.Duration, lifecycle.DefaultRequestTimeout},
		{"lifecycle.bindingsDrainTimeout", l.BindingsDrainTimeout.Duration, lifecycle.DefaultBindingsDrainTimeout},
		{"lifecycle.terminationHeadroom", l.TerminationHeadroom.Duration, lifecycle.DefaultTerminationHeadroom},
		{"lifecycle.drainDelay is unset (derived)", l.DrainDelay == nil, true},
		{"lifecycle.shutdownTimeout is unset (= requestTimeout)", l.ShutdownTimeout == nil, true},
		{"probes.readiness.periodSeconds", ptr.Deref(p.Readiness.PeriodSeconds, -1), ferrofedv1alpha1.DefaultReadinessPeriodSeconds},
		{"probes.readiness.failureThreshold", ptr.Deref(p.Readiness.FailureThreshold, -1), ferrofedv1alpha1.DefaultReadinessFailureThreshold},
		{"probes.readiness.timeoutSeconds", ptr.Deref(p.Readiness.TimeoutSeconds, -1), ferrofedv1alpha1.DefaultReadinessTimeoutSeconds},
		{"probes.startup.periodSeconds", ptr.Deref(p.Startup.PeriodSeconds, -1), ferrofedv1alpha1.DefaultStartupPeriodSeconds},
		{"probes.startup.failureThreshold", ptr.Deref(p.Startup.FailureThreshold, -1), ferrofedv1alpha1.DefaultStartupFailureThreshold},
		{"probes.startup.timeoutSeconds", ptr.Deref(p.Startup.TimeoutSeconds, -1), ferrofedv1alpha1.DefaultStartupTimeoutSeconds},
		{"probes.startup.initialDelaySeconds", ptr.Deref(p.Startup.InitialDelaySeconds, -1), int32(0)},
		{"probes.liveness.periodSeconds", ptr.Deref(p.Liveness.PeriodSeconds, -1), ferrofedv1alpha1.DefaultLivenessPeriodSeconds},
		{"probes.liveness.failureThreshold", ptr.Deref(p.Liveness.FailureThreshold, -1), ferrofedv1alpha1.DefaultLivenessFailureThreshold},
		{"probes.liveness.timeoutSeconds", ptr.Deref(p.Liveness.TimeoutSeconds, -1), ferrofedv1alpha1.DefaultLivenessTimeoutSeconds},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("spec.%s defaults to %v in the CRD, %v in Go", c.field, c.got, c.want)
		}
	}
}
