package operator_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

// TestSwitchingToAClaimRetiresTheDeploymentsPods: a switch from the emptyDir spool to a
// claim per replica loses no record. The Deployment and its ReplicaSet are deleted with
// the Orphan policy, and their pods are retired (out of the Service and the
// ReplicaSet, the Gateway their only owner) instead of deleted; the operator reads each
// one's backlog from its /metrics and deletes it only once its spool reads empty. The
// pod of the real gateway below holds two undelivered records until the repository
// accepts; the other has no IP yet, so its backlog cannot be read, and it is kept.
func TestSwitchingToAClaimRetiresTheDeploymentsPods(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()

	// A real gateway (the production assembly) stands in for the old pods' process:
	// its audit repository refuses to take anything for now.
	arr := auditrepo.Start(t, auditrepo.Options{})
	arr.Set(t, double.Knobs{Fault: double.FaultHold})
	member := members.Start(t, members.Options{ID: "a"})
	is := issuer.New(t)
	g := gatewaytest.Start(t, fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n[audit]\ndestination = \"repository\"\nurl = %q\nspool_dir = %q\n",
		member.URL, arr.URL, t.TempDir()), gatewaytest.WithIssuer(is))
	for _, name := range []string{"RETIRE1", "RETIRE2"} {
		if s, _ := g.Do(http.MethodGet, "/fhir/Patient?name="+name, is.Sign(t, "app", issuer.ClientScope), nil); s != http.StatusOK {
			t.Fatalf("search answered %d", s)
		}
	}
	u, err := url.Parse(g.URL)
	if err != nil {
		t.Fatal(err)
	}
	host, portText, _ := net.SplitHostPort(u.Host)
	port, _ := strconv.Atoi(portText)

	gw := newGateway("reconcile", "retire", all(inline(auditRepository), func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Replicas = ptr.To[int32](2)
		g.Spec.Port = int32(port)
	}))
	if err := k8s.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(gw)
	_, dep := reconciled(ctx, t, key)
	readyDeployment(ctx, t, key)
	rs, pods := deploymentPods(ctx, t, dep, "7d9f", 2)
	setPodIP(ctx, t, pods[0], host)

	updateGateway(ctx, t, key, spoolClaim("1Gi", corev1.ReadWriteOnce))
	sts := statefulSetOf(ctx, t, key)
	makeClaims(ctx, t, sts, 0, 1)
	readyStatefulSet(ctx, t, key)
	eventually(t, settle, "the Deployment and its ReplicaSet deleted with the Orphan policy", func() error {
		if err := deletedOrphaning(ctx, key, &appsv1.Deployment{}); err != nil {
			return err
		}
		return deletedOrphaning(ctx, client.ObjectKeyFromObject(rs), &appsv1.ReplicaSet{})
	})
	eventually(t, settle, "both pods retired and listed, AuditDelivering=False", func() error {
		for _, p := range pods {
			if err := retiring(ctx, gw.Name, p); err != nil {
				return err
			}
		}
		a := getGateway(ctx, t, key).Status.Audit
		if a == nil || len(a.RetiringPods) != 2 {
			return fmt.Errorf("status.audit %+v", a)
		}
		read, unread := a.RetiringPods[0], a.RetiringPods[1]
		if read.Name != pods[0].Name || read.UndeliveredRecords != 2 || read.UndeliveredBytes <= 0 || read.LastRead == nil || read.Message != "" {
			return fmt.Errorf("the read pod: %+v", read)
		}
		if unread.Name != pods[1].Name || unread.Message == "" || unread.LastRead != nil {
			return fmt.Errorf("the pod without an IP: %+v", unread)
		}
		if a.UndeliveredRecords < 2 {
			return fmt.Errorf("totals %+v", a)
		}
		c := condition(getGateway(ctx, t, key), ferrofedv1alpha1.ConditionAuditDelivering)
		if c.Status != metav1.ConditionFalse || c.Reason != ferrofedv1alpha1.ReasonRetiringPodsDelivering {
			return fmt.Errorf("AuditDelivering %s %s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	gcOrphaned(ctx, t, key, &appsv1.Deployment{})
	gcOrphaned(ctx, t, client.ObjectKeyFromObject(rs), &appsv1.ReplicaSet{})

	// The repository accepts: the read pod's spool empties, and the pod goes.
	arr.Set(t, double.Knobs{})
	eventually(t, settle+2*controllers.RetirePollInterval, "the delivered pod deleted, the other kept", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pods[0]), &corev1.Pod{}); err == nil {
			return fmt.Errorf("pod %s is still there", pods[0].Name)
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod %s: %w", pods[0].Name, err)
		}
		if err := retiring(ctx, gw.Name, pods[1]); err != nil {
			return err
		}
		if a := getGateway(ctx, t, key).Status.Audit; a == nil || len(a.RetiringPods) != 1 || a.RetiringPods[0].Name != pods[1].Name {
			return fmt.Errorf("status.audit %+v", a)
		}
		return nil
	})
	// Its IP known, the other pod reads empty too (the same process answers) and goes.
	setPodIP(ctx, t, pods[1], host)
	eventually(t, settle+2*controllers.RetirePollInterval, "no retiring pod left, AuditDelivering=True", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pods[1]), &corev1.Pod{}); err == nil {
			return fmt.Errorf("pod %s is still there", pods[1].Name)
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod %s: %w", pods[1].Name, err)
		}
		g := getGateway(ctx, t, key)
		if a := g.Status.Audit; a != nil && len(a.RetiringPods) != 0 {
			return fmt.Errorf("status.audit %+v", a)
		}
		if c := condition(g, ferrofedv1alpha1.ConditionAuditDelivering); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("AuditDelivering %s %s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	if n := arr.Stored(); n < 2 {
		t.Fatalf("the repository took %d record(s), want the 2 the pod held", n)
	}
}

// deploymentPods makes what the Deployment controller and the ReplicaSet controller
// would have: a ReplicaSet of dep with template hash, and n pods of it.
func deploymentPods(ctx context.Context, t *testing.T, dep *appsv1.Deployment, hash string, n int) (*appsv1.ReplicaSet, []*corev1.Pod) {
	t.Helper()
	labels := map[string]string{"pod-template-hash": hash}
	for k, v := range dep.Spec.Template.Labels {
		labels[k] = v
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: dep.Namespace, Name: dep.Name + "-" + hash, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(n)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: dep.Spec.Template.Spec}},
	}
	if err := k8s.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: dep.Namespace, Name: fmt.Sprintf("%s-%d", rs.Name, i), Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
			Spec: dep.Spec.Template.Spec,
		}
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	return rs, pods
}

// setPodIP gives a pod the IP the kubelet would report.
func setPodIP(ctx context.Context, t *testing.T, p *corev1.Pod, ip string) {
	t.Helper()
	setPodStatus(ctx, t, p, ip, nil)
}

// setPodStatus gives a running pod ip and, when conditions is not nil, those
// conditions, as the kubelet would report them.
func setPodStatus(ctx context.Context, t *testing.T, p *corev1.Pod, ip string, conditions []corev1.PodCondition) {
	t.Helper()
	eventually(t, settle, "the status of pod "+p.Name, func() error {
		live := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), live); err != nil {
			return err
		}
		live.Status.Phase, live.Status.PodIP, live.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
		if conditions != nil {
			live.Status.Conditions = conditions
		}
		return k8s.Status().Update(ctx, live)
	})
}

// retiring reports, as an error, when p is not a retiring pod of gateway: running, no
// selector label left, LabelRetiringOf set, the Gateway its only owner.
func retiring(ctx context.Context, gateway string, p *corev1.Pod) error {
	live := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), live); err != nil {
		return err
	}
	if live.DeletionTimestamp != nil {
		return fmt.Errorf("pod %s is being deleted", p.Name)
	}
	if _, ok := live.Labels[controllers.LabelInstance]; ok || live.Labels[controllers.LabelRetiringOf] != gateway {
		return fmt.Errorf("pod %s labels %v", p.Name, live.Labels)
	}
	if len(live.OwnerReferences) != 1 || live.OwnerReferences[0].Kind != "Gateway" || live.OwnerReferences[0].Name != gateway ||
		ptr.Deref(live.OwnerReferences[0].Controller, false) {
		return fmt.Errorf("pod %s owners %+v", p.Name, live.OwnerReferences)
	}
	return nil
}
