package chart

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/proctest"
)

// TestChartInstallsAWorkingOperator is the install test: a local control plane
// (kube-apiserver and etcd from bin/k8s), `helm install` of the chart with the webhook
// off, `ferrofed operator` run as a process with the ServiceAccount and ClusterRole the
// chart installed (so that the RBAC generated from the markers is proven sufficient),
// then config/samples and examples/kubernetes/gateway.yaml applied with kubectl, each
// Gateway reaching its Deployment with the derived grace period.
func TestChartInstallsAWorkingOperator(t *testing.T) {
	root := repoRoot(t)
	assets := k8sAssets(t)
	kubectl := filepath.Join(assets, "kubectl")
	helmBin(t)

	cfg, c, kubeEnv := startControlPlane(t, assets)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	mustHelm(t, kubeEnv, "install", release, chartDir(t), "--namespace", namespace, "--create-namespace",
		"--set", "webhook.enabled=false")
	t.Run("helm installed the CRD, the operator's Deployment and its RBAC", func(t *testing.T) {
		status := mustHelm(t, kubeEnv, "status", release, "--namespace", namespace)
		if !strings.Contains(status, "STATUS: deployed") {
			t.Fatalf("helm status:\n%s", status)
		}
		var dep appsv1.Deployment
		if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: "ferrofed-operator"}, &dep); err != nil {
			t.Fatal(err)
		}
		args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " ")
		if !strings.HasPrefix(args, "operator ") || !strings.Contains(args, "--enable-webhook=false") {
			t.Fatalf("operator args %q", args)
		}
		out := run(t, kubeEnv, kubectl, "get", "crd", "gateways.ferrofed.io", "-o", "name")
		if strings.TrimSpace(out) != "customresourcedefinition.apiextensions.k8s.io/gateways.ferrofed.io" {
			t.Fatalf("kubectl get crd: %q", out)
		}
	})

	// The operator runs as the chart's ServiceAccount: a token from the TokenRequest API,
	// no admin rights, only what the generated ClusterRole grants.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "ferrofed-operator",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of the chart's ServiceAccount: %v", err)
	}
	operatorConfig := rest.AnonymousClientConfig(cfg)
	operatorConfig.BearerToken = tok.Status.Token
	operatorKubeconfig := writeKubeconfig(t, "operator", operatorConfig)

	bin := buildFerrofed(t)
	probe := freeAddr(t)
	startOperator(t, bin, operatorKubeconfig, probe)
	waitFor(t, ctx, "the operator's /readyz", func() (bool, string) {
		res, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK, res.Status
	})

	samples, _ := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	var gateways []string
	for _, s := range samples {
		if filepath.Base(s) == "kustomization.yaml" {
			continue
		}
		gateways = append(gateways, s)
	}
	if len(gateways) == 0 {
		t.Fatal("config/samples holds no sample to apply")
	}
	for _, tc := range []struct {
		what, ns string
		files    []string
	}{
		{"config/samples", "samples", gateways},
		{"examples/kubernetes/gateway.yaml", "examples", []string{filepath.Join(root, "examples", "kubernetes", "gateway.yaml")}},
	} {
		t.Run("the Gateways of "+tc.what+" reach their Deployments with the derived grace period", func(t *testing.T) {
			run(t, kubeEnv, kubectl, "create", "namespace", tc.ns)
			for _, f := range tc.files {
				run(t, kubeEnv, kubectl, "apply", "--namespace", tc.ns, "-f", f)
			}
			var list ferrofedv1alpha1.GatewayList
			if err := c.List(ctx, &list, client.InNamespace(tc.ns)); err != nil || len(list.Items) == 0 {
				t.Fatalf("Gateways in %s: %d, %v", tc.ns, len(list.Items), err)
			}
			for _, gw := range list.Items {
				want := gatewayspec.Plan(&gw.Spec).GracePeriodSeconds
				var dep appsv1.Deployment
				waitFor(t, ctx, fmt.Sprintf("Deployment %s/%s with terminationGracePeriodSeconds %d", tc.ns, gw.Name, want), func() (bool, string) {
					err := c.Get(ctx, types.NamespacedName{Namespace: tc.ns, Name: gw.Name}, &dep)
					if err != nil {
						return false, err.Error()
					}
					got := dep.Spec.Template.Spec.TerminationGracePeriodSeconds
					if got == nil {
						return false, "no terminationGracePeriodSeconds"
					}
					return *got == want, fmt.Sprintf("terminationGracePeriodSeconds %d", *got)
				})
				ctr := dep.Spec.Template.Spec.Containers[0]
				if ctr.ReadinessProbe == nil || ctr.ReadinessProbe.HTTPGet == nil || !strings.HasSuffix(ctr.ReadinessProbe.HTTPGet.Path, "/health/readiness") {
					t.Errorf("Deployment %s: readiness probe %+v, want one on {basePath}/health/readiness", gw.Name, ctr.ReadinessProbe)
				}
				if ctr.LivenessProbe == nil || ctr.LivenessProbe.HTTPGet == nil || !strings.HasSuffix(ctr.LivenessProbe.HTTPGet.Path, "/health") {
					t.Errorf("Deployment %s: liveness probe %+v, want one on {basePath}/health", gw.Name, ctr.LivenessProbe)
				}
				t.Logf("Gateway %s/%s: Deployment with terminationGracePeriodSeconds %d", tc.ns, gw.Name, want)
			}
		})
	}

	t.Run("the API server accepts the plain Deployment example", func(t *testing.T) {
		out := run(t, kubeEnv, kubectl, "apply", "--dry-run=server", "--namespace", "examples",
			"-f", filepath.Join(root, "examples", "kubernetes", "deployment.yaml"))
		for _, want := range []string{"configmap/ferrofed-config", "deployment.apps/ferrofed", "service/ferrofed", "poddisruptionbudget.policy/ferrofed"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply --dry-run=server lacks %s:\n%s", want, out)
			}
		}
	})

	t.Run("an upgrade with the webhook on keeps the certificate generated at install", func(t *testing.T) {
		const rel, ns = "ferrofed-tls", "ferrofed-tls"
		// failurePolicy Ignore: no operator pod serves this webhook, and it must not
		// stand in the way of the Gateways above. crds.enabled=false: the CRD is the
		// first release's, and one release per cluster owns it.
		set := []string{"--set", "webhook.failurePolicy=Ignore", "--set", "rbac.create=false", "--set", "serviceAccount.create=false", "--set", "serviceAccount.name=default",
			"--set", "crds.enabled=false"}
		mustHelm(t, kubeEnv, append([]string{"install", rel, chartDir(t), "--namespace", ns, "--create-namespace"}, set...)...)
		first := webhookCA(t, ctx, c, ns, rel)
		mustHelm(t, kubeEnv, append([]string{"upgrade", rel, chartDir(t), "--namespace", ns}, set...)...)
		if second := webhookCA(t, ctx, c, ns, rel); !bytes.Equal(first, second) {
			t.Fatal("helm upgrade generated a new webhook CA; the lookup should have kept the installed one")
		}
		mustHelm(t, kubeEnv, "uninstall", rel, "--namespace", ns)
	})
}

// startControlPlane starts envtest from assets (no CRD: the chart installs it) and
// returns its configuration, a client with the Gateway types, and the environment that
// points helm and kubectl at it as an admin.
func startControlPlane(t *testing.T, assets string) (*rest.Config, client.Client, []string) {
	t.Helper()
	env := &envtest.Environment{BinaryAssetsDirectory: assets, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start the local control plane from %s: %v", assets, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stop the control plane: %v", err)
		}
	})
	admin, err := env.AddUser(envtest.User{Name: "chart-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := ferrofedv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c, []string{"KUBECONFIG=" + writeKubeconfig(t, "admin", admin.Config())}
}

// webhookCA returns the CA of the generated webhook Secret, after checking that the
// ValidatingWebhookConfiguration trusts exactly it.
func webhookCA(t *testing.T, ctx context.Context, c client.Client, ns, rel string) []byte {
	t.Helper()
	var s corev1.Secret
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: rel + "-webhook-tls"}, &s); err != nil {
		t.Fatal(err)
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := c.Get(ctx, types.NamespacedName{Name: rel + "-validating"}, &vwc); err != nil {
		t.Fatal(err)
	}
	if len(vwc.Webhooks) == 0 || !bytes.Equal(vwc.Webhooks[0].ClientConfig.CABundle, s.Data["ca.crt"]) {
		t.Fatal("the webhook configuration does not trust the Secret's ca.crt")
	}
	return s.Data["ca.crt"]
}

// writeKubeconfig writes cfg as a kubeconfig file and returns its path.
func writeKubeconfig(t *testing.T, name string, cfg *rest.Config) string {
	t.Helper()
	user := map[string]any{}
	if cfg.BearerToken != "" {
		user["token"] = cfg.BearerToken
	}
	if len(cfg.CertData) > 0 {
		user["client-certificate-data"] = cfg.CertData
		user["client-key-data"] = cfg.KeyData
	}
	kc := map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"current-context": name,
		"clusters": []any{map[string]any{"name": "local", "cluster": map[string]any{
			"server": cfg.Host, "certificate-authority-data": cfg.CAData,
		}}},
		"users":    []any{map[string]any{"name": name, "user": user}},
		"contexts": []any{map[string]any{"name": name, "context": map[string]any{"cluster": "local", "user": name}}},
	}
	data, err := yaml.Marshal(kc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// buildFerrofed builds the ferrofed binary into a temporary folder.
func buildFerrofed(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ferrofed")
	if err := proctest.BuildFerrofed(bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// startOperator runs `ferrofed operator` until the test ends; its output is collected.
func startOperator(t *testing.T, bin, kubeconfig, probe string, extra ...string) *proctest.SyncBuffer {
	t.Helper()
	logs := &proctest.SyncBuffer{}
	cmd := exec.Command(bin, append([]string{"operator", "--enable-webhook=false", "--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=" + probe}, extra...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ferrofed operator: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("ferrofed operator output:\n%s", logs.String())
		}
	})
	return logs
}

// freeAddr returns a loopback address with a port free at the time of the call.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitFor polls cond until it holds or ctx ends (double.EventuallyWithin); on timeout
// it fails with cond's last word (the operator's output is logged by its cleanup).
func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, string)) {
	t.Helper()
	within := time.Minute
	if d, ok := ctx.Deadline(); ok {
		within = time.Until(d)
	}
	last := ""
	double.EventuallyWithin(t, within, what, func() bool {
		ok, why := cond()
		last = why
		return ok
	}, func() string { return "(last: " + last + ")" })
}

// run runs a command with extra environment and fails the test when it fails.
func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	out, err := output(env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return out
}

// output runs a command and returns its combined output and error, for the callers
// that wait for a command to succeed.
func output(env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
