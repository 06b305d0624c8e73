package operator_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

// TestTheOperatorReadsItsPodsReports stands a real gateway (the production assembly)
// in for a Gateway's two pods, configured with the operator's issuer exactly as the
// operator rendered it (the entry of the rendered ferrofed.toml, the key set of the
// rendered ConfigMap): the operator's tokens are accepted, its polls fill
// status.dependencies and the conditions, a member going down flips MembersReachable
// within two poll intervals and back, and pods that are not ready are not polled.
func TestTheOperatorReadsItsPodsReports(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	a := members.Start(t, members.Options{ID: "a"})
	b := members.Start(t, members.Options{ID: "b"})
	registry := fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n[[registry.members]]\nid = \"b\"\nquery_endpoint = %q\n", a.URL, b.URL)

	gw := newGateway("reconcile", "polled", all(inline(registry), func(g *ferrofedv1alpha1.Gateway) { g.Spec.Replicas = ptr.To[int32](2) }))
	if err := k8s.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(gw)
	_, dep := reconciled(ctx, t, key)

	// The operator's issuer as rendered: a read-only entry after the user's, its key
	// set in the ConfigMap and mounted where the entry reads it.
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, key, cm); err != nil {
		t.Fatal(err)
	}
	cfg, err := gatewayspec.ParseRendered([]byte(cm.Data[gatewayspec.ConfigFileName]))
	if err != nil {
		t.Fatal(err)
	}
	last := cfg.Auth.Issuers[len(cfg.Auth.Issuers)-1]
	if len(cfg.Auth.Issuers) != 2 || last.Issuer != gatewayspec.OperatorIssuerID || !last.ReadOnly ||
		last.Audience != gatewayspec.OperatorAudience(gw.Namespace, gw.Name) || last.JWKSFile != gatewayspec.OperatorJWKSFile {
		t.Fatalf("the rendered issuers %+v", cfg.Auth.Issuers)
	}
	jwks := cm.Data[gatewayspec.OperatorJWKSKey]
	if !strings.Contains(jwks, `"kty":"EC"`) || strings.Contains(jwks, `"d":`) {
		t.Fatalf("the rendered key set is not one public EC key: %s", jwks)
	}
	mounted := false
	for _, m := range dep.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounted = mounted || (m.MountPath == gatewayspec.OperatorJWKSFile && m.SubPath == gatewayspec.OperatorJWKSKey)
	}
	if !mounted {
		t.Fatalf("the pod template does not mount the key set at %s", gatewayspec.OperatorJWKSFile)
	}
	jwksFile := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwksFile, []byte(jwks), 0o600); err != nil {
		t.Fatal(err)
	}
	operatorIssuer := fmt.Sprintf("[[auth.issuers]]\nissuer = %q\naudience = %q\njwks_file = %q\noperator_scope = %q\nalgorithms = [\"ES256\"]\nread_only = true\n",
		last.Issuer, last.Audience, jwksFile, last.OperatorScope)
	is := issuer.New(t)
	g := gatewaytest.Start(t, registry+operatorIssuer, gatewaytest.WithIssuer(is))
	u, err := url.Parse(g.URL)
	if err != nil {
		t.Fatal(err)
	}
	host, portText, _ := net.SplitHostPort(u.Host)
	port, _ := strconv.Atoi(portText)
	updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) { g.Spec.Port = int32(port) })
	_, dep = reconciled(ctx, t, key)
	_, pods := deploymentPods(ctx, t, dep, "5c8d", 2)
	search := func() {
		t.Helper()
		if s, body := g.Do(http.MethodGet, "/fhir/Patient?name=POLLED", is.Sign(t, "app", issuer.ClientScope), nil); s != http.StatusOK {
			t.Fatalf("search answered %d: %s", s, body)
		}
	}
	search()
	for _, p := range pods {
		setPodReady(ctx, t, p, host, true)
	}
	eventually(t, settle, "both replicas read, every member reachable", func() error {
		gw := getGateway(ctx, t, key)
		d := gw.Status.Dependencies
		if d == nil || d.ReplicasPolled != 2 || d.ReplicasRead != 2 || d.MembersReachable != "2/2" || d.LastPollTime == nil {
			return fmt.Errorf("status.dependencies %+v", d)
		}
		if len(d.Pods) != 2 || d.Pods[0].Lifecycle != "serving" || d.Pods[0].Message != "" {
			return fmt.Errorf("pods %+v", d.Pods)
		}
		if c := condition(gw, ferrofedv1alpha1.ConditionMembersReachable); c.Status != metav1.ConditionTrue || c.ObservedGeneration != gw.Generation {
			return fmt.Errorf("MembersReachable %+v", c)
		}
		if c := condition(gw, ferrofedv1alpha1.ConditionBindingsHealthy); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("BindingsHealthy %+v", c)
		}
		return nil
	})

	// The operator's token reads and does nothing else.
	token, err := reconciler.Poller.Issuer.Token(gatewayspec.OperatorAudience(gw.Namespace, gw.Name), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := g.Do(http.MethodGet, "/operator/dependencies", token, nil); s != http.StatusOK {
		t.Errorf("the operator's token on the report: %d", s)
	}
	if s, _ := g.Do(http.MethodPost, "/operator/probe", token, nil); s != http.StatusForbidden {
		t.Errorf("the operator's token on the probe (a POST): %d, want 403", s)
	}
	if s, _ := g.Do(http.MethodGet, "/fhir/Patient?name=X", token, nil); s != http.StatusUnauthorized {
		t.Errorf("the operator's token on the data plane: %d, want 401", s)
	}
	other, _ := reconciler.Poller.Issuer.Token(gatewayspec.OperatorAudience(gw.Namespace, "another"), time.Now())
	if s, _ := g.Do(http.MethodGet, "/operator/dependencies", other, nil); s != http.StatusUnauthorized {
		t.Errorf("a token for another Gateway: %d, want 401", s)
	}

	// Member b goes down: within two poll intervals the condition names it.
	b.Set(t, double.Knobs{Fault: double.FaultRefused})
	g.Do(http.MethodGet, "/fhir/Patient?name=POLLED", is.Sign(t, "app", issuer.ClientScope), nil)
	down := time.Now()
	eventually(t, 2*pollInterval+settle/6, "MembersReachable=False naming b-query", func() error {
		gw := getGateway(ctx, t, key)
		c := condition(gw, ferrofedv1alpha1.ConditionMembersReachable)
		if c.Status != metav1.ConditionFalse || c.Reason != ferrofedv1alpha1.ReasonMembersDown || !strings.Contains(c.Message, "b-query down on 2 of 2 replicas") {
			return fmt.Errorf("MembersReachable %s %s %q", c.Status, c.Reason, c.Message)
		}
		if d := gw.Status.Dependencies; d.MembersReachable != "1/2" || d.Keys[0].Key != "member/b-query" || d.Keys[0].Down != 2 {
			return fmt.Errorf("status.dependencies %+v", d)
		}
		return nil
	})
	t.Logf("member down to MembersReachable=False: %s (poll interval %s)", time.Since(down).Round(time.Millisecond), pollInterval)
	if strings.Contains(fmt.Sprint(getGateway(ctx, t, key).Status), "127.0.0.1") {
		t.Error("the status names an address")
	}

	b.Set(t, double.Knobs{})
	search()
	eventually(t, 2*pollInterval+settle/6, "MembersReachable=True again", func() error {
		c := condition(getGateway(ctx, t, key), ferrofedv1alpha1.ConditionMembersReachable)
		if c.Status != metav1.ConditionTrue {
			return fmt.Errorf("MembersReachable %s %s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})

	// No ready pod: nothing is polled, and the status says so.
	for _, p := range pods {
		setPodReady(ctx, t, p, host, false)
	}
	eventually(t, settle, "MembersReachable=Unknown NotPolled", func() error {
		gw := getGateway(ctx, t, key)
		c := condition(gw, ferrofedv1alpha1.ConditionMembersReachable)
		if c.Status != metav1.ConditionUnknown || c.Reason != ferrofedv1alpha1.ReasonNotPolled || gw.Status.Dependencies != nil {
			return fmt.Errorf("MembersReachable %s %s %q, dependencies %+v", c.Status, c.Reason, c.Message, gw.Status.Dependencies)
		}
		return nil
	})
	before := reconciler.Poller.Polls()
	time.Sleep(3 * pollInterval)
	if n := reconciler.Poller.Polls() - before; n != 0 {
		t.Errorf("%d polls with no ready pod", n)
	}
	if err := k8s.Delete(ctx, gw); err != nil {
		t.Fatal(err)
	}
}

// setPodReady gives a pod the IP and Ready condition the kubelet would report.
func setPodReady(ctx context.Context, t *testing.T, p *corev1.Pod, ip string, ready bool) {
	t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	setPodStatus(ctx, t, p, ip, []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}})
}
