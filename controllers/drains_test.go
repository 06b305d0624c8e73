package controllers

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func message(t *testing.T, m lifecycle.TerminationMessage) string {
	t.Helper()
	line, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(line) + "\n"
}

func terminatedPod(deleted bool, term *corev1.ContainerStateTerminated) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "edge-abc"}, Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](26)}}
	if deleted {
		// Deleted at t0: the timestamp is t0 + the grace period.
		p.DeletionTimestamp = &metav1.Time{Time: t0.Add(26 * time.Second)}
		p.DeletionGracePeriodSeconds = ptr.To[int64](26)
	}
	cs := corev1.ContainerStatus{Name: ContainerName}
	if term != nil {
		cs.State.Terminated = term
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "sidecar"}, cs}
	return p
}

func TestDrainOf(t *testing.T) {
	ended := metav1.Time{Time: t0.Add(9 * time.Second)}
	completed := message(t, lifecycle.TerminationMessage{Outcome: lifecycle.DrainCompleted, Drain: 8500 * time.Millisecond,
		Steps: lifecycle.DrainSteps{DrainDelay: 4 * time.Second, InFlight: 4 * time.Second}})
	cut := message(t, lifecycle.TerminationMessage{Outcome: lifecycle.DrainCut, Drain: 21 * time.Second,
		Steps: lifecycle.DrainSteps{DrainDelay: 4 * time.Second, InFlight: 15 * time.Second}, CutConnections: 3, Abandoned: []string{"pmir"}})
	tests := []struct {
		name string
		pod  *corev1.Pod
		ok   bool
		want ferrofedv1alpha1.DrainRecord
	}{
		{"a completed drain is read from the message", terminatedPod(true, &corev1.ContainerStateTerminated{Message: completed, FinishedAt: ended}), true,
			ferrofedv1alpha1.DrainRecord{Pod: "edge-abc", Ended: ended, Outcome: "completed", DurationMilliseconds: 8500, GracePeriodSeconds: 26}},
		{"a cut drain names its connections and abandoned bindings", terminatedPod(true, &corev1.ContainerStateTerminated{Message: cut, FinishedAt: ended}), true,
			ferrofedv1alpha1.DrainRecord{Pod: "edge-abc", Ended: ended, Outcome: "cut", DurationMilliseconds: 21000, GracePeriodSeconds: 26, CutConnections: 3, AbandonedBindings: []string{"pmir"}}},
		{"a kill without a message is timed from the deletion", terminatedPod(true, &corev1.ContainerStateTerminated{ExitCode: 137, FinishedAt: metav1.Time{Time: t0.Add(26 * time.Second)}}), true,
			ferrofedv1alpha1.DrainRecord{Pod: "edge-abc", Ended: metav1.Time{Time: t0.Add(26 * time.Second)}, Outcome: "killed", DurationMilliseconds: 26000, GracePeriodSeconds: 26, ExitCode: 137}},
		{"garbage in the message is no report", terminatedPod(true, &corev1.ContainerStateTerminated{ExitCode: 0, Message: "panic: oops", FinishedAt: ended}), true,
			ferrofedv1alpha1.DrainRecord{Pod: "edge-abc", Ended: ended, Outcome: "unknown", DurationMilliseconds: 9000, GracePeriodSeconds: 26}},
		{"a pod not being deleted did not drain (a liveness restart)", terminatedPod(false, &corev1.ContainerStateTerminated{Message: completed, FinishedAt: ended}), false, ferrofedv1alpha1.DrainRecord{}},
		{"a container still running has not ended its drain", terminatedPod(true, nil), false, ferrofedv1alpha1.DrainRecord{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := drainOf(tt.pod)
			if ok != tt.ok {
				t.Fatalf("drainOf ok = %v, want %v", ok, tt.ok)
			}
			if ok && (got.Pod != tt.want.Pod || !got.Ended.Equal(&tt.want.Ended) || got.Outcome != tt.want.Outcome ||
				got.DurationMilliseconds != tt.want.DurationMilliseconds || got.GracePeriodSeconds != tt.want.GracePeriodSeconds ||
				got.CutConnections != tt.want.CutConnections || got.ExitCode != tt.want.ExitCode ||
				strings.Join(got.AbandonedBindings, ",") != strings.Join(tt.want.AbandonedBindings, ",")) {
				t.Fatalf("drainOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestMergeDrainsKeepsTheNewestOncePerPod(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.Time{Time: t0.Add(time.Duration(s) * time.Second)} }
	var existing []ferrofedv1alpha1.DrainRecord
	for i := range ferrofedv1alpha1.MaxDrainRecords {
		existing = append(existing, ferrofedv1alpha1.DrainRecord{Pod: "old", Ended: at(-i)})
	}
	got := mergeDrains(existing, []ferrofedv1alpha1.DrainRecord{{Pod: "new", Ended: at(5)}, {Pod: "new", Ended: at(5)}, {Pod: "old", Ended: at(0)}})
	if len(got) != ferrofedv1alpha1.MaxDrainRecords || got[0].Pod != "new" || got[1].Pod != "old" || !got[1].Ended.Equal(ptr.To(at(0))) {
		t.Fatalf("mergeDrains = %+v", got)
	}
	if got[len(got)-1].Ended.Equal(ptr.To(at(-ferrofedv1alpha1.MaxDrainRecords + 1))) {
		t.Errorf("the oldest record was kept past the cap")
	}
}

func TestDrainsCondition(t *testing.T) {
	tests := []struct {
		name   string
		drains []ferrofedv1alpha1.DrainRecord
		status metav1.ConditionStatus
		reason string
		says   string
	}{
		{"no drain yet", nil, metav1.ConditionUnknown, ferrofedv1alpha1.ReasonNoDrainYet, "No pod"},
		{"the newest completed", []ferrofedv1alpha1.DrainRecord{{Pod: "a", Outcome: "completed", DurationMilliseconds: 8000, GracePeriodSeconds: 26}, {Pod: "b", Outcome: "killed"}},
			metav1.ConditionTrue, ferrofedv1alpha1.ReasonDrainCompleted, "Pod a drained in 8s of its 26s"},
		{"the newest cut", []ferrofedv1alpha1.DrainRecord{{Pod: "a", Outcome: "cut", CutConnections: 2, DurationMilliseconds: 21000}},
			metav1.ConditionFalse, ferrofedv1alpha1.ReasonDrainCut, "Pod a cut 2 connection(s)"},
		{"the newest killed names the pod and how long it ran", []ferrofedv1alpha1.DrainRecord{{Pod: "a", Outcome: "killed", ExitCode: 137, DurationMilliseconds: 1000, GracePeriodSeconds: 1}},
			metav1.ConditionFalse, ferrofedv1alpha1.ReasonDrainKilled, "Pod a was killed (exit code 137) 1s after SIGTERM"},
		{"unreported", []ferrofedv1alpha1.DrainRecord{{Pod: "a", Outcome: "unknown"}}, metav1.ConditionUnknown, ferrofedv1alpha1.ReasonDrainUnreported, "without reporting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := drainsCondition(tt.drains)
			if c.Status != tt.status || c.Reason != tt.reason || !strings.Contains(c.Message, tt.says) {
				t.Fatalf("DrainsComplete = %s %s %q", c.Status, c.Reason, c.Message)
			}
		})
	}
}
