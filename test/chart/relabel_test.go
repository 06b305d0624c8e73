package chart

import (
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/ferrofed/ferrofed/controllers"
)

// TestChartGatewayTargetsAreRelabelledFromTheService runs the gateways' ServiceMonitor
// relabelings with Prometheus's own relabeling code on the target a Gateway's Service
// gives (the meta labels of Kubernetes service discovery, then the labels the
// Prometheus Operator sets before a ServiceMonitor's relabelings: its endpoint label
// among them): the target is scraped at the path and scheme the operator's annotations
// say, carries the Gateway's name, and no target label named endpoint is left to
// rename the gateway's own.
func TestChartGatewayTargetsAreRelabelledFromTheService(t *testing.T) {
	gw := ofKind(render(t, monitoringOn...), "ServiceMonitor")[release+"-gateways"]
	ep := nested(t, gw, "spec", "endpoints").([]any)[0].(map[string]any)
	var cfgs []*relabel.Config
	// What the Prometheus Operator puts first, of what matters here.
	cfgs = append(cfgs, &relabel.Config{Action: relabel.Replace, Regex: relabel.MustNewRegexp("(.*)"), Separator: ";",
		TargetLabel: "endpoint", Replacement: ep["port"].(string), NameValidationScheme: model.UTF8Validation})
	for _, r := range ep["relabelings"].([]any) {
		r := r.(map[string]any)
		c := relabel.DefaultRelabelConfig
		c.NameValidationScheme = model.UTF8Validation
		if a, ok := r["action"].(string); ok {
			c.Action = relabel.Action(a)
		}
		if re, ok := r["regex"].(string); ok {
			c.Regex = relabel.MustNewRegexp(re)
		}
		for _, s := range asSlice(r["sourceLabels"]) {
			c.SourceLabels = append(c.SourceLabels, model.LabelName(s.(string)))
		}
		if tl, ok := r["targetLabel"].(string); ok {
			c.TargetLabel = tl
		}
		if rep, ok := r["replacement"].(string); ok {
			c.Replacement = rep
		}
		if err := c.Validate(model.UTF8Validation); err != nil {
			t.Fatalf("relabeling %v: %v", r, err)
		}
		cfgs = append(cfgs, &c)
	}
	annotation := func(name string) string { return "__meta_kubernetes_service_annotation_" + sanitize(name) }
	target := func(extra map[string]string) map[string]string {
		m := map[string]string{
			"__address__":      "10.1.2.3:8443",
			"__scheme__":       "http",
			"__metrics_path__": ep["path"].(string),
			"__meta_kubernetes_service_label_" + sanitize(controllers.LabelInstance): "edge",
			"__meta_kubernetes_service_label_" + sanitize(controllers.LabelMetrics):  "true",
		}
		for k, v := range extra {
			m[k] = v
		}
		lb := labels.NewBuilder(labels.FromMap(m))
		if !relabel.ProcessBuilder(lb, cfgs...) {
			t.Fatal("the relabelings drop the target")
		}
		return lb.Labels().Map()
	}
	for _, tc := range []struct {
		name         string
		annotations  map[string]string
		path, scheme string
	}{
		{"a Gateway with a base path and TLS", map[string]string{annotation(controllers.AnnotationMetricsPath): "/federation/metrics",
			annotation(controllers.AnnotationMetricsScheme): "https"}, "/federation/metrics", "https"},
		{"a Gateway with the defaults", map[string]string{annotation(controllers.AnnotationMetricsPath): "/metrics",
			annotation(controllers.AnnotationMetricsScheme): "http"}, "/metrics", "http"},
		{"a Service without the annotations", nil, "/metrics", "http"},
		{"annotations that are not a path or a scheme", map[string]string{annotation(controllers.AnnotationMetricsPath): "metrics",
			annotation(controllers.AnnotationMetricsScheme): "ftp"}, "/metrics", "http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := target(tc.annotations)
			if got["__metrics_path__"] != tc.path || got["__scheme__"] != tc.scheme {
				t.Errorf("scraped at %s %s, want %s %s", got["__scheme__"], got["__metrics_path__"], tc.scheme, tc.path)
			}
			if got["gateway"] != "edge" {
				t.Errorf("gateway label %q, want the Gateway's name", got["gateway"])
			}
			if v, ok := got["endpoint"]; ok {
				t.Errorf("the target keeps endpoint=%q: the gateway's endpoint label would become exported_endpoint", v)
			}
		})
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
