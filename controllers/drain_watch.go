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
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// drainInbox holds, per Gateway, the drains the pod watch saw and the status has not
// recorded yet. A pod is gone from the cache soon after its containers end, so its drain
// is read when the watch delivers its final state, not by the next reconcile. Each pod
// UID is taken once; an operator restart loses what was not yet recorded.
type drainInbox struct {
	mu      sync.Mutex
	pending map[types.NamespacedName][]ferrofedv1alpha1.DrainRecord
	seen    map[types.UID]time.Time
	// audit holds, per Gateway and pod name, what each drained pod reported its spools
	// still held (spoolReportOf), until status.audit records it.
	audit map[types.NamespacedName]map[string]claimFigures
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
	pod, ok := asPod(o)
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
	if f, ok := spoolReportOf(pod); ok {
		r.drained.addAudit(gw, pod.Name, f)
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

// addAudit keeps what pod's gateway reported its spools held when its drain closed
// them, for the claim of that pod (status.audit).
func (b *drainInbox) addAudit(gw types.NamespacedName, pod string, f claimFigures) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.audit == nil {
		b.audit = map[types.NamespacedName]map[string]claimFigures{}
	}
	if b.audit[gw] == nil {
		b.audit[gw] = map[string]claimFigures{}
	}
	b.audit[gw][pod] = f
}

// takeAudit takes gw's spool reports, by pod name.
func (b *drainInbox) takeAudit(gw types.NamespacedName) map[string]claimFigures {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.audit[gw]
	delete(b.audit, gw)
	return r
}

// putBackAudit returns reports a failed status patch did not record; newer ones win.
func (b *drainInbox) putBackAudit(gw types.NamespacedName, reports map[string]claimFigures) {
	if len(reports) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.audit == nil {
		b.audit = map[types.NamespacedName]map[string]claimFigures{}
	}
	if b.audit[gw] == nil {
		b.audit[gw] = map[string]claimFigures{}
	}
	for pod, f := range reports {
		if _, newer := b.audit[gw][pod]; !newer {
			b.audit[gw][pod] = f
		}
	}
}

// spoolReportOf is what a drained pod's gateway said its spools still held (the
// termination message's audit), or false when it said nothing of them.
func spoolReportOf(pod *corev1.Pod) (claimFigures, bool) {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != ContainerName || cs.State.Terminated == nil {
			continue
		}
		msg, err := lifecycle.ParseTerminationMessage([]byte(cs.State.Terminated.Message))
		if err != nil || msg.Audit == nil {
			return claimFigures{}, false
		}
		records, size := lifecycle.Undelivered(msg.Audit)
		return claimFigures{records: records, bytes: size, reportedBy: ferrofedv1alpha1.ReportedByDrain}, true
	}
	return claimFigures{}, false
}

// podGone maps a deleted pod to its Gateway: a replica's pod gone releases its claim
// for the hand-over, and a hand-over Job's pod gone may end its Job.
func (r *GatewayReconciler) podGone(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetLabels()[LabelManagedBy] != FieldOwner {
		return nil
	}
	name := o.GetLabels()[LabelInstance]
	if name == "" {
		name = o.GetLabels()[LabelHandOverOf]
	}
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// claimChanged maps a spool claim's event to its Gateway.
func (r *GatewayReconciler) claimChanged(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[LabelAuditSpool]
	if name == "" || o.GetLabels()[LabelManagedBy] != FieldOwner {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}
