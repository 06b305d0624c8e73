package chart

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
)

// TestChartNamespacedInstallWorksWithRolesOnly installs the chart with scope
// namespaces, runs `ferrofed operator` with the flags the chart gives its pod and the
// chart's ServiceAccount token: a Gateway in the watched namespace is reconciled, one
// in another namespace is not touched, and the ServiceAccount cannot even read
// Deployments there.
func TestChartNamespacedInstallWorksWithRolesOnly(t *testing.T) {
	assets := k8sAssets(t)
	helmBin(t)
	cfg, c, kubeEnv := startControlPlane(t, assets)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, ns := range []string{"team-a", "team-b"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	mustHelm(t, kubeEnv, "install", release, chartDir(t), "--namespace", namespace, "--create-namespace",
		"--set", "webhook.enabled=false", "--set", "scope=namespaces", "--set", "watchNamespaces={team-a}")

	var dep appsv1.Deployment
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: "ferrofed-operator"}, &dep); err != nil {
		t.Fatal(err)
	}
	var watch string
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--watch-namespaces=") {
			watch = a
		}
	}
	if watch != "--watch-namespaces=team-a" {
		t.Fatalf("the chart's operator args lack --watch-namespaces=team-a: %v", dep.Spec.Template.Spec.Containers[0].Args)
	}

	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "ferrofed-operator",
		&authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	operatorConfig := rest.AnonymousClientConfig(cfg)
	operatorConfig.BearerToken = tok.Status.Token
	asOperator, err := client.New(operatorConfig, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := asOperator.List(ctx, &appsv1.DeploymentList{}, client.InNamespace("team-b")); !apierrors.IsForbidden(err) {
		t.Fatalf("the ServiceAccount of a namespaced install listed Deployments in team-b: %v", err)
	}
	if err := asOperator.List(ctx, &appsv1.DeploymentList{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the ServiceAccount of a namespaced install listed Deployments cluster-wide: %v", err)
	}

	probe := freeAddr(t)
	// As the chart runs it: with its own namespace, so that it polls the pods too (its
	// informers are per namespace, and the polls read them).
	startOperator(t, buildFerrofed(t), writeKubeconfig(t, "operator", operatorConfig), probe, watch, "--operator-namespace="+namespace)
	waitFor(t, ctx, "the operator's /readyz", func() (bool, string) {
		res, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK, res.Status
	})
	for _, ns := range []string{"team-a", "team-b"} {
		gw := &ferrofedv1alpha1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
			Spec: ferrofedv1alpha1.GatewaySpec{Image: "ghcr.io/ferrofed/ferrofed:test",
				Config: &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To(issuer.RemoteTable)}}}
		if err := c.Create(ctx, gw); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ctx, "the Gateway in the watched namespace reconciled", func() (bool, string) {
		err := c.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "edge"}, &appsv1.Deployment{})
		return err == nil, errString(err)
	})
	time.Sleep(3 * time.Second) // a reconcile of team-b's Gateway would have happened by now
	var other ferrofedv1alpha1.Gateway
	if err := c.Get(ctx, types.NamespacedName{Namespace: "team-b", Name: "edge"}, &other); err != nil {
		t.Fatal(err)
	}
	if len(other.Status.Conditions) != 0 {
		t.Errorf("the Gateway in team-b, outside the watched namespaces, got a status: %+v", other.Status.Conditions)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "team-b", Name: "edge"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment was made in team-b: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
