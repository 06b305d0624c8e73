package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// The spool claims, their hand-over Jobs and the finalizer. RBAC: the claims are made by
// the StatefulSet controller and deleted by the operator after their hand-over; the Jobs
// are the operator's own.
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=ferrofed.io,resources=gateways,verbs=patch
// +kubebuilder:rbac:groups=ferrofed.io,resources=gateways/finalizers,verbs=update

// spoolResult is what one pass over a Gateway's spool claims found and did.
type spoolResult struct {
	// status is status.audit, nil with no claims.
	status *ferrofedv1alpha1.AuditStatus
	// claimsLeft counts the claims that still exist after the pass, and the retiring
	// pods still held: the finalizer stays while any is left.
	claimsLeft int
	// requeue, when not zero, is when a backoff ends.
	requeue time.Duration
	// reports are the drain reports taken from the inbox, put back when the status
	// patch fails.
	reports map[string]claimFigures
}

// needsSpoolPass reports whether a Gateway may have spool claims: it has a persistent
// spool, holds the finalizer, or its status lists claims.
func needsSpoolPass(gw *ferrofedv1alpha1.Gateway) bool {
	return gw.Spec.PersistentSpool() || slices.Contains(gw.Finalizers, FinalizerAuditHandOver) || gw.Status.Audit != nil
}

// reconcileSpool makes one pass over gw's spool claims (claimRoles): an owned claim's
// leftover hand-over Job is deleted (its replica is back and owns the spool); an
// orphaned claim whose pod is gone is handed over (planHandOver), and deleted only
// after its Job succeeded. statefulSet says whether a StatefulSet should exist;
// rendered is the configuration the Jobs mount (the Gateway's ConfigMap holds it).
func (r *GatewayReconciler) reconcileSpool(ctx context.Context, gw *ferrofedv1alpha1.Gateway, rendered []byte, statefulSet bool) (spoolResult, error) {
	key := client.ObjectKeyFromObject(gw)
	ns := client.InNamespace(gw.Namespace)
	var claims corev1.PersistentVolumeClaimList
	if err := r.List(ctx, &claims, ns, client.MatchingLabels{LabelAuditSpool: gw.Name}); err != nil {
		return spoolResult{}, fmt.Errorf("list the spool claims: %w", err)
	}
	var jobs batchv1.JobList
	if err := r.List(ctx, &jobs, ns, client.MatchingLabels{LabelHandOverOf: gw.Name}); err != nil {
		return spoolResult{}, fmt.Errorf("list the hand-over Jobs: %w", err)
	}
	pods, err := podsOf(r.Pods, gw.Namespace, map[string]string{LabelInstance: gw.Name})
	if err != nil {
		return spoolResult{}, fmt.Errorf("list the gateway pods: %w", err)
	}
	jobPods, err := podsOf(r.Pods, gw.Namespace, map[string]string{LabelHandOverOf: gw.Name})
	if err != nil {
		return spoolResult{}, fmt.Errorf("list the hand-over pods: %w", err)
	}
	podExists := map[string]bool{}
	for _, p := range pods {
		podExists[p.Name] = true
	}
	uids := map[string]types.UID{}
	release := map[string]bool{}
	var names []string
	for _, c := range claims.Items {
		if controlledBy(&c, gw) || c.DeletionTimestamp != nil {
			continue // a claim the Gateway controls is no spool claim; one being deleted is gone
		}
		names = append(names, c.Name)
		uids[c.Name] = c.UID
		release[c.Name] = c.Annotations[AnnotationReleaseQuarantine] == "true"
	}
	jobsOf := map[string][]*batchv1.Job{}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if controlledBy(j, gw) {
			jobsOf[j.Labels[LabelHandOverClaim]] = append(jobsOf[j.Labels[LabelHandOverClaim]], j)
		}
	}
	roles := claimRoles(gw.Name, names, gw.Spec.ReplicasOrDefault(), statefulSet)

	// The figures: as the status last had them, then the drains reported since.
	figures := map[string]claimFigures{}
	previous := map[string]ferrofedv1alpha1.SpoolClaimStatus{}
	if gw.Status.Audit != nil {
		for _, c := range gw.Status.Audit.Claims {
			previous[c.Name] = c
			figures[c.Name] = claimFigures{records: c.UndeliveredRecords, bytes: c.UndeliveredBytes, reportedBy: c.ReportedBy}
		}
	}
	res := spoolResult{reports: r.drained.takeAudit(key)}
	for _, role := range roles {
		if f, ok := res.reports[ReplicaPodName(gw.Name, role.ordinal)]; ok {
			figures[role.name] = f
		}
	}

	handOvers := map[string]*ferrofedv1alpha1.HandOverStatus{}
	// refused: the claims whose release is asked and not acted on (releaseRequested).
	refused := map[string]bool{}
	var kept []claimRole
	var errs []error
	now := time.Now()
	for _, role := range roles {
		js := jobsOf[role.name]
		delete(jobsOf, role.name)
		if !role.orphaned {
			// The replica is back (a scale-up): it owns the spool again, and its lock
			// keeps a Job out anyway; the Job goes.
			for _, j := range js {
				errs = append(errs, r.deleteJob(ctx, gw, j, "its claim's replica is back"))
			}
			if release[role.name] {
				refused[role.name] = true
				r.tellReleaseRefused(gw, previous[role.name], role.name, "its replica "+ReplicaPodName(gw.Name, role.ordinal)+" owns it")
			}
			kept = append(kept, role)
			continue
		}
		var newest *batchv1.Job
		for _, j := range js {
			if newest == nil || jobAttempt(j) > jobAttempt(newest) {
				newest = j
			}
		}
		var rep *handOverReport
		var msg *lifecycle.HandOverMessage
		if newest != nil {
			if rep = handOverReportOf(jobPods, newest.Name); rep != nil {
				msg = &rep.msg
				records, size := lifecycle.Undelivered(rep.msg.Left)
				figures[role.name] = claimFigures{records: records, bytes: size, reportedBy: ferrofedv1alpha1.ReportedByHandOver}
			}
		}
		p := planHandOver(claimFacts{podExists: podExists[ReplicaPodName(gw.Name, role.ordinal)], jobs: js, report: rep,
			release: release[role.name], prev: previous[role.name]}, now)
		if p.newest != nil {
			handOvers[role.name] = &ferrofedv1alpha1.HandOverStatus{Job: p.newest.Name, State: p.state}
		}
		if p.releaseRefused != "" {
			refused[role.name] = true
			r.tellReleaseRefused(gw, previous[role.name], role.name, p.releaseRefused)
		}
		switch p.step {
		case stepWait:
			switch p.state {
			case ferrofedv1alpha1.HandOverFailedState:
				r.tellHandOverFailed(gw, previous[role.name], p.newest, msg)
			case ferrofedv1alpha1.HandOverQuarantineLeft:
				r.tellQuarantineLeft(gw, previous[role.name], p.newest, p.quarantined, figures[role.name].bytes)
			}
			if p.retryIn > 0 && (res.requeue == 0 || p.retryIn < res.requeue) {
				res.requeue = p.retryIn
			}
			kept = append(kept, role)
		case stepStart:
			if p.state == ferrofedv1alpha1.HandOverFailedState {
				r.tellHandOverFailed(gw, previous[role.name], p.newest, msg)
			}
			if !gatewayspec.ImageAllowed(r.AllowedImages, gw.Spec.Image) {
				// No Job in an image the operator does not allow (an update of a
				// Gateway being deleted is not validated): the claim waits.
				kept = append(kept, role)
				continue
			}
			for _, j := range js {
				errs = append(errs, r.deleteJob(ctx, gw, j, "a new attempt replaces it"))
			}
			job := HandOverJob(gw, rendered, role.name, p.attempt)
			if err := r.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
				errs = append(errs, fmt.Errorf("create hand-over Job %s: %w", job.Name, err))
			} else if err == nil {
				r.Recorder.Eventf(gw, job, corev1.EventTypeNormal, "HandOverStarted", "HandOver",
					"Started Job %s (attempt %d) to hand over claim %s: its replica %s is gone for good.", job.Name, p.attempt, role.name, ReplicaPodName(gw.Name, role.ordinal))
			}
			handOvers[role.name] = &ferrofedv1alpha1.HandOverStatus{Job: job.Name, State: ferrofedv1alpha1.HandOverRunning}
			kept = append(kept, role)
		case stepDeleteClaim:
			claim := &corev1.PersistentVolumeClaim{}
			claim.Name, claim.Namespace = role.name, gw.Namespace
			err := r.Delete(ctx, claim, client.Preconditions{UID: ptr.To(uids[role.name])})
			switch {
			case err == nil:
				delivered := int64(0)
				if msg != nil {
					delivered = msg.Delivered
				}
				r.Recorder.Eventf(gw, p.newest, corev1.EventTypeNormal, "HandOverSucceeded", "HandOver",
					"Job %s handed claim %s over: %d record(s) delivered, none left; the claim is deleted.", p.newest.Name, role.name, delivered)
			case apierrors.IsNotFound(err):
			default:
				errs = append(errs, fmt.Errorf("delete claim %s: %w", role.name, err))
				kept = append(kept, role)
			}
		case stepReleaseClaim:
			deleted, err := r.releaseClaim(ctx, gw, role.name, uids[role.name], p, figures[role.name].bytes)
			if err != nil {
				errs = append(errs, err)
			}
			if !deleted {
				kept = append(kept, role)
			}
		}
	}
	// Jobs whose claim is gone (deleted after its hand-over, or by someone): their work
	// is done.
	for claim, js := range jobsOf {
		for _, j := range js {
			errs = append(errs, r.deleteJob(ctx, gw, j, "claim "+claim+" is gone"))
		}
	}
	retiring, err := r.reconcileRetiring(ctx, gw, rendered)
	errs = append(errs, err)
	if retiring.requeue > 0 && (res.requeue == 0 || retiring.requeue < res.requeue) {
		res.requeue = retiring.requeue
	}
	res.status = withRetiring(auditSummary(gw.Name, kept, figures, handOvers, refused), retiring)
	res.claimsLeft = len(kept) + retiring.held
	return res, errors.Join(errs...)
}

// deleteJob deletes a hand-over Job and, in the background, its pods.
func (r *GatewayReconciler) deleteJob(ctx context.Context, gw *ferrofedv1alpha1.Gateway, j *batchv1.Job, why string) error {
	if j.DeletionTimestamp != nil {
		return nil
	}
	err := r.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: ptr.To(j.UID)})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete hand-over Job %s (%s): %w", j.Name, why, err)
	}
	return nil
}

// handOverReportOf is the message `ferrofed audit drain` left in the terminated
// container of one of job's pods (the newest that has one), with that container's exit
// status; nil when there is none, or it cannot be read.
func handOverReportOf(pods []corev1.Pod, job string) *handOverReport {
	var best *corev1.ContainerStateTerminated
	for _, p := range pods {
		if p.Labels[LabelHandOverJob] != job {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; cs.Name == HandOverContainerName && t != nil && t.Message != "" &&
				(best == nil || t.FinishedAt.After(best.FinishedAt.Time)) {
				best = t
			}
		}
	}
	if best == nil {
		return nil
	}
	m, err := lifecycle.ParseHandOverMessage([]byte(best.Message))
	if err != nil {
		return nil
	}
	return &handOverReport{msg: m, exit: best.ExitCode}
}

// tellHandOverFailed tells a failed hand-over Job in an Event, once: not when the status
// already showed that Job failed.
func (r *GatewayReconciler) tellHandOverFailed(gw *ferrofedv1alpha1.Gateway, prev ferrofedv1alpha1.SpoolClaimStatus, job *batchv1.Job, msg *lifecycle.HandOverMessage) {
	if prev.HandOver != nil && prev.HandOver.Job == job.Name && prev.HandOver.State == ferrofedv1alpha1.HandOverFailedState {
		return
	}
	left := "what it holds was not reported"
	if msg != nil {
		records, size := lifecycle.Undelivered(msg.Left)
		left = fmt.Sprintf("%s with %d record(s), %d bytes left", msg.Outcome, records, size)
	}
	r.Recorder.Eventf(gw, job, corev1.EventTypeWarning, ferrofedv1alpha1.ReasonHandOverFailed, "HandOver",
		"Job %s did not hand claim %s over (%s); the claim is kept, and a new Job starts %s after the failure.",
		job.Name, job.Labels[LabelHandOverClaim], left, HandOverRetryBackoff)
}

// setFinalizer adds or removes FinalizerAuditHandOver with a merge patch conditional on
// the Gateway's resourceVersion (a conflict is retried by the next reconcile).
func (r *GatewayReconciler) setFinalizer(ctx context.Context, gw *ferrofedv1alpha1.Gateway, on bool) error {
	has := slices.Contains(gw.Finalizers, FinalizerAuditHandOver)
	if has == on {
		return nil
	}
	fins := slices.DeleteFunc(slices.Clone(gw.Finalizers), func(f string) bool { return f == FinalizerAuditHandOver })
	if on {
		fins = append(fins, FinalizerAuditHandOver)
	}
	if fins == nil {
		fins = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": gw.ResourceVersion, "finalizers": fins}})
	if err != nil {
		return err
	}
	// A Gateway gone already (its last finalizer removed) needs nothing more.
	if err := r.Patch(ctx, gw, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("set the finalizer %s to %t: %w", FinalizerAuditHandOver, on, err)
	}
	return nil
}

// finalize is the reconcile of a Gateway being deleted that holds FinalizerAuditHandOver:
// with retainOnDelete the claims are named in an Event and the Gateway let go at once;
// otherwise the operator deletes the StatefulSet (its pods drain and release their
// claims), hands every claim over, and lets the Gateway go once none is left.
func (r *GatewayReconciler) finalize(ctx context.Context, gw *ferrofedv1alpha1.Gateway) (ctrl.Result, error) {
	if !slices.Contains(gw.Finalizers, FinalizerAuditHandOver) {
		return ctrl.Result{}, nil // the garbage collector removes the owned objects
	}
	if gw.Spec.RetainSpoolClaimsOnDelete() {
		var claims corev1.PersistentVolumeClaimList
		if err := r.List(ctx, &claims, client.InNamespace(gw.Namespace), client.MatchingLabels{LabelAuditSpool: gw.Name}); err != nil {
			return ctrl.Result{}, fmt.Errorf("list the spool claims: %w", err)
		}
		var names []string
		for _, c := range claims.Items {
			names = append(names, c.Name)
		}
		slices.Sort(names)
		if err := r.releaseRetiringPods(ctx, gw); err != nil {
			return ctrl.Result{}, err
		}
		if len(names) > 0 {
			r.Recorder.Eventf(gw, nil, corev1.EventTypeNormal, "SpoolClaimsRetained", "Delete",
				"spec.audit.spool.retainOnDelete: kept %d spool claim(s), not handed over: %s. Records in them wait there; delete them by hand once drained (ferrofed audit drain).",
				len(names), nameList(names))
		}
		return ctrl.Result{}, r.setFinalizer(ctx, gw, false)
	}
	sts := &appsv1.StatefulSet{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(gw), sts); err == nil && controlledBy(sts, gw) && (sts.DeletionTimestamp == nil || orphaning(sts)) {
		if err := r.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete StatefulSet %s: %w", sts.Name, err)
		}
		r.Recorder.Eventf(gw, nil, corev1.EventTypeNormal, "Deleted", "Delete",
			"Deleted StatefulSet %s: its pods drain and release their spool claims, which are handed over before the Gateway goes.", sts.Name)
	} else if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("get StatefulSet %s: %w", gw.Name, err)
	}
	rendered, _, _ := r.lastValidRendering(ctx, gw)
	res, err := r.reconcileSpool(ctx, gw, rendered, false)
	if perr := r.patchAuditStatus(ctx, gw, res); perr != nil {
		r.drained.putBackAudit(client.ObjectKeyFromObject(gw), res.reports)
		err = errors.Join(err, perr)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if res.claimsLeft == 0 {
		return ctrl.Result{}, r.setFinalizer(ctx, gw, false)
	}
	return ctrl.Result{RequeueAfter: res.requeue}, nil
}

// patchAuditStatus writes status.audit and AuditDelivering of a Gateway being deleted
// (the rest of its status stays as it was), when they changed.
func (r *GatewayReconciler) patchAuditStatus(ctx context.Context, gw *ferrofedv1alpha1.Gateway, res spoolResult) error {
	st := *gw.Status.DeepCopy()
	st.Audit = res.status
	setAuditCondition(&st, gw.Generation)
	setAuditMetric(gw, st.Audit)
	if equality.Semantic.DeepEqual(st, gw.Status) {
		return nil
	}
	audit, err := auditPatch(st.Audit)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": gw.ResourceVersion},
		"status": map[string]any{"audit": audit, "conditions": st.Conditions}})
	if err != nil {
		return err
	}
	if err := r.Status().Patch(ctx, gw, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("patch Gateway status: %w", client.IgnoreNotFound(err))
	}
	return nil
}

// setAuditCondition sets AuditDelivering from st.Audit.
func setAuditCondition(st *ferrofedv1alpha1.GatewayStatus, generation int64) {
	c := auditCondition(st.Audit)
	c.ObservedGeneration = generation
	meta.SetStatusCondition(&st.Conditions, c)
}
