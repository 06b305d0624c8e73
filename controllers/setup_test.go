package controllers

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// desiredDeployment is the operator's apply configuration of a Deployment with
// replicas, stamped with its AnnotationAppliedConfig as the reconciler applies it.
func desiredDeployment(t *testing.T, replicas int32) *appsv1ac.DeploymentApplyConfiguration {
	t.Helper()
	build := func() *appsv1ac.DeploymentApplyConfiguration {
		return appsv1ac.Deployment("gw", "ns").WithLabels(map[string]string{LabelManagedBy: FieldOwner}).
			WithSpec(appsv1ac.DeploymentSpec().WithReplicas(replicas))
	}
	sum, err := configDigest(build())
	if err != nil {
		t.Fatal(err)
	}
	return withApplied(build(), sum)
}

// appliedByUs is FieldOwner's field set after an apply of desiredDeployment, as the
// apiserver records it (written out here, not computed).
const appliedByUs = `{"f:metadata":{"f:annotations":{"f:ferrofed.io/applied-config":{}},"f:labels":{"f:app.kubernetes.io/managed-by":{}}},"f:spec":{"f:replicas":{}}}`

// liveDeployment is a Deployment as the apiserver serves it once desired is applied:
// FieldOwner manages its replicas, a label and the applied-config annotation, another
// manager a label of its own; the spec holds defaults no one applied.
func liveDeployment(t *testing.T, desired *appsv1ac.DeploymentApplyConfiguration, fieldsOfOwner string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw", Generation: 3,
			Labels: map[string]string{LabelManagedBy: FieldOwner, "example.org/team": "clinical"},
			Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: "{}",
				AnnotationAppliedConfig: desired.Annotations[AnnotationAppliedConfig]},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: FieldOwner, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1", FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(fieldsOfOwner)},
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1", FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:example.org/team":{}}}}`)},
			}},
		Spec: appsv1.DeploymentSpec{Replicas: desired.Spec.Replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: ContainerName, Image: "example.org/gateway", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, ReadyReplicas: 2, UpdatedReplicas: 2,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Message: "a long message"}}},
	}
}

// The field set the reconciler expects of an apply is the apiserver's.
func TestAppliedFieldsAreTheApiserversRecord(t *testing.T) {
	fields, applied, err := appliedFields(desiredDeployment(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	if string(fields) != appliedByUs || applied != desiredDeployment(t, 2).Annotations[AnnotationAppliedConfig] || len(applied) != 64 {
		t.Errorf("applied fields %s (annotation %q), want %s", fields, applied, appliedByUs)
	}
}

// An owned object is as the reconciler would apply it only with the configuration's
// own annotation and every field FieldOwner applied still its own; the cached copy of
// it answers exactly as the full object does, while holding neither its spec nor any
// managedFields.
func TestCachedOwnedObjectKeepsOnlyTheDigestOfItsManagedFields(t *testing.T) {
	two := desiredDeployment(t, 2)
	full := liveDeployment(t, two, appliedByUs)
	cachedAny, err := trimForCache(liveDeployment(t, two, appliedByUs))
	if err != nil {
		t.Fatal(err)
	}
	cached := asDeployment(t, cachedAny)
	if len(cached.ManagedFields) != 0 || len(cached.Spec.Template.Spec.Containers) != 0 || ptr.Deref(cached.Spec.Replicas, 0) != 2 {
		t.Errorf("the cached Deployment kept managedFields %v or its spec %+v (of which only replicas, 2)", managers(cached.ManagedFields), cached.Spec)
	}
	if replicasHeld(cached) {
		t.Errorf("the cached Deployment says another manager holds spec.replicas; only %s applied it", FieldOwner)
	}
	if cached.Status.ReadyReplicas != 2 || cached.Status.UpdatedReplicas != 2 || cached.Status.ObservedGeneration != 3 || cached.Generation != 3 || len(cached.Status.Conditions) != 0 {
		t.Errorf("the cached Deployment's generation and status counters = %d %+v, want them kept (and no conditions)", cached.Generation, cached.Status)
	}
	if len(cached.Labels) != 0 || len(cached.Annotations) != 0 || cached.Name != "gw" || cached.Namespace != "ns" || !IsTrimmedForCache(cached) {
		t.Errorf("the cached Deployment kept labels %v or annotations %v, or lost its name", cached.Labels, cached.Annotations)
	}
	for _, replicas := range []int32{2, 3} {
		fromFull, err := sameAsLive(full, desiredDeployment(t, replicas))
		if err != nil {
			t.Fatal(err)
		}
		fromCache, err := sameAsLive(cached, desiredDeployment(t, replicas))
		if err != nil {
			t.Fatal(err)
		}
		if fromFull != (replicas == 2) || fromCache != fromFull {
			t.Errorf("replicas %d: same as the full object %v, as the cached one %v; want %v for both", replicas, fromFull, fromCache, replicas == 2)
		}
	}
	// A second pass (a transform of a cached copy) changes nothing.
	again, _ := trimForCache(cachedAny.(*cachedOwned).DeepCopyObject())
	if again.(*cachedOwned).GenerateName != cached.GenerateName {
		t.Errorf("trimming twice changed the digest")
	}

	// Someone else updated the replicas: the apiserver moved the field to them.
	edited := liveDeployment(t, two, `{"f:metadata":{"f:annotations":{"f:ferrofed.io/applied-config":{}},"f:labels":{"f:app.kubernetes.io/managed-by":{}}},"f:spec":{}}`)
	edited.ManagedFields = append(edited.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "apps/v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)})
	edited.Spec.Replicas = ptr.To[int32](5)
	// Applied by an operator before the annotation, or with the annotation edited away.
	unmarked := liveDeployment(t, two, appliedByUs)
	delete(unmarked.Annotations, AnnotationAppliedConfig)
	if !replicasHeld(edited) || !replicasHeld(trimmed(t, edited.DeepCopy())) {
		t.Errorf("spec.replicas updated by kubectl-edit: replicasHeld is false (full object %v, cached %v), want true",
			replicasHeld(edited), replicasHeld(trimmed(t, edited.DeepCopy())))
	}
	for name, live := range map[string]*appsv1.Deployment{"a field taken over by another manager": edited, "no applied-config annotation": unmarked} {
		for _, obj := range []*appsv1.Deployment{live.DeepCopy(), trimmed(t, live.DeepCopy())} {
			if same, err := sameAsLive(obj, two); err != nil || same {
				t.Errorf("%s: same as the desired Deployment = %v (%v), want false", name, same, err)
			}
		}
	}
}

func trimmed(t *testing.T, d *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	out, err := trimForCache(d)
	if err != nil {
		t.Fatal(err)
	}
	return asDeployment(t, out)
}

// asDeployment is the Deployment the reconciler reads of what the cache keeps of one
// (cachedReads).
func asDeployment(t *testing.T, cached any) *appsv1.Deployment {
	t.Helper()
	c, ok := cached.(*cachedOwned)
	if !ok {
		t.Fatalf("the cache keeps a Deployment as %T, want a *cachedOwned", cached)
	}
	d := &appsv1.Deployment{}
	if !c.into(d) {
		t.Fatal("a cachedOwned does not expand into a Deployment")
	}
	return d
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
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, PodIP: "10.0.0.7", PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, Reason: "r", Message: "m", LastTransitionTime: metav1.Now()}},
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
	out, err := trimForCache(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	cached, ok := out.(*cachedPod)
	if !ok {
		t.Fatalf("the cache keeps a pod as %T, want a *cachedPod", out)
	}
	// Its drain, and for the dependency polls its IP and whether it is ready.
	if !cached.ready || cached.ip != "10.0.0.7" || len(cached.ended) != 1 || cached.ended[0].Name != ContainerName ||
		cached.Annotations != nil || len(cached.ManagedFields) != 0 || ptr.Deref(cached.grace, 0) != 30 {
		t.Errorf("the cached pod kept other than its drain, IP and readiness: %+v", cached)
	}
	if again, err := trimForCache(cached); err != nil || again != any(cached) {
		t.Errorf("a cached pod trimmed again became %v (%v)", again, err)
	}
	expanded := cached.pod()
	if got, ok := drainOf(expanded); !ok || got.Outcome != want.Outcome || got.DurationMilliseconds != want.DurationMilliseconds ||
		got.GracePeriodSeconds != want.GracePeriodSeconds || got.ExitCode != want.ExitCode || got.Pod != want.Pod {
		t.Errorf("drain of the cached pod = %+v (%v), want %+v", got, ok, want)
	}
	if expanded.Status.PodIP != "10.0.0.7" || expanded.Labels[LabelInstance] != "gw" || expanded.UID != "u1" ||
		!equality.Semantic.DeepEqual(expanded.Status.Conditions, []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}) {
		t.Errorf("the expanded pod lost what was cached: %+v", expanded)
	}
	// A copy is its own: changing it leaves the cached pod as it was.
	cp := cached.DeepCopyObject().(*cachedPod)
	cp.Labels[LabelInstance], cp.ended[0].State.Terminated.ExitCode, *cp.grace = "other", 1, 1
	if cached.Labels[LabelInstance] != "gw" || cached.ended[0].State.Terminated.ExitCode != 137 || *cached.grace != 30 {
		t.Errorf("a deep copy shares its content with the cached pod: %+v", cached)
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

// The remembered sums are keyed by the configuration's content: a remembered sum is
// the computed one, another configuration has its own, and the memo stays bounded.
func TestDesiredSumIsRememberedByContent(t *testing.T) {
	for _, replicas := range []int32{2, 3, 2} {
		fields, applied, err := appliedFields(desiredDeployment(t, replicas))
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // computed, then remembered
			got, err := desiredSum(desiredDeployment(t, replicas))
			if err != nil || got != digest(applied, fields) {
				t.Fatalf("replicas %d: desiredSum %q %v, want %q", replicas, got, err, digest(applied, fields))
			}
		}
	}
	two, _ := desiredSum(desiredDeployment(t, 2))
	three, _ := desiredSum(desiredDeployment(t, 3))
	if two == three {
		t.Error("two configurations share a sum")
	}
	m := boundedMap[[32]byte, [32]byte]{max: maxDesiredSums}
	for i := range maxDesiredSums + 1 {
		m.getOrPut([32]byte{byte(i), byte(i >> 8), byte(i >> 16)}, [32]byte{})
	}
	if len(m.m) != 1 {
		t.Errorf("the memo holds %d sums, want it cleared when full", len(m.m))
	}
}
