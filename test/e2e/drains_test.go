//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/ferrofed/ferrofed/test/rollout"
)

// drainSeen is one record of a Gateway's status.drains.
type drainSeen struct {
	outcome    string
	durationMS int64
	grace      int64
	exitCode   int64
}

// drainWatch reads a Gateway's status.drains every second and keeps every record it
// saw, by pod: the status holds the last 10 drains, and a run replaces more pods than
// that (6 rollouts of 2 replicas), each of which must have reached it.
type drainWatch struct {
	mu     sync.Mutex
	seen   map[string]drainSeen
	cancel context.CancelFunc
	done   chan struct{}
}

func (c *cluster) watchDrains(ns, name string) *drainWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &drainWatch{seen: map[string]drainSeen{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			if gw, err := c.getGateway(ctx, ns, name); err == nil {
				w.add(drainsOf(gw))
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return w
}

func (w *drainWatch) add(drains map[string]drainSeen) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for pod, d := range drains {
		w.seen[pod] = d
	}
}

func (w *drainWatch) get(pod string) (drainSeen, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, ok := w.seen[pod]
	return d, ok
}

func (w *drainWatch) stop() map[string]drainSeen {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// drainsOf reads status.drains of a Gateway, by pod.
func drainsOf(gw *unstructured.Unstructured) map[string]drainSeen {
	out := map[string]drainSeen{}
	list, _, _ := unstructured.NestedSlice(gw.Object, "status", "drains")
	for _, item := range list {
		m, _ := item.(map[string]any)
		pod, _ := m["pod"].(string)
		outcome, _ := m["outcome"].(string)
		out[pod] = drainSeen{outcome: outcome, durationMS: int64At(m, "durationMilliseconds"),
			grace: int64At(m, "gracePeriodSeconds"), exitCode: int64At(m, "exitCode")}
	}
	return out
}

func int64At(m map[string]any, key string) int64 {
	switch v := m[key].(type) {
	case int64:
		return v
	case float64:
		return int64(v)
	}
	return 0
}

// waitDrainsReported waits until every ended pod's drain is in the status (seen by w),
// then stops w and returns what it saw.
func (s *e2e) waitDrainsReported(t *testing.T, w *drainWatch, ended []rollout.PodEnd) map[string]drainSeen {
	t.Helper()
	eventually(t, time.Minute, "every replaced pod's drain in status.drains", func(context.Context) (bool, string, error) {
		var missing []string
		for _, e := range ended {
			if _, ok := w.get(e.Name); !ok {
				missing = append(missing, e.Name)
			}
		}
		return len(missing) == 0, fmt.Sprintf("not reported yet: %v", missing), nil
	})
	return w.stop()
}

// checkDrainsCompleted asserts that each ended pod's drain reached the Gateway's status
// as completed within its grace period, and that each has its Event (status.drains
// holds 10; the Events name every pod), and that the status now holds what it can.
func (s *e2e) checkDrainsCompleted(t *testing.T, name string, run rolloutRun) string {
	t.Helper()
	ctx := context.Background()
	completed := 0
	for _, e := range run.ended {
		d, ok := run.drains[e.Name]
		switch {
		case !ok:
			t.Errorf("pod %s: its drain never reached status.drains of Gateway %s", e.Name, name)
		case d.outcome != "completed":
			t.Errorf("pod %s: status.drains outcome %q (exit code %d, %d ms), want completed", e.Name, d.outcome, d.exitCode, d.durationMS)
		case d.grace != e.Grace:
			t.Errorf("pod %s: status.drains grace period %d s, want the pod's %d s", e.Name, d.grace, e.Grace)
		case d.durationMS <= 0 || d.durationMS >= d.grace*1000:
			t.Errorf("pod %s: status.drains duration %d ms, want above 0 and under the grace period of %d s", e.Name, d.durationMS, d.grace)
		default:
			completed++
		}
	}
	// An Event per drain, named in its note ("Pod <name> drained in ...").
	evs, err := s.c.kube.EventsV1().Events(cfg.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evented := 0
	for _, e := range run.ended {
		found := false
		for _, ev := range evs.Items {
			if ev.Regarding.Kind == "Gateway" && ev.Regarding.Name == name && ev.Reason == "Drained" && strings.Contains(ev.Note, "Pod "+e.Name+" drained in ") {
				found = true
				break
			}
		}
		if found {
			evented++
		} else {
			t.Errorf("pod %s: no Drained Event on Gateway %s names it", e.Name, name)
		}
	}
	gw, err := s.c.getGateway(ctx, cfg.namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	held := len(drainsOf(gw))
	if want := min(10, len(run.ended)); held < want {
		t.Errorf("status.drains holds %d records after %d drains, want at least %d", held, len(run.ended), want)
	}
	if st, reason := rollout.Condition(gw, "DrainsComplete"); st != "True" {
		t.Errorf("DrainsComplete=%s %s after completed drains", st, reason)
	}
	return fmt.Sprintf("status-drains-completed=%d/%d drained-events=%d/%d status-holds=%d", completed, len(run.ended), evented, len(run.ended), held)
}

// killedMidDrain deletes one gateway pod with a grace period of 1 s, shorter than its
// drain delay (4 s): the kubelet kills it mid-drain, and the Gateway's status says so.
func (s *e2e) killedMidDrain(t *testing.T) {
	ctx := context.Background()
	dep, err := s.c.ownedDeployment(ctx, s.gateway)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := s.c.kube.CoreV1().Pods(cfg.namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(dep.Spec.Selector)})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("gateway pods: %d, %v", len(pods.Items), err)
	}
	victim := pods.Items[0].Name
	// What `kubectl delete pod --grace-period=1` sends.
	if err := s.c.kube.CoreV1().Pods(cfg.namespace).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}); err != nil {
		t.Fatalf("delete pod %s with a grace period of 1 s: %v", victim, err)
	}
	t.Logf("deleted pod %s with --grace-period=1 (its drain delay is %s)", victim, budgets(nil).Plan().DrainDelay)
	var d drainSeen
	var message string
	eventually(t, time.Minute, "the kill in status.drains and DrainsComplete=False", func(ctx context.Context) (bool, string, error) {
		gw, err := s.c.getGateway(ctx, cfg.namespace, gatewayName)
		if err != nil {
			return false, "", err
		}
		var ok bool
		if d, ok = drainsOf(gw)[victim]; !ok {
			return false, "pod " + victim + " not in status.drains yet", nil
		}
		st, reason := rollout.Condition(gw, "DrainsComplete")
		message = reason
		return st == "False", "DrainsComplete=" + st + " " + reason, nil
	})
	if d.outcome != "killed" || d.exitCode != 137 || d.grace != 1 {
		t.Errorf("pod %s: status.drains %+v, want outcome killed, exit code 137 (SIGKILL), grace period 1 s", victim, d)
	}
	// "DrainKilled: Pod <name> was killed (exit code 137) 1s after SIGTERM, before its
	// drain ended: it needed more than its 1s grace period."
	took := (time.Duration(d.durationMS) * time.Millisecond).String()
	for _, want := range []string{"DrainKilled", "Pod " + victim, took + " after SIGTERM", "more than its 1s grace period"} {
		if !strings.Contains(message, want) {
			t.Errorf("DrainsComplete says %q, want it to contain %q", message, want)
		}
	}
	evs, err := s.c.kube.EventsV1().Events(cfg.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evented := false
	for _, ev := range evs.Items {
		if ev.Regarding.Name == gatewayName && ev.Type == corev1.EventTypeWarning && ev.Reason == "DrainKilled" && strings.Contains(ev.Note, victim) {
			evented = true
		}
	}
	if !evented {
		t.Errorf("no DrainKilled Warning Event names pod %s", victim)
	}
	s.summary = append(s.summary, fmt.Sprintf("e2e kill mid-drain: pod %s deleted with grace 1s: status.drains outcome=%s exit=%d after %s; DrainsComplete=False %q",
		victim, d.outcome, d.exitCode, took, message))
	// The Deployment replaces it before the next step's rollouts.
	eventually(t, cfg.stepTimeout, "the killed pod replaced", func(ctx context.Context) (bool, string, error) {
		dep, err := s.c.ownedDeployment(ctx, s.gateway)
		if err != nil {
			return false, "", err
		}
		pods, err := s.c.kube.CoreV1().Pods(cfg.namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(dep.Spec.Selector)})
		if err != nil {
			return false, "", err
		}
		ok, detail := rollout.RolledOut(dep)
		return ok && len(pods.Items) == 2, fmt.Sprintf("%s, %d pods", detail, len(pods.Items)), nil
	})
}
