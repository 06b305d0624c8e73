package controllers

import (
	"errors"
	"path"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// What a Gateway's Service says of its pods' metrics, for a Prometheus ServiceMonitor
// that selects every Gateway's Service by LabelMetrics and takes the path and scheme of
// each from its annotations (the chart's monitoring.serviceMonitor; docs/operator.md,
// "Monitoring"). A Gateway with metrics.disabled gets none of them.
const (
	// LabelMetrics is "true" on the Service of a Gateway whose pods serve /metrics.
	LabelMetrics = "ferrofed.io/metrics"
	// AnnotationMetricsPath is the path of the pods' metrics: the base path and
	// metrics.path of the rendered configuration.
	AnnotationMetricsPath = "ferrofed.io/metrics-path"
	// AnnotationMetricsScheme is http, or https when the Gateway sets spec.tls.
	AnnotationMetricsScheme = "ferrofed.io/metrics-scheme"
)

// errMetricsDisabled is metricsEndpoint's answer for a configuration with
// metrics.disabled.
var errMetricsDisabled = errors.New("metrics.disabled is set")

// metricsEndpoint is where gw's pods serve their metrics: the scheme and the path
// under the base path, from metrics.path of the rendered configuration (/metrics when
// it does not parse), or errMetricsDisabled.
func metricsEndpoint(gw *ferrofedv1alpha1.Gateway, rendered []byte) (scheme, urlPath string, err error) {
	metricsPath := "/metrics"
	if cfg, perr := gatewayspec.ParseRendered(rendered); perr == nil {
		if cfg.Metrics.Disabled {
			return "", "", errMetricsDisabled
		}
		metricsPath = cfg.Metrics.Path
	}
	scheme = "http"
	if gw.Spec.TLS != nil {
		scheme = "https"
	}
	return scheme, path.Join(gw.Spec.BasePathOrDefault(), metricsPath), nil
}

// withMetrics labels and annotates svc with where gw's pods serve their metrics;
// with metrics.disabled it leaves svc as it is.
func withMetrics(svc *corev1ac.ServiceApplyConfiguration, gw *ferrofedv1alpha1.Gateway, rendered []byte) *corev1ac.ServiceApplyConfiguration {
	scheme, urlPath, err := metricsEndpoint(gw, rendered)
	if err != nil {
		return svc
	}
	return svc.WithLabels(map[string]string{LabelMetrics: "true"}).
		WithAnnotations(map[string]string{AnnotationMetricsPath: urlPath, AnnotationMetricsScheme: scheme})
}
