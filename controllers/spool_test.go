package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

func TestClaimRoles(t *testing.T) {
	claims := []string{"spool-gw-2", "spool-gw-0", "spool-gw-1", "spool-gw-10", "spool-other-0", "spool-gw-01", "spool-gw-", "spool-gw-x", "data-gw-0"}
	cases := []struct {
		name        string
		replicas    int32
		statefulSet bool
		want        string // name:o (orphaned) or name:r, in order
	}{
		{"three replicas own 0, 1, 2; 10 is orphaned", 3, true, "spool-gw-10:o spool-gw-0:r spool-gw-1:r spool-gw-2:r"},
		{"a scale-down from 3 to 1 orphans 1 and 2", 1, true, "spool-gw-1:o spool-gw-2:o spool-gw-10:o spool-gw-0:r"},
		{"zero replicas orphan every claim", 0, true, "spool-gw-0:o spool-gw-1:o spool-gw-2:o spool-gw-10:o"},
		{"no StatefulSet (emptyDir, or deletion) orphans every claim", 20, false, "spool-gw-0:o spool-gw-1:o spool-gw-2:o spool-gw-10:o"},
		{"eleven replicas own them all", 11, true, "spool-gw-0:r spool-gw-1:r spool-gw-2:r spool-gw-10:r"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range claimRoles("gw", claims, tc.replicas, tc.statefulSet) {
				tag := "r"
				if r.orphaned {
					tag = "o"
				}
				got = append(got, r.name+":"+tag)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("got %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}

func TestClaimOrdinal(t *testing.T) {
	for claim, want := range map[string]int{"spool-gw-0": 0, "spool-gw-7": 7, "spool-gw-123": 123,
		"spool-gw-": -1, "spool-gw-07": -1, "spool-gw--1": -1, "spool-gw-1-0": -1, "spool-gwx-1": -1, "spool-gw": -1} {
		n, ok := claimOrdinal("gw", claim)
		if (want < 0) == ok || (ok && n != want) {
			t.Errorf("claimOrdinal(gw, %q) = %d, %t; want %d", claim, n, ok, want)
		}
	}
	if got := SpoolClaimName("gw", 3); got != "spool-gw-3" {
		t.Errorf("SpoolClaimName = %q", got)
	}
}

func TestHandOverJobNameIsBounded(t *testing.T) {
	long := strings.Repeat("a", 63)
	names := map[string]bool{}
	for _, claim := range []string{"spool-gw-0", SpoolClaimName(long, 0), SpoolClaimName(long, 1), SpoolClaimName(long[:50], 12)} {
		for _, attempt := range []int{1, 2, 1000} {
			n := HandOverJobName(claim, attempt)
			if len(n) > 63 || !strings.HasSuffix(n, fmt.Sprintf("-handover-%d", attempt)) || strings.Contains(n, "--") {
				t.Errorf("HandOverJobName(%q, %d) = %q (%d characters)", claim, attempt, n, len(n))
			}
			if names[n] {
				t.Errorf("HandOverJobName(%q, %d) = %q twice", claim, attempt, n)
			}
			names[n] = true
		}
	}
	if got := HandOverJobName("spool-gw-0", 1); got != "spool-gw-0-handover-1" {
		t.Errorf("a short name is kept whole: %q", got)
	}
}

func TestHandOverJob(t *testing.T) {
	gw := gateway(func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.SecretMounts = []ferrofedv1alpha1.SecretMount{{SecretName: "audit-token", MountPath: "/etc/ferrofed/secrets/audit"}}
		g.Spec.TLS = &ferrofedv1alpha1.TLS{SecretName: "edge-tls"}
	})
	j := HandOverJob(gw, []byte("[audit]\ndestination = \"repository\"\n"), "spool-edge-4", 2)
	if j.Name != "spool-edge-4-handover-2" || j.Labels[LabelHandOverAttempt] != "2" || j.Labels[LabelHandOverClaim] != "spool-edge-4" || j.Labels[LabelManagedBy] != FieldOwner {
		t.Errorf("Job %s labels %v", j.Name, j.Labels)
	}
	if !metav1.IsControlledBy(j, gw) {
		t.Errorf("Job owners %v: want the Gateway as controller", j.OwnerReferences)
	}
	pod := j.Spec.Template
	if pod.Labels[LabelHandOverJob] != j.Name || pod.Labels[LabelInstance] != "" || pod.Labels[LabelName] != "" {
		t.Errorf("pod labels %v: want %s=%s and none the Service selects", pod.Labels, LabelHandOverJob, j.Name)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || *j.Spec.BackoffLimit != HandOverBackoffLimit || *j.Spec.ActiveDeadlineSeconds != HandOverActiveDeadline {
		t.Errorf("restartPolicy %s backoffLimit %d activeDeadlineSeconds %d", pod.Spec.RestartPolicy, *j.Spec.BackoffLimit, *j.Spec.ActiveDeadlineSeconds)
	}
	if fp := j.Spec.PodFailurePolicy; fp == nil || len(fp.Rules) != 1 || fp.Rules[0].Action != batchv1.PodFailurePolicyActionFailJob ||
		fp.Rules[0].OnExitCodes == nil || fmt.Sprint(fp.Rules[0].OnExitCodes.Values) != "[5]" || *fp.Rules[0].OnExitCodes.ContainerName != HandOverContainerName {
		t.Errorf("podFailurePolicy %+v: want the Job failed at once on exit 5 (only quarantine left)", fp)
	}
	c := pod.Spec.Containers[0]
	if c.Name != HandOverContainerName || c.Image != gw.Spec.Image || strings.Join(c.Args, " ") != "audit drain --config /etc/ferrofed/ferrofed.toml --timeout 10m0s --termination-message-path /dev/termination-log" {
		t.Errorf("container %s image %s args %v", c.Name, c.Image, c.Args)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	for name, path := range map[string]string{"config": "/etc/ferrofed/ferrofed.toml", "secret-mount-0": "/etc/ferrofed/secrets/audit", "tls": "/etc/ferrofed/tls", SpoolVolumeName: "/var/lib/ferrofed/audit"} {
		if mounts[name] != path {
			t.Errorf("mount %s at %q, want %s", name, mounts[name], path)
		}
	}
	if v := volumes[SpoolVolumeName]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "spool-edge-4" {
		t.Errorf("spool volume %+v, want the claim spool-edge-4", v)
	}
	if _, ok := volumes["audit-spool"]; ok {
		t.Error("the Job has the gateway's emptyDir spool")
	}
}

func job(attempt int, cond batchv1.JobConditionType, at time.Time) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("j", attempt), Labels: map[string]string{LabelHandOverAttempt: fmt.Sprint(attempt)}}}
	if cond != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
	}
	return j
}

func TestPlanHandOver(t *testing.T) {
	now := time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC)
	empty := &handOverReport{msg: lifecycle.HandOverMessage{Outcome: lifecycle.HandOverEmpty, Delivered: 3, Left: []lifecycle.SpoolLeft{{Destination: "repository"}}}}
	left := &handOverReport{exit: 3, msg: lifecycle.HandOverMessage{Outcome: lifecycle.HandOverTimeout, Left: []lifecycle.SpoolLeft{{Destination: "repository", Records: 2, Bytes: 10}}}}
	cases := []struct {
		name      string
		podExists bool
		jobs      []*batchv1.Job
		report    *handOverReport
		step      handOverStep
		attempt   int
		state     string
		retryIn   time.Duration
	}{
		{"its pod still drains: wait, no Job", true, nil, nil, stepWait, 0, "", 0},
		{"its pod still drains, even with a Job: wait", true, []*batchv1.Job{job(1, "", now)}, nil, stepWait, 0, "", 0},
		{"no Job yet: start attempt 1", false, nil, nil, stepStart, 1, "", 0},
		{"a running Job: wait", false, []*batchv1.Job{job(1, "", now)}, nil, stepWait, 2, ferrofedv1alpha1.HandOverRunning, 0},
		{"succeeded, reported empty: delete the claim", false, []*batchv1.Job{job(1, batchv1.JobComplete, now)}, empty, stepDeleteClaim, 2, ferrofedv1alpha1.HandOverSucceeded, 0},
		{"succeeded, no message read (exit 0 is empty): delete the claim", false, []*batchv1.Job{job(1, batchv1.JobComplete, now)}, nil, stepDeleteClaim, 2, ferrofedv1alpha1.HandOverSucceeded, 0},
		{"succeeded but reported records left: never delete, treat as failed", false, []*batchv1.Job{job(1, batchv1.JobComplete, now)}, left, stepWait, 2, ferrofedv1alpha1.HandOverFailedState, HandOverRetryBackoff},
		{"failed a minute ago: wait out the backoff", false, []*batchv1.Job{job(1, batchv1.JobFailed, now.Add(-time.Minute))}, left, stepWait, 2, ferrofedv1alpha1.HandOverFailedState, HandOverRetryBackoff - time.Minute},
		{"failed past the backoff: start attempt 2", false, []*batchv1.Job{job(1, batchv1.JobFailed, now.Add(-HandOverRetryBackoff))}, left, stepStart, 2, ferrofedv1alpha1.HandOverFailedState, 0},
		{"the newest attempt decides", false, []*batchv1.Job{job(3, "", now), job(1, batchv1.JobFailed, now.Add(-time.Hour)), job(2, batchv1.JobFailed, now.Add(-time.Hour))}, nil, stepWait, 4, ferrofedv1alpha1.HandOverRunning, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := planHandOver(claimFacts{podExists: tc.podExists, jobs: tc.jobs, report: tc.report}, now)
			if p.step != tc.step || p.attempt != tc.attempt || p.state != tc.state || p.retryIn != tc.retryIn {
				t.Errorf("plan step %d attempt %d state %q retryIn %s; want %d %d %q %s", p.step, p.attempt, p.state, p.retryIn, tc.step, tc.attempt, tc.state, tc.retryIn)
			}
			if p.releaseRefused != "" || p.quarantined != 0 {
				t.Errorf("releaseRefused %q, quarantined %d without a release asked or a quarantine", p.releaseRefused, p.quarantined)
			}
		})
	}
}

// quarantineReport is what `ferrofed audit drain` reports when only quarantine is left,
// with exit status exit (5 when it says so).
func quarantineReport(exit int32, records int64) *handOverReport {
	return &handOverReport{exit: exit, msg: lifecycle.HandOverMessage{Outcome: lifecycle.HandOverFailed, Delivered: 4,
		Left: []lifecycle.SpoolLeft{{Destination: "repository", Records: records, Bytes: 4096 * records}, {Destination: "feed"}}}}
}

// claimShown is a claim as the status showed it: its Job's state and whether it asked
// for a release.
func claimShown(job, state string, release bool) ferrofedv1alpha1.SpoolClaimStatus {
	return ferrofedv1alpha1.SpoolClaimStatus{Name: "spool-gw-1", HandOver: &ferrofedv1alpha1.HandOverStatus{Job: job, State: state}, ReleaseRequested: release}
}

// TestPlanHandOverWithOnlyQuarantineLeft: a Job that exited 5 with nothing but
// quarantine left is never followed by another; the claim is deleted only on a release
// set after that state was shown; a release anywhere else is refused, saying why.
func TestPlanHandOverWithOnlyQuarantineLeft(t *testing.T) {
	now := time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC)
	failed := func(ago time.Duration) []*batchv1.Job {
		return []*batchv1.Job{job(2, batchv1.JobFailed, now.Add(-ago))}
	}
	pending := &handOverReport{exit: 3, msg: lifecycle.HandOverMessage{Outcome: lifecycle.HandOverTimeout, Left: []lifecycle.SpoolLeft{{Destination: "repository", Records: 9, Bytes: 900}}}}
	shown := claimShown("j2", ferrofedv1alpha1.HandOverQuarantineLeft, false)
	cases := []struct {
		name        string
		facts       claimFacts
		step        handOverStep
		state       string
		retryIn     time.Duration
		quarantined int64
		refused     string // a word of releaseRefused, "" for none
	}{
		{"exit 5, only quarantine: wait, no retry, however long ago",
			claimFacts{jobs: failed(time.Hour), report: quarantineReport(5, 3)}, stepWait, ferrofedv1alpha1.HandOverQuarantineLeft, 0, 3, ""},
		{"exit 5 a minute ago: no backoff either",
			claimFacts{jobs: failed(time.Minute), report: quarantineReport(5, 3)}, stepWait, ferrofedv1alpha1.HandOverQuarantineLeft, 0, 3, ""},
		{"the same message with exit 4 (a cursor not written): an ordinary failure, retried",
			claimFacts{jobs: failed(time.Hour), report: quarantineReport(4, 3)}, stepStart, ferrofedv1alpha1.HandOverFailedState, 0, 0, ""},
		{"exit 5 with no records in the message: an ordinary failure",
			claimFacts{jobs: failed(time.Hour), report: quarantineReport(5, 0)}, stepStart, ferrofedv1alpha1.HandOverFailedState, 0, 0, ""},
		{"a pod exited 5 but the Job still runs (its retries): wait for its end",
			claimFacts{jobs: []*batchv1.Job{job(2, "", now)}, report: quarantineReport(5, 3)}, stepWait, ferrofedv1alpha1.HandOverRunning, 0, 0, ""},
		{"released after the state was shown: delete the claim",
			claimFacts{jobs: failed(time.Hour), report: quarantineReport(5, 3), release: true, prev: shown}, stepReleaseClaim, ferrofedv1alpha1.HandOverQuarantineLeft, 0, 3, ""},
		{"released before the state was shown (the first pass that sees it): refused",
			claimFacts{jobs: failed(time.Hour), report: quarantineReport(5, 3), release: true, prev: claimShown("j2", ferrofedv1alpha1.HandOverRunning, true)},
			stepWait, ferrofedv1alpha1.HandOverQuarantineLeft, 0, 3, "before"},
		{"released before, and never seen unset since: still refused",
			claimFacts{jobs: failed(time.Hour), report: quarantineReport(5, 3), release: true, prev: claimShown("j2", ferrofedv1alpha1.HandOverQuarantineLeft, true)},
			stepWait, ferrofedv1alpha1.HandOverQuarantineLeft, 0, 3, "set it again"},
		{"the state shown was of another Job (a name reused): refused",
			claimFacts{jobs: failed(time.Hour), report: quarantineReport(5, 3), release: true, prev: claimShown("j1", ferrofedv1alpha1.HandOverQuarantineLeft, false)},
			stepWait, ferrofedv1alpha1.HandOverQuarantineLeft, 0, 3, "before"},
		{"released while records are pending: refused, retried as ever",
			claimFacts{jobs: failed(time.Hour), report: pending, release: true, prev: shown}, stepStart, ferrofedv1alpha1.HandOverFailedState, 0, 0, "not all quarantined"},
		{"released while pending, within the backoff: refused, waits",
			claimFacts{jobs: failed(time.Minute), report: pending, release: true}, stepWait, ferrofedv1alpha1.HandOverFailedState, HandOverRetryBackoff - time.Minute, 0, "not all quarantined"},
		{"released while the Job runs: refused",
			claimFacts{jobs: []*batchv1.Job{job(2, "", now)}, release: true}, stepWait, ferrofedv1alpha1.HandOverRunning, 0, 0, "runs"},
		{"released while its pod drains: refused",
			claimFacts{podExists: true, release: true}, stepWait, "", 0, 0, "pod still exists"},
		{"released before any Job: refused, the hand-over starts",
			claimFacts{release: true}, stepStart, "", 0, 0, "not started"},
		{"released on a claim reported empty: deleted as handed over, nothing refused",
			claimFacts{jobs: []*batchv1.Job{job(2, batchv1.JobComplete, now)}, release: true}, stepDeleteClaim, ferrofedv1alpha1.HandOverSucceeded, 0, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := planHandOver(tc.facts, now)
			if p.step != tc.step || p.state != tc.state || p.retryIn != tc.retryIn || p.quarantined != tc.quarantined {
				t.Errorf("plan step %d state %q retryIn %s quarantined %d; want %d %q %s %d", p.step, p.state, p.retryIn, p.quarantined, tc.step, tc.state, tc.retryIn, tc.quarantined)
			}
			if (tc.refused == "") != (p.releaseRefused == "") || !strings.Contains(p.releaseRefused, tc.refused) {
				t.Errorf("releaseRefused %q, want one saying %q", p.releaseRefused, tc.refused)
			}
		})
	}
}

func TestHandOverReportOf(t *testing.T) {
	line, err := quarantineReport(5, 2).msg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	pod := func(job string, exit int32, msg string, at time.Time) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelHandOverJob: job}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: HandOverContainerName,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: msg, FinishedAt: metav1.NewTime(at)}}}}}}
	}
	at := time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC)
	pods := []corev1.Pod{pod("j1", 4, `{"v":1}`, at), pod("j1", 5, string(line), at.Add(time.Minute)), pod("j2", 5, string(line), at.Add(time.Hour))}
	rep := handOverReportOf(pods, "j1")
	if n, ok := rep.quarantineOnly(); rep == nil || rep.exit != 5 || !ok || n != 2 {
		t.Errorf("report %+v: want the newest pod's, exit 5 with 2 quarantined records", rep)
	}
	if rep := handOverReportOf(pods[:1], "j1"); rep != nil {
		t.Errorf("report %+v of an unreadable message, want none", rep)
	}
}

func TestAnnotationSetter(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC))
	entries := []metav1.ManagedFieldsEntry{
		{Manager: "kube-controller-manager", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:pv.kubernetes.io/bind-completed":{}}}}`)},
		{Manager: "broken", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{`)},
		{Manager: "kubectl-annotate", Time: &at, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{".":{},"f:ferrofed.io/release-quarantine":{}}}}`)},
	}
	if m, when := annotationSetter(entries, AnnotationReleaseQuarantine); m != "kubectl-annotate" || !when.Equal(at.Time) {
		t.Errorf("annotationSetter = %q %s, want kubectl-annotate at %s", m, when, at)
	}
	if m, _ := annotationSetter(entries[:2], AnnotationReleaseQuarantine); m != "" {
		t.Errorf("annotationSetter = %q without a manager of the key, want none", m)
	}
}

// The cached copy of a spool claim keeps the release annotation, and no other.
func TestCachedClaimKeepsOnlyTheReleaseAnnotation(t *testing.T) {
	for _, tc := range []struct {
		in, want map[string]string
	}{
		{map[string]string{AnnotationReleaseQuarantine: "true", "pv.kubernetes.io/bind-completed": "yes"}, map[string]string{AnnotationReleaseQuarantine: "true"}},
		{map[string]string{"pv.kubernetes.io/bind-completed": "yes"}, nil},
	} {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "spool-gw-1", Annotations: tc.in,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl-annotate"}}}}
		out, err := trimForCache(c)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*corev1.PersistentVolumeClaim)
		if fmt.Sprint(got.Annotations) != fmt.Sprint(tc.want) || got.ManagedFields != nil {
			t.Errorf("cached annotations %v, managedFields %v; want %v and none", got.Annotations, got.ManagedFields, tc.want)
		}
	}
}

func TestAuditSummaryAndCondition(t *testing.T) {
	roles := claimRoles("gw", []string{"spool-gw-0", "spool-gw-1", "spool-gw-2"}, 1, true)
	cases := []struct {
		name      string
		roles     []claimRole
		figures   map[string]claimFigures
		handOvers map[string]*ferrofedv1alpha1.HandOverStatus
		release   map[string]bool
		status    metav1.ConditionStatus
		reason    string
		records   int64
		message   string
	}{
		{"no claims", nil, nil, nil, nil, metav1.ConditionUnknown, ferrofedv1alpha1.ReasonNoSpoolClaims, 0, "no spool claims"},
		{"orphaned claims never reported wait", roles, nil, nil, nil, metav1.ConditionFalse, ferrofedv1alpha1.ReasonHandOverPending, 0,
			"0 record(s) (as reported) wait in 2 orphaned claim(s) for their hand-over: spool-gw-1, spool-gw-2."},
		{"an orphaned claim with records waits; one drained empty does not", roles, map[string]claimFigures{
			"spool-gw-1": {records: 0, reportedBy: ferrofedv1alpha1.ReportedByDrain},
			"spool-gw-2": {records: 9, bytes: 900, reportedBy: ferrofedv1alpha1.ReportedByDrain},
			"spool-gw-0": {records: 4, bytes: 400, reportedBy: ferrofedv1alpha1.ReportedByDrain}}, nil, nil,
			metav1.ConditionFalse, ferrofedv1alpha1.ReasonHandOverPending, 13, "9 record(s) (as reported) wait in 1 orphaned claim(s) for their hand-over: spool-gw-2."},
		{"a failed hand-over says so first", roles, map[string]claimFigures{"spool-gw-1": {records: 3, reportedBy: ferrofedv1alpha1.ReportedByHandOver}},
			map[string]*ferrofedv1alpha1.HandOverStatus{"spool-gw-1": {Job: "spool-gw-1-handover-1", State: ferrofedv1alpha1.HandOverFailedState}}, nil,
			metav1.ConditionFalse, ferrofedv1alpha1.ReasonHandOverFailed, 3, "The hand-over of 1 claim(s) failed (spool-gw-1)"},
		{"owned claims with records: nothing waits for a hand-over", roles[2:], map[string]claimFigures{"spool-gw-0": {records: 5, reportedBy: ferrofedv1alpha1.ReportedByDrain}}, nil, nil,
			metav1.ConditionTrue, ferrofedv1alpha1.ReasonNothingWaiting, 5, "1 claim(s); no orphaned claim holds records"},
		{"only quarantine left says so before a failure, naming the claim, its count and the annotation", roles, map[string]claimFigures{
			"spool-gw-1": {records: 3, reportedBy: ferrofedv1alpha1.ReportedByHandOver}, "spool-gw-2": {records: 7, reportedBy: ferrofedv1alpha1.ReportedByHandOver}},
			map[string]*ferrofedv1alpha1.HandOverStatus{"spool-gw-1": {Job: "spool-gw-1-handover-1", State: ferrofedv1alpha1.HandOverFailedState},
				"spool-gw-2": {Job: "spool-gw-2-handover-1", State: ferrofedv1alpha1.HandOverQuarantineLeft}}, nil,
			metav1.ConditionFalse, ferrofedv1alpha1.ReasonQuarantineLeft, 10,
			"Only quarantined records are left in 1 claim(s), 7 in all: spool-gw-2 (7). They were refused for good and no hand-over can deliver them, so no new Job starts; " +
				"the claims are kept. Inspect them, then annotate each claim ferrofed.io/release-quarantine=true to delete it with them, or delete it yourself. " +
				"The hand-over of 1 other claim(s) failed (spool-gw-1)."},
		{"a release that does not apply is said, whatever the reason", roles, map[string]claimFigures{"spool-gw-1": {records: 3, reportedBy: ferrofedv1alpha1.ReportedByDrain}},
			nil, map[string]bool{"spool-gw-1": true, "spool-gw-0": true},
			metav1.ConditionFalse, ferrofedv1alpha1.ReasonHandOverPending, 3,
			"for their hand-over: spool-gw-1, spool-gw-2. ferrofed.io/release-quarantine=true releases nothing on spool-gw-1, spool-gw-0: it counts only"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := auditSummary("gw", tc.roles, tc.figures, tc.handOvers, tc.release)
			c := auditCondition(st)
			if c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.message) {
				t.Errorf("AuditDelivering %s %s %q; want %s %s containing %q", c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.message)
			}
			if st != nil && st.UndeliveredRecords != tc.records {
				t.Errorf("undeliveredRecords %d, want %d", st.UndeliveredRecords, tc.records)
			}
		})
	}
	st := auditSummary("gw", roles, nil, nil, map[string]bool{"spool-gw-2": true})
	if st.Claims[0].Replica != ferrofedv1alpha1.ReplicaOrphaned || st.Claims[2].Replica != "gw-0" || st.OrphanedClaims != 2 ||
		st.Claims[0].ReleaseRequested || !st.Claims[1].ReleaseRequested {
		t.Errorf("claims %+v", st.Claims)
	}
}

// TestAuditSummaryIsBounded: past MaxAuditClaims the claims are counted, not listed.
func TestAuditSummaryIsBounded(t *testing.T) {
	var names []string
	figures := map[string]claimFigures{}
	for i := range ferrofedv1alpha1.MaxAuditClaims + 5 {
		names = append(names, SpoolClaimName("gw", i))
		figures[SpoolClaimName("gw", i)] = claimFigures{records: 1, bytes: 2, reportedBy: ferrofedv1alpha1.ReportedByDrain}
	}
	st := auditSummary("gw", claimRoles("gw", names, 0, true), figures, nil, nil)
	if len(st.Claims) != ferrofedv1alpha1.MaxAuditClaims || st.ClaimsNotListed != 5 || st.UndeliveredRecords != int64(len(names)) || st.OrphanedClaims != int32(len(names)) {
		t.Errorf("%d claims listed, %d not, %d records, %d orphaned", len(st.Claims), st.ClaimsNotListed, st.UndeliveredRecords, st.OrphanedClaims)
	}
}

func TestWorkloadReady(t *testing.T) {
	for _, tc := range []struct {
		name string
		dep  bool
		gen  int64
		obs  int64
		rdy  int32
		upd  int32
		want int32
		ok   bool
	}{
		{"none", false, 0, 0, 0, 0, 1, false},
		{"all ready and updated", true, 2, 2, 3, 3, 3, true},
		{"not yet observed", true, 3, 2, 3, 3, 3, false},
		{"one not ready", true, 2, 2, 2, 3, 3, false},
		{"one of an old template", true, 2, 2, 3, 2, 3, false},
		{"zero wanted", true, 1, 1, 0, 0, 0, true},
	} {
		var d = deployment(tc.gen, tc.obs, tc.rdy, tc.upd, tc.rdy)
		if !tc.dep {
			d = nil
		}
		if got := workloadReady(d, tc.want); got != tc.ok {
			t.Errorf("%s: workloadReady = %t, want %t", tc.name, got, tc.ok)
		}
	}
}
