package controllers

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

func TestCacheKeepsOnlyWhatTheReconcilerReads(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: FieldOwner}, {Manager: "kube-controller-manager"}, {Manager: "kubectl"}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ManagedFields: managed,
		Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: "{}"}}}
	if _, err := trimForCache(dep); err != nil {
		t.Fatal(err)
	}
	if len(dep.ManagedFields) != 1 || dep.ManagedFields[0].Manager != FieldOwner {
		t.Errorf("managedFields = %+v, want the operator's entry only", dep.ManagedFields)
	}
	if _, ok := dep.Annotations[corev1.LastAppliedConfigAnnotation]; !ok {
		t.Errorf("a Deployment lost an annotation the operator does not own")
	}
	gw := &ferrofedv1alpha1.Gateway{ObjectMeta: metav1.ObjectMeta{
		Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "keep": "me"}}}
	if _, err := trimForCache(gw); err != nil {
		t.Fatal(err)
	}
	if _, ok := gw.Annotations[corev1.LastAppliedConfigAnnotation]; ok || gw.Annotations["keep"] != "me" {
		t.Errorf("Gateway annotations = %v, want only kubectl's last-applied configuration gone", gw.Annotations)
	}
	if out, err := trimForCache("not an object"); err != nil || out != "not an object" {
		t.Errorf("a tombstone was changed: %v %v", out, err)
	}
}
