//go:build e2e

// The persistent audit spool on the real node (docs/audit-spool.md, "Hand-over"); alone:
// make e2e-audit-persistent.

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ferrofed/ferrofed/test/rollout"
)

// The scenario's bounds: every wait has its deadline, every load its count.
const (
	spoolReplicas      = 2
	spoolClaimSize     = "1Gi" // audit.max_spool_bytes' default (256 MiB), one spool, and headroom
	spoolLoadWorkers   = 4
	spoolLoadMax       = 60000 // markers per mode, at most
	spoolSteadyWindow  = 15 * time.Second
	spoolStepDeadline  = 3 * time.Minute
	spoolDeliverWithin = 5 * time.Minute // from the repository accepting to every record delivered
	spoolSettle        = 20 * time.Second
	spoolMountPath     = "/var/lib/ferrofed/audit"
)

// spoolMode is one of the two runs of the scenario.
type spoolMode struct {
	name       string // the Gateway's
	prefix     string // of its load's markers
	persistent bool
}

// spoolRun is what one mode's run measured.
type spoolRun struct {
	mode                     spoolMode
	answered, delivered      int
	lost                     []string
	duplicates, dupMarkers   int
	steadyRate, wholeRate    float64
	loadTook                 time.Duration
	claimWait                time.Duration // scale-down to the orphaned claim's deletion
	claimAfterAccept         time.Duration // the repository accepting to the orphaned claim's deletion
	orphanSeen               string        // AuditDelivering and status.audit while the repository refused
	otherAnswers             map[string]int
	replacedPods             int
	deliveredAfterAcceptTook time.Duration
}

// TestAuditPersistentSpool: a Gateway with 2 replicas and a persistent spool per replica
// (spec.audit.spool.volumeClaimTemplate, claims of the cluster's provisioner), the
// audit repository double as a pod refusing every delivery; audited requests under load
// (each with a marker its AuditEvent carries) through a rolling restart, the deletion of
// each replica's pod and a scale-down to 1; then the repository accepts and every
// request answered 200 has its AuditEvent delivered, the orphaned claim is deleted only
// once its hand-over Job delivered it, and the Gateway's deletion waits for its claims.
// The same run with the emptyDir spool is the negative control: it must lose records.
func TestAuditPersistentSpool(t *testing.T) {
	s := &e2e{c: connect(t)}
	t.Cleanup(s.cleanup(t))
	t.Cleanup(func() {
		for _, line := range s.summary {
			t.Log(line)
			fmt.Println(line)
		}
	})
	var repo *auditRepo
	runs := map[bool]*spoolRun{}
	type step struct {
		name string
		run  func(t *testing.T)
	}
	steps := []step{
		{"the chart installs the operator", s.installChart},
		{"member nodes run as pods", s.deployMembers},
		{"the token issuer and the audit repository double run", func(t *testing.T) {
			s.needIssuer(t)
			repo = s.deployAuditRepo(t)
		}},
	}
	// FERROFED_E2E_SPOOL_MODES=emptydir runs the negative control alone (it needs nothing
	// new of the operator).
	// FERROFED_E2E_SPOOL_MODES=switch runs the switch from the emptyDir spool to claims
	// (the retiring pods) alone.
	modes := env("FERROFED_E2E_SPOOL_MODES", "emptydir,persistent,switch")
	if strings.Contains(modes, "emptydir") {
		steps = append(steps, step{"with the emptyDir spool, records are lost (negative control)", func(t *testing.T) {
			runs[false] = s.spoolScenario(t, repo, spoolMode{name: "e2e-spool-emptydir", prefix: "E2EEMPTY", persistent: false})
		}})
	}
	if strings.Contains(modes, "persistent") {
		steps = append(steps, step{"with a persistent spool per replica, every request answered 200 has its AuditEvent delivered", func(t *testing.T) {
			runs[true] = s.spoolScenario(t, repo, spoolMode{name: "e2e-spool-claims", prefix: "E2ECLAIM", persistent: true})
		}})
	}
	if strings.Contains(modes, "switch") {
		steps = append(steps, step{"switching from the emptyDir to a persistent spool loses no record", func(t *testing.T) {
			s.spoolSwitchScenario(t, repo, spoolMode{name: "e2e-spool-switch", prefix: "E2ESWITCH", persistent: true})
		}})
	}
	for _, st := range steps {
		if !t.Run(st.name, st.run) && !cfg.continueOnFailure {
			t.Fatalf("step %q failed: the steps after it are skipped (FERROFED_E2E_CONTINUE=1 runs them)", st.name)
		}
	}
	p, e := runs[true], runs[false]
	if p != nil && e != nil {
		line := fmt.Sprintf("e2e audit spool throughput (answered 200 per second, repository refusing): persistent %.0f/s steady, %.0f/s through the disruptions; emptyDir %.0f/s steady, %.0f/s through the disruptions",
			p.steadyRate, p.wholeRate, e.steadyRate, e.wholeRate)
		s.summary = append(s.summary, line)
	}
}

// spoolScenario runs the scenario for one mode and checks what that mode promises.
func (s *e2e) spoolScenario(t *testing.T, repo *auditRepo, mode spoolMode) *spoolRun {
	ctx := context.Background()
	if repo == nil || s.issuer == nil || len(s.members) == 0 {
		t.Fatal("the repository double, the token issuer or the members are missing: their step did not run")
	}
	run := &spoolRun{mode: mode}
	start := time.Now()

	// The Gateway. Strict field validation: an API without the persistent spool's fields
	// refuses the Gateway instead of running an emptyDir one.
	member := s.members[0]
	inline := fmt.Sprintf("[[registry.members]]\nid = %q\nquery_endpoint = %q\n\n%s\n[audit]\ndestination = \"repository\"\nurl = %q\n",
		member.ID, member.URL, s.issuer.TOMLIssuer(), repo.base)
	spec := map[string]any{
		"replicas": spoolReplicas,
		"image":    cfg.image,
		"lifecycle": map[string]any{
			"requestTimeout":       requestTimeout.String(),
			"bindingsDrainTimeout": bindingsDrain.String(),
		},
		"probes": map[string]any{
			"startup":   map[string]any{"periodSeconds": 1, "failureThreshold": 60},
			"readiness": map[string]any{"periodSeconds": 1, "failureThreshold": 2},
		},
		"config": map[string]any{"inline": inline},
	}
	if mode.persistent {
		spec["audit"] = spoolClaimAudit(mode.name)
	}
	gwObj := gatewayObject(cfg.namespace, mode.name, spec)
	if _, err := s.c.dyn.Resource(gatewayGVR).Namespace(cfg.namespace).Create(ctx, gwObj, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatalf("create Gateway %s: %v", mode.name, err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted && !cfg.keep {
			_ = s.c.dyn.Resource(gatewayGVR).Namespace(cfg.namespace).Delete(context.Background(), mode.name, metav1.DeleteOptions{})
		}
	})
	gw := s.readyGateway(t, mode.name, spoolStepDeadline)

	// The workload: a StatefulSet with a claim per replica, or a Deployment with an emptyDir.
	var selector string
	if mode.persistent {
		sts := ownedStatefulSet(t, s, gw)
		selector = metav1.FormatLabelSelector(sts.Spec.Selector)
		if dep, err := s.c.ownedDeployment(ctx, gw); err == nil && dep != nil {
			t.Errorf("Gateway %s with a volumeClaimTemplate still owns Deployment %s", mode.name, dep.Name)
		}
		for i := range spoolReplicas {
			claim := spoolClaim(mode.name, i)
			pvc, err := s.c.kube.CoreV1().PersistentVolumeClaims(cfg.namespace).Get(ctx, claim, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("claim %s of replica %d: %v", claim, i, err)
			}
			if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != storageClass {
				t.Errorf("claim %s: phase %s, class %v; want Bound, %s", claim, pvc.Status.Phase, pvc.Spec.StorageClassName, storageClass)
			}
			t.Logf("replica %d: claim %s bound to %s (%s)", i, claim, pvc.Spec.VolumeName, pvc.Status.Capacity.Storage())
		}
	} else {
		dep, err := s.c.ownedDeployment(ctx, gw)
		if err != nil {
			t.Fatal(err)
		}
		if !hasEmptyDirAt(dep, spoolMountPath) {
			t.Fatalf("Gateway %s: no emptyDir at %s in its Deployment: %+v", mode.name, spoolMountPath, dep.Spec.Template.Spec.Volumes)
		}
		selector = metav1.FormatLabelSelector(dep.Spec.Selector)
	}
	svc, err := s.c.ownedService(ctx, gw)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	eventually(t, spoolStepDeadline, "both replicas in the Service's endpoints", func(ctx context.Context) (bool, string, error) {
		addrs, err = rollout.EndpointAddrs(ctx, s.c.kube, svc)
		return len(addrs) == spoolReplicas, fmt.Sprintf("endpoints %v", addrs), err
	})
	if local, why := rollout.OnThisMachine(addrs); !local {
		skipOffMachine(t, "the Gateway's Service is not reachable from this machine: "+why)
	}
	base := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port))
	eventually(t, 2*time.Minute, "the Service routing to the gateway", func(ctx context.Context) (bool, string, error) {
		ok, why := rollout.Routed(ctx, base, 20)
		return ok, why, nil
	})

	// The repository refuses every delivery; the load starts.
	repo.control(t, "script?status=503&count=1000000")
	load := startPrefixedLoad(base, s.issuer.ClientToken(time.Hour), spoolLoadWorkers, mode.prefix, spoolLoadMax)
	defer load.stop()
	loadStart := time.Now()
	load.waitAnswered(t, 100, time.Minute)
	n0, t0 := load.answeredCount(), time.Now()
	time.Sleep(spoolSteadyWindow)
	run.steadyRate = float64(load.answeredCount()-n0) / time.Since(t0).Seconds()
	t.Logf("%s: %.0f requests/s answered 200 with the repository refusing (a %s window, before any disruption)", mode.name, run.steadyRate, spoolSteadyWindow)

	// 1. A rolling restart: a configuration change through the Gateway replaces every pod.
	before := podUIDs(t, s, selector)
	if err := s.c.patchGateway(ctx, cfg.namespace, mode.name, map[string]any{"config": map[string]any{"inline": inline + "\n[health]\ncache_ttl_ms = 1500\n"}}); err != nil {
		t.Fatalf("rolling restart: %v", err)
	}
	rolled := time.Now()
	waitAllReplaced(t, s, selector, before, spoolReplicas)
	run.replacedPods += len(before)
	t.Logf("%s: rolling restart done in %s (%d answered 200 so far)", mode.name, time.Since(rolled).Round(time.Second), load.answeredCount())
	load.waitAnswered(t, load.answeredCount()+50, time.Minute)

	// 2. `kubectl delete pod` of each replica, one after the other.
	for _, p := range s.gatewayPods(t, selector) {
		was := podUIDs(t, s, selector)
		if err := s.c.kube.CoreV1().Pods(cfg.namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete pod %s: %v", p.Name, err)
		}
		deletedAt := time.Now()
		delete(was, p.UID)
		waitReplacedOne(t, s, selector, p.UID, was, spoolReplicas)
		run.replacedPods++
		t.Logf("%s: pod %s deleted, its replacement Ready %s later", mode.name, p.Name, time.Since(deletedAt).Round(100*time.Millisecond))
		load.waitAnswered(t, load.answeredCount()+50, time.Minute)
	}

	// 3. Scale down to 1. With claims, the orphaned claim is handed over and must
	// outlive the repository's refusal.
	orphan := spoolClaim(mode.name, spoolReplicas-1)
	var claimGone *goneWatch
	if mode.persistent {
		claimGone = s.watchClaimGone(orphan)
		defer claimGone.stop()
	}
	if err := s.c.patchGateway(ctx, cfg.namespace, mode.name, map[string]any{"replicas": 1}); err != nil {
		t.Fatalf("scale down: %v", err)
	}
	scaledAt := time.Now()
	eventually(t, spoolStepDeadline, "one gateway pod left after the scale-down", func(ctx context.Context) (bool, string, error) {
		pods, err := listGatewayPods(ctx, s, selector)
		if err != nil {
			return false, "", err
		}
		return len(pods) == 1 && rollout.PodReady(&pods[0]), fmt.Sprintf("%d pods", len(pods)), nil
	})
	run.replacedPods++
	load.waitAnswered(t, load.answeredCount()+50, time.Minute)
	if mode.persistent {
		// While the repository refuses, the orphaned claim holds records: the operator
		// says so and keeps it.
		eventually(t, 2*time.Minute, "AuditDelivering=False and status.audit naming "+orphan+" orphaned while the repository refuses", func(ctx context.Context) (bool, string, error) {
			g, err := s.c.getGateway(ctx, cfg.namespace, mode.name)
			if err != nil {
				return false, "", err
			}
			st, reason := rollout.Condition(g, "AuditDelivering")
			a := readStatusAudit(g)
			c := a.claim(orphan)
			if c != nil {
				run.orphanSeen = fmt.Sprintf("AuditDelivering=%s %s, %s %s with %d undelivered records (reported by %q)", st, reason, orphan, c.Replica, c.UndeliveredRecords, c.ReportedBy)
			}
			return st == "False" && c != nil && c.Replica == "orphaned" && a.OrphanedClaims >= 1,
				fmt.Sprintf("AuditDelivering=%s %s; status.audit %s", st, reason, statusAudit(g)), nil
		})
		t.Logf("%s: while the repository refuses: %s", mode.name, run.orphanSeen)
		if at, gone := claimGone.gone(); gone {
			t.Errorf("claim %s deleted %s after the scale-down while the repository refused every delivery", orphan, at.Sub(scaledAt).Round(time.Second))
		}
		t.Logf("%s: hand-over of %s: %s", mode.name, orphan, s.handOverJobs(t, gw))
	}
	load.stop()
	run.loadTook = time.Since(loadStart)
	answered := load.answeredSet()
	st := load.stats()
	run.answered = len(answered)
	run.otherAnswers = st.other
	run.wholeRate = float64(len(answered)) / run.loadTook.Seconds()

	// The repository accepts.
	repo.control(t, "script?status=503&count=0")
	accepted := time.Now()
	counts := func() map[string]int {
		out := map[string]int{}
		for _, e := range repo.received(t).Events {
			for _, q := range e.Queries {
				if m, ok := strings.CutPrefix(q, "name="); ok && strings.HasPrefix(m, mode.prefix) {
					out[m]++
				}
			}
		}
		return out
	}
	missing := func(c map[string]int) []string {
		var out []string
		for m := range answered {
			if c[m] == 0 {
				out = append(out, m)
			}
		}
		sort.Strings(out)
		return out
	}
	var c map[string]int
	if mode.persistent {
		eventually(t, spoolDeliverWithin, "every request answered 200 has its AuditEvent delivered", func(context.Context) (bool, string, error) {
			c = counts()
			lost := missing(c)
			return len(lost) == 0, fmt.Sprintf("%d of %d answered 200 not delivered yet, e.g. %v", len(lost), len(answered), first(lost, 5)), nil
		})
		run.deliveredAfterAcceptTook = time.Since(accepted)
		eventually(t, spoolDeliverWithin, "the orphaned claim "+orphan+" deleted once its records are delivered", func(context.Context) (bool, string, error) {
			_, gone := claimGone.gone()
			return gone, "still there", nil
		})
		at, _ := claimGone.gone()
		run.claimWait = at.Sub(scaledAt)
		run.claimAfterAccept = at.Sub(accepted)
		if _, err := s.c.kube.CoreV1().PersistentVolumeClaims(cfg.namespace).Get(ctx, spoolClaim(mode.name, 0), metav1.GetOptions{}); err != nil {
			t.Errorf("the live replica's claim %s: %v", spoolClaim(mode.name, 0), err)
		}
		eventually(t, 2*time.Minute, "AuditDelivering=True once everything is delivered", func(ctx context.Context) (bool, string, error) {
			g, err := s.c.getGateway(ctx, cfg.namespace, mode.name)
			if err != nil {
				return false, "", err
			}
			st, reason := rollout.Condition(g, "AuditDelivering")
			a := readStatusAudit(g)
			live := a.claim(spoolClaim(mode.name, 0))
			return st == "True" && a.OrphanedClaims == 0 && a.claim(orphan) == nil && live != nil && live.Replica == mode.name+"-0",
				fmt.Sprintf("AuditDelivering=%s %s; status.audit %s", st, reason, statusAudit(g)), nil
		})
		t.Logf("%s: hand-over Jobs after the delivery: %s", mode.name, s.handOverJobs(t, gw))
	} else {
		// Nothing waits anywhere any more once the surviving pod's spool is delivered:
		// the count stops moving.
		last, since := -1, time.Now()
		eventually(t, spoolDeliverWithin, "the deliveries settled", func(context.Context) (bool, string, error) {
			c = counts()
			if len(c) != last {
				last, since = len(c), time.Now()
			}
			return time.Since(since) >= spoolSettle && time.Since(accepted) >= 2*spoolSettle,
				fmt.Sprintf("%d of %d answered 200 delivered", len(answered)-len(missing(c)), len(answered)), nil
		})
	}
	run.lost = missing(c)
	run.delivered = run.answered - len(run.lost)
	for _, n := range c {
		if n > 1 {
			run.duplicates += n - 1
			run.dupMarkers++
		}
	}

	// The Gateway's deletion: with claims, it waits for them to be drained (the
	// repository accepts now), then they go too.
	if !cfg.keep {
		if err := s.c.dyn.Resource(gatewayGVR).Namespace(cfg.namespace).Delete(ctx, mode.name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete Gateway %s: %v", mode.name, err)
		}
		deleted = true
		delStart := time.Now()
		eventually(t, spoolStepDeadline, "Gateway "+mode.name+" and its claims gone", func(ctx context.Context) (bool, string, error) {
			_, err := s.c.getGateway(ctx, cfg.namespace, mode.name)
			gwGone := apierrors.IsNotFound(err)
			claims, lerr := s.c.kube.CoreV1().PersistentVolumeClaims(cfg.namespace).List(ctx, metav1.ListOptions{})
			if lerr != nil {
				return false, "", lerr
			}
			var left []string
			for _, pvc := range claims.Items {
				if strings.HasPrefix(pvc.Name, "spool-"+mode.name+"-") {
					left = append(left, pvc.Name)
				}
			}
			return gwGone && len(left) == 0, fmt.Sprintf("Gateway gone %v, claims %v", gwGone, left), nil
		})
		t.Logf("%s: Gateway deleted, and its claims, %s after the delete", mode.name, time.Since(delStart).Round(time.Second))
	}

	kind := "emptyDir"
	if mode.persistent {
		kind = "persistent"
	}
	line := fmt.Sprintf("e2e audit spool %s (%s): pods replaced %d (rolling restart, delete of each, scale-down 2->1) requests=%d answered-200=%d other=%v delivered=%d/%d lost=%d duplicates=%d (of %d markers) load %s at %.0f/s (steady %.0f/s)",
		kind, mode.name, run.replacedPods, st.requests, run.answered, st.other, run.delivered, run.answered, len(run.lost), run.duplicates, run.dupMarkers,
		run.loadTook.Round(time.Second), run.wholeRate, run.steadyRate)
	if mode.persistent {
		line += fmt.Sprintf(" delivered %s after the repository accepted; scale-down to the orphaned claim's deletion %s (%s of it after the repository accepted; before: %s)",
			run.deliveredAfterAcceptTook.Round(time.Second), run.claimWait.Round(time.Second), run.claimAfterAccept.Round(time.Second), run.orphanSeen)
	}
	line += fmt.Sprintf(" in %s", time.Since(start).Round(time.Second))
	s.summary = append(s.summary, line)
	t.Log(line)
	if mode.persistent && len(run.lost) > 0 {
		t.Errorf("%d of %d requests answered 200 have no AuditEvent delivered with the persistent spool, e.g. %v", len(run.lost), run.answered, first(run.lost, 10))
	}
	if !mode.persistent && len(run.lost) == 0 {
		t.Errorf("with the emptyDir spool no record was lost through %d pod replacements with the repository refusing: the scenario cannot see a loss, so the persistent spool's 0 proves nothing", run.replacedPods)
	}
	// 503 while a replica boots, and no answer while the Service still routes to a pod
	// that is gone, are the disruptions; any other status is not this gateway's doing.
	for status, n := range st.other {
		if status != "no-answer" && status != "cut-by-stop" && status != "503" {
			t.Errorf("%d requests answered %s through the Service; the first answers other than 200: %v", n, status, st.samples)
		}
	}
	return run
}

// ---------------------------------------------------------------------------- claims, pods, Jobs

// spoolClaimAudit is spec.audit of a Gateway with a claim per replica of the cluster's
// provisioner.
func spoolClaimAudit(gateway string) map[string]any {
	return map[string]any{"spool": map[string]any{
		"volumeClaimTemplate": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"e2e.ferrofed.io/spool": gateway}},
			"spec": map[string]any{
				"storageClassName": storageClass,
				"accessModes":      []any{"ReadWriteOnce"},
				"resources":        map[string]any{"requests": map[string]any{"storage": spoolClaimSize}},
			},
		},
		"retainOnDelete": false,
	}}
}

// spoolClaim is the claim of replica i: the StatefulSet's claim template "spool".
func spoolClaim(gateway string, i int) string { return fmt.Sprintf("spool-%s-%d", gateway, i) }

func ownedStatefulSet(t *testing.T, s *e2e, gw *unstructured.Unstructured) *appsv1.StatefulSet {
	t.Helper()
	list, err := s.c.kube.AppsV1().StatefulSets(gw.GetNamespace()).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == gw.GetUID() {
			sts := &list.Items[i]
			found := false
			for _, tpl := range sts.Spec.VolumeClaimTemplates {
				found = found || tpl.Name == "spool"
			}
			if !found {
				t.Errorf("StatefulSet %s has no volumeClaimTemplate named spool", sts.Name)
			}
			mounted := false
			for _, c := range sts.Spec.Template.Spec.Containers {
				for _, m := range c.VolumeMounts {
					mounted = mounted || (m.Name == "spool" && m.MountPath == spoolMountPath)
				}
			}
			if !mounted {
				t.Errorf("StatefulSet %s does not mount its claim spool at %s", sts.Name, spoolMountPath)
			}
			return sts
		}
	}
	t.Fatalf("Gateway %s with spec.audit.spool.volumeClaimTemplate owns no StatefulSet", gw.GetName())
	return nil
}

func podUIDs(t *testing.T, s *e2e, selector string) map[types.UID]bool {
	t.Helper()
	out := map[types.UID]bool{}
	for _, p := range s.gatewayPods(t, selector) {
		out[p.UID] = true
	}
	return out
}

// listGatewayPods lists the gateway's pods: those of the selector a Job (a hand-over)
// does not own.
func listGatewayPods(ctx context.Context, s *e2e, selector string) ([]corev1.Pod, error) {
	list, err := s.c.kube.CoreV1().Pods(cfg.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "Job" {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

func (s *e2e) gatewayPods(t *testing.T, selector string) []corev1.Pod {
	t.Helper()
	pods, err := listGatewayPods(context.Background(), s, selector)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// waitAllReplaced waits until n Ready pods run, none of them one of before, and no pod
// is terminating.
func waitAllReplaced(t *testing.T, s *e2e, selector string, before map[types.UID]bool, n int) {
	t.Helper()
	eventually(t, spoolStepDeadline, "every pod replaced and Ready", func(ctx context.Context) (bool, string, error) {
		pods, err := listGatewayPods(ctx, s, selector)
		if err != nil {
			return false, "", err
		}
		ready, old := 0, 0
		for i := range pods {
			p := &pods[i]
			if before[p.UID] {
				old++
			} else if p.DeletionTimestamp == nil && rollout.PodReady(p) {
				ready++
			}
		}
		return old == 0 && ready == n && len(pods) == n, fmt.Sprintf("%d pods, %d old, %d new Ready", len(pods), old, ready), nil
	})
}

// waitReplacedOne waits until the pod gone is gone and n Ready pods run: the others
// of before, and one new.
func waitReplacedOne(t *testing.T, s *e2e, selector string, gone types.UID, others map[types.UID]bool, n int) {
	t.Helper()
	eventually(t, spoolStepDeadline, "the deleted pod replaced and Ready", func(ctx context.Context) (bool, string, error) {
		pods, err := listGatewayPods(ctx, s, selector)
		if err != nil {
			return false, "", err
		}
		ready, fresh := 0, 0
		for i := range pods {
			p := &pods[i]
			if p.UID == gone {
				return false, "the deleted pod " + p.Name + " is still terminating", nil
			}
			if p.DeletionTimestamp == nil && rollout.PodReady(p) {
				ready++
				if !others[p.UID] {
					fresh++
				}
			}
		}
		return ready == n && fresh == 1 && len(pods) == n, fmt.Sprintf("%d pods, %d Ready, %d new", len(pods), ready, fresh), nil
	})
}

// goneWatch polls a claim every half second and keeps when it was first seen deleted
// (marked for deletion or gone).
type goneWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	at     time.Time
}

func (s *e2e) watchClaimGone(name string) *goneWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &goneWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			pvc, err := s.c.kube.CoreV1().PersistentVolumeClaims(cfg.namespace).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && pvc.DeletionTimestamp != nil) {
				w.mu.Lock()
				w.at = time.Now()
				w.mu.Unlock()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *goneWatch) gone() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at, !w.at.IsZero()
}

func (w *goneWatch) stop() { w.cancel(); <-w.done }

// handOverJobs describes the Jobs the Gateway owns (the hand-overs), for the log.
func (s *e2e) handOverJobs(t *testing.T, gw *unstructured.Unstructured) string {
	t.Helper()
	jobs, err := s.c.kube.BatchV1().Jobs(cfg.namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, j := range jobs.Items {
		if ref := metav1.GetControllerOf(&j); ref == nil || ref.UID != gw.GetUID() {
			continue
		}
		args := ""
		if cs := j.Spec.Template.Spec.Containers; len(cs) > 0 {
			args = strings.Join(append(append([]string{}, cs[0].Command...), cs[0].Args...), " ")
		}
		out = append(out, fmt.Sprintf("%s (active %d, succeeded %d, failed %d, activeDeadlineSeconds %v: %s)",
			j.Name, j.Status.Active, j.Status.Succeeded, j.Status.Failed, deref(j.Spec.ActiveDeadlineSeconds), args))
	}
	if len(out) == 0 {
		return "no Job owned by the Gateway"
	}
	return strings.Join(out, "; ")
}

// auditStatus is the part of status.audit the scenario reads.
type auditStatus struct {
	Claims             []spoolClaimStatus  `json:"claims"`
	OrphanedClaims     int32               `json:"orphanedClaims"`
	UndeliveredRecords int64               `json:"undeliveredRecords"`
	RetiringPods       []retiringPodStatus `json:"retiringPods"`
}

// retiringPodStatus is one entry of status.audit.retiringPods.
type retiringPodStatus struct {
	Name               string `json:"name"`
	UndeliveredRecords int64  `json:"undeliveredRecords"`
	UndeliveredBytes   int64  `json:"undeliveredBytes"`
	LastRead           string `json:"lastRead"`
	Message            string `json:"message"`
}

// spoolClaimStatus is one entry of status.audit.claims.
type spoolClaimStatus struct {
	Name               string `json:"name"`
	Replica            string `json:"replica"` // the pod, or "orphaned"
	UndeliveredRecords int64  `json:"undeliveredRecords"`
	ReportedBy         string `json:"reportedBy"`
	HandOver           *struct {
		Job   string `json:"job"`
		State string `json:"state"`
	} `json:"handOver"`
}

func (a *auditStatus) claim(name string) *spoolClaimStatus {
	for i := range a.Claims {
		if a.Claims[i].Name == name {
			return &a.Claims[i]
		}
	}
	return nil
}

func readStatusAudit(gw *unstructured.Unstructured) *auditStatus {
	a := &auditStatus{}
	if v, ok, _ := unstructured.NestedFieldNoCopy(gw.Object, "status", "audit"); ok {
		if b, err := json.Marshal(v); err == nil {
			_ = json.Unmarshal(b, a)
		}
	}
	return a
}

// statusAudit is the Gateway's status.audit as JSON, for the log.
func statusAudit(gw *unstructured.Unstructured) string {
	v, ok, _ := unstructured.NestedFieldNoCopy(gw.Object, "status", "audit")
	if !ok {
		return "(none)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// ---------------------------------------------------------------------------- the switch

// spoolSwitchScenario: a Gateway with 2 replicas and the emptyDir spool, the repository
// refusing, audited load running; the Gateway switches to a claim per replica. Once its
// StatefulSet is ready the Deployment's pods retire (docs/operator.md, "Retiring
// pods"): still Running, out of the Service, owned by the Gateway, listed in
// status.audit.retiringPods with their records. The load stops, the repository
// accepts: every request answered 200 has its AuditEvent delivered and each retiring
// pod is deleted once its spool reads empty.
func (s *e2e) spoolSwitchScenario(t *testing.T, repo *auditRepo, mode spoolMode) {
	ctx := context.Background()
	if repo == nil || s.issuer == nil || len(s.members) == 0 {
		t.Fatal("the repository double, the token issuer or the members are missing: their step did not run")
	}
	start := time.Now()
	member := s.members[0]
	inline := fmt.Sprintf("[[registry.members]]\nid = %q\nquery_endpoint = %q\n\n%s\n[audit]\ndestination = \"repository\"\nurl = %q\n",
		member.ID, member.URL, s.issuer.TOMLIssuer(), repo.base)
	spec := map[string]any{
		"replicas": spoolReplicas,
		"image":    cfg.image,
		"lifecycle": map[string]any{
			"requestTimeout":       requestTimeout.String(),
			"bindingsDrainTimeout": bindingsDrain.String(),
		},
		"probes": map[string]any{
			"startup":   map[string]any{"periodSeconds": 1, "failureThreshold": 60},
			"readiness": map[string]any{"periodSeconds": 1, "failureThreshold": 2},
		},
		"config": map[string]any{"inline": inline},
	}
	if _, err := s.c.dyn.Resource(gatewayGVR).Namespace(cfg.namespace).Create(ctx, gatewayObject(cfg.namespace, mode.name, spec), metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Fatalf("create Gateway %s: %v", mode.name, err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted && !cfg.keep {
			// After a failure: the repository accepts, so that the retiring pods and the
			// claims empty and the Gateway's finalizer can go before the namespace does.
			if res, err := repo.client.Post(repo.base+"/_double/script?status=503&count=0", "", nil); err == nil {
				res.Body.Close()
			}
			_ = s.c.dyn.Resource(gatewayGVR).Namespace(cfg.namespace).Delete(context.Background(), mode.name, metav1.DeleteOptions{})
		}
	})
	gw := s.readyGateway(t, mode.name, spoolStepDeadline)
	dep, err := s.c.ownedDeployment(ctx, gw)
	if err != nil {
		t.Fatal(err)
	}
	if !hasEmptyDirAt(dep, spoolMountPath) {
		t.Fatalf("Gateway %s: no emptyDir at %s in its Deployment: %+v", mode.name, spoolMountPath, dep.Spec.Template.Spec.Volumes)
	}
	depSelector := metav1.FormatLabelSelector(dep.Spec.Selector)
	svc, err := s.c.ownedService(ctx, gw)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	eventually(t, spoolStepDeadline, "both replicas in the Service's endpoints", func(ctx context.Context) (bool, string, error) {
		addrs, err = rollout.EndpointAddrs(ctx, s.c.kube, svc)
		return len(addrs) == spoolReplicas, fmt.Sprintf("endpoints %v", addrs), err
	})
	if local, why := rollout.OnThisMachine(addrs); !local {
		skipOffMachine(t, "the Gateway's Service is not reachable from this machine: "+why)
	}
	base := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port))
	eventually(t, 2*time.Minute, "the Service routing to the gateway", func(ctx context.Context) (bool, string, error) {
		ok, why := rollout.Routed(ctx, base, 20)
		return ok, why, nil
	})

	// The repository refuses; the load runs on the Deployment's pods.
	repo.control(t, "script?status=503&count=1000000")
	load := startPrefixedLoad(base, s.issuer.ClientToken(time.Hour), spoolLoadWorkers, mode.prefix, spoolLoadMax)
	defer load.stop()
	loadStart := time.Now()
	load.waitAnswered(t, 100, time.Minute)
	time.Sleep(spoolSteadyWindow)
	old := map[string]types.UID{}
	for _, p := range s.gatewayPods(t, depSelector) {
		if p.DeletionTimestamp == nil {
			old[p.Name] = p.UID
		}
	}
	if len(old) != spoolReplicas {
		t.Fatalf("%d live pods of Deployment %s before the switch, want %d", len(old), dep.Name, spoolReplicas)
	}
	t.Logf("%s: %d answered 200 on the emptyDir pods %v before the switch", mode.name, load.answeredCount(), mapKeys(old))

	// The switch.
	gone := s.watchPodsGone(old)
	defer gone.stop()
	if err := s.c.patchGateway(ctx, cfg.namespace, mode.name, map[string]any{"audit": spoolClaimAudit(mode.name)}); err != nil {
		t.Fatalf("switch to a volumeClaimTemplate: %v", err)
	}
	switched := time.Now()
	var stsReadyAfter time.Duration
	var retiringSeen string
	var retiringRecords int64
	early := "" // a pod gone while the repository refused: no wait can mend that
	eventually(t, spoolStepDeadline, "the StatefulSet ready, the Deployment gone and its pods retiring", func(ctx context.Context) (bool, string, error) {
		var why []string
		sts, err := s.c.kube.AppsV1().StatefulSets(cfg.namespace).Get(ctx, mode.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			why = append(why, "no StatefulSet yet")
		case err != nil:
			return false, "", err
		case sts.Status.ReadyReplicas != spoolReplicas:
			why = append(why, fmt.Sprintf("StatefulSet %d of %d ready", sts.Status.ReadyReplicas, spoolReplicas))
		case stsReadyAfter == 0:
			stsReadyAfter = time.Since(switched)
		}
		if d, err := s.c.ownedDeployment(ctx, gw); err == nil && d.DeletionTimestamp == nil {
			why = append(why, "Deployment "+d.Name+" still there")
		}
		for name, uid := range old {
			p, err := s.c.kube.CoreV1().Pods(cfg.namespace).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && (p.UID != uid || p.DeletionTimestamp != nil)) {
				early = fmt.Sprintf("the emptyDir pod %s is gone or being deleted before the repository accepted", name)
				return true, early, nil
			}
			if err != nil {
				return false, "", err
			}
			if w := retiringWrong(p, mode.name, gw.GetUID()); w != "" {
				why = append(why, name+": "+w)
			}
		}
		g, err := s.c.getGateway(ctx, cfg.namespace, mode.name)
		if err != nil {
			return false, "", err
		}
		st, reason := rollout.Condition(g, "AuditDelivering")
		a := readStatusAudit(g)
		listed, records := map[string]bool{}, int64(0)
		for _, r := range a.RetiringPods {
			if _, ok := old[r.Name]; ok && r.UndeliveredRecords > 0 {
				listed[r.Name] = true
			}
			records += r.UndeliveredRecords
		}
		if len(listed) != len(old) || len(a.RetiringPods) != len(old) {
			why = append(why, fmt.Sprintf("status.audit.retiringPods %+v", a.RetiringPods))
		}
		if st != "False" || !strings.HasPrefix(reason, "RetiringPodsDelivering:") { // reason is "Reason: message"
			why = append(why, fmt.Sprintf("AuditDelivering=%s %s", st, reason))
		}
		if len(why) == 0 {
			retiringRecords = records
			retiringSeen = fmt.Sprintf("AuditDelivering=%s %s, retiringPods %+v", st, reason, a.RetiringPods)
		}
		return len(why) == 0, strings.Join(why, "; "), nil
	})
	if early != "" {
		t.Fatal(early)
	}
	retiringAfter := time.Since(switched)
	t.Logf("%s: StatefulSet ready %s after the switch; pods retiring (%s after it): %s", mode.name, stsReadyAfter.Round(time.Second), retiringAfter.Round(time.Second), retiringSeen)
	if at, was := gone.last(); was {
		t.Errorf("a retiring pod was deleted %s after the switch while the repository refused", at.Sub(switched).Round(time.Second))
	}
	load.waitAnswered(t, load.answeredCount()+50, time.Minute) // the StatefulSet's pods serve
	load.stop()
	loadTook := time.Since(loadStart)
	answered := load.answeredSet()
	st := load.stats()

	// The repository accepts.
	repo.control(t, "script?status=503&count=0")
	accepted := time.Now()
	var c map[string]int
	eventually(t, spoolDeliverWithin, "every request answered 200 has its AuditEvent delivered", func(context.Context) (bool, string, error) {
		c = markerCounts(t, repo, mode.prefix)
		lost := missingMarkers(answered, c)
		return len(lost) == 0, fmt.Sprintf("%d of %d answered 200 not delivered yet, e.g. %v", len(lost), len(answered), first(lost, 5)), nil
	})
	deliveredAfter := time.Since(accepted)
	eventually(t, spoolDeliverWithin, "every retiring pod deleted", func(context.Context) (bool, string, error) {
		n := gone.count()
		return n == len(old), fmt.Sprintf("%d of %d retiring pods deleted", n, len(old)), nil
	})
	lastAt, _ := gone.last()
	retiredAfter := lastAt.Sub(accepted)
	eventually(t, 2*time.Minute, "status.audit.retiringPods empty and AuditDelivering=True", func(ctx context.Context) (bool, string, error) {
		g, err := s.c.getGateway(ctx, cfg.namespace, mode.name)
		if err != nil {
			return false, "", err
		}
		st, reason := rollout.Condition(g, "AuditDelivering")
		return st == "True" && len(readStatusAudit(g).RetiringPods) == 0,
			fmt.Sprintf("AuditDelivering=%s %s; status.audit %s", st, reason, statusAudit(g)), nil
	})
	// A last count: duplicates may still arrive after the last missing one.
	c = markerCounts(t, repo, mode.prefix)
	lost := missingMarkers(answered, c)
	duplicates, dupMarkers := 0, 0
	for _, n := range c {
		if n > 1 {
			duplicates += n - 1
			dupMarkers++
		}
	}

	if !cfg.keep {
		if err := s.c.dyn.Resource(gatewayGVR).Namespace(cfg.namespace).Delete(ctx, mode.name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete Gateway %s: %v", mode.name, err)
		}
		deleted = true
		eventually(t, spoolStepDeadline, "Gateway "+mode.name+" and its claims gone", func(ctx context.Context) (bool, string, error) {
			_, err := s.c.getGateway(ctx, cfg.namespace, mode.name)
			gwGone := apierrors.IsNotFound(err)
			claims, lerr := s.c.kube.CoreV1().PersistentVolumeClaims(cfg.namespace).List(ctx, metav1.ListOptions{})
			if lerr != nil {
				return false, "", lerr
			}
			var left []string
			for _, pvc := range claims.Items {
				if strings.HasPrefix(pvc.Name, "spool-"+mode.name+"-") {
					left = append(left, pvc.Name)
				}
			}
			return gwGone && len(left) == 0, fmt.Sprintf("Gateway gone %v, claims %v", gwGone, left), nil
		})
	}

	line := fmt.Sprintf("e2e audit spool switch emptyDir->claims (%s): requests=%d answered-200=%d other=%v delivered=%d/%d lost=%d duplicates=%d (of %d markers) load %s; StatefulSet ready %s after the switch, %d pods retiring %s after it holding %d records; repository accepts -> every record delivered %s, last retiring pod deleted %s; in %s",
		mode.name, st.requests, len(answered), st.other, len(answered)-len(lost), len(answered), len(lost), duplicates, dupMarkers, loadTook.Round(time.Second),
		stsReadyAfter.Round(time.Second), len(old), retiringAfter.Round(time.Second), retiringRecords,
		deliveredAfter.Round(time.Second), retiredAfter.Round(time.Second), time.Since(start).Round(time.Second))
	s.summary = append(s.summary, line)
	t.Log(line)
	if len(lost) > 0 {
		t.Errorf("%d of %d requests answered 200 have no AuditEvent delivered across the switch, e.g. %v", len(lost), len(answered), first(lost, 10))
	}
	for status, n := range st.other {
		if status != "no-answer" && status != "cut-by-stop" && status != "503" {
			t.Errorf("%d requests answered %s through the Service; the first answers other than 200: %v", n, status, st.samples)
		}
	}
}

// retiringWrong says what a retiring pod of gateway lacks, or "".
func retiringWrong(p *corev1.Pod, gateway string, owner types.UID) string {
	var why []string
	if p.Status.Phase != corev1.PodRunning {
		why = append(why, "phase "+string(p.Status.Phase))
	}
	for _, l := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance"} {
		if _, ok := p.Labels[l]; ok {
			why = append(why, "still labelled "+l)
		}
	}
	if p.Labels["ferrofed.io/retiring-of"] != gateway {
		why = append(why, fmt.Sprintf("ferrofed.io/retiring-of=%q", p.Labels["ferrofed.io/retiring-of"]))
	}
	if refs := p.OwnerReferences; len(refs) != 1 || refs[0].UID != owner || (refs[0].Controller != nil && *refs[0].Controller) {
		var owners []string
		for _, r := range refs {
			owners = append(owners, fmt.Sprintf("%s/%s (controller %v)", r.Kind, r.Name, r.Controller != nil && *r.Controller))
		}
		why = append(why, fmt.Sprintf("owners %v", owners))
	}
	return strings.Join(why, ", ")
}

// markerCounts counts the AuditEvents the repository double received, by marker of
// prefix.
func markerCounts(t *testing.T, repo *auditRepo, prefix string) map[string]int {
	out := map[string]int{}
	for _, e := range repo.received(t).Events {
		for _, q := range e.Queries {
			if m, ok := strings.CutPrefix(q, "name="); ok && strings.HasPrefix(m, prefix) {
				out[m]++
			}
		}
	}
	return out
}

// missingMarkers are the markers of answered that c does not count, sorted.
func missingMarkers(answered map[string]bool, c map[string]int) []string {
	var out []string
	for m := range answered {
		if c[m] == 0 {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// podsGoneWatch polls pods every half second and keeps when each was first seen
// deleted (marked for deletion, gone, or replaced by a pod of another UID).
type podsGoneWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	at     map[string]time.Time
}

func (s *e2e) watchPodsGone(pods map[string]types.UID) *podsGoneWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &podsGoneWatch{cancel: cancel, done: make(chan struct{}), at: map[string]time.Time{}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			for name, uid := range pods {
				w.mu.Lock()
				_, seen := w.at[name]
				w.mu.Unlock()
				if seen {
					continue
				}
				p, err := s.c.kube.CoreV1().Pods(cfg.namespace).Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) || (err == nil && (p.UID != uid || p.DeletionTimestamp != nil)) {
					w.mu.Lock()
					w.at[name] = time.Now()
					w.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *podsGoneWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.at)
}

// last is when the last pod seen deleted was, and whether any was.
func (w *podsGoneWatch) last() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	for _, at := range w.at {
		if at.After(last) {
			last = at
		}
	}
	return last, !last.IsZero()
}

func (w *podsGoneWatch) stop() { w.cancel(); <-w.done }
