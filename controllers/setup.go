package controllers

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// Setup registers the GatewayReconciler with mgr and, when webhook is true, the
// Gateway validating webhook on mgr's webhook server.
func Setup(mgr ctrl.Manager, webhook bool) error {
	r := &GatewayReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(FieldOwner)}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the Gateway controller: %w", err)
	}
	if webhook {
		if err := ferrofedv1alpha1.SetupWebhookWithManager(mgr); err != nil {
			return fmt.Errorf("set up the Gateway webhook: %w", err)
		}
	}
	return nil
}

// The metrics endpoint of `ferrofed operator` authenticates and authorizes its callers.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
