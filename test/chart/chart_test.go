package chart

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/ferrofed/ferrofed/test/certpool"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the rendered chart")

// The chart is rendered as `helm install ferrofed charts/ferrofed -n ferrofed-system` would.
const (
	release   = "ferrofed"
	namespace = "ferrofed-system"
)

// generatedSecret matches the values helm's genCA/genSignedCert make afresh on every
// render; the golden files hold a placeholder instead.
var generatedSecret = regexp.MustCompile(`(?m)^(\s*(?:ca\.crt|tls\.crt|tls\.key|caBundle): )\S+$`)

func TestChartRendersAsTheGoldenFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
	}{
		{"default", nil},
		{"cert-manager", []string{"certManager.enabled=true"}},
		{"webhook-disabled", []string{"webhook.enabled=false"}},
		{"namespaces", []string{"scope=namespaces", "watchNamespaces={clinical,research}", "allowedImages={registry.example.org/ferrofed/*}"}},
		{"operator-tracing", []string{"tracing.endpoint=https://otel-collector.observability.svc:4318", "tracing.headersSecret.name=otel-token",
			"tracing.caSecret.name=otel-ca", "tracing.caSecret.key=bundle.pem"}},
		{"monitoring", append([]string{"monitoring.serviceMonitor.labels.release=kube-prometheus-stack",
			"monitoring.prometheusRule.labels.release=kube-prometheus-stack"}, monitoringOn...)},
	} {
		t.Run("with values "+tc.name+" the chart renders as testdata/"+tc.name+".yaml", func(t *testing.T) {
			args := []string{"template", release, chartDir(t), "--namespace", namespace}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			got := mustHelm(t, nil, args...)
			if tc.name == "default" {
				checkGeneratedCertificate(t, got)
			}
			got = generatedSecret.ReplaceAllString(got, "${1}<generated at install>")
			got = elideCRDSpecs(got)
			golden := filepath.Join("testdata", tc.name+".yaml")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run make generate to write the golden files)", err)
			}
			if got != string(want) {
				t.Errorf("helm template differs from %s; if the change is intended, run make generate.\n%s", golden, lineDiff(string(want), got))
			}
		})
	}
}

// checkGeneratedCertificate holds the certificate generated at install to what the API
// server needs: the webhook configuration trusts the CA in the Secret, and the serving
// certificate is signed by it for the webhook Service's DNS name.
func checkGeneratedCertificate(t *testing.T, rendered string) {
	t.Helper()
	values := map[string]string{}
	for _, m := range generatedSecret.FindAllStringSubmatch(rendered, -1) {
		key := strings.TrimSuffix(strings.TrimSpace(m[1]), ":")
		values[key] = strings.TrimSpace(strings.TrimPrefix(m[0], m[1]))
	}
	if values["caBundle"] == "" || values["caBundle"] != values["ca.crt"] {
		t.Fatalf("the webhook's caBundle is not the Secret's ca.crt")
	}
	decode := func(key string) *x509.Certificate {
		raw, err := base64.StdEncoding.DecodeString(values[key])
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		block, _ := pem.Decode(raw)
		if block == nil {
			t.Fatalf("%s holds no PEM block", key)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return c
	}
	ca, leaf := decode("ca.crt"), decode("tls.crt")
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: certpool.Of(ca), DNSName: "ferrofed-webhook." + namespace + ".svc"}); err != nil {
		t.Fatalf("the serving certificate does not verify for the webhook Service: %v", err)
	}
}

// lineDiff shows the first lines where want and got differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b bytes.Buffer
	shown := 0
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl + "\n")
			if shown++; shown == 10 {
				break
			}
		}
	}
	return b.String()
}

func TestChartRefusesWrongValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"a string for replicaCount", []string{"--set", "replicaCount=two"}, "/replicaCount"},
		{"a string for webhook.enabled", []string{"--set-string", "webhook.enabled=true"}, "/webhook/enabled"},
		{"a port out of range", []string{"--set", "metrics.port=70000"}, "/metrics/port"},
		{"an unknown failure policy", []string{"--set", "webhook.failurePolicy=Sometimes"}, "/webhook/failurePolicy"},
		{"an unknown pull policy", []string{"--set", "image.pullPolicy=Sometimes"}, "/image/pullPolicy"},
		{"a duration that is not one", []string{"--set", "certManager.duration=one year"}, "/certManager/duration"},
		{"a string for crds.keep", []string{"--set-string", "crds.keep=true"}, "/crds/keep"},
		{"an unknown crds key", []string{"--set", "crds.install=true"}, "install"},
		{"an unknown top-level key", []string{"--set", "replicas=2"}, "replicas"},
		{"an unknown scope", []string{"--set", "scope=tenant"}, "/scope"},
		{"a namespace that is not a name", []string{"--set", "scope=namespaces", "--set", "watchNamespaces={Bad_NS}"}, "/watchNamespaces/0"},
		{"scope namespaces without a namespace", []string{"--set", "scope=namespaces"}, "/watchNamespaces"},
		{"an image pattern with a space", []string{"--set-json", `allowedImages=["a b"]`}, "/allowedImages/0"},
		{"an unknown nested key", []string{"--set", "webhook.certDir=/x"}, "certDir"},
		{"a string for monitoring.serviceMonitor.enabled", []string{"--set-string", "monitoring.serviceMonitor.enabled=true"}, "/monitoring/serviceMonitor/enabled"},
		{"a scrape interval that is not a duration", []string{"--set", "monitoring.serviceMonitor.interval=thirty"}, "/monitoring/serviceMonitor/interval"},
		{"an unknown serviceMonitor key", []string{"--set", "monitoring.serviceMonitor.port=9090"}, "port"},
		{"an unknown monitoring key", []string{"--set", "monitoring.podMonitor.enabled=true"}, "podMonitor"},
		{"a runbook base URL with a trailing slash", []string{"--set", "monitoring.prometheusRule.runbookBaseURL=https://wiki.example.org/"}, "/monitoring/prometheusRule/runbookBaseURL"},
		{"a dashboard namespace that is not a name", []string{"--set", "monitoring.dashboards.namespace=Bad_NS"}, "/monitoring/dashboards/namespace"},
		{"a dashboard label that is not a string", []string{"--set", "monitoring.dashboards.labels.grafana_dashboard=1"}, "/monitoring/dashboards/labels/grafana_dashboard"},
	} {
		t.Run("helm template refuses "+tc.name, func(t *testing.T) {
			args := append([]string{"template", release, chartDir(t), "--namespace", namespace}, tc.set...)
			_, errOut, err := helm(t, nil, args...)
			if err == nil {
				t.Fatalf("helm template %v succeeded, want a schema error", tc.set)
			}
			if !strings.Contains(errOut, "values don't meet the specifications of the schema") || !strings.Contains(errOut, tc.want) {
				t.Fatalf("error does not name %q as a schema violation:\n%s", tc.want, errOut)
			}
		})
	}
}

func TestChartPassesHelmLint(t *testing.T) {
	on := []string{}
	for _, v := range monitoringOn {
		on = append(on, "--set", v)
	}
	for _, set := range [][]string{nil, {"--set", "certManager.enabled=true"}, {"--set", "webhook.enabled=false"}, on,
		append([]string{"--set", "scope=namespaces", "--set", "watchNamespaces={clinical}"}, on...)} {
		t.Run("helm lint --strict passes with "+strings.Join(set, " "), func(t *testing.T) {
			out := mustHelm(t, nil, append([]string{"lint", "--strict", chartDir(t)}, set...)...)
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
}

// elideCRDSpecs replaces the spec of each rendered CustomResourceDefinition with a
// placeholder: the spec is controller-gen's, ~95 kB that TestChartCRDsAreTheGeneratedOnes
// holds to config/crd/bases, and would otherwise be copied into every golden file. What
// the chart adds (its labels, the keep annotation, crds.enabled) stays in them.
func elideCRDSpecs(rendered string) string {
	docs := strings.Split(rendered, "\n---\n")
	for i, d := range docs {
		if !strings.Contains(d, "\nkind: CustomResourceDefinition\n") {
			continue
		}
		if at := strings.Index(d, "\nspec:\n"); at >= 0 {
			tail := ""
			if strings.HasSuffix(d, "\n") {
				tail = "\n"
			}
			docs[i] = d[:at] + "\nspec: <controller-gen's, as in config/crd/bases (TestChartCRDsAreTheGeneratedOnes)>" + tail
		}
	}
	return strings.Join(docs, "\n---\n")
}

// renderedCRDs renders the chart with set and returns its CustomResourceDefinitions by name.
func renderedCRDs(t *testing.T, set ...string) map[string]map[string]any {
	t.Helper()
	args := []string{"template", release, chartDir(t), "--namespace", namespace}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(mustHelm(t, nil, args...), "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("helm template printed a document that is not YAML: %v\n%s", err, doc)
		}
		if obj["kind"] != "CustomResourceDefinition" {
			continue
		}
		out[nested(t, obj, "metadata", "name").(string)] = obj
	}
	return out
}

// nested is obj's value at path, failing the test when a step is missing.
func nested(t testing.TB, obj map[string]any, path ...string) any {
	t.Helper()
	var v any = obj
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: %v is not an object", strings.Join(path, "."), v)
		}
		if v, ok = m[p]; !ok {
			t.Fatalf("%s: no %q", strings.Join(path, "."), p)
		}
	}
	return v
}

// TestChartCRDsAreTheGeneratedOnes: the chart renders every CRD of config/crd/bases with
// the same spec, its labels, and the keep annotation as crds.keep says; crds.enabled=false
// renders none.
func TestChartCRDsAreTheGeneratedOnes(t *testing.T) {
	root := repoRoot(t)
	bases, _ := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if len(bases) == 0 {
		t.Fatal("config/crd/bases holds no CRD")
	}
	rendered := renderedCRDs(t)
	if len(rendered) != len(bases) {
		t.Fatalf("the chart renders %d CRDs, config/crd/bases has %d: run make generate", len(rendered), len(bases))
	}
	for _, b := range bases {
		data, err := os.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := yaml.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		name := nested(t, want, "metadata", "name").(string)
		t.Run(name+" is rendered as config/crd/bases has it, labelled and kept", func(t *testing.T) {
			got, ok := rendered[name]
			if !ok {
				t.Fatalf("the chart does not render %s: run make generate", name)
			}
			if !reflect.DeepEqual(got["spec"], want["spec"]) {
				t.Fatalf("the chart's %s spec is not the one in %s: run make generate", name, b)
			}
			annotations := nested(t, got, "metadata", "annotations").(map[string]any)
			if annotations["helm.sh/resource-policy"] != "keep" {
				t.Errorf("annotations %v lack helm.sh/resource-policy: keep", annotations)
			}
			for k, v := range nested(t, want, "metadata", "annotations").(map[string]any) {
				if annotations[k] != v {
					t.Errorf("annotation %s is %v, config/crd/bases has %v", k, annotations[k], v)
				}
			}
			labels := nested(t, got, "metadata", "labels").(map[string]any)
			if labels["app.kubernetes.io/managed-by"] != "Helm" || labels["app.kubernetes.io/instance"] != release {
				t.Errorf("labels %v are not the chart's", labels)
			}
		})
	}
	t.Run("crds.keep=false renders the CRDs without the keep annotation", func(t *testing.T) {
		for name, crd := range renderedCRDs(t, "crds.keep=false") {
			annotations, _ := nested(t, crd, "metadata", "annotations").(map[string]any)
			if _, ok := annotations["helm.sh/resource-policy"]; ok {
				t.Errorf("%s keeps its resource policy with crds.keep=false: %v", name, annotations)
			}
		}
	})
	t.Run("crds.enabled=false renders no CRD", func(t *testing.T) {
		if got := renderedCRDs(t, "crds.enabled=false"); len(got) != 0 {
			t.Fatalf("the chart renders %d CRDs with crds.enabled=false", len(got))
		}
	})
}
