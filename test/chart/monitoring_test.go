package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/ferrofed/ferrofed/controllers"
)

// monitoringOn are the values that turn every part of monitoring on.
var monitoringOn = []string{"monitoring.serviceMonitor.enabled=true", "monitoring.prometheusRule.enabled=true", "monitoring.dashboards.enabled=true"}

// render runs helm template with set and returns the objects it prints.
func render(t *testing.T, set ...string) []map[string]any {
	t.Helper()
	args := []string{"template", release, chartDir(t), "--namespace", namespace}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	var objs []map[string]any
	for _, doc := range strings.Split(mustHelm(t, nil, args...), "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("helm template printed a document that is not YAML: %v\n%s", err, doc)
		}
		if obj != nil {
			objs = append(objs, obj)
		}
	}
	return objs
}

// ofKind are the objects of kind, by name.
func ofKind(objs []map[string]any, kind string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		if o["kind"] == kind {
			out[o["metadata"].(map[string]any)["name"].(string)] = o
		}
	}
	return out
}

func TestChartMonitoringIsOffByDefault(t *testing.T) {
	objs := render(t)
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		if got := ofKind(objs, kind); len(got) != 0 {
			t.Errorf("the default values render %d %s objects", len(got), kind)
		}
	}
	if _, ok := ofKind(objs, "ConfigMap")[release+"-dashboard"]; ok {
		t.Error("the default values render the dashboard's ConfigMap")
	}
}

// TestChartServiceMonitorsSelectWhatTheOperatorLabels holds the gateways'
// ServiceMonitor to the operator's own constants: it selects the label and reads the
// annotations controllers.Service puts on every Gateway's Service, and the operator's
// ServiceMonitor selects the chart's metrics Service alone.
func TestChartServiceMonitorsSelectWhatTheOperatorLabels(t *testing.T) {
	objs := render(t, monitoringOn...)
	sms := ofKind(objs, "ServiceMonitor")
	gw, ok := sms[release+"-gateways"]
	if !ok {
		t.Fatalf("no ServiceMonitor %s-gateways among %v", release, keys(sms))
	}
	want := map[string]any{controllers.LabelManagedBy: controllers.FieldOwner, controllers.LabelMetrics: "true"}
	if got := nested(t, gw, "spec", "selector", "matchLabels"); !equalJSON(got, want) {
		t.Errorf("the gateways' ServiceMonitor selects %v, the operator labels %v", got, want)
	}
	if got := nested(t, gw, "spec", "namespaceSelector"); !equalJSON(got, map[string]any{"any": true}) {
		t.Errorf("with scope cluster the gateways' namespaceSelector is %v, want any", got)
	}
	ep := nested(t, gw, "spec", "endpoints").([]any)[0].(map[string]any)
	if ep["port"] != controllers.PortName {
		t.Errorf("the gateways' endpoint port is %v, the operator names it %q", ep["port"], controllers.PortName)
	}
	sources := map[string]string{}
	for _, r := range ep["relabelings"].([]any) {
		r := r.(map[string]any)
		if src, ok := r["sourceLabels"].([]any); ok {
			sources[r["targetLabel"].(string)] = src[0].(string)
		}
	}
	for target, annotation := range map[string]string{"__metrics_path__": controllers.AnnotationMetricsPath, "__scheme__": controllers.AnnotationMetricsScheme} {
		if want := "__meta_kubernetes_service_annotation_" + sanitize(annotation); sources[target] != want {
			t.Errorf("%s is relabelled from %q, want %q (the Service's %s)", target, sources[target], want, annotation)
		}
	}
	if _, ok := ep["tlsConfig"]; ok {
		t.Errorf("without gatewayTLSConfig the gateways' endpoint has a tlsConfig: %v", ep["tlsConfig"])
	}

	op, ok := sms[release+"-operator"]
	if !ok {
		t.Fatalf("no ServiceMonitor %s-operator among %v", release, keys(sms))
	}
	// A metric's own label named as a target label is renamed exported_<label> unless
	// the endpoint honors the scraped labels: the operator's endpoint does, the
	// gateways' has only endpoint to drop (its relabelings, above).
	honors := nested(t, op, "spec", "endpoints").([]any)[0].(map[string]any)["honorLabels"] == true
	for name, labels := range registeredMetrics(t) {
		for _, l := range labels {
			if !slices.Contains(targetLabels, l) && l != "endpoint" {
				continue
			}
			switch {
			case strings.HasPrefix(name, "ferrofed_operator_") && l != "gateway" && !honors: // no gateway label on the operator's target
				t.Errorf("%s has a label %q the operator's target has too, and its ServiceMonitor does not honor labels", name, l)
			case !strings.HasPrefix(name, "ferrofed_operator_") && l != "endpoint":
				t.Errorf("%s has a label %q the gateways' targets have too: it would read exported_%s", name, l, l)
			}
		}
	}
	svc := ofKind(objs, "Service")[release+"-operator-metrics"]
	if svc == nil {
		t.Fatal("no operator metrics Service")
	}
	svcLabels := nested(t, svc, "metadata", "labels").(map[string]any)
	for k, v := range nested(t, op, "spec", "selector", "matchLabels").(map[string]any) {
		if svcLabels[k] != v {
			t.Errorf("the operator's ServiceMonitor selects %s=%v, the metrics Service has %v", k, v, svcLabels[k])
		}
	}
	for name, s := range ofKind(objs, "Service") {
		if name == release+"-operator-metrics" {
			continue
		}
		if nested(t, s, "metadata", "labels").(map[string]any)[controllers.LabelMetrics] != nil {
			t.Errorf("Service %s carries %s: the operator's ServiceMonitor would scrape it", name, controllers.LabelMetrics)
		}
	}

	t.Run("scope namespaces limits the gateways' ServiceMonitor to watchNamespaces", func(t *testing.T) {
		objs := render(t, append([]string{"scope=namespaces", "watchNamespaces={clinical,research}"}, monitoringOn...)...)
		got := nested(t, ofKind(objs, "ServiceMonitor")[release+"-gateways"], "spec", "namespaceSelector")
		if !equalJSON(got, map[string]any{"matchNames": []any{"clinical", "research"}}) {
			t.Errorf("namespaceSelector %v", got)
		}
	})
	t.Run("gatewayTLSConfig becomes the gateways' tlsConfig", func(t *testing.T) {
		objs := render(t, append([]string{"monitoring.serviceMonitor.gatewayTLSConfig.serverName=edge.clinical.svc",
			"monitoring.serviceMonitor.gatewayTLSConfig.ca.secret.name=gateway-ca", "monitoring.serviceMonitor.gatewayTLSConfig.ca.secret.key=ca.crt"}, monitoringOn...)...)
		ep := nested(t, ofKind(objs, "ServiceMonitor")[release+"-gateways"], "spec", "endpoints").([]any)[0].(map[string]any)
		want := map[string]any{"serverName": "edge.clinical.svc", "ca": map[string]any{"secret": map[string]any{"name": "gateway-ca", "key": "ca.crt"}}}
		if !equalJSON(ep["tlsConfig"], want) {
			t.Errorf("tlsConfig %v, want %v", ep["tlsConfig"], want)
		}
	})
}

// The alerts issue 29 asks for, and each one's runbook page under docs/runbooks.
var wantAlerts = map[string]string{
	"FerrofedDrainCutOrKilled":         "drain-cut-or-killed.md",
	"FerrofedAuditBacklogGrowing":      "audit-backlog-growing.md",
	"FerrofedMemberDownOnEveryReplica": "member-down.md",
	"FerrofedReadinessFlapping":        "readiness-flapping.md",
	"FerrofedCertificateExpiresSoon":   "certificate-expiring.md",
	"FerrofedOperatorApplyFailing":     "operator-apply-failing.md",
}

// alertRule is one rule of the rendered PrometheusRule.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func renderedRules(t *testing.T, set ...string) []alertRule {
	t.Helper()
	rules := ofKind(render(t, append(set, monitoringOn...)...), "PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules rendered, want 1", len(rules))
	}
	var out []alertRule
	for _, pr := range rules {
		var spec struct {
			Groups []struct {
				Rules []alertRule `json:"rules"`
			} `json:"groups"`
		}
		data, _ := json.Marshal(pr["spec"])
		if err := json.Unmarshal(data, &spec); err != nil {
			t.Fatal(err)
		}
		for _, g := range spec.Groups {
			out = append(out, g.Rules...)
		}
	}
	return out
}

// TestChartAlertsAreRealRules parses every alert's expression with Prometheus's own
// parser and holds each metric it reads, and each label it matches on, to what the
// gateway or the operator registers; each alert links a runbook that exists, and every
// runbook is linked.
func TestChartAlertsAreRealRules(t *testing.T) {
	registered := registeredMetrics(t)
	rules := renderedRules(t)
	const base = "https://github.com/ferrofed/ferrofed/blob/main/docs/runbooks/"
	linked := map[string]bool{}
	for _, r := range rules {
		t.Run(r.Alert, func(t *testing.T) {
			page, ok := wantAlerts[r.Alert]
			if !ok {
				t.Fatalf("alert %s is not one of %v: add it and its runbook to wantAlerts", r.Alert, keys(wantAlerts))
			}
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("expr %q does not parse: %v", r.Expr, err)
			}
			if expr.Type() != parser.ValueTypeVector {
				t.Errorf("expr %q is a %s, an alert needs a vector", r.Expr, expr.Type())
			}
			checkMetrics(t, registered, expr)
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("for %q: %v", r.For, err)
				}
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("severity %q", s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("annotations %v lack a summary or description", r.Annotations)
			}
			url := r.Annotations["runbook_url"]
			if url != base+page {
				t.Errorf("runbook_url %q, want %q", url, base+page)
			}
			rel := strings.TrimPrefix(url, base)
			if _, err := os.Stat(filepath.Join(repoRoot(t), "docs", "runbooks", rel)); err != nil {
				t.Errorf("runbook_url %q names no page under docs/runbooks: %v", url, err)
			}
			linked[rel] = true
		})
	}
	for alert := range wantAlerts {
		if !slices.ContainsFunc(rules, func(r alertRule) bool { return r.Alert == alert }) {
			t.Errorf("the PrometheusRule has no alert %s", alert)
		}
	}
	pages, _ := filepath.Glob(filepath.Join(repoRoot(t), "docs", "runbooks", "*.md"))
	for _, p := range pages {
		if name := filepath.Base(p); name != "README.md" && !linked[name] {
			t.Errorf("docs/runbooks/%s is the runbook of no alert", name)
		}
	}
	t.Run("runbookBaseURL moves every runbook_url", func(t *testing.T) {
		for _, r := range renderedRules(t, "monitoring.prometheusRule.runbookBaseURL=https://wiki.example.org/ferrofed") {
			if want := "https://wiki.example.org/ferrofed/" + wantAlerts[r.Alert]; r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
		}
	})
}

// grafanaVars are the dashboard's variables, replaced by what a query may hold in their
// place before it is parsed.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "${datasource}", "x", "$namespace", ".*", "$gateway", ".*")

// TestChartDashboardQueriesAreReal: the dashboard's ConfigMap holds the chart's
// dashboards/ferrofed.json, a Grafana dashboard whose every query parses as PromQL and
// reads only metrics the gateway or the operator registers, with panels for requests,
// dependency states, the audit backlog and drains.
func TestChartDashboardQueriesAreReal(t *testing.T) {
	registered := registeredMetrics(t)
	cm, ok := ofKind(render(t, append([]string{"monitoring.dashboards.namespace=grafana"}, monitoringOn...)...), "ConfigMap")[release+"-dashboard"]
	if !ok {
		t.Fatal("no dashboard ConfigMap with monitoring.dashboards.enabled")
	}
	if ns := nested(t, cm, "metadata", "namespace"); ns != "grafana" {
		t.Errorf("the dashboard's ConfigMap is in %v, want monitoring.dashboards.namespace grafana", ns)
	}
	if l := nested(t, cm, "metadata", "labels").(map[string]any); l["grafana_dashboard"] != "1" {
		t.Errorf("labels %v lack grafana_dashboard: \"1\"", l)
	}
	data := nested(t, cm, "data", "ferrofed.json").(string)
	file, err := os.ReadFile(filepath.Join(chartDir(t), "dashboards", "ferrofed.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(data) != strings.TrimSpace(string(file)) {
		t.Fatal("the ConfigMap's ferrofed.json is not the chart's dashboards/ferrofed.json")
	}
	var dash struct {
		UID           string `json:"uid"`
		Title         string `json:"title"`
		SchemaVersion int    `json:"schemaVersion"`
		Templating    struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(data), &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" || dash.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want both set and a schema of Grafana 10 or later", dash.UID, dash.Title, dash.SchemaVersion)
	}
	read := map[string]bool{}
	ids := map[int]bool{}
	queries := 0
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries++
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(q.Expr))
			if err != nil {
				t.Errorf("panel %q: %q does not parse: %v", p.Title, q.Expr, err)
				continue
			}
			for _, name := range checkMetrics(t, registered, expr) {
				read[name] = true
			}
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+), *\w+\)$`)
	for _, v := range dash.Templating.List {
		q, ok := v.Query.(map[string]any)
		if !ok {
			continue
		}
		m := labelValues.FindStringSubmatch(q["query"].(string))
		if m == nil {
			t.Errorf("variable %s: query %v is not label_values(selector, label)", v.Name, q["query"])
			continue
		}
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(m[1]))
		if err != nil {
			t.Errorf("variable %s: %q does not parse: %v", v.Name, m[1], err)
			continue
		}
		checkMetrics(t, registered, expr)
	}
	if queries < 10 {
		t.Errorf("%d queries: the dashboard is nearly empty", queries)
	}
	for _, want := range []string{"ferrofed_http_requests_total", "ferrofed_dependency_state", "ferrofed_audit_spool_undelivered_records",
		"ferrofed_operator_drains_total", "ferrofed_binding_request_duration_seconds_bucket"} {
		if !read[want] {
			t.Errorf("no panel reads %s", want)
		}
	}
}

// targetLabels are the labels a series gets from its scrape (the ServiceMonitors'
// target labels), not from the code that exports it.
var targetLabels = []string{"namespace", "gateway", "pod", "service", "job", "instance", "container"}

// checkMetrics fails t for every metric expr reads that registered lacks, and every
// label it matches on that is neither the metric's nor a target label; it returns the
// names read.
func checkMetrics(t *testing.T, registered map[string][]string, expr parser.Expr) []string {
	t.Helper()
	var names []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name == "" {
			t.Errorf("%s selects no metric by name", vs)
			return nil
		}
		names = append(names, vs.Name)
		labels, ok := registered[vs.Name]
		if !ok {
			t.Errorf("%s is registered by no metric of gateway/ or controllers/", vs.Name)
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel && !slices.Contains(labels, m.Name) && !slices.Contains(targetLabels, m.Name) {
				t.Errorf("%s has no label %q (its labels: %v)", vs.Name, m.Name, labels)
			}
		}
		return nil
	})
	return names
}

// sanitize is a Kubernetes annotation's name as Prometheus's service discovery spells
// it in a meta label: every character outside [a-zA-Z0-9_] becomes '_'.
func sanitize(s string) string {
	return regexp.MustCompile(`[^a-zA-Z0-9_]`).ReplaceAllString(s, "_")
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
