package controllers

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// DefaultMaxConcurrentReconciles is how many Gateways are reconciled at once: each
// reconcile mostly waits on the apiserver, so a few in parallel keep a large
// fleet's first rollout short.
const DefaultMaxConcurrentReconciles = 4

// Options tune Setup.
type Options struct {
	// Webhook registers the validating webhook on the manager's webhook server.
	Webhook bool
	// MaxConcurrentReconciles defaults to DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
}

// Setup registers the GatewayReconciler with mgr and, when asked, the Gateway
// validating webhook on mgr's webhook server.
func Setup(mgr ctrl.Manager, o Options) error {
	r := &GatewayReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(FieldOwner)}
	if err := r.SetupWithManager(mgr, o.MaxConcurrentReconciles); err != nil {
		return fmt.Errorf("set up the Gateway controller: %w", err)
	}
	if o.Webhook {
		if err := ferrofedv1alpha1.SetupWebhookWithManager(mgr); err != nil {
			return fmt.Errorf("set up the Gateway webhook: %w", err)
		}
	}
	return nil
}

// The metrics endpoint of `ferrofed operator` authenticates and authorizes its callers.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
