package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

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

// CacheOptions keep the informers' copies small: of every object's managedFields only
// FieldOwner's entries stay (the reconciler extracts those and nothing else), and a
// Gateway loses kubectl's last-applied-configuration, a second copy of its spec that
// the reconciler never reads. The trimmed copies must never be sent back whole (an
// Update would reset the other managers' fields): the reconciler only applies, patches
// status and deletes.
func CacheOptions() cache.Options {
	return cache.Options{DefaultTransform: trimForCache}
}

func trimForCache(in any) (any, error) {
	obj, ok := in.(metav1.Object)
	if !ok {
		return in, nil // e.g. cache.DeletedFinalStateUnknown
	}
	if mf := obj.GetManagedFields(); len(mf) > 0 {
		kept := mf[:0:0]
		for _, e := range mf {
			if e.Manager == FieldOwner {
				kept = append(kept, e)
			}
		}
		obj.SetManagedFields(kept)
	}
	if _, isGateway := in.(*ferrofedv1alpha1.Gateway); isGateway {
		if a := obj.GetAnnotations(); a != nil {
			if _, has := a[corev1.LastAppliedConfigAnnotation]; has {
				trimmed := make(map[string]string, len(a)-1)
				for k, v := range a {
					if k != corev1.LastAppliedConfigAnnotation {
						trimmed[k] = v
					}
				}
				obj.SetAnnotations(trimmed)
			}
		}
	}
	return in, nil
}
