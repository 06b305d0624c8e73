package operator_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// envtest has no StatefulSet, Job or garbage collector controller and no kubelet: these
// tests make what those would (the claims spool-<gw>-<n>, a Job's conditions, a hand-over
// pod's terminated container) and check what the operator does with them.

// persistentGateway is a Gateway of replicas with an audit repository and a persistent
// spool of 1Gi, in namespace "reconcile".
func persistentGateway(ctx context.Context, t *testing.T, name string, replicas int32, mutate func(*ferrofedv1alpha1.Gateway)) types.NamespacedName {
	t.Helper()
	gw := newGateway("reconcile", name, all(inline(auditRepository), spoolClaim("1Gi", corev1.ReadWriteOnce), func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Replicas = ptr.To(replicas)
		g.Spec.Audit.Spool.VolumeClaimTemplate.Metadata = &ferrofedv1alpha1.SpoolClaimMetadata{Labels: map[string]string{"team": "audit"}}
		if mutate != nil {
			mutate(g)
		}
	}))
	if err := k8s.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	return client.ObjectKeyFromObject(gw)
}

// statefulSetOf waits for the Gateway's StatefulSet.
func statefulSetOf(ctx context.Context, t *testing.T, key types.NamespacedName) *appsv1.StatefulSet {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	eventually(t, settle, "the StatefulSet of "+key.Name, func() error { return k8s.Get(ctx, key, sts) })
	return sts
}

// makeClaims creates the claims spool-<gw>-<n> for ordinals, labelled as the
// StatefulSet controller labels them from the template.
func makeClaims(ctx context.Context, t *testing.T, sts *appsv1.StatefulSet, ordinals ...int) {
	t.Helper()
	tmpl := sts.Spec.VolumeClaimTemplates[0]
	for _, n := range ordinals {
		c := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: sts.Namespace, Name: controllers.SpoolClaimName(sts.Name, n), Labels: tmpl.Labels},
			Spec:       tmpl.Spec,
		}
		if err := k8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
}

// claimGone reports whether a claim is deleted: gone, or being deleted (envtest's
// apiserver adds kubernetes.io/pvc-protection, which no controller here removes).
func claimGone(ctx context.Context, key types.NamespacedName) (bool, error) {
	c := &corev1.PersistentVolumeClaim{}
	err := k8s.Get(ctx, key, c)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return err == nil && c.DeletionTimestamp != nil, client.IgnoreNotFound(err)
}

// handOverJobs are the hand-over Jobs of a Gateway, by claim.
func handOverJobs(ctx context.Context, gw string) (map[string]batchv1.Job, error) {
	var jobs batchv1.JobList
	if err := k8s.List(ctx, &jobs, client.InNamespace("reconcile"), client.MatchingLabels{controllers.LabelHandOverOf: gw}); err != nil {
		return nil, err
	}
	out := map[string]batchv1.Job{}
	for _, j := range jobs.Items {
		if j.DeletionTimestamp == nil {
			out[j.Labels[controllers.LabelHandOverClaim]] = j
		}
	}
	return out, nil
}

// finishJob sets a Job's status as the Job controller would at its end.
func finishJob(ctx context.Context, t *testing.T, j batchv1.Job, succeeded bool) {
	t.Helper()
	now := metav1.Now()
	st := batchv1.JobStatus{StartTime: &now}
	if succeeded {
		st.CompletionTime, st.Succeeded = &now, 1
		st.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now}}
	} else {
		st.Failed = controllers.HandOverBackoffLimit + 1
		st.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, LastTransitionTime: now, LastProbeTime: now}}
	}
	live := &batchv1.Job{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(&j), live); err != nil {
		t.Fatal(err)
	}
	live.Status = st
	if err := k8s.Status().Update(ctx, live); err != nil {
		t.Fatalf("finish Job %s: %v", j.Name, err)
	}
}

// handOverPod makes the pod the Job controller would have run for j, its container
// terminated with exit code and the hand-over message msg.
func handOverPod(ctx context.Context, t *testing.T, j batchv1.Job, exit int32, msg lifecycle.HandOverMessage) {
	t.Helper()
	data, err := msg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: j.Name + "-x7k2p", Labels: j.Spec.Template.Labels},
		Spec:       j.Spec.Template.Spec,
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
		Name: controllers.HandOverContainerName, Image: j.Spec.Template.Spec.Containers[0].Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: string(data),
			StartedAt: metav1.Now(), FinishedAt: metav1.Now()}},
	}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

func eventSaid(ctx context.Context, ns, gw, reason string, words ...string) error {
	var evs eventsv1.EventList
	if err := k8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, e := range evs.Items {
		if e.Regarding.Name != gw || e.Reason != reason {
			continue
		}
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(e.Note, w)
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("no %s event of %s naming %q", reason, gw, words)
}

// TestPersistentSpoolGetsAStatefulSet: with spec.audit.spool.volumeClaimTemplate the
// gateway runs as a StatefulSet (no Deployment) whose volumeClaimTemplate "spool" is
// mounted at the spool directory, its claims retained when scaled or deleted, labelled
// for the operator; the Gateway carries the hand-over finalizer, and AuditDelivering is
// Unknown while it has no claim.
func TestPersistentSpoolGetsAStatefulSet(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := persistentGateway(ctx, t, "spool-sts", 2, nil)
	sts := statefulSetOf(ctx, t, key)
	if n := len(sts.Spec.VolumeClaimTemplates); n != 1 || sts.Spec.VolumeClaimTemplates[0].Name != controllers.SpoolVolumeName {
		t.Fatalf("volumeClaimTemplates %+v, want one named %s", sts.Spec.VolumeClaimTemplates, controllers.SpoolVolumeName)
	}
	tmpl := sts.Spec.VolumeClaimTemplates[0]
	if tmpl.Labels[controllers.LabelAuditSpool] != key.Name || tmpl.Labels[controllers.LabelManagedBy] != controllers.FieldOwner || tmpl.Labels["team"] != "audit" {
		t.Errorf("claim template labels %v: want %s=%s, the managed-by label and the template's own", tmpl.Labels, controllers.LabelAuditSpool, key.Name)
	}
	if q := tmpl.Spec.Resources.Requests[corev1.ResourceStorage]; q.Cmp(resource.MustParse("1Gi")) != 0 || !slices.Equal(tmpl.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("claim template spec %+v, want 1Gi ReadWriteOnce", tmpl.Spec)
	}
	p := sts.Spec.PersistentVolumeClaimRetentionPolicy
	if p == nil || p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType || p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("persistentVolumeClaimRetentionPolicy %+v, want Retain and Retain", p)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement || sts.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType || ptr.Deref(sts.Spec.Replicas, 0) != 2 {
		t.Errorf("podManagementPolicy %s, updateStrategy %s, replicas %d: want Parallel, RollingUpdate, 2", sts.Spec.PodManagementPolicy, sts.Spec.UpdateStrategy.Type, ptr.Deref(sts.Spec.Replicas, 0))
	}
	mounted := false
	for _, m := range sts.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounted = mounted || (m.Name == controllers.SpoolVolumeName && m.MountPath == gatewayspec.AuditSpoolDir)
	}
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.Name == "audit-spool" {
			t.Errorf("the StatefulSet's pods still have the emptyDir spool %+v", v)
		}
	}
	if !mounted {
		t.Errorf("the spool claim is not mounted at %s", gatewayspec.AuditSpoolDir)
	}
	if !equalLabels(sts.Spec.Template.Labels, sts.Spec.Selector.MatchLabels) || sts.Spec.Template.Labels[controllers.LabelInstance] != key.Name {
		t.Errorf("pod labels %v, selector %v: want the Deployment's labels", sts.Spec.Template.Labels, sts.Spec.Selector.MatchLabels)
	}
	if err := k8s.Get(ctx, key, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("get Deployment: %v, want NotFound", err)
	}
	eventually(t, settle, "the finalizer and AuditDelivering=Unknown", func() error {
		g := getGateway(ctx, t, key)
		if !slices.Contains(g.Finalizers, controllers.FinalizerAuditHandOver) {
			return fmt.Errorf("finalizers %v", g.Finalizers)
		}
		if c := condition(g, ferrofedv1alpha1.ConditionAuditDelivering); c.Status != metav1.ConditionUnknown || c.Reason != ferrofedv1alpha1.ReasonNoSpoolClaims {
			return fmt.Errorf("AuditDelivering %s %s", c.Status, c.Reason)
		}
		return nil
	})
	// The claims, as the StatefulSet controller makes them: both owned, nothing waits.
	makeClaims(ctx, t, sts, 0, 1)
	eventually(t, settle, "status.audit lists both claims, owned", func() error {
		g := getGateway(ctx, t, key)
		a := g.Status.Audit
		if a == nil || len(a.Claims) != 2 || a.Claims[0].Replica != key.Name+"-0" || a.Claims[1].Replica != key.Name+"-1" || a.OrphanedClaims != 0 {
			return fmt.Errorf("status.audit %+v", a)
		}
		if c := condition(g, ferrofedv1alpha1.ConditionAuditDelivering); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("AuditDelivering %s %s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	if jobs, err := handOverJobs(ctx, key.Name); err != nil || len(jobs) != 0 {
		t.Errorf("hand-over Jobs %v (%v), want none: no claim is orphaned", jobs, err)
	}
}

func equalLabels(a, b map[string]string) bool {
	if len(a) < len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// TestScaleDownHandsOverTwoClaims: a scale-down from 3 to 1 orphans spool-gw-1 and
// spool-gw-2 and starts exactly two hand-over Jobs; a claim is deleted only after its
// Job succeeded; a failed Job sets AuditDelivering=False and keeps its claim.
func TestScaleDownHandsOverTwoClaims(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := persistentGateway(ctx, t, "spool-down", 3, nil)
	sts := statefulSetOf(ctx, t, key)
	makeClaims(ctx, t, sts, 0, 1, 2)
	claimKey := func(n int) types.NamespacedName {
		return types.NamespacedName{Namespace: key.Namespace, Name: controllers.SpoolClaimName(key.Name, n)}
	}
	eventually(t, settle, "three owned claims in status.audit", func() error {
		if a := getGateway(ctx, t, key).Status.Audit; a == nil || len(a.Claims) != 3 {
			return fmt.Errorf("status.audit %+v", a)
		}
		return nil
	})

	updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) { g.Spec.Replicas = ptr.To[int32](1) })
	var jobs map[string]batchv1.Job
	eventually(t, settle, "two hand-over Jobs, for claims 1 and 2", func() error {
		var err error
		if jobs, err = handOverJobs(ctx, key.Name); err != nil {
			return err
		}
		if len(jobs) != 2 {
			return fmt.Errorf("%d Jobs", len(jobs))
		}
		for _, n := range []int{1, 2} {
			if _, ok := jobs[claimKey(n).Name]; !ok {
				return fmt.Errorf("no Job for %s", claimKey(n).Name)
			}
		}
		return nil
	})
	// The Job: the gateway's image and configuration, the claim where the spool goes.
	j := jobs[claimKey(1).Name]
	if j.Name != controllers.HandOverJobName(claimKey(1).Name, 1) || !metav1.IsControlledBy(&j, getGateway(ctx, t, key)) {
		t.Errorf("Job %s (owners %v), want %s controlled by the Gateway", j.Name, j.OwnerReferences, controllers.HandOverJobName(claimKey(1).Name, 1))
	}
	c := j.Spec.Template.Spec.Containers[0]
	if c.Image != "ghcr.io/ferrofed/ferrofed:test" || !slices.Equal(c.Args, controllers.HandOverArgs()) || j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever ||
		ptr.Deref(j.Spec.BackoffLimit, 0) != controllers.HandOverBackoffLimit || ptr.Deref(j.Spec.ActiveDeadlineSeconds, 0) != controllers.HandOverActiveDeadline {
		t.Errorf("Job %s: image %s args %v restart %s backoffLimit %v deadline %v", j.Name, c.Image, c.Args, j.Spec.Template.Spec.RestartPolicy, j.Spec.BackoffLimit, j.Spec.ActiveDeadlineSeconds)
	}
	claimMounted := false
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claimKey(1).Name {
			for _, m := range c.VolumeMounts {
				claimMounted = claimMounted || (m.Name == v.Name && m.MountPath == gatewayspec.AuditSpoolDir)
			}
		}
	}
	if !claimMounted || !strings.Contains(strings.Join(c.Args, " "), "--config "+gatewayspec.ConfigPath) {
		t.Errorf("Job %s does not mount %s at %s with the gateway's configuration: %+v", j.Name, claimKey(1).Name, gatewayspec.AuditSpoolDir, c)
	}
	eventually(t, settle, "AuditDelivering=False, pending, with both claims orphaned", func() error {
		g := getGateway(ctx, t, key)
		cond := condition(g, ferrofedv1alpha1.ConditionAuditDelivering)
		if cond.Status != metav1.ConditionFalse || cond.Reason != ferrofedv1alpha1.ReasonHandOverPending {
			return fmt.Errorf("AuditDelivering %s %s %q", cond.Status, cond.Reason, cond.Message)
		}
		if a := g.Status.Audit; a == nil || a.OrphanedClaims != 2 || a.Claims[0].HandOver == nil || a.Claims[0].HandOver.State != ferrofedv1alpha1.HandOverRunning {
			return fmt.Errorf("status.audit %+v", a)
		}
		return nil
	})

	// Claim 2's Job fails: the claim stays, AuditDelivering=False naming it, an Event.
	handOverPod(ctx, t, jobs[claimKey(2).Name], 3, lifecycle.HandOverMessage{Outcome: lifecycle.HandOverTimeout, Delivered: 5,
		Left: []lifecycle.SpoolLeft{{Destination: "repository", Records: 7, Bytes: 7000}}})
	finishJob(ctx, t, jobs[claimKey(2).Name], false)
	eventually(t, settle, "AuditDelivering=False, HandOverFailed, naming claim 2 and its 7 records", func() error {
		g := getGateway(ctx, t, key)
		cond := condition(g, ferrofedv1alpha1.ConditionAuditDelivering)
		if cond.Status != metav1.ConditionFalse || cond.Reason != ferrofedv1alpha1.ReasonHandOverFailed || !strings.Contains(cond.Message, claimKey(2).Name) {
			return fmt.Errorf("AuditDelivering %s %s %q", cond.Status, cond.Reason, cond.Message)
		}
		for _, cl := range g.Status.Audit.Claims {
			if cl.Name == claimKey(2).Name && cl.UndeliveredRecords == 7 && cl.ReportedBy == ferrofedv1alpha1.ReportedByHandOver &&
				cl.HandOver != nil && cl.HandOver.State == ferrofedv1alpha1.HandOverFailedState {
				return nil
			}
		}
		return fmt.Errorf("status.audit %+v", g.Status.Audit)
	})
	eventually(t, settle, "a HandOverFailed event", func() error {
		return eventSaid(ctx, key.Namespace, key.Name, ferrofedv1alpha1.ReasonHandOverFailed, claimKey(2).Name)
	})

	// Claim 1's Job runs: its claim stays. It succeeds: the claim goes, then the Job.
	time.Sleep(time.Second)
	for _, n := range []int{1, 2} {
		if gone, err := claimGone(ctx, claimKey(n)); err != nil || gone {
			t.Fatalf("claim %s deleted (%v) before its Job succeeded", claimKey(n).Name, err)
		}
	}
	handOverPod(ctx, t, jobs[claimKey(1).Name], 0, lifecycle.HandOverMessage{Outcome: lifecycle.HandOverEmpty, Delivered: 42,
		Left: []lifecycle.SpoolLeft{{Destination: "repository"}}})
	finishJob(ctx, t, jobs[claimKey(1).Name], true)
	eventually(t, settle, "claim 1 deleted after its Job succeeded, then its Job", func() error {
		if gone, err := claimGone(ctx, claimKey(1)); err != nil || !gone {
			return fmt.Errorf("claim 1 still there (%w)", err)
		}
		js, err := handOverJobs(ctx, key.Name)
		if err != nil {
			return err
		}
		if _, ok := js[claimKey(1).Name]; ok {
			return fmt.Errorf("Job of claim 1 still there")
		}
		return nil
	})
	eventually(t, settle, "a HandOverSucceeded event counting 42 records", func() error {
		return eventSaid(ctx, key.Namespace, key.Name, "HandOverSucceeded", claimKey(1).Name, "42 record(s) delivered")
	})
	for _, n := range []int{0, 2} {
		if gone, err := claimGone(ctx, claimKey(n)); err != nil || gone {
			t.Errorf("claim %s deleted (%v): it was never reported empty", claimKey(n).Name, err)
		}
	}
	eventually(t, settle, "status.audit: claim 0 owned, claim 2 orphaned with 7 records", func() error {
		a := getGateway(ctx, t, key).Status.Audit
		if a == nil || len(a.Claims) != 2 || a.Claims[0].Name != claimKey(2).Name || a.Claims[0].Replica != ferrofedv1alpha1.ReplicaOrphaned ||
			a.Claims[1].Name != claimKey(0).Name || a.UndeliveredRecords != 7 || a.OrphanedClaims != 1 {
			return fmt.Errorf("status.audit %+v", a)
		}
		return nil
	})
}

// TestScaleUpDeletesARunningHandOver: a claim whose ordinal comes back in range before
// its Job ended belongs to the new pod again: the Job goes, the claim stays.
func TestScaleUpDeletesARunningHandOver(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := persistentGateway(ctx, t, "spool-up", 2, nil)
	sts := statefulSetOf(ctx, t, key)
	makeClaims(ctx, t, sts, 0, 1)
	updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) { g.Spec.Replicas = ptr.To[int32](1) })
	eventually(t, settle, "one hand-over Job", func() error {
		js, err := handOverJobs(ctx, key.Name)
		if err == nil && len(js) != 1 {
			err = fmt.Errorf("%d Jobs", len(js))
		}
		return err
	})
	updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) { g.Spec.Replicas = ptr.To[int32](2) })
	eventually(t, settle, "the Job deleted, the claim kept", func() error {
		js, err := handOverJobs(ctx, key.Name)
		if err == nil && len(js) != 0 {
			err = fmt.Errorf("%d Jobs", len(js))
		}
		return err
	})
	if gone, err := claimGone(ctx, types.NamespacedName{Namespace: key.Namespace, Name: controllers.SpoolClaimName(key.Name, 1)}); err != nil || gone {
		t.Errorf("claim 1 deleted (%v)", err)
	}
}

// TestFinalizerHoldsADeletedGateway: a deleted Gateway with a persistent spool stays
// (its finalizer) while the operator deletes its StatefulSet and hands its claim over;
// it goes once the claim was handed over and deleted.
func TestFinalizerHoldsADeletedGateway(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := persistentGateway(ctx, t, "spool-delete", 1, nil)
	sts := statefulSetOf(ctx, t, key)
	makeClaims(ctx, t, sts, 0)
	claim := types.NamespacedName{Namespace: key.Namespace, Name: controllers.SpoolClaimName(key.Name, 0)}
	eventually(t, settle, "the finalizer", func() error {
		if g := getGateway(ctx, t, key); !slices.Contains(g.Finalizers, controllers.FinalizerAuditHandOver) {
			return fmt.Errorf("finalizers %v", g.Finalizers)
		}
		return nil
	})
	if err := k8s.Delete(ctx, &ferrofedv1alpha1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	eventually(t, settle, "the StatefulSet deleted and a hand-over Job for claim 0", func() error {
		if err := k8s.Get(ctx, key, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("StatefulSet: %w", err)
		}
		js, err := handOverJobs(ctx, key.Name)
		if err != nil {
			return err
		}
		var ok bool
		if job, ok = js[claim.Name]; !ok {
			return fmt.Errorf("no Job for %s", claim.Name)
		}
		return nil
	})
	time.Sleep(time.Second)
	if g := getGateway(ctx, t, key); g.DeletionTimestamp == nil {
		t.Fatal("the Gateway is not being deleted")
	}
	if gone, err := claimGone(ctx, claim); err != nil || gone {
		t.Fatalf("claim deleted (%v) before its hand-over", err)
	}
	finishJob(ctx, t, job, true) // no pod message: a Job that succeeded exited 0, which means empty
	eventually(t, settle, "the claim deleted and the Gateway gone", func() error {
		if gone, err := claimGone(ctx, claim); err != nil || !gone {
			return fmt.Errorf("claim still there (%w)", err)
		}
		if err := k8s.Get(ctx, key, &ferrofedv1alpha1.Gateway{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Gateway: %w", err)
		}
		if _, ok := auditUndeliveredMetric(key.Namespace + "/" + key.Name); ok {
			return fmt.Errorf("ferrofed_operator_audit_undelivered still has the deleted Gateway's series")
		}
		return nil
	})
}

// TestRetainOnDeleteReleasesTheGateway: with retainOnDelete the deleted Gateway goes at
// once, its claims stay, named in an Event.
func TestRetainOnDeleteReleasesTheGateway(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := persistentGateway(ctx, t, "spool-retain", 1, func(g *ferrofedv1alpha1.Gateway) { g.Spec.Audit.Spool.RetainOnDelete = ptr.To(true) })
	sts := statefulSetOf(ctx, t, key)
	makeClaims(ctx, t, sts, 0)
	claim := types.NamespacedName{Namespace: key.Namespace, Name: controllers.SpoolClaimName(key.Name, 0)}
	eventually(t, settle, "the finalizer and the claim in status.audit", func() error {
		g := getGateway(ctx, t, key)
		if !slices.Contains(g.Finalizers, controllers.FinalizerAuditHandOver) || g.Status.Audit == nil {
			return fmt.Errorf("finalizers %v, audit %+v", g.Finalizers, g.Status.Audit)
		}
		return nil
	})
	if err := k8s.Delete(ctx, &ferrofedv1alpha1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "the Gateway gone", func() error {
		if err := k8s.Get(ctx, key, &ferrofedv1alpha1.Gateway{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Gateway: %w", err)
		}
		return nil
	})
	eventually(t, settle, "a SpoolClaimsRetained event naming the claim", func() error {
		return eventSaid(ctx, key.Namespace, key.Name, "SpoolClaimsRetained", claim.Name)
	})
	if gone, err := claimGone(ctx, claim); err != nil || gone {
		t.Errorf("claim deleted (%v): retainOnDelete keeps it", err)
	}
	if js, err := handOverJobs(ctx, key.Name); err != nil || len(js) != 0 {
		t.Errorf("hand-over Jobs %v (%v), want none", js, err)
	}
}

// readyStatefulSet sets a StatefulSet's status as its controller would once every
// replica runs ready with the latest template.
func readyStatefulSet(ctx context.Context, t *testing.T, key types.NamespacedName) {
	t.Helper()
	eventually(t, settle, "the StatefulSet marked ready", func() error {
		s := &appsv1.StatefulSet{}
		if err := k8s.Get(ctx, key, s); err != nil {
			return err
		}
		n := ptr.Deref(s.Spec.Replicas, 1)
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: n, ReadyReplicas: n, CurrentReplicas: n, UpdatedReplicas: n, AvailableReplicas: n}
		return k8s.Status().Update(ctx, s)
	})
}

// readyDeployment does the same for a Deployment.
func readyDeployment(ctx context.Context, t *testing.T, key types.NamespacedName) {
	t.Helper()
	eventually(t, settle, "the Deployment marked ready", func() error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctx, key, d); err != nil {
			return err
		}
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, ReadyReplicas: n, UpdatedReplicas: n, AvailableReplicas: n}
		return k8s.Status().Update(ctx, d)
	})
}

// TestSwitchingSpoolModesDropsNoRequest: emptyDir to persistent, the Deployment stays
// until the StatefulSet has every replica ready; back to the emptyDir, the StatefulSet
// stays until the Deployment is ready, then goes, and every claim is handed over; the
// finalizer goes with the last claim.
func TestSwitchingSpoolModesDropsNoRequest(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	gw := newGateway("reconcile", "spool-switch", all(inline(auditRepository), func(g *ferrofedv1alpha1.Gateway) { g.Spec.Replicas = ptr.To[int32](2) }))
	if err := k8s.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(gw)
	reconciled(ctx, t, key)
	readyDeployment(ctx, t, key)

	updateGateway(ctx, t, key, spoolClaim("1Gi", corev1.ReadWriteOnce))
	sts := statefulSetOf(ctx, t, key)
	time.Sleep(time.Second)
	if err := k8s.Get(ctx, key, &appsv1.Deployment{}); err != nil {
		t.Fatalf("the Deployment went before the StatefulSet was ready: %v", err)
	}
	makeClaims(ctx, t, sts, 0, 1)
	readyStatefulSet(ctx, t, key)
	eventually(t, settle, "the Deployment deleted once the StatefulSet is ready, its pods orphaned", func() error {
		return deletedOrphaning(ctx, key, &appsv1.Deployment{})
	})
	gcOrphaned(ctx, t, key, &appsv1.Deployment{})
	eventually(t, settle, "Ready=True from the StatefulSet, two owned claims", func() error {
		g := getGateway(ctx, t, key)
		if c := condition(g, ferrofedv1alpha1.ConditionReady); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %s %s %q", c.Status, c.Reason, c.Message)
		}
		if a := g.Status.Audit; a == nil || len(a.Claims) != 2 || a.OrphanedClaims != 0 {
			return fmt.Errorf("status.audit %+v", a)
		}
		return nil
	})

	// Back to the emptyDir.
	updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) { g.Spec.Audit = nil })
	reconciled(ctx, t, key)
	time.Sleep(time.Second)
	if err := k8s.Get(ctx, key, &appsv1.StatefulSet{}); err != nil {
		t.Fatalf("the StatefulSet went before the Deployment was ready: %v", err)
	}
	readyDeployment(ctx, t, key)
	var jobs map[string]batchv1.Job
	eventually(t, settle, "the StatefulSet deleted, both claims orphaned and handed over by a Job each", func() error {
		if err := k8s.Get(ctx, key, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("StatefulSet: %w", err)
		}
		var err error
		if jobs, err = handOverJobs(ctx, key.Name); err != nil {
			return err
		}
		if len(jobs) != 2 {
			return fmt.Errorf("%d Jobs", len(jobs))
		}
		return nil
	})
	if g := getGateway(ctx, t, key); !slices.Contains(g.Finalizers, controllers.FinalizerAuditHandOver) {
		t.Errorf("finalizers %v: the claims still wait", g.Finalizers)
	}
	for _, j := range jobs {
		finishJob(ctx, t, j, true)
	}
	eventually(t, settle, "both claims deleted, the finalizer and status.audit gone", func() error {
		for _, n := range []int{0, 1} {
			if gone, err := claimGone(ctx, types.NamespacedName{Namespace: key.Namespace, Name: controllers.SpoolClaimName(key.Name, n)}); err != nil || !gone {
				return fmt.Errorf("claim %d still there (%w)", n, err)
			}
		}
		g := getGateway(ctx, t, key)
		if slices.Contains(g.Finalizers, controllers.FinalizerAuditHandOver) || g.Status.Audit != nil {
			return fmt.Errorf("finalizers %v, status.audit %+v", g.Finalizers, g.Status.Audit)
		}
		if c := condition(g, ferrofedv1alpha1.ConditionAuditDelivering); c.Status != metav1.ConditionUnknown {
			return fmt.Errorf("AuditDelivering %s %s", c.Status, c.Reason)
		}
		return nil
	})
}

// TestADrainReportsItsSpoolInStatusAudit: a replica's pod deleted by a scale-down
// reports in its drain's termination message what its spool held; status.audit shows
// it on the orphaned claim (reportedBy drain), and the hand-over starts only once the
// pod is gone.
func TestADrainReportsItsSpoolInStatusAudit(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := persistentGateway(ctx, t, "spool-report", 2, nil)
	sts := statefulSetOf(ctx, t, key)
	makeClaims(ctx, t, sts, 0, 1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name + "-1", Labels: sts.Spec.Template.Labels, Finalizers: []string{"ferrofed.io/test-hold"}},
		Spec:       sts.Spec.Template.Spec,
	}
	pod.Spec.NodeName = "node-a"
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: controllers.SpoolVolumeName, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: controllers.SpoolClaimName(key.Name, 1)}}})
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) { g.Spec.Replicas = ptr.To[int32](1) })
	time.Sleep(time.Second)
	if js, err := handOverJobs(ctx, key.Name); err != nil || len(js) != 0 {
		t.Fatalf("hand-over Jobs %v (%v) while the replica's pod still drains", js, err)
	}
	// The pod is deleted and its gateway drains, reporting 12 records left.
	if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	data, err := lifecycle.TerminationMessage{Outcome: lifecycle.DrainCompleted, Drain: 2 * time.Second, Abandoned: []string{},
		Audit: []lifecycle.SpoolLeft{{Destination: "repository", Records: 12, Bytes: 3400}}}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	msg := string(data)
	eventually(t, settle, "the pod's final status", func() error {
		p := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return err
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: controllers.ContainerName, Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: msg, FinishedAt: metav1.Now()}}}}
		return k8s.Status().Update(ctx, p)
	})
	eventually(t, settle, "status.audit: 12 records on the orphaned claim, reported by its drain", func() error {
		g := getGateway(ctx, t, key)
		a := g.Status.Audit
		if a == nil || len(a.Claims) != 2 || a.Claims[0].Name != controllers.SpoolClaimName(key.Name, 1) || a.Claims[0].UndeliveredRecords != 12 ||
			a.Claims[0].UndeliveredBytes != 3400 || a.Claims[0].ReportedBy != ferrofedv1alpha1.ReportedByDrain || a.UndeliveredRecords != 12 {
			return fmt.Errorf("status.audit %+v", a)
		}
		if c := condition(g, ferrofedv1alpha1.ConditionAuditDelivering); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "12 record(s)") {
			return fmt.Errorf("AuditDelivering %s %s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	eventually(t, settle, "ferrofed_operator_audit_undelivered of the Gateway at 12", func() error {
		v, ok := auditUndeliveredMetric(key.Namespace + "/" + key.Name)
		if !ok || v != 12 {
			return fmt.Errorf("ferrofed_operator_audit_undelivered = %v (present: %t)", v, ok)
		}
		return nil
	})
	// The pod gone: the hand-over starts.
	eventually(t, settle, "the pod gone", func() error {
		p := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return client.IgnoreNotFound(err)
		}
		p.Finalizers = nil
		if err := k8s.Update(ctx, p); err != nil {
			return err
		}
		return fmt.Errorf("pod still there")
	})
	eventually(t, settle, "one hand-over Job for claim 1", func() error {
		js, err := handOverJobs(ctx, key.Name)
		if err == nil && (len(js) != 1 || js[controllers.SpoolClaimName(key.Name, 1)].Name == "") {
			err = fmt.Errorf("Jobs %v", js)
		}
		return err
	})
}

// auditUndeliveredMetric is ferrofed_operator_audit_undelivered{gateway}, and whether
// the series exists.
func auditUndeliveredMetric(gateway string) (float64, bool) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, false
	}
	for _, f := range families {
		if f.GetName() != "ferrofed_operator_audit_undelivered" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "gateway" && l.GetValue() == gateway {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// deletedOrphaning reports, as an error, when obj (by key) is not being deleted with the
// Orphan policy: its dependents are to be left running.
func deletedOrphaning(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	if err := k8s.Get(ctx, key, obj); err != nil {
		return err
	}
	if obj.GetDeletionTimestamp() == nil || !slices.Contains(obj.GetFinalizers(), metav1.FinalizerOrphanDependents) {
		return fmt.Errorf("%s: deletion %v, finalizers %v: not deleted with the Orphan policy", key.Name, obj.GetDeletionTimestamp(), obj.GetFinalizers())
	}
	return nil
}

// gcOrphaned does what the garbage collector would for an object deleted with the
// Orphan policy (envtest runs none): it removes the orphan finalizer, and the object goes.
func gcOrphaned(ctx context.Context, t *testing.T, key types.NamespacedName, obj client.Object) {
	t.Helper()
	eventually(t, settle, "the orphan finalizer of "+key.Name+" removed", func() error {
		if err := k8s.Get(ctx, key, obj); err != nil {
			return client.IgnoreNotFound(err)
		}
		obj.SetFinalizers(slices.DeleteFunc(obj.GetFinalizers(), func(f string) bool { return f == metav1.FinalizerOrphanDependents }))
		return k8s.Update(ctx, obj)
	})
}
