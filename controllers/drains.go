package controllers

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// drainOf reads how a deleted gateway pod's drain went from its gateway container's
// final state: the termination message the gateway wrote at the end of its drain
// (lifecycle.TerminationMessage, which the kubelet copies into the pod's status), or,
// without one, the kill. It reports false for a pod that is not being deleted (a
// container restarted by its liveness probe did not drain) or whose container has not
// terminated yet.
func drainOf(pod *corev1.Pod) (ferrofedv1alpha1.DrainRecord, bool) {
	if pod.DeletionTimestamp == nil {
		return ferrofedv1alpha1.DrainRecord{}, false
	}
	var term *corev1.ContainerStateTerminated
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == ContainerName && cs.State.Terminated != nil {
			term = cs.State.Terminated
		}
	}
	if term == nil {
		return ferrofedv1alpha1.DrainRecord{}, false
	}
	// The deletion's own grace period (kubectl delete --grace-period), else the pod's.
	grace := ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, 0)
	if g := ptr.Deref(pod.DeletionGracePeriodSeconds, 0); g > 0 {
		grace = g
	}
	d := ferrofedv1alpha1.DrainRecord{Pod: pod.Name, Ended: term.FinishedAt, GracePeriodSeconds: grace, ExitCode: term.ExitCode}
	if msg, err := lifecycle.ParseTerminationMessage([]byte(term.Message)); err == nil {
		d.Outcome = msg.Outcome
		d.DurationMilliseconds = msg.Drain.Milliseconds()
		d.CutConnections = int32(min(msg.CutConnections, 1<<30))
		d.AbandonedBindings = append([]string(nil), msg.Abandoned...)
		if len(d.AbandonedBindings) > 32 {
			d.AbandonedBindings = d.AbandonedBindings[:32]
		}
		return d, true
	}
	// No report: the process did not reach the end of its drain. SIGTERM came at the
	// deletion, which is the deletion timestamp less the grace period.
	if !term.FinishedAt.IsZero() {
		sigterm := pod.DeletionTimestamp.Add(-time.Duration(grace) * time.Second)
		if took := term.FinishedAt.Sub(sigterm); took > 0 {
			d.DurationMilliseconds = took.Milliseconds()
		}
	}
	d.Outcome = "killed"
	if term.ExitCode == 0 {
		d.Outcome = "unknown"
	}
	return d, true
}

// mergeDrains adds drains to existing, without duplicates (one per pod and end),
// newest first, at most ferrofedv1alpha1.MaxDrainRecords.
func mergeDrains(existing, drains []ferrofedv1alpha1.DrainRecord) []ferrofedv1alpha1.DrainRecord {
	type key struct {
		pod   string
		ended int64
	}
	seen := map[key]bool{}
	var out []ferrofedv1alpha1.DrainRecord
	for _, d := range append(append([]ferrofedv1alpha1.DrainRecord(nil), drains...), existing...) {
		k := key{d.Pod, d.Ended.UnixNano()}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, d)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Ended.After(out[j].Ended.Time) })
	if len(out) > ferrofedv1alpha1.MaxDrainRecords {
		out = out[:ferrofedv1alpha1.MaxDrainRecords]
	}
	return out
}

// drainsCondition is DrainsComplete for status.drains, newest first.
func drainsCondition(drains []ferrofedv1alpha1.DrainRecord) metav1.Condition {
	c := metav1.Condition{Type: ferrofedv1alpha1.ConditionDrainsComplete, Status: metav1.ConditionUnknown,
		Reason: ferrofedv1alpha1.ReasonNoDrainYet, Message: "No pod of this Gateway has drained yet."}
	if len(drains) == 0 {
		return c
	}
	d := drains[0]
	took := time.Duration(d.DurationMilliseconds) * time.Millisecond
	switch d.Outcome {
	case lifecycle.DrainCompleted:
		c.Status, c.Reason = metav1.ConditionTrue, ferrofedv1alpha1.ReasonDrainCompleted
		c.Message = fmt.Sprintf("Pod %s drained in %s of its %ds grace period.", d.Pod, took, d.GracePeriodSeconds)
	case lifecycle.DrainCut:
		c.Status, c.Reason = metav1.ConditionFalse, ferrofedv1alpha1.ReasonDrainCut
		c.Message = fmt.Sprintf("Pod %s cut %d connection(s) at its shutdown timeout, after %s: requests outlived spec.lifecycle.shutdownTimeout.",
			d.Pod, d.CutConnections, took)
	case "killed":
		c.Status, c.Reason = metav1.ConditionFalse, ferrofedv1alpha1.ReasonDrainKilled
		c.Message = fmt.Sprintf("Pod %s was killed (exit code %d) %s after SIGTERM, before its drain ended: it needed more than its %ds grace period.",
			d.Pod, d.ExitCode, took, d.GracePeriodSeconds)
	default:
		c.Reason = ferrofedv1alpha1.ReasonDrainUnreported
		c.Message = fmt.Sprintf("Pod %s exited without reporting its drain.", d.Pod)
	}
	return c
}
