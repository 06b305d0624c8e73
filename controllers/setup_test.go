package controllers

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// liveDeployment is a Deployment as the apiserver serves it: FieldOwner manages its
// replicas and a label, another manager a label of its own.
func liveDeployment(replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw", Generation: 3,
			Labels:      map[string]string{LabelManagedBy: FieldOwner, "example.org/team": "clinical"},
			Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: "{}"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: FieldOwner, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1", FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:app.kubernetes.io/managed-by":{}}},"f:spec":{"f:replicas":{}}}`)},
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1", FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:example.org/team":{}}}}`)},
			}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: ContainerName, Image: "example.org/gateway", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, ReadyReplicas: 2, UpdatedReplicas: 2,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Message: "a long message"}}},
	}
}

// The cached copy of an owned object answers sameAsLive exactly as the full object
// does, while holding neither its spec nor any managedFields.
func TestCachedOwnedObjectKeepsOnlyTheDigestOfItsManagedFields(t *testing.T) {
	desired := func(replicas int32) *appsv1ac.DeploymentApplyConfiguration {
		return appsv1ac.Deployment("gw", "ns").WithLabels(map[string]string{LabelManagedBy: FieldOwner}).
			WithSpec(appsv1ac.DeploymentSpec().WithReplicas(replicas))
	}
	full := liveDeployment(2)
	cachedAny, err := trimForCache(liveDeployment(2))
	if err != nil {
		t.Fatal(err)
	}
	cached := cachedAny.(*appsv1.Deployment)
	if len(cached.ManagedFields) != 0 || len(cached.Spec.Template.Spec.Containers) != 0 || cached.Spec.Replicas != nil {
		t.Errorf("the cached Deployment kept managedFields %v or its spec %+v", managers(cached.ManagedFields), cached.Spec)
	}
	if cached.Status.ReadyReplicas != 2 || cached.Status.UpdatedReplicas != 2 || cached.Status.ObservedGeneration != 3 || cached.Generation != 3 || len(cached.Status.Conditions) != 0 {
		t.Errorf("the cached Deployment's generation and status counters = %d %+v, want them kept (and no conditions)", cached.Generation, cached.Status)
	}
	if len(cached.Labels) != 0 || len(cached.Annotations) != 1 || cached.Name != "gw" || cached.Namespace != "ns" {
		t.Errorf("the cached Deployment kept labels %v or annotations %v, or lost its name", cached.Labels, cached.Annotations)
	}
	for _, replicas := range []int32{2, 3} {
		fromFull, err := sameAsLive(full, desired(replicas))
		if err != nil {
			t.Fatal(err)
		}
		fromCache, err := sameAsLive(cached, desired(replicas))
		if err != nil {
			t.Fatal(err)
		}
		if fromFull != (replicas == 2) || fromCache != fromFull {
			t.Errorf("replicas %d: same as the full object %v, as the cached one %v; want %v for both", replicas, fromFull, fromCache, replicas == 2)
		}
	}
	// A second pass (a transform of a cached copy) changes nothing.
	again, _ := trimForCache(cached.DeepCopy())
	if again.(*appsv1.Deployment).Annotations[managedSumKey] != cached.Annotations[managedSumKey] {
		t.Errorf("trimming twice changed the digest")
	}
}

func TestCacheKeepsOnlyWhatTheReconcilerReads(t *testing.T) {
	gw := &ferrofedv1alpha1.Gateway{ObjectMeta: metav1.ObjectMeta{
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: FieldOwner}, {Manager: "kubectl"}},
		Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "keep": "me"}}}
	if _, err := trimForCache(gw); err != nil {
		t.Fatal(err)
	}
	if _, ok := gw.Annotations[corev1.LastAppliedConfigAnnotation]; ok || gw.Annotations["keep"] != "me" {
		t.Errorf("Gateway annotations = %v, want only kubectl's last-applied configuration gone", gw.Annotations)
	}
	if len(gw.ManagedFields) != 0 {
		t.Errorf("the cached Gateway kept managedFields %v", managers(gw.ManagedFields))
	}

	pm := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "cm", Labels: map[string]string{"a": "b"},
		Annotations: map[string]string{"kubernetes.io/description": "long"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: FieldOwner}}}}
	if _, err := trimForCache(pm); err != nil {
		t.Fatal(err)
	}
	if pm.Annotations != nil || pm.ManagedFields != nil || pm.Labels["a"] != "b" {
		t.Errorf("ConfigMap metadata = %+v, want its labels only", pm.ObjectMeta)
	}

	finished := metav1.NewTime(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))
	deleted := metav1.NewTime(finished.Add(-5 * time.Second))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gw-1", Namespace: "ns", UID: "u1", DeletionTimestamp: &deleted, DeletionGracePeriodSeconds: ptr.To[int64](30),
			Labels: map[string]string{LabelManagedBy: FieldOwner, LabelInstance: "gw"}, Annotations: map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](30), NodeName: "node",
			Containers: []corev1.Container{{Name: ContainerName, Image: "example.org/gateway", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
			Volumes:    []corev1.Volume{{Name: "v"}}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: ContainerName, Image: "example.org/gateway", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 137, FinishedAt: finished}}},
				{Name: "sidecar", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
			}},
	}
	want, ok := drainOf(pod.DeepCopy())
	if !ok {
		t.Fatal("no drain read from the full pod")
	}
	if _, err := trimForCache(pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Containers) != 0 || len(pod.Spec.Volumes) != 0 || len(pod.Status.Conditions) != 0 || len(pod.ManagedFields) != 0 ||
		len(pod.Status.ContainerStatuses) != 1 || pod.Annotations != nil {
		t.Errorf("the cached pod kept more than its drain: %+v", pod)
	}
	if got, ok := drainOf(pod); !ok || got.Outcome != want.Outcome || got.DurationMilliseconds != want.DurationMilliseconds ||
		got.GracePeriodSeconds != want.GracePeriodSeconds || got.ExitCode != want.ExitCode || got.Pod != want.Pod {
		t.Errorf("drain of the cached pod = %+v (%v), want %+v", got, ok, want)
	}

	if out, err := trimForCache("not an object"); err != nil || out != "not an object" {
		t.Errorf("a tombstone was changed: %v %v", out, err)
	}
}

func managers(mf []metav1.ManagedFieldsEntry) []string {
	out := make([]string, 0, len(mf))
	for _, e := range mf {
		out = append(out, e.Manager)
	}
	return out
}
