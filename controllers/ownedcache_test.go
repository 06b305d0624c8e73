package controllers

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The reconciler reads an owned Deployment, Service or PodDisruptionBudget from the
// compact cache as the trimmed object it was, a missing one as NotFound, and what it
// reads is its own: changing it leaves the cache as it was.
func TestCachedReadsExpandTheCompactOwnedObjects(t *testing.T) {
	store := func(objs ...client.Object) toolscache.Store {
		s := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
		for _, o := range objs {
			out, err := trimForCache(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Add(out); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	owner := []metav1.OwnerReference{{APIVersion: "ferrofed.io/v1alpha1", Kind: "Gateway", Name: "gw", UID: "u", Controller: ptr.To(true)}}
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: "gw", Generation: 4, OwnerReferences: owner, Labels: map[string]string{LabelManagedBy: FieldOwner},
			Annotations: map[string]string{AnnotationAppliedConfig: "{}"}}
	}
	dep := &appsv1.Deployment{ObjectMeta: meta(), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: ContainerName}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 4, Replicas: 3, ReadyReplicas: 2, UpdatedReplicas: 3,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable}}}}
	svc := &corev1.Service{ObjectMeta: meta(), Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1"}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: meta()}
	r := cachedReads{compactStores: compactStores{deployments: store(dep), services: store(svc), budgets: store(pdb)}}
	key := types.NamespacedName{Namespace: "ns", Name: "gw"}
	ctx := context.Background()

	got := &appsv1.Deployment{}
	if err := r.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(got.Spec.Replicas, 0) != 3 || got.Status.ReadyReplicas != 2 || got.Status.ObservedGeneration != 4 || got.Generation != 4 ||
		!controlledByName(got, "gw") || !IsTrimmedForCache(got) || len(got.Spec.Template.Spec.Containers) != 0 || len(got.Status.Conditions) != 0 {
		t.Errorf("the Deployment read from the cache = %+v", got)
	}
	*got.Spec.Replicas, got.OwnerReferences[0].Name = 9, "other"
	again := &appsv1.Deployment{}
	if err := r.Get(ctx, key, again); err != nil || ptr.Deref(again.Spec.Replicas, 0) != 3 || again.OwnerReferences[0].Name != "gw" {
		t.Errorf("changing what was read changed the cache: %+v (%v)", again, err)
	}
	s, b := &corev1.Service{}, &policyv1.PodDisruptionBudget{}
	if err := r.Get(ctx, key, s); err != nil || s.Spec.ClusterIP != "" || !controlledByName(s, "gw") || !IsTrimmedForCache(s) {
		t.Errorf("the Service read from the cache = %+v (%v), want its metadata only", s, err)
	}
	if err := r.Get(ctx, key, b); err != nil || !controlledByName(b, "gw") {
		t.Errorf("the PodDisruptionBudget read from the cache = %+v (%v)", b, err)
	}
	if err := r.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "none"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Service the cache does not hold: %v, want NotFound", err)
	}
}

func controlledByName(o client.Object, name string) bool {
	c := metav1.GetControllerOf(o)
	return c != nil && c.Name == name && c.Kind == "Gateway"
}
