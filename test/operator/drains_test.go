package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// drainedPod makes a gateway pod of gw as the kubelet leaves it after a drain: deleted
// (a finalizer keeps it for the test), its gateway container terminated with message
// and exit code.
func drainedPod(ctx context.Context, t *testing.T, gw *ferrofedv1alpha1.Gateway, name, message string, exitCode int32) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: gw.Namespace, Name: name, Labels: controllers.Labels(gw),
			Finalizers: []string{"ferrofed.io/test-keep"}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](50),
			Containers: []corev1.Container{{Name: controllers.ContainerName, Image: gw.Spec.Image}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p := &corev1.Pod{}
		if k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), p) == nil {
			p.Finalizers = nil
			_ = k8s.Update(context.Background(), p)
		}
	})
	if err := k8s.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: controllers.ContainerName, Image: gw.Spec.Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Message: message,
			StartedAt: metav1.Time{Time: time.Now().Add(-time.Minute)}, FinishedAt: metav1.Now()}}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// TestDrainsReachTheGatewaysStatus: a pod whose gateway container reported its drain,
// and one killed with exit code 137, reach status.drains, DrainsComplete and an Event.
func TestDrainsReachTheGatewaysStatus(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "drains"}
	if err := k8s.Create(ctx, newGateway(key.Namespace, key.Name, nil)); err != nil {
		t.Fatal(err)
	}
	gw, _ := reconciled(ctx, t, key)
	line, err := lifecycle.TerminationMessage{Outcome: lifecycle.DrainCompleted, Drain: 12300 * time.Millisecond,
		Steps: lifecycle.DrainSteps{DrainDelay: 10 * time.Second, InFlight: 2 * time.Second}, Abandoned: []string{}}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	drainedPod(ctx, t, gw, "drains-completed", string(line)+"\n", 0)
	eventually(t, settle, "the completed drain in status.drains and DrainsComplete=True", func() error {
		g := getGateway(ctx, t, key)
		if len(g.Status.Drains) != 1 || g.Status.Drains[0].Pod != "drains-completed" || g.Status.Drains[0].Outcome != "completed" ||
			g.Status.Drains[0].DurationMilliseconds != 12300 || g.Status.Drains[0].GracePeriodSeconds != 50 {
			return fmt.Errorf("drains %+v", g.Status.Drains)
		}
		if c := condition(g, ferrofedv1alpha1.ConditionDrainsComplete); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("DrainsComplete %s %s", c.Status, c.Reason)
		}
		return nil
	})

	drainedPod(ctx, t, gw, "drains-killed", "", 137)
	eventually(t, settle, "the kill first in status.drains and DrainsComplete=False naming the pod", func() error {
		g := getGateway(ctx, t, key)
		if len(g.Status.Drains) != 2 || g.Status.Drains[0].Pod != "drains-killed" || g.Status.Drains[0].Outcome != "killed" || g.Status.Drains[0].ExitCode != 137 {
			return fmt.Errorf("drains %+v", g.Status.Drains)
		}
		c := condition(g, ferrofedv1alpha1.ConditionDrainsComplete)
		if c.Status != metav1.ConditionFalse || c.Reason != ferrofedv1alpha1.ReasonDrainKilled || !strings.Contains(c.Message, "drains-killed") {
			return fmt.Errorf("DrainsComplete %s %s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	eventually(t, settle, "a DrainKilled event on the Gateway", func() error {
		var evs eventsv1.EventList
		if err := k8s.List(ctx, &evs, client.InNamespace(key.Namespace)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == key.Name && e.Reason == ferrofedv1alpha1.ReasonDrainKilled && strings.Contains(e.Note, "drains-killed") {
				return nil
			}
		}
		return fmt.Errorf("no DrainKilled event")
	})
}
