package controllers

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// drainInbox holds, per Gateway, the drains the pod watch saw and the status has not
// recorded yet. A pod is gone from the cache soon after its containers end, so its drain
// is read when the watch delivers its final state, not by the next reconcile. Each pod
// UID is taken once; an operator restart loses what was not yet recorded.
type drainInbox struct {
	mu      sync.Mutex
	pending map[types.NamespacedName][]ferrofedv1alpha1.DrainRecord
	seen    map[types.UID]time.Time
}

// add keeps d for gw unless pod uid was seen already; it reports whether it was new.
func (b *drainInbox) add(gw types.NamespacedName, uid types.UID, d ferrofedv1alpha1.DrainRecord) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending == nil {
		b.pending, b.seen = map[types.NamespacedName][]ferrofedv1alpha1.DrainRecord{}, map[types.UID]time.Time{}
	}
	if _, dup := b.seen[uid]; dup {
		return false
	}
	// Forget the pods seen long ago: the set stays as small as the recent drains.
	for u, at := range b.seen {
		if time.Since(at) > time.Hour {
			delete(b.seen, u)
		}
	}
	b.seen[uid] = time.Now()
	b.pending[gw] = append(b.pending[gw], d)
	return true
}

func (b *drainInbox) take(gw types.NamespacedName) []ferrofedv1alpha1.DrainRecord {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.pending[gw]
	delete(b.pending, gw)
	return d
}

func (b *drainInbox) putBack(gw types.NamespacedName, d []ferrofedv1alpha1.DrainRecord) {
	if len(d) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending == nil {
		b.pending = map[types.NamespacedName][]ferrofedv1alpha1.DrainRecord{}
	}
	b.pending[gw] = append(d, b.pending[gw]...)
}

// podDrained maps a gateway pod's event to its Gateway when the pod was deleted and its
// gateway container has ended: the drain is read now, counted, and kept for the status.
func (r *GatewayReconciler) podDrained(_ context.Context, o client.Object) []reconcile.Request {
	pod, ok := o.(*corev1.Pod)
	if !ok || pod.Labels[LabelManagedBy] != FieldOwner || pod.Labels[LabelInstance] == "" {
		return nil
	}
	d, ok := drainOf(pod)
	if !ok {
		return nil
	}
	gw := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Labels[LabelInstance]}
	if !r.drained.add(gw, pod.UID, d) {
		return nil
	}
	drainsTotal.WithLabelValues(d.Outcome).Inc()
	if d.DurationMilliseconds > 0 {
		drainSeconds.Observe(float64(d.DurationMilliseconds) / 1000)
	}
	return []reconcile.Request{{NamespacedName: gw}}
}

// tellDrain emits the Event of a drain the status just recorded, in the words of the
// DrainsComplete condition it would make.
func (r *GatewayReconciler) tellDrain(gw *ferrofedv1alpha1.Gateway, d ferrofedv1alpha1.DrainRecord) {
	c := drainsCondition([]ferrofedv1alpha1.DrainRecord{d})
	if c.Status == metav1.ConditionTrue {
		r.Recorder.Eventf(gw, nil, corev1.EventTypeNormal, "Drained", "Drain", "%s", c.Message)
		return
	}
	r.Recorder.Eventf(gw, nil, corev1.EventTypeWarning, c.Reason, "Drain", "%s", c.Message)
}
