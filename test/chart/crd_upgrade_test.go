package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

const (
	crdName = "gateways.ferrofed.io"
	// storedQueryCRDName is the chart's other CRD.
	storedQueryCRDName = "storedqueries.ferrofed.io"
	// olderField is the spec field the older chart's CRD lacks.
	olderField = "tolerations"
	// olderDescription is the Gateway description of the older chart's CRD.
	olderDescription = "Gateway, as an older chart described it."
)

// TestHelmUpgradeUpdatesTheCRD installs, on a local control plane, a copy of the chart
// whose Gateway CRD lacks spec.tolerations and has another description, upgrades it to
// the real chart with `helm upgrade`, and reads the CRD back from the API server: the
// upgrade must have changed it. helm uninstall must then leave the CRD (crds.keep), and
// delete it with crds.keep=false. A release of the chart from before the CRD was a
// template (the CRD in crds/, which Helm never upgrades) moves over with
// `helm upgrade --take-ownership`, as the README says, and an upgrade that turns
// crds.enabled off leaves the CRD in place.
func TestHelmUpgradeUpdatesTheCRD(t *testing.T) {
	assets := k8sAssets(t)
	kubectl := filepath.Join(assets, "kubectl")
	helmBin(t)

	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	if _, err := env.Start(); err != nil {
		t.Fatalf("start the local control plane from %s: %v", assets, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stop the control plane: %v", err)
		}
	})
	admin, err := env.AddUser(envtest.User{Name: "crd-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeEnv := []string{"KUBECONFIG=" + writeKubeconfig(t, "admin", admin.Config())}
	current := chartDir(t)
	older := olderChart(t, false)
	legacy := olderChart(t, true)
	// No operator runs here: the webhook would have nothing behind it.
	noWebhook := []string{"--set", "webhook.enabled=false"}

	// crd reads the CRD back from the API server, or nil when there is none.
	crd := func(t *testing.T) map[string]any {
		t.Helper()
		out := run(t, kubeEnv, kubectl, "get", "crd", crdName, "--ignore-not-found", "-o", "json")
		if strings.TrimSpace(out) == "" {
			return nil
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(out), &obj); err != nil {
			t.Fatalf("kubectl get crd: %v\n%s", err, out)
		}
		return obj
	}
	// isReal reports whether the CRD in the cluster is the real chart's, failing when it
	// is neither the real nor the older one.
	isReal := func(t *testing.T) bool {
		t.Helper()
		obj := crd(t)
		if obj == nil {
			t.Fatalf("no CRD %s in the cluster", crdName)
		}
		schema := gatewaySchema(t, obj)
		_, hasField := nested(t, schema, "properties", "spec", "properties").(map[string]any)[olderField]
		isOlder := schema["description"] == olderDescription
		if hasField == isOlder {
			t.Fatalf("the CRD in the cluster is neither the real chart's nor the older one (spec.%s present: %v, description %q)",
				olderField, hasField, schema["description"])
		}
		return hasField
	}
	// warm waits until the API server serves each chart CRD's instances from its watch
	// cache. The cache of a CRD starts at its first request; the CRD finalizer lists
	// instances without a limit, which a cache still initializing refuses, and its
	// retries back off exponentially: a CRD deleted a second after it was made stayed
	// Terminating ("storage is (re)initializing") for over three minutes in CI. A list
	// without chunking takes the same path, so once it answers the finalizer's will.
	warm := func(t *testing.T) {
		t.Helper()
		for _, resource := range []string{"gateways.ferrofed.io", "storedqueries.ferrofed.io"} {
			deadline := time.Now().Add(time.Minute)
			for {
				_, err := output(kubeEnv, kubectl, "get", resource, "--all-namespaces", "--chunk-size=0", "-o", "name")
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the API server did not serve %s a minute after the CRD was made: %v", resource, err)
				}
				time.Sleep(250 * time.Millisecond)
			}
		}
	}
	// gone waits until every CRD of the chart is deleted (the StoredQuery CRD too: a
	// CRD still terminating would refuse the next release's install). Every 5 s a CRD
	// still there gets an annotation: the finalizer requeues a terminating CRD at once
	// on any change but its own condition, instead of at the end of a backoff that
	// doubles with each failed list. Three minutes bound it.
	gone := func(t *testing.T) {
		t.Helper()
		start := time.Now()
		deadline := start.Add(3 * time.Minute)
		nudged := start
		for {
			left := strings.TrimSpace(run(t, kubeEnv, kubectl, "get", "crd", crdName, storedQueryCRDName, "--ignore-not-found", "-o", "name"))
			if left == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("CRDs still there three minutes after they were deleted: %s\n%s", left,
					run(t, kubeEnv, kubectl, "get", "crd", crdName, storedQueryCRDName, "--ignore-not-found", "-o", "jsonpath={.items[*].status.conditions}"))
			}
			if time.Since(nudged) > 5*time.Second {
				nudged = time.Now()
				for _, name := range strings.Fields(left) {
					// The CRD may be gone between the get and this: not an error.
					_, _ = output(kubeEnv, kubectl, "annotate", "--overwrite", name, "ferrofed.io/test-nudge="+nudged.Format("150405"))
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
	}

	t.Run("with crds.keep=false helm uninstall deletes the CRD", func(t *testing.T) {
		out := mustHelm(t, kubeEnv, append([]string{"install", "unkept", current, "--namespace", "unkept", "--create-namespace", "--set", "crds.keep=false"}, noWebhook...)...)
		if !strings.Contains(out, "crds.keep is off: helm uninstall deletes it") {
			t.Errorf("the release notes do not warn that crds.keep is off:\n%s", out)
		}
		if !isReal(t) {
			t.Fatal("helm install did not install the chart's CRD")
		}
		warm(t)
		mustHelm(t, kubeEnv, "uninstall", "unkept", "--namespace", "unkept")
		gone(t)
	})

	t.Run("helm upgrade updates the CRD the older chart installed", func(t *testing.T) {
		mustHelm(t, kubeEnv, append([]string{"install", release, older, "--namespace", namespace, "--create-namespace"}, noWebhook...)...)
		if isReal(t) {
			t.Fatal("the older chart installed the real CRD: the test proves nothing")
		}
		out := mustHelm(t, kubeEnv, append([]string{"upgrade", release, current, "--namespace", namespace}, noWebhook...)...)
		for _, want := range []string{"helm upgrade updates it with the chart", "helm uninstall leaves it"} {
			if !strings.Contains(out, want) {
				t.Errorf("the release notes lack %q:\n%s", want, out)
			}
		}
		if !isReal(t) {
			t.Fatalf("after helm upgrade the CRD still lacks spec.%s", olderField)
		}
		annotations := nested(t, crd(t), "metadata", "annotations").(map[string]any)
		if annotations["helm.sh/resource-policy"] != "keep" || annotations["meta.helm.sh/release-name"] != release {
			t.Fatalf("the upgraded CRD's annotations %v: want helm.sh/resource-policy keep, owned by release %s", annotations, release)
		}
	})

	t.Run("helm uninstall keeps the CRD", func(t *testing.T) {
		out := mustHelm(t, kubeEnv, "uninstall", release, "--namespace", namespace)
		if !strings.Contains(out, "kept due to the resource policy") || !strings.Contains(out, crdName) {
			t.Errorf("helm uninstall does not report the kept CRD:\n%s", out)
		}
		if !isReal(t) {
			t.Fatal("the kept CRD is not the upgraded one")
		}
		warm(t)
		run(t, kubeEnv, kubectl, "delete", "crd", crdName, "--wait=true")
		// The chart's other CRD is kept alike; the next release installs it anew.
		run(t, kubeEnv, kubectl, "delete", "crd", storedQueryCRDName, "--wait=true")
		gone(t)
	})

	t.Run("a release from before the CRD was a template moves over with --take-ownership", func(t *testing.T) {
		mustHelm(t, kubeEnv, append([]string{"install", "legacy", legacy, "--namespace", "legacy", "--create-namespace"}, noWebhook...)...)
		if isReal(t) {
			t.Fatal("the legacy chart installed the real CRD: the test proves nothing")
		}
		_, errOut, err := helm(t, kubeEnv, append([]string{"upgrade", "legacy", current, "--namespace", "legacy"}, noWebhook...)...)
		if err == nil || !strings.Contains(errOut, "invalid ownership metadata") {
			t.Fatalf("helm upgrade without --take-ownership: %v\n%s\nwant the ownership error the README's --take-ownership answers", err, errOut)
		}
		mustHelm(t, kubeEnv, append([]string{"upgrade", "legacy", current, "--namespace", "legacy", "--take-ownership"}, noWebhook...)...)
		if !isReal(t) {
			t.Fatalf("after helm upgrade --take-ownership the CRD still lacks spec.%s", olderField)
		}
		// values.yaml: with crds.keep, an upgrade that turns crds.enabled off leaves it too.
		mustHelm(t, kubeEnv, append([]string{"upgrade", "legacy", current, "--namespace", "legacy", "--set", "crds.enabled=false"}, noWebhook...)...)
		if !isReal(t) {
			t.Fatal("the CRD changed when an upgrade stopped rendering it")
		}
		mustHelm(t, kubeEnv, "uninstall", "legacy", "--namespace", "legacy")
		if crd(t) == nil {
			t.Fatal("the CRD is gone after the release that took it over was uninstalled")
		}
	})
}

// olderChart copies the chart into a temporary folder with the Gateway CRD as an older
// release would have it: without spec.tolerations and with another description. legacy
// puts that CRD in crds/, as the chart did before its CRDs were templates; otherwise it
// replaces the spec in the CRD's template.
func olderChart(t *testing.T, legacy bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ferrofed")
	if err := os.CopyFS(dir, os.DirFS(chartDir(t))); err != nil {
		t.Fatal(err)
	}
	tpl := filepath.Join(dir, "templates", "crd-ferrofed.io_gateways.yaml")
	base, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "crd", "bases", "ferrofed.io_gateways.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(base, &obj); err != nil {
		t.Fatal(err)
	}
	schema := gatewaySchema(t, obj)
	props := nested(t, schema, "properties", "spec", "properties").(map[string]any)
	if _, ok := props[olderField]; !ok {
		t.Fatalf("the real CRD has no spec.%s: pick another field for the older chart to lack", olderField)
	}
	delete(props, olderField)
	schema["description"] = olderDescription

	if legacy {
		data, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(tpl); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "crds"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "crds", "ferrofed.io_gateways.yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	// The template's metadata (crds.enabled, labels, keep) stays; only its spec changes.
	text, err := os.ReadFile(tpl)
	if err != nil {
		t.Fatal(err)
	}
	at, end := strings.Index(string(text), "\nspec:\n"), strings.LastIndex(string(text), "{{- end }}")
	if at < 0 || end < at {
		t.Fatalf("%s does not have the layout hack/generate-chart.sh writes", tpl)
	}
	spec, err := yaml.Marshal(map[string]any{"spec": obj["spec"]})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tpl, []byte(string(text[:at+1])+string(spec)+string(text[end:])), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// gatewaySchema is the openAPIV3Schema of the CRD's only version.
func gatewaySchema(t testing.TB, crd map[string]any) map[string]any {
	t.Helper()
	versions := nested(t, crd, "spec", "versions").([]any)
	if len(versions) != 1 {
		t.Fatalf("the CRD has %d versions; this test knows one", len(versions))
	}
	return nested(t, versions[0].(map[string]any), "schema", "openAPIV3Schema").(map[string]any)
}
