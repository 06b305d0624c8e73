package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// A claim whose hand-over left only quarantined records, and its release by a person
// (docs/operator.md, "The persistent audit spool"; docs/audit-spool.md, "Hand-over").

// tellQuarantineLeft tells, once per Job (not when the status already showed that Job
// in state quarantineLeft), that a claim holds only quarantine and waits for a person.
func (r *GatewayReconciler) tellQuarantineLeft(gw *ferrofedv1alpha1.Gateway, prev ferrofedv1alpha1.SpoolClaimStatus, job *batchv1.Job, records, size int64) {
	if prev.HandOver != nil && prev.HandOver.Job == job.Name && prev.HandOver.State == ferrofedv1alpha1.HandOverQuarantineLeft {
		return
	}
	r.Recorder.Eventf(gw, job, corev1.EventTypeWarning, ferrofedv1alpha1.ReasonQuarantineLeft, "HandOver",
		"Job %s delivered everything it could from claim %s; %d quarantined record(s) (%d bytes) are left, which the audit repository refused for good "+
			"(or were found damaged) and no hand-over can deliver: no new Job starts, and the claim is kept. Inspect them, then annotate the claim %s=true "+
			"to delete it with them, or delete the claim yourself.",
		job.Name, job.Labels[LabelHandOverClaim], records, size, AnnotationReleaseQuarantine)
}

// tellReleaseRefused tells, once per appearance of the annotation (not when the status
// already showed the claim asking), that a claim's release is not acted on, and why.
func (r *GatewayReconciler) tellReleaseRefused(gw *ferrofedv1alpha1.Gateway, prev ferrofedv1alpha1.SpoolClaimStatus, claim, why string) {
	if prev.ReleaseRequested {
		return
	}
	r.Recorder.Eventf(gw, nil, corev1.EventTypeWarning, "ReleaseRefused", "ReleaseQuarantine",
		"Claim %s carries %s=true, but %s: nothing is released, and the claim stays as it is. The annotation counts only on a claim whose hand-over "+
			"left nothing but quarantined records (status.audit: quarantineLeft), set after the operator reported that.",
		claim, AnnotationReleaseQuarantine, why)
}

// releaseClaim deletes an orphaned claim whose hand-over left only quarantine (p), on
// the request of its annotation. The claim is read live, so that the Event can name the
// field manager that set the annotation, and deleted with that read's UID and
// resourceVersion as preconditions: a claim replaced, or its annotation removed, since is
// not deleted. deleted reports whether the claim is gone (or going).
func (r *GatewayReconciler) releaseClaim(ctx context.Context, gw *ferrofedv1alpha1.Gateway, name string, uid types.UID, p handOverPlan, size int64) (deleted bool, err error) {
	reader := r.reader()
	claim := &corev1.PersistentVolumeClaim{}
	switch err := reader.Get(ctx, types.NamespacedName{Namespace: gw.Namespace, Name: name}, claim); {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get claim %s to release its quarantine: %w", name, err)
	case claim.UID != uid || claim.Annotations[AnnotationReleaseQuarantine] != "true":
		return false, nil // changed since the cache saw it: the next pass decides again
	case claim.DeletionTimestamp != nil:
		return true, nil
	}
	err = r.Delete(ctx, claim, client.Preconditions{UID: &claim.UID, ResourceVersion: &claim.ResourceVersion})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case apierrors.IsConflict(err):
		return false, nil // changed meanwhile: its watch event brings the next pass
	case err != nil:
		return false, fmt.Errorf("delete claim %s (its quarantine released): %w", name, err)
	}
	by := "an unknown field manager"
	if manager, at := annotationSetter(claim.ManagedFields, AnnotationReleaseQuarantine); manager != "" {
		by = fmt.Sprintf("field manager %q", manager)
		if !at.IsZero() {
			by += " at " + at.UTC().Format(time.RFC3339)
		}
	}
	r.Recorder.Eventf(gw, claim, corev1.EventTypeNormal, "QuarantineReleased", "ReleaseQuarantine",
		"Deleted claim %s with the %d quarantined record(s) (%d bytes) Job %s left: released by its annotation %s=true, set by %s.",
		name, p.quarantined, size, p.newest.Name, AnnotationReleaseQuarantine, by)
	return true, nil
}

// annotationSetter is the field manager whose managed fields hold the annotation key,
// and the time of its last write; "" when none does (managedFields cut, or not kept).
func annotationSetter(entries []metav1.ManagedFieldsEntry, key string) (string, time.Time) {
	for _, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Metadata struct {
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		if _, ok := fields.Metadata.Annotations["f:"+key]; ok {
			var at time.Time
			if e.Time != nil {
				at = e.Time.Time
			}
			return e.Manager, at
		}
	}
	return "", time.Time{}
}
