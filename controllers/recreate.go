package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// The StatefulSet of a persistent spool is made again when the API server refuses to
// change its immutable fields (in practice its volumeClaimTemplate: a larger storage
// request, another storageClassName, other labels), as the Prometheus operator does:
// it is deleted with propagationPolicy Orphan, so that its pods keep running and
// serving and its claims stay, and created again from the new template once it is gone;
// the new StatefulSet (the same selector) adopts the running pods and rolls them as
// usual. In a cluster the garbage collector finishes an Orphan delete (it takes the
// StatefulSet's ownerReference off the pods, then the 'orphan' finalizer off the
// StatefulSet); until then nothing is applied and nothing created, and the Gateway
// looks again every recreateRecheck. A Background or Foreground delete would take the
// pods, and their drains, with it: never here.

const (
	// EventStatefulSetRecreated is the reason of the Normal Event told when the
	// StatefulSet is deleted with propagationPolicy Orphan to be made again: it names
	// what changed, and that the existing claims keep their size.
	EventStatefulSetRecreated = "StatefulSetRecreated"
	// recreateRecheck is how often a Gateway whose StatefulSet is being deleted looks
	// again (the deletion's end sends an event too; this is in case it does not).
	recreateRecheck = 2 * time.Second
)

// immutableStatefulSetFields reads a refused apply: ok when the API server refused a
// StatefulSet as invalid and every cause is an update of an immutable spec field;
// fields are the causes' fields. Two forms are known: kube-apiserver v1.37 (and its
// declarative validation) gives one cause per field, "spec.volumeClaimTemplates: ...:
// field is immutable"; older ones gave one cause on "spec", "Forbidden: updates to
// statefulset spec for fields other than 'replicas', ... are forbidden". A refusal with
// any other cause (a value invalid in itself) is not one a re-create would get past.
func immutableStatefulSetFields(err error) (fields []string, ok bool) {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return nil, false
	}
	d := status.Status().Details
	if d == nil || d.Kind != "StatefulSet" || (d.Group != "" && d.Group != appsv1.GroupName) || len(d.Causes) == 0 {
		return nil, false
	}
	for _, c := range d.Causes {
		if !immutableCause(c) {
			return nil, false
		}
		fields = append(fields, c.Field)
	}
	return fields, true
}

// immutableCause reports whether one cause of an Invalid StatefulSet says an immutable
// spec field was changed, in either form immutableStatefulSetFields names.
func immutableCause(c metav1.StatusCause) bool {
	msg := strings.ToLower(c.Message)
	switch {
	case c.Field == "spec":
		return strings.Contains(msg, "updates to statefulset spec for fields other than")
	case strings.HasPrefix(c.Field, "spec."):
		return strings.Contains(msg, "field is immutable")
	}
	return false
}

// recreateChanges decides whether a refused apply of desired over live is answered by
// re-creating the StatefulSet, and names what changed for the Event and the status.
// Only a refusal of immutable fields (immutableStatefulSetFields) is, and only when the
// selector stays: a new StatefulSet adopts the running pods only if it selects them.
func recreateChanges(refused error, live, desired *appsv1.StatefulSet) ([]string, bool) {
	if _, ok := immutableStatefulSetFields(refused); !ok {
		return nil, false
	}
	if !equality.Semantic.DeepEqual(live.Spec.Selector, desired.Spec.Selector) {
		return nil, false
	}
	return statefulSetChanges(live, desired), true
}

// statefulSetChanges names the changes of the immutable fields the operator sets, live
// to desired: the spool claim template's storage request, storageClassName, accessModes,
// volumeMode (when set), labels and annotations, then serviceName and
// podManagementPolicy. Fields the API server defaults are compared only where desired
// sets them. A change it cannot name is "the volumeClaimTemplate".
func statefulSetChanges(live, desired *appsv1.StatefulSet) []string {
	var out []string
	lt, dt := live.Spec.VolumeClaimTemplates, desired.Spec.VolumeClaimTemplates
	if len(lt) != 1 || len(dt) != 1 || lt[0].Name != dt[0].Name {
		out = append(out, "the volumeClaimTemplates")
	} else {
		out = append(out, claimTemplateChanges(lt[0], dt[0])...)
	}
	if live.Spec.ServiceName != desired.Spec.ServiceName {
		out = append(out, fmt.Sprintf("serviceName %s to %s", live.Spec.ServiceName, desired.Spec.ServiceName))
	}
	if desired.Spec.PodManagementPolicy != "" && live.Spec.PodManagementPolicy != desired.Spec.PodManagementPolicy {
		out = append(out, fmt.Sprintf("podManagementPolicy %s to %s", live.Spec.PodManagementPolicy, desired.Spec.PodManagementPolicy))
	}
	if len(out) == 0 {
		out = append(out, "the volumeClaimTemplate")
	}
	return out
}

// claimTemplateChanges names what differs between two claim templates (see
// statefulSetChanges).
func claimTemplateChanges(live, desired corev1.PersistentVolumeClaim) []string {
	var out []string
	l, d := live.Spec, desired.Spec
	lq, lok := l.Resources.Requests[corev1.ResourceStorage]
	dq, dok := d.Resources.Requests[corev1.ResourceStorage]
	if lok != dok || lq.Cmp(dq) != 0 {
		out = append(out, fmt.Sprintf("storage request %s to %s", quantityOrNone(lq, lok), quantityOrNone(dq, dok)))
	}
	if ls, ds := ptr.Deref(l.StorageClassName, ""), ptr.Deref(d.StorageClassName, ""); ls != ds {
		out = append(out, fmt.Sprintf("storageClassName %s to %s", classOrDefault(ls), classOrDefault(ds)))
	}
	if !slices.Equal(l.AccessModes, d.AccessModes) {
		out = append(out, fmt.Sprintf("accessModes %v to %v", l.AccessModes, d.AccessModes))
	}
	if d.VolumeMode != nil && ptr.Deref(l.VolumeMode, "") != *d.VolumeMode {
		out = append(out, fmt.Sprintf("volumeMode %s to %s", ptr.Deref(l.VolumeMode, "(none)"), *d.VolumeMode))
	}
	if !maps.Equal(live.Labels, desired.Labels) {
		out = append(out, "the claims' labels")
	}
	if !maps.Equal(live.Annotations, desired.Annotations) {
		out = append(out, "the claims' annotations")
	}
	return out
}

func quantityOrNone(q resource.Quantity, ok bool) string {
	if !ok {
		return "(none)"
	}
	return q.String()
}

func classOrDefault(c string) string {
	if c == "" {
		return "(the default class)"
	}
	return c
}

// typedStatefulSet is a StatefulSet's apply configuration as the typed object.
func typedStatefulSet(desired runtime.ApplyConfiguration) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{}
	asApplyConfigurationInto(desired, s)
	return s
}

// orphaning reports whether a StatefulSet is being deleted with propagationPolicy
// Orphan: the garbage collector has not released its pods yet.
func orphaning(s *appsv1.StatefulSet) bool {
	return s.DeletionTimestamp != nil && slices.Contains(s.Finalizers, metav1.FinalizerOrphanDependents)
}

// claimsKeepTheirSize is said wherever a re-create is told.
const claimsKeepTheirSize = "The existing claims (spool-%s-<n>) keep their size and storage class: a template shapes only the claims made after it; " +
	"grow an existing claim on the claim itself (spec.resources.requests.storage) when its StorageClass allows volume expansion."

// statefulSetGoing is the answer while the Gateway's StatefulSet is being deleted: it is
// not applied to (it is going) and not made again until it is gone; the Gateway
// reports Ready=False, ReasonStatefulSetRecreating, and looks again shortly.
func statefulSetGoing(gw *ferrofedv1alpha1.Gateway, live, desired *appsv1.StatefulSet) applyProblem {
	if !orphaning(live) {
		return applyProblem{ferrofedv1alpha1.ReasonStatefulSetRecreating, fmt.Sprintf(
			"StatefulSet %s is being deleted; it is created again from the Gateway once it is gone.", live.Name)}
	}
	return applyProblem{ferrofedv1alpha1.ReasonStatefulSetRecreating, fmt.Sprintf(
		"StatefulSet %s is being re-created with what the API server does not change on a StatefulSet (%s): it was deleted with propagationPolicy Orphan, "+
			"its pods keep running and serving and its claims stay; it is created again from the new template once the garbage collector has released its pods, "+
			"and adopts them. "+claimsKeepTheirSize,
		live.Name, strings.Join(statefulSetChanges(live, desired), ", "), gw.Name)}
}

// recreateStatefulSet answers a refused apply of the Gateway's StatefulSet o: when the
// refusal is of immutable fields (recreateChanges), the StatefulSet is deleted with
// propagationPolicy Orphan, told in an EventStatefulSetRecreated Event, and the
// answer is statefulSetGoing's; any other refusal is applyFailed's.
func (r *GatewayReconciler) recreateStatefulSet(ctx context.Context, gw *ferrofedv1alpha1.Gateway, o ownedObject, refused error) error {
	if _, ok := immutableStatefulSetFields(refused); !ok {
		return r.applyFailed(gw, o.kind, gw.Name, refused)
	}
	desired := typedStatefulSet(o.desired)
	// Read again around the cache: one that has not seen an earlier re-create's delete
	// yet must not delete (and tell) twice.
	reader := r.reader()
	live := &appsv1.StatefulSet{}
	if err := reader.Get(ctx, client.ObjectKeyFromObject(gw), live); apierrors.IsNotFound(err) {
		return applyProblem{ferrofedv1alpha1.ReasonStatefulSetRecreating, fmt.Sprintf("StatefulSet %s is gone; it is created again from the Gateway.", gw.Name)}
	} else if err != nil {
		return fmt.Errorf("get StatefulSet %s: %w", gw.Name, err)
	}
	if !controlledBy(live, gw) {
		return r.applyFailed(gw, o.kind, gw.Name, refused)
	}
	if live.DeletionTimestamp != nil {
		return statefulSetGoing(gw, live, desired)
	}
	changed, ok := recreateChanges(refused, live, desired)
	if !ok {
		return r.applyFailed(gw, o.kind, gw.Name, refused)
	}
	err := r.Delete(ctx, live, client.PropagationPolicy(metav1.DeletePropagationOrphan), client.Preconditions{UID: ptr.To(live.UID)})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete StatefulSet %s with propagationPolicy Orphan, to make it again: %w", live.Name, err)
	}
	r.Recorder.Eventf(gw, live, corev1.EventTypeNormal, EventStatefulSetRecreated, "Recreate", "%s", eventNote(fmt.Sprintf(
		"Deleted StatefulSet %s with propagationPolicy Orphan to make it again with what the API server does not change on a StatefulSet: %s. "+
			"Its pods keep running and serving, its claims stay; the new StatefulSet adopts the pods. "+claimsKeepTheirSize,
		live.Name, strings.Join(changed, ", "), gw.Name)))
	live.Finalizers = append(live.Finalizers, metav1.FinalizerOrphanDependents)
	live.DeletionTimestamp = ptr.To(metav1.Now())
	return statefulSetGoing(gw, live, desired)
}
