package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// The persistent spool (spec.audit.spool.volumeClaimTemplate) and its hand-over
// (docs/audit-spool.md, "On Kubernetes"; docs/operator.md, "The persistent audit spool").
const (
	// SpoolVolumeName names the StatefulSet's volumeClaimTemplate, and so the claims:
	// spool-<gateway>-<ordinal>.
	SpoolVolumeName = "spool"
	// LabelAuditSpool is on every spool claim (through the template's metadata): the
	// name of its Gateway. The operator lists a Gateway's claims by it.
	LabelAuditSpool = "ferrofed.io/audit-spool"
	// LabelHandOverOf is on every hand-over Job and its pods: the name of the Gateway.
	LabelHandOverOf = "ferrofed.io/handover-of"
	// LabelHandOverClaim is on every hand-over Job and its pods: the claim it drains.
	LabelHandOverClaim = "ferrofed.io/handover-claim"
	// LabelHandOverAttempt is on every hand-over Job: its attempt for that claim, from 1.
	LabelHandOverAttempt = "ferrofed.io/handover-attempt"
	// LabelHandOverJob is on a hand-over Job's pods: the Job's name.
	LabelHandOverJob = "ferrofed.io/handover-job"
	// FinalizerAuditHandOver holds a deleted Gateway with a persistent spool until each
	// of its claims was handed over (or, with retainOnDelete, named in an Event).
	FinalizerAuditHandOver = "ferrofed.io/audit-handover"
	// HandOverContainerName is the container of a hand-over Job.
	HandOverContainerName = "audit-drain"
	// AnnotationReleaseQuarantine, set to "true" on an orphaned claim whose hand-over
	// left only quarantined records (state quarantineLeft), asks the operator to delete
	// the claim with them. It counts only when set after the operator reported that
	// state (docs/operator.md, "The persistent audit spool").
	AnnotationReleaseQuarantine = "ferrofed.io/release-quarantine"

	// HandOverTimeout is the --timeout of `ferrofed audit drain` in a hand-over Job.
	HandOverTimeout = 10 * time.Minute
	// HandOverBackoffLimit is the Job's backoffLimit: pods it retries before it fails.
	HandOverBackoffLimit int32 = 3
	// HandOverRetryBackoff is how long after a failed hand-over Job the operator starts
	// the next one for the same claim (the claim is kept meanwhile).
	HandOverRetryBackoff = 5 * time.Minute
)

// HandOverActiveDeadline is the Job's activeDeadlineSeconds: every attempt its whole
// timeout, plus a minute each to schedule, pull and start.
var HandOverActiveDeadline = int64((HandOverTimeout + time.Minute).Seconds()) * int64(HandOverBackoffLimit+1)

// SpoolClaimName is the claim of a Gateway's replica ordinal, as the StatefulSet
// controller names it: <template>-<statefulset>-<ordinal>.
func SpoolClaimName(gateway string, ordinal int) string {
	return SpoolVolumeName + "-" + gateway + "-" + strconv.Itoa(ordinal)
}

// claimOrdinal is the replica ordinal of a claim of gateway's, or false when the name is
// not of SpoolClaimName's form.
func claimOrdinal(gateway, claim string) (int, bool) {
	rest, ok := strings.CutPrefix(claim, SpoolVolumeName+"-"+gateway+"-")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// ReplicaPodName is the StatefulSet's pod of ordinal.
func ReplicaPodName(gateway string, ordinal int) string { return gateway + "-" + strconv.Itoa(ordinal) }

// SpoolClaimLabels are the labels the operator gives every spool claim.
func SpoolClaimLabels(gw *ferrofedv1alpha1.Gateway) map[string]string {
	l := Labels(gw)
	l[LabelAuditSpool] = gw.Name
	return l
}

// StatefulSet runs the gateway pods of a Gateway with a persistent spool: the pod
// template of Deployment, and a volumeClaimTemplate SpoolVolumeName mounted at the spool
// directory. Claims are retained when scaled down or deleted: the operator, not the
// StatefulSet controller, decides when a claim may go (after its hand-over). Pods are
// started and stopped in parallel, as a Deployment's are; a rollout replaces one pod at
// a time (it cannot surge: the new pod needs the old one's claim).
func StatefulSet(gw *ferrofedv1alpha1.Gateway, plan lifecycle.Plan, rendered []byte) *appsv1ac.StatefulSetApplyConfiguration {
	t := gw.Spec.Audit.Spool.VolumeClaimTemplate
	labels := map[string]string{}
	var annotations map[string]string
	if t.Metadata != nil {
		for k, v := range t.Metadata.Labels {
			labels[k] = v
		}
		annotations = t.Metadata.Annotations
	}
	for k, v := range SpoolClaimLabels(gw) {
		labels[k] = v
	}
	// No kind, apiVersion or namespace: a template's claim has none.
	claim := (&corev1ac.PersistentVolumeClaimApplyConfiguration{}).WithName(SpoolVolumeName).WithLabels(labels)
	if len(annotations) > 0 {
		claim.WithAnnotations(annotations)
	}
	if t.Spec != nil {
		claim.WithSpec(asApplyConfiguration[corev1ac.PersistentVolumeClaimSpecApplyConfiguration](t.Spec))
	}
	return appsv1ac.StatefulSet(gw.Name, gw.Namespace).
		WithLabels(Labels(gw)).
		WithOwnerReferences(ownerReference(gw)).
		WithSpec(appsv1ac.StatefulSetSpec().
			WithReplicas(gw.Spec.ReplicasOrDefault()).
			WithServiceName(gw.Name).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(gw))).
			WithPodManagementPolicy(appsv1.ParallelPodManagement).
			WithUpdateStrategy(appsv1ac.StatefulSetUpdateStrategy().WithType(appsv1.RollingUpdateStatefulSetStrategyType)).
			WithPersistentVolumeClaimRetentionPolicy(appsv1ac.StatefulSetPersistentVolumeClaimRetentionPolicy().
				WithWhenDeleted(appsv1.RetainPersistentVolumeClaimRetentionPolicyType).
				WithWhenScaled(appsv1.RetainPersistentVolumeClaimRetentionPolicyType)).
			WithTemplate(podTemplate(gw, plan, rendered)).
			WithVolumeClaimTemplates(claim))
}

// boundedName is base+suffix cut to 63 characters (a Job's name is a label value of its
// pods): a longer base is cut and given 8 hex characters of its digest, so two claims
// never share a Job name.
func boundedName(base, suffix string) string {
	const max = 63
	if len(base)+len(suffix) <= max {
		return base + suffix
	}
	sum := sha256.Sum256([]byte(base))
	keep := max - len(suffix) - 9
	return strings.TrimRight(base[:keep], "-.") + "-" + hex.EncodeToString(sum[:])[:8] + suffix
}

// HandOverJobName is the name of attempt (from 1) of claim's hand-over Job:
// <claim>-handover-<attempt>, at most 63 characters (boundedName).
func HandOverJobName(claim string, attempt int) string {
	return boundedName(claim, "-handover-"+strconv.Itoa(attempt))
}

// HandOverArgs are the hand-over container's arguments: the image's entrypoint is
// ferrofed, as for `serve`.
func HandOverArgs() []string {
	return []string{"audit", "drain", "--config", gatewayspec.ConfigPath, "--timeout", HandOverTimeout.String(),
		"--termination-message-path", gatewayspec.TerminationMessagePath}
}

// HandOverJob is attempt of the Job that hands claim over: `ferrofed audit drain` in the
// gateway's image, with the gateway pod's configuration, secretMounts and TLS volumes,
// the claim mounted where the gateway mounts its spool, scheduled as the gateway pods
// are. Its pod never restarts in place; the Job retries HandOverBackoffLimit times
// within HandOverActiveDeadline, except after exit lifecycle.HandOverExitQuarantine (only
// quarantine left, which another pod could not deliver either): that fails the Job at
// once (podFailurePolicy). The Gateway controls it.
func HandOverJob(gw *ferrofedv1alpha1.Gateway, rendered []byte, claim string, attempt int) *batchv1.Job {
	name := HandOverJobName(claim, attempt)
	mounts, volumes := podVolumes(gw, rendered, false)
	mounts = append(mounts, corev1ac.VolumeMount().WithName(SpoolVolumeName).WithMountPath(gatewayspec.AuditSpoolDir))
	volumes = append(volumes, corev1ac.Volume().WithName(SpoolVolumeName).
		WithPersistentVolumeClaim(corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(claim)))
	container := corev1ac.Container().
		WithName(HandOverContainerName).
		WithImage(gw.Spec.Image).
		WithArgs(HandOverArgs()...).
		WithTerminationMessagePath(gatewayspec.TerminationMessagePath).
		WithTerminationMessagePolicy(corev1.TerminationMessageReadFile).
		WithSecurityContext(containerSecurityContext()).
		WithVolumeMounts(mounts...)
	if res := resources(gw.Spec.Resources); res != nil {
		container.WithResources(res)
	} else {
		container.WithResources(defaultResources())
	}
	pod := corev1ac.PodSpec().
		WithRestartPolicy(corev1.RestartPolicyNever).
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		WithContainers(container).
		WithVolumes(volumes...)
	scheduling(gw, pod)
	var spec corev1.PodSpec
	asApplyConfigurationInto(pod, &spec) // the typed pod spec of the same builder
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: gw.Namespace,
			Labels: map[string]string{LabelManagedBy: FieldOwner, LabelHandOverOf: gw.Name, LabelHandOverClaim: claim,
				LabelHandOverAttempt: strconv.Itoa(attempt)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: ferrofedv1alpha1.GroupVersion.String(), Kind: "Gateway",
				Name: gw.Name, UID: gw.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To(HandOverBackoffLimit),
			ActiveDeadlineSeconds: ptr.To(HandOverActiveDeadline),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action: batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{ContainerName: ptr.To(HandOverContainerName),
					Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{lifecycle.HandOverExitQuarantine}},
			}}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelManagedBy: FieldOwner, LabelHandOverOf: gw.Name,
					LabelHandOverClaim: claim, LabelHandOverJob: name}},
				Spec: spec,
			},
		},
	}
}

// claimRole is what one spool claim is to its Gateway now.
type claimRole struct {
	name    string
	ordinal int
	// orphaned: no replica will own it (its ordinal is past spec.replicas, or no
	// StatefulSet should exist).
	orphaned bool
}

// claimRoles sorts a Gateway's claims into owned and orphaned: a claim is orphaned when
// its ordinal is spec.replicas or more, or when no StatefulSet should exist
// (statefulSet false: the spool is an emptyDir now, or the Gateway is being deleted).
// Names not of SpoolClaimName's form are left out. Orphaned claims come first, then by
// ordinal.
func claimRoles(gateway string, claims []string, replicas int32, statefulSet bool) []claimRole {
	var out []claimRole
	for _, c := range claims {
		n, ok := claimOrdinal(gateway, c)
		if !ok {
			continue
		}
		out = append(out, claimRole{name: c, ordinal: n, orphaned: !statefulSet || n >= int(replicas)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].orphaned != out[j].orphaned {
			return out[i].orphaned
		}
		return out[i].ordinal < out[j].ordinal
	})
	return out
}

// jobState is a hand-over Job's state from its conditions: running, succeeded or
// failed, and when it finished.
func jobState(j *batchv1.Job) (string, time.Time) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return ferrofedv1alpha1.HandOverSucceeded, c.LastTransitionTime.Time
		case batchv1.JobFailed:
			return ferrofedv1alpha1.HandOverFailedState, c.LastTransitionTime.Time
		}
	}
	return ferrofedv1alpha1.HandOverRunning, time.Time{}
}

// jobAttempt is a hand-over Job's attempt, 0 when its label is missing or wrong.
func jobAttempt(j *batchv1.Job) int {
	n, err := strconv.Atoi(j.Labels[LabelHandOverAttempt])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// handOverStep is what the operator does next for one orphaned claim.
type handOverStep int

const (
	// stepWait: its pod still runs (draining), or its Job runs, or a failed Job's
	// backoff has not passed, or only quarantine is left and no release was asked.
	stepWait handOverStep = iota
	// stepStart: no Job yet, or the backoff after a failed one has passed: start
	// attempt (the newest's + 1).
	stepStart
	// stepDeleteClaim: the newest Job succeeded and reported the spool empty.
	stepDeleteClaim
	// stepReleaseClaim: only quarantine is left and a person released it
	// (AnnotationReleaseQuarantine): the claim is deleted with it.
	stepReleaseClaim
)

// handOverReport is what the newest pod of a hand-over Job reported: the message of
// `ferrofed audit drain` and its container's exit status.
type handOverReport struct {
	msg  lifecycle.HandOverMessage
	exit int32
}

// quarantineOnly reports whether rep says that everything deliverable was delivered and
// only quarantined records are left (exit lifecycle.HandOverExitQuarantine, outcome
// failed, records left), and how many. The exit tells it from another failure: the
// message's counts include the quarantine either way.
func (rep *handOverReport) quarantineOnly() (int64, bool) {
	if rep == nil || rep.exit != lifecycle.HandOverExitQuarantine || rep.msg.Outcome != lifecycle.HandOverFailed {
		return 0, false
	}
	records, _ := lifecycle.Undelivered(rep.msg.Left)
	return records, records > 0
}

// claimFacts is what planHandOver decides one orphaned claim's next step from.
type claimFacts struct {
	// podExists: its replica's pod still exists (it drains).
	podExists bool
	// jobs are the claim's hand-over Jobs; report is what the newest one's pod
	// reported, nil when none was read.
	jobs   []*batchv1.Job
	report *handOverReport
	// release: the claim carries AnnotationReleaseQuarantine=true.
	release bool
	// prev is the claim as the status showed it before this pass (zero when absent).
	prev ferrofedv1alpha1.SpoolClaimStatus
}

// handOverPlan is the decision for one orphaned claim.
type handOverPlan struct {
	step handOverStep
	// newest is the newest Job of the claim, if any; attempt is the one to start.
	newest  *batchv1.Job
	attempt int
	// state is newest's state; retryIn is how long the backoff still runs.
	state   string
	retryIn time.Duration
	// quarantined counts the records left in quarantine, in state quarantineLeft.
	quarantined int64
	// releaseRefused, when the claim asks for a release that is not acted on, says why.
	releaseRefused string
}

// planHandOver decides one orphaned claim's next step at now. A claim is deleted only
// after a Job succeeded and nothing it reported says records are left: `ferrofed audit
// drain` exits 0 only when every spool is empty, so a succeeded Job whose message could
// not be read is empty too. A failed Job that left only quarantined records (its exit
// says so) is not followed by another one, which could not deliver them either: the
// claim waits for a person, and is deleted with its quarantine only when released
// (releasable).
func planHandOver(f claimFacts, now time.Time) handOverPlan {
	if f.podExists {
		return handOverPlan{step: stepWait, releaseRefused: refusal(f, "its replica's pod still exists (it drains, then a hand-over delivers what it left)")}
	}
	var newest *batchv1.Job
	for _, j := range f.jobs {
		if newest == nil || jobAttempt(j) > jobAttempt(newest) {
			newest = j
		}
	}
	if newest == nil {
		return handOverPlan{step: stepStart, attempt: 1, releaseRefused: refusal(f, "its hand-over has not started")}
	}
	p := handOverPlan{newest: newest, attempt: jobAttempt(newest) + 1}
	state, ended := jobState(newest)
	if state == ferrofedv1alpha1.HandOverSucceeded && f.report != nil {
		// Never expected (`ferrofed audit drain` exits 0 only on an empty spool), but
		// a report of records left wins over the exit: the claim is kept, as after
		// a failure.
		if records, _ := lifecycle.Undelivered(f.report.msg.Left); records > 0 || f.report.msg.Outcome != lifecycle.HandOverEmpty {
			state = ferrofedv1alpha1.HandOverFailedState
		}
	}
	if n, ok := f.report.quarantineOnly(); ok && state == ferrofedv1alpha1.HandOverFailedState {
		state, p.quarantined = ferrofedv1alpha1.HandOverQuarantineLeft, n
	}
	p.state = state
	switch state {
	case ferrofedv1alpha1.HandOverSucceeded:
		p.step = stepDeleteClaim
	case ferrofedv1alpha1.HandOverQuarantineLeft:
		p.step = stepWait
		if f.release && releasable(f.prev, newest.Name) {
			p.step = stepReleaseClaim
		} else {
			p.releaseRefused = refusal(f, "it carried the annotation before the operator reported that only quarantine is left "+
				"(remove the annotation, then set it again)")
		}
	case ferrofedv1alpha1.HandOverFailedState:
		p.releaseRefused = refusal(f, fmt.Sprintf("its hand-over Job %s left records that are not all quarantined, and they are retried", newest.Name))
		if wait := HandOverRetryBackoff - now.Sub(ended); wait > 0 {
			p.step, p.retryIn = stepWait, wait
			return p
		}
		p.step = stepStart
	default:
		p.step = stepWait
		p.releaseRefused = refusal(f, fmt.Sprintf("its hand-over Job %s runs", newest.Name))
	}
	return p
}

// releasable reports whether a release of a claim now in state quarantineLeft from job
// counts: only when the status already showed that state of that Job without the
// annotation, so that the annotation was set after the quarantine was reported (one set
// earlier, while records could still be quarantined, never deletes them).
func releasable(prev ferrofedv1alpha1.SpoolClaimStatus, job string) bool {
	return prev.HandOver != nil && prev.HandOver.Job == job && prev.HandOver.State == ferrofedv1alpha1.HandOverQuarantineLeft && !prev.ReleaseRequested
}

// refusal is why, when f asks for a release, and "" when it does not.
func refusal(f claimFacts, why string) string {
	if !f.release {
		return ""
	}
	return why
}

// claimFigures is what one claim held, undelivered, as last reported.
type claimFigures struct {
	records, bytes int64
	reportedBy     string
}

// auditSummary is status.audit of claims (in claimRoles' order) with their figures,
// hand-over states and the releases they ask that are not acted on (refused: their
// releaseRequested, which planHandOver reads back as the claim's prev), or nil with no
// claims. At most ferrofedv1alpha1.MaxAuditClaims are listed; the totals count them all.
func auditSummary(gateway string, roles []claimRole, figures map[string]claimFigures, handOvers map[string]*ferrofedv1alpha1.HandOverStatus, refused map[string]bool) *ferrofedv1alpha1.AuditStatus {
	if len(roles) == 0 {
		return nil
	}
	st := &ferrofedv1alpha1.AuditStatus{}
	for i, r := range roles {
		f := figures[r.name]
		st.UndeliveredRecords += f.records
		st.UndeliveredBytes += f.bytes
		if r.orphaned {
			st.OrphanedClaims++
		}
		if i >= ferrofedv1alpha1.MaxAuditClaims {
			st.ClaimsNotListed++
			continue
		}
		c := ferrofedv1alpha1.SpoolClaimStatus{Name: r.name, Replica: ReplicaPodName(gateway, r.ordinal),
			UndeliveredRecords: f.records, UndeliveredBytes: f.bytes, ReportedBy: f.reportedBy, HandOver: handOvers[r.name],
			ReleaseRequested: refused[r.name]}
		if r.orphaned {
			c.Replica = ferrofedv1alpha1.ReplicaOrphaned
		}
		st.Claims = append(st.Claims, c)
	}
	return st
}

// withRetiring adds the retiring pods to status.audit (made when there are retiring
// pods but no claims) and to its totals.
func withRetiring(st *ferrofedv1alpha1.AuditStatus, r retiringResult) *ferrofedv1alpha1.AuditStatus {
	if r.held == 0 {
		return st
	}
	if st == nil {
		st = &ferrofedv1alpha1.AuditStatus{}
	}
	st.RetiringPods = r.pods
	st.UndeliveredRecords += r.records
	st.UndeliveredBytes += r.bytes
	return st
}

// auditCondition is AuditDelivering for status.audit: Unknown with no claims; False
// while a claim holds only quarantine (QuarantineLeft: it waits for a person), while a
// hand-over failed, or while orphaned claims hold records (or never reported what they
// hold) and wait for their hand-over; True otherwise. A release asked on a claim it
// does not apply to is said in every case.
func auditCondition(st *ferrofedv1alpha1.AuditStatus) metav1.Condition {
	c := metav1.Condition{Type: ferrofedv1alpha1.ConditionAuditDelivering, Status: metav1.ConditionUnknown,
		Reason: ferrofedv1alpha1.ReasonNoSpoolClaims, Message: "The Gateway has no spool claims (its spool is an emptyDir, or none was made yet)."}
	if st == nil {
		return c
	}
	var failed, waiting, quarantine, refused []string
	var waitingRecords, quarantined int64
	for _, cl := range st.Claims {
		state := ""
		if cl.HandOver != nil {
			state = cl.HandOver.State
		}
		switch state {
		case ferrofedv1alpha1.HandOverFailedState:
			failed = append(failed, cl.Name)
		case ferrofedv1alpha1.HandOverQuarantineLeft:
			quarantine = append(quarantine, fmt.Sprintf("%s (%d)", cl.Name, cl.UndeliveredRecords))
			quarantined += cl.UndeliveredRecords
		}
		if cl.Replica == ferrofedv1alpha1.ReplicaOrphaned && (cl.UndeliveredRecords > 0 || cl.ReportedBy == "") {
			waiting = append(waiting, cl.Name)
			waitingRecords += cl.UndeliveredRecords
		}
		if cl.ReleaseRequested {
			refused = append(refused, cl.Name) // a release acted on deletes the claim: it is not listed
		}
	}
	var retiring []string
	var retiringRecords int64
	for _, p := range st.RetiringPods {
		retiring = append(retiring, p.Name)
		retiringRecords += p.UndeliveredRecords
	}
	switch {
	case len(quarantine) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, ferrofedv1alpha1.ReasonQuarantineLeft
		c.Message = fmt.Sprintf("Only quarantined records are left in %d claim(s), %d in all: %s. They were refused for good and no hand-over can deliver them, "+
			"so no new Job starts; the claims are kept. Inspect them, then annotate each claim %s=true to delete it with them, or delete it yourself.",
			len(quarantine), quarantined, nameList(quarantine), AnnotationReleaseQuarantine)
		if len(failed) > 0 {
			c.Message += fmt.Sprintf(" The hand-over of %d other claim(s) failed (%s).", len(failed), nameList(failed))
		}
	case len(failed) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, ferrofedv1alpha1.ReasonHandOverFailed
		c.Message = fmt.Sprintf("The hand-over of %d claim(s) failed (%s); %d record(s) reported undelivered in all; the claims are kept and a new Job starts %s after each failure.",
			len(failed), nameList(failed), st.UndeliveredRecords, HandOverRetryBackoff)
	case len(waiting) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, ferrofedv1alpha1.ReasonHandOverPending
		c.Message = fmt.Sprintf("%d record(s) (as reported) wait in %d orphaned claim(s) for their hand-over: %s.",
			waitingRecords, len(waiting), nameList(waiting))
	case len(retiring) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, ferrofedv1alpha1.ReasonRetiringPodsDelivering
		c.Message = fmt.Sprintf("%d record(s) (as last read) wait in the emptyDir spools of %d retiring pod(s), each deleted once its spool reads empty: %s.",
			retiringRecords, len(retiring), nameList(retiring))
	default:
		c.Status, c.Reason = metav1.ConditionTrue, ferrofedv1alpha1.ReasonNothingWaiting
		c.Message = fmt.Sprintf("%d claim(s); no orphaned claim holds records, no hand-over failed.", len(st.Claims)+int(st.ClaimsNotListed))
	}
	if len(refused) > 0 {
		c.Message += fmt.Sprintf(" %s=true releases nothing on %s: it counts only on a claim whose hand-over left nothing but quarantine, set after the operator reported that "+
			"(remove it, and set it again then).", AnnotationReleaseQuarantine, nameList(refused))
	}
	return c
}

// nameList names at most 10 names, and counts the rest.
func nameList(names []string) string {
	if len(names) <= 10 {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:10], ", ") + fmt.Sprintf(" and %d more", len(names)-10)
}

// statefulSetView is a StatefulSet in a Deployment's shape, as the status and
// workloadReady read it: the same generation and replica
// counters mean the same there.
func statefulSetView(s *appsv1.StatefulSet) *appsv1.Deployment {
	if s == nil {
		return nil
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Generation: s.Generation},
		Status: appsv1.DeploymentStatus{ObservedGeneration: s.Status.ObservedGeneration, Replicas: s.Status.Replicas,
			UpdatedReplicas: s.Status.UpdatedReplicas, ReadyReplicas: s.Status.ReadyReplicas},
	}
}

// workloadReady reports whether a workload (in a Deployment's shape) has observed its
// spec and runs want ready pods of its latest template: only then is the workload of the
// other spool mode deleted, so that switching modes drops no request.
func workloadReady(d *appsv1.Deployment, want int32) bool {
	return d != nil && d.Status.ObservedGeneration >= d.Generation && d.Status.ReadyReplicas >= want && d.Status.UpdatedReplicas >= want
}
