package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// TestChartWithMonitoringInstalls installs the chart with every part of monitoring on
// into a local control plane that has the Prometheus Operator's ServiceMonitor and
// PrometheusRule CRDs (testdata/prometheus-operator-crd): the API server checks the
// rendered objects against their real schemas. `kubectl apply --dry-run=server
// --validate=strict` then refuses any field those schemas do not know (which an
// install would silently prune), with a negative control; and what the API server
// stored holds every field the chart rendered.
func TestChartWithMonitoringInstalls(t *testing.T) {
	assets := k8sAssets(t)
	kubectl := filepath.Join(assets, "kubectl")
	helmBin(t)

	env := &envtest.Environment{BinaryAssetsDirectory: assets, ErrorIfCRDPathMissing: true,
		CRDDirectoryPaths: []string{filepath.Join("testdata", "prometheus-operator-crd")}}
	if _, err := env.Start(); err != nil {
		t.Fatalf("start the local control plane from %s: %v", assets, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stop the control plane: %v", err)
		}
	})
	admin, err := env.AddUser(envtest.User{Name: "monitoring-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeEnv := []string{"KUBECONFIG=" + writeKubeconfig(t, "admin", admin.Config())}

	set := []string{"webhook.enabled=false", "monitoring.dashboards.namespace=grafana",
		"monitoring.serviceMonitor.labels.release=kube-prometheus-stack",
		"monitoring.serviceMonitor.gatewayTLSConfig.serverName=edge.clinical.svc",
		"monitoring.serviceMonitor.gatewayTLSConfig.ca.secret.name=gateway-ca",
		"monitoring.serviceMonitor.gatewayTLSConfig.ca.secret.key=ca.crt"}
	set = append(set, monitoringOn...)
	var args []string
	for _, s := range set {
		args = append(args, "--set", s)
	}
	monitoringDocs := mustHelm(t, nil, append([]string{"template", release, chartDir(t), "--namespace", namespace,
		"--show-only", "templates/servicemonitor.yaml", "--show-only", "templates/prometheusrule.yaml"}, args...)...)

	t.Run("the API server's strict field validation accepts the ServiceMonitors and the PrometheusRule", func(t *testing.T) {
		run(t, kubeEnv, kubectl, "create", "namespace", namespace)
		out := run(t, kubeEnv, kubectl, "apply", "--dry-run=server", "--validate=strict", "-f", writeTemp(t, "monitoring.yaml", monitoringDocs))
		for _, want := range []string{"servicemonitor.monitoring.coreos.com/ferrofed-operator", "servicemonitor.monitoring.coreos.com/ferrofed-gateways",
			"prometheusrule.monitoring.coreos.com/ferrofed"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply --dry-run=server lacks %s:\n%s", want, out)
			}
		}
	})
	t.Run("the same check refuses a ServiceMonitor with a field its schema lacks (negative control)", func(t *testing.T) {
		bad := strings.Replace(monitoringDocs, "\n  endpoints:\n", "\n  endpoints:\n    - port: http\n      metricsPath: /metrics\n", 1)
		if bad == monitoringDocs {
			t.Fatal("found no endpoints to spoil")
		}
		out, err := output(kubeEnv, kubectl, "apply", "--dry-run=server", "--validate=strict", "-f", writeTemp(t, "bad.yaml", bad))
		if err == nil || !strings.Contains(out, "metricsPath") {
			t.Fatalf("kubectl apply accepted an unknown field (err %v):\n%s", err, out)
		}
	})

	run(t, kubeEnv, kubectl, "create", "namespace", "grafana")
	notes := mustHelm(t, kubeEnv, append([]string{"install", release, chartDir(t), "--namespace", namespace}, args...)...)
	if !strings.Contains(notes, "ClusterRole "+release+"-metrics-reader") || strings.Contains(notes, "those targets fail") {
		t.Errorf("the install's notes do not ask for the metrics-reader binding, or warn of a gatewayTLSConfig that is set:\n%s", notes)
	}

	t.Run("helm installed the ServiceMonitors, the PrometheusRule and the dashboard, as rendered", func(t *testing.T) {
		rendered := map[string]map[string]any{}
		for _, doc := range strings.Split(monitoringDocs, "\n---\n") {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatal(err)
			}
			if obj != nil {
				rendered[strings.ToLower(obj["kind"].(string))+"/"+nested(t, obj, "metadata", "name").(string)] = obj
			}
		}
		if len(rendered) != 3 {
			t.Fatalf("rendered %v, want two ServiceMonitors and a PrometheusRule", keys(rendered))
		}
		for name, want := range rendered {
			out := run(t, kubeEnv, kubectl, "get", "--namespace", namespace, name, "-o", "json")
			var live map[string]any
			if err := json.Unmarshal([]byte(out), &live); err != nil {
				t.Fatal(err)
			}
			if path, ok := holds(live["spec"], want["spec"], "spec"); !ok {
				t.Errorf("%s: the API server stored %s otherwise than the chart rendered it (pruned?)", name, path)
			}
		}
		out := run(t, kubeEnv, kubectl, "get", "configmap", "--namespace", "grafana", release+"-dashboard", "-o", "jsonpath={.data.ferrofed\\.json}")
		var dash map[string]any
		if err := json.Unmarshal([]byte(out), &dash); err != nil || dash["uid"] != "ferrofed-overview" {
			t.Fatalf("the dashboard ConfigMap in grafana holds no dashboard ferrofed-overview (%v)", err)
		}
		status := mustHelm(t, kubeEnv, "status", release, "--namespace", namespace)
		if !strings.Contains(status, "STATUS: deployed") {
			t.Fatalf("helm status:\n%s", status)
		}
	})
}

// holds reports whether live holds every field of want with the same value (the API
// server may add defaults); path names the first that differs.
func holds(live, want any, path string) (string, bool) {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return path, false
		}
		for k, v := range w {
			if p, ok := holds(l[k], v, path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(w) {
			return path, false
		}
		for i := range w {
			if p, ok := holds(l[i], w[i], path+"["+strconv.Itoa(i)+"]"); !ok {
				return p, false
			}
		}
		return "", true
	}
	return path, reflect.DeepEqual(live, want) || equalJSON(live, want)
}

// writeTemp writes data to a file of that name in a temporary folder.
func writeTemp(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
