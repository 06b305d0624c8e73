package operator_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
)

// TestOperatorCacheDropsForeignManagedFields reads the manager's own cache, built from
// controllers.ManagerOptions exactly as `ferrofed operator` builds it, and compares it
// with the apiserver: managedFields, the Deployment's spec and a Gateway's
// last-applied configuration are in the apiserver's copy and not in the cached one,
// which still has what the reconciler reads (owner, generation, status).
func TestOperatorCacheDropsForeignManagedFields(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "cache-trim"}
	gw := newGateway(key.Namespace, key.Name, nil)
	gw.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: `{"spec":{"image":"a copy of the spec"}}`}
	if err := k8s.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	reconciled(ctx, t, key)
	// Another manager takes a field of the Deployment: its managedFields entry is on
	// the apiserver's copy.
	other := appsv1ac.Deployment(key.Name, key.Namespace).WithLabels(map[string]string{"example.org/team": "clinical"})
	if err := k8s.Apply(ctx, other, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}

	live := &appsv1.Deployment{}
	if err := k8s.Get(ctx, key, live); err != nil {
		t.Fatal(err)
	}
	if !hasManager(live.ManagedFields, "someone-else") || !hasManager(live.ManagedFields, controllers.FieldOwner) {
		t.Fatalf("the apiserver's Deployment has managers %v, want someone-else and %s", managers(live.ManagedFields), controllers.FieldOwner)
	}
	// Read as the reconciler reads it: the cache keeps it compact (controllers.CachedReader).
	reader, err := controllers.CachedReader(ctx, managerCache)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "the cached Deployment has the other manager's label and only the operator's managedFields", func() error {
		cached := &appsv1.Deployment{}
		if err := reader.Get(ctx, key, cached); err != nil {
			return err
		}
		if cached.ResourceVersion != live.ResourceVersion {
			return fmt.Errorf("the cache has not seen the other manager's apply yet")
		}
		if got := managers(cached.ManagedFields); len(got) != 0 {
			return fmt.Errorf("cached managers %v, want none", got)
		}
		if len(cached.Spec.Template.Spec.Containers) != 0 || len(live.Spec.Template.Spec.Containers) == 0 {
			return fmt.Errorf("the cached Deployment has %d containers, the apiserver's %d: want the template in the apiserver's copy only",
				len(cached.Spec.Template.Spec.Containers), len(live.Spec.Template.Spec.Containers))
		}
		if !controllers.IsTrimmedForCache(cached) {
			return fmt.Errorf("the cached Deployment has no digest of its managed fields")
		}
		return nil
	})

	cachedGW := &ferrofedv1alpha1.Gateway{}
	if err := managerCache.Get(ctx, key, cachedGW); err != nil {
		t.Fatal(err)
	}
	if _, has := cachedGW.Annotations[corev1.LastAppliedConfigAnnotation]; has {
		t.Errorf("the cached Gateway kept kubectl's last-applied configuration")
	}
	if got := managers(cachedGW.ManagedFields); len(got) != 0 {
		t.Errorf("the cached Gateway kept managedFields of %v", got)
	}
	liveGW := getGateway(ctx, t, key)
	if _, has := liveGW.Annotations[corev1.LastAppliedConfigAnnotation]; !has {
		t.Errorf("the apiserver's Gateway lost its last-applied configuration: the trim must touch the cache only")
	}
}

func managers(mf []metav1.ManagedFieldsEntry) []string {
	out := make([]string, 0, len(mf))
	for _, e := range mf {
		out = append(out, e.Manager)
	}
	return out
}

func hasManager(mf []metav1.ManagedFieldsEntry, name string) bool {
	for _, e := range mf {
		if e.Manager == name {
			return true
		}
	}
	return false
}
