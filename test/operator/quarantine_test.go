package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// A hand-over that leaves only quarantine, and its release (docs/operator.md, "The
// persistent audit spool"). As in spool_test.go, the tests make the Jobs' pods and
// conditions themselves.

// quarantineMessage is what `ferrofed audit drain` reports, with exit 5, when only
// records quarantined in the repository's spool are left.
func quarantineMessage(records int64) lifecycle.HandOverMessage {
	return lifecycle.HandOverMessage{Outcome: lifecycle.HandOverFailed, Delivered: 11,
		Left: []lifecycle.SpoolLeft{{Destination: "repository", Records: records, Bytes: 4096 * records}}}
}

// failJobAt sets a Job's status as the Job controller would once it failed at at.
func failJobAt(ctx context.Context, t *testing.T, j batchv1.Job, at time.Time) {
	t.Helper()
	when := metav1.NewTime(at)
	live := &batchv1.Job{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(&j), live); err != nil {
		t.Fatal(err)
	}
	live.Status = batchv1.JobStatus{StartTime: &when, Failed: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonPodFailurePolicy, LastTransitionTime: when, LastProbeTime: when},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonPodFailurePolicy, LastTransitionTime: when, LastProbeTime: when}}}
	if err := k8s.Status().Update(ctx, live); err != nil {
		t.Fatalf("fail Job %s: %v", j.Name, err)
	}
}

// annotateRelease sets (on) or removes the release annotation of a claim.
func annotateRelease(ctx context.Context, t *testing.T, claim types.NamespacedName, on bool) {
	t.Helper()
	value := `"true"`
	if !on {
		value = "null"
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, controllers.AnnotationReleaseQuarantine, value)
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name}}
	if err := k8s.Patch(ctx, c, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// claimStatus is a claim as status.audit lists it, or an error saying what it lists.
func claimStatus(g *ferrofedv1alpha1.Gateway, name string) (ferrofedv1alpha1.SpoolClaimStatus, error) {
	if g.Status.Audit != nil {
		for _, c := range g.Status.Audit.Claims {
			if c.Name == name {
				return c, nil
			}
		}
	}
	return ferrofedv1alpha1.SpoolClaimStatus{}, fmt.Errorf("claim %s not in status.audit %+v", name, g.Status.Audit)
}

// countEvents counts the events of reason about gw.
func countEvents(ctx context.Context, t *testing.T, ns, gw, reason string) int {
	t.Helper()
	var evs eventsv1.EventList
	if err := k8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs.Items {
		if e.Regarding.Name == gw && e.Reason == reason {
			n++
		}
	}
	return n
}

// TestQuarantineLeftWaitsForARelease: a scale-down from 3 to 1 hands claims 1 and 2
// over. Claim 1's Job exits 5, only quarantine left: long past the retry backoff no new
// Job starts, the claim is kept in state quarantineLeft, AuditDelivering=False
// (QuarantineLeft) names it with its count, and a Warning says so once. Claim 2's Job
// left records pending: its release annotation changes nothing and says so. Claim 1's
// annotation deletes it, with a Normal Event naming it, its count and who asked.
func TestQuarantineLeftWaitsForARelease(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := persistentGateway(ctx, t, "spool-quarantine", 3, nil)
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
		if jobs, err = handOverJobs(ctx, key.Name); err == nil && len(jobs) != 2 {
			err = fmt.Errorf("%d Jobs", len(jobs))
		}
		return err
	})

	// Claim 1: exit 5, only 3 quarantined records left; it failed longer ago than the
	// backoff, after which an ordinary failure is retried at once.
	handOverPod(ctx, t, jobs[claimKey(1).Name], lifecycle.HandOverExitQuarantine, quarantineMessage(3))
	failJobAt(ctx, t, jobs[claimKey(1).Name], time.Now().Add(-controllers.HandOverRetryBackoff-time.Minute))
	// Claim 2: a timeout with 9 records pending, a minute ago.
	handOverPod(ctx, t, jobs[claimKey(2).Name], 3, lifecycle.HandOverMessage{Outcome: lifecycle.HandOverTimeout, Delivered: 1,
		Left: []lifecycle.SpoolLeft{{Destination: "repository", Records: 9, Bytes: 9000}}})
	failJobAt(ctx, t, jobs[claimKey(2).Name], time.Now().Add(-time.Minute))

	eventually(t, settle, "claim 1 in state quarantineLeft, AuditDelivering=False QuarantineLeft naming it and its count", func() error {
		g := getGateway(ctx, t, key)
		c, err := claimStatus(g, claimKey(1).Name)
		if err != nil {
			return err
		}
		if c.HandOver == nil || c.HandOver.State != ferrofedv1alpha1.HandOverQuarantineLeft || c.HandOver.Job != jobs[claimKey(1).Name].Name ||
			c.UndeliveredRecords != 3 || c.ReportedBy != ferrofedv1alpha1.ReportedByHandOver {
			return fmt.Errorf("claim 1 %+v (handOver %+v)", c, c.HandOver)
		}
		cond := condition(g, ferrofedv1alpha1.ConditionAuditDelivering)
		if cond.Status != metav1.ConditionFalse || cond.Reason != ferrofedv1alpha1.ReasonQuarantineLeft ||
			!strings.Contains(cond.Message, claimKey(1).Name+" (3)") || !strings.Contains(cond.Message, controllers.AnnotationReleaseQuarantine+"=true") {
			return fmt.Errorf("AuditDelivering %s %s %q", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	eventually(t, settle, "a QuarantineLeft warning naming claim 1", func() error {
		return eventSaid(ctx, key.Namespace, key.Name, ferrofedv1alpha1.ReasonQuarantineLeft, claimKey(1).Name, "3 quarantined record(s)", controllers.AnnotationReleaseQuarantine)
	})
	time.Sleep(2 * time.Second)
	js, err := handOverJobs(ctx, key.Name)
	if err != nil {
		t.Fatal(err)
	}
	if j, ok := js[claimKey(1).Name]; !ok || j.Name != controllers.HandOverJobName(claimKey(1).Name, 1) {
		t.Errorf("claim 1's Job %q (present: %t), want attempt 1 still, and no other: only quarantine is left", j.Name, ok)
	}
	if gone, err := claimGone(ctx, claimKey(1)); err != nil || gone {
		t.Fatalf("claim 1 deleted (%v) without a release", err)
	}
	if n := countEvents(ctx, t, key.Namespace, key.Name, ferrofedv1alpha1.ReasonQuarantineLeft); n != 1 {
		t.Errorf("%d QuarantineLeft events, want 1", n)
	}

	// Claim 2 holds pending records: its release changes nothing, and says so.
	annotateRelease(ctx, t, claimKey(2), true)
	eventually(t, settle, "claim 2 asks for a release not acted on, in its status and AuditDelivering's message", func() error {
		g := getGateway(ctx, t, key)
		c, err := claimStatus(g, claimKey(2).Name)
		if err != nil {
			return err
		}
		if !c.ReleaseRequested || c.HandOver == nil || c.HandOver.State != ferrofedv1alpha1.HandOverFailedState {
			return fmt.Errorf("claim 2 %+v (handOver %+v)", c, c.HandOver)
		}
		if cond := condition(g, ferrofedv1alpha1.ConditionAuditDelivering); !strings.Contains(cond.Message, "releases nothing on "+claimKey(2).Name) {
			return fmt.Errorf("AuditDelivering %s %s %q", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	eventually(t, settle, "a ReleaseRefused warning naming claim 2 and why", func() error {
		return eventSaid(ctx, key.Namespace, key.Name, "ReleaseRefused", claimKey(2).Name, "not all quarantined")
	})
	if gone, err := claimGone(ctx, claimKey(2)); err != nil || gone {
		t.Fatalf("claim 2 deleted (%v): it holds pending records", err)
	}

	// Claim 1's release: the claim goes, then its Job; claim 2 stays.
	annotateRelease(ctx, t, claimKey(1), true)
	eventually(t, settle, "claim 1 deleted, then its Job", func() error {
		if gone, err := claimGone(ctx, claimKey(1)); err != nil || !gone {
			return fmt.Errorf("claim 1 still there (%w)", err)
		}
		js, err := handOverJobs(ctx, key.Name)
		if err == nil {
			if _, ok := js[claimKey(1).Name]; ok {
				err = fmt.Errorf("the Job of claim 1 still there")
			}
		}
		return err
	})
	eventually(t, settle, "a QuarantineReleased event naming claim 1, its count and who asked", func() error {
		return eventSaid(ctx, key.Namespace, key.Name, "QuarantineReleased", claimKey(1).Name, "3 quarantined record(s)",
			controllers.AnnotationReleaseQuarantine+"=true, set by field manager")
	})
	if gone, err := claimGone(ctx, claimKey(2)); err != nil || gone {
		t.Errorf("claim 2 deleted (%v): it holds pending records", err)
	}
	eventually(t, settle, "AuditDelivering back to HandOverFailed (claim 2), claim 1 no longer listed", func() error {
		g := getGateway(ctx, t, key)
		if _, err := claimStatus(g, claimKey(1).Name); err == nil {
			return fmt.Errorf("claim 1 still in status.audit")
		}
		if cond := condition(g, ferrofedv1alpha1.ConditionAuditDelivering); cond.Reason != ferrofedv1alpha1.ReasonHandOverFailed {
			return fmt.Errorf("AuditDelivering %s %s %q", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
}

// TestQuarantineReleaseLetsADeletedGatewayGo: a deleted Gateway whose only claim's
// hand-over left quarantine stays (its finalizer), with no new Job; a release set before
// the quarantine was reported changes nothing; set again after, it deletes the claim
// and the Gateway goes.
func TestQuarantineReleaseLetsADeletedGatewayGo(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := persistentGateway(ctx, t, "spool-quarantine-delete", 1, nil)
	sts := statefulSetOf(ctx, t, key)
	makeClaims(ctx, t, sts, 0)
	claim := types.NamespacedName{Namespace: key.Namespace, Name: controllers.SpoolClaimName(key.Name, 0)}
	eventually(t, settle, "the claim in status.audit", func() error {
		_, err := claimStatus(getGateway(ctx, t, key), claim.Name)
		return err
	})
	if err := k8s.Delete(ctx, &ferrofedv1alpha1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	eventually(t, settle, "a hand-over Job for the claim", func() error {
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
	// Released too early: while the Job runs.
	annotateRelease(ctx, t, claim, true)
	eventually(t, settle, "the early release refused", func() error {
		return eventSaid(ctx, key.Namespace, key.Name, "ReleaseRefused", claim.Name, "runs")
	})
	handOverPod(ctx, t, job, lifecycle.HandOverExitQuarantine, quarantineMessage(2))
	failJobAt(ctx, t, job, time.Now().Add(-controllers.HandOverRetryBackoff-time.Minute))
	eventually(t, settle, "state quarantineLeft, the release still not acted on", func() error {
		g := getGateway(ctx, t, key)
		c, err := claimStatus(g, claim.Name)
		if err != nil {
			return err
		}
		if c.HandOver == nil || c.HandOver.State != ferrofedv1alpha1.HandOverQuarantineLeft || !c.ReleaseRequested {
			return fmt.Errorf("claim %+v (handOver %+v)", c, c.HandOver)
		}
		if cond := condition(g, ferrofedv1alpha1.ConditionAuditDelivering); cond.Reason != ferrofedv1alpha1.ReasonQuarantineLeft {
			return fmt.Errorf("AuditDelivering %s %s %q", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if gone, err := claimGone(ctx, claim); err != nil || gone {
		t.Fatalf("claim deleted (%v) by a release set before its quarantine was reported", err)
	}
	g := getGateway(ctx, t, key)
	if g.DeletionTimestamp == nil {
		t.Fatal("the Gateway is not being deleted")
	}
	if js, err := handOverJobs(ctx, key.Name); err != nil || len(js) != 1 || js[claim.Name].Name != job.Name {
		t.Errorf("hand-over Jobs %v (%v), want %s alone", js, err, job.Name)
	}

	// Removed, then set again once the state is shown: the claim goes, and the Gateway.
	annotateRelease(ctx, t, claim, false)
	eventually(t, settle, "the release gone from the status", func() error {
		c, err := claimStatus(getGateway(ctx, t, key), claim.Name)
		if err == nil && c.ReleaseRequested {
			err = fmt.Errorf("claim %+v", c)
		}
		return err
	})
	annotateRelease(ctx, t, claim, true)
	eventually(t, settle, "the claim deleted and the Gateway gone", func() error {
		if gone, err := claimGone(ctx, claim); err != nil || !gone {
			return fmt.Errorf("claim still there (%w)", err)
		}
		if err := k8s.Get(ctx, key, &ferrofedv1alpha1.Gateway{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Gateway: %w", err)
		}
		return nil
	})
	eventually(t, settle, "a QuarantineReleased event", func() error {
		return eventSaid(ctx, key.Namespace, key.Name, "QuarantineReleased", claim.Name, "2 quarantined record(s)")
	})
}
