package controllers

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// TestServiceSaysWhereThePodsServeMetrics: the Service of a Gateway carries the label
// the chart's ServiceMonitor selects and the path and scheme it scrapes, from the base
// path, metrics.path and spec.tls; with metrics.disabled it carries none of them.
func TestServiceSaysWhereThePodsServeMetrics(t *testing.T) {
	for _, tc := range []struct {
		name         string
		mutate       func(*ferrofedv1alpha1.Gateway)
		label        bool
		path, scheme string
	}{
		{"defaults", nil, true, "/metrics", "http"},
		{"a base path and TLS", func(g *ferrofedv1alpha1.Gateway) {
			g.Spec.BasePath = "/federation"
			g.Spec.TLS = &ferrofedv1alpha1.TLS{SecretName: "edge-tls"}
		}, true, "/federation/metrics", "https"},
		{"metrics.path", func(g *ferrofedv1alpha1.Gateway) {
			g.Spec.Config = configWithIssuer("[metrics]\npath = \"/internal/prom\"\n")
		}, true, "/internal/prom", "http"},
		{"metrics.disabled", func(g *ferrofedv1alpha1.Gateway) {
			g.Spec.Config = configWithIssuer("[metrics]\ndisabled = true\n")
		}, false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := gateway(tc.mutate)
			plan := gatewayspec.Plan(&gw.Spec)
			rendered, err := gatewayspec.RenderAndCheck(&gw.Spec, plan, []byte(*gw.Spec.Config.Inline))
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			svc := Service(gw, rendered)
			if got := svc.Labels[LabelMetrics] == "true"; got != tc.label {
				t.Fatalf("labels %v: %s=true is %v, want %v", svc.Labels, LabelMetrics, got, tc.label)
			}
			if svc.Labels[LabelManagedBy] != FieldOwner || svc.Labels[LabelInstance] != gw.Name {
				t.Errorf("labels %v lost the operator's own", svc.Labels)
			}
			if svc.Annotations[AnnotationMetricsPath] != tc.path || svc.Annotations[AnnotationMetricsScheme] != tc.scheme {
				t.Errorf("annotations %v, want path %q and scheme %q", svc.Annotations, tc.path, tc.scheme)
			}
		})
	}
}

// TestApplyFailedCountsTheRefusal: every refused apply adds one to
// ferrofed_operator_apply_failures_total{kind}, the metric the chart's
// FerrofedOperatorApplyFailing alert reads.
func TestApplyFailedCountsTheRefusal(t *testing.T) {
	r := &GatewayReconciler{Recorder: events.NewFakeRecorder(10)}
	gw := gateway(nil)
	before := testutil.ToFloat64(applyFailures.WithLabelValues("Service"))
	for range 2 {
		if err := r.applyFailed(gw, "Service", gw.Name, errors.New("connection refused")); err == nil {
			t.Fatal("applyFailed returned no error")
		}
	}
	if got := testutil.ToFloat64(applyFailures.WithLabelValues("Service")) - before; got != 2 {
		t.Fatalf("ferrofed_operator_apply_failures_total{kind=Service} grew by %v, want 2", got)
	}
}

// TestDrainOutcomesStartAtZero: once registered, ferrofed_operator_drains_total has a
// series at 0 for every outcome, so that FerrofedDrainCutOrKilled's increase() counts
// the first cut or kill of an operator's life (a series born at 1 shows no increase).
func TestDrainOutcomesStartAtZero(t *testing.T) {
	registerMetrics()
	for _, o := range []string{"completed", "cut", "killed", "unknown"} {
		found := false
		families, err := metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "ferrofed_operator_drains_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" && l.GetValue() == o {
						found = true
					}
				}
			}
		}
		if !found {
			t.Errorf("ferrofed_operator_drains_total has no series for outcome %q before any drain", o)
		}
	}
}
