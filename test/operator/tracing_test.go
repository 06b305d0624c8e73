package operator_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// reconcileSpans keeps the operator's reconcile spans of the Gateways named "traced"
// (the suite's manager has a tracer provider with it), and drops every other one.
var reconcileSpans = &spanKeeper{name: "traced"}

type spanKeeper struct {
	name  string
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (k *spanKeeper) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (k *spanKeeper) OnEnd(s sdktrace.ReadOnlySpan) {
	if slices.Contains(s.Attributes(), controllers.AttrGateway.String(k.name)) {
		k.mu.Lock()
		k.spans = append(k.spans, s)
		k.mu.Unlock()
	}
}
func (k *spanKeeper) Shutdown(context.Context) error   { return nil }
func (k *spanKeeper) ForceFlush(context.Context) error { return nil }

func (k *spanKeeper) kept() []sdktrace.ReadOnlySpan {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.spans)
}

// withTracing sets spec.tracing: endpoint, then mutate.
func withTracing(endpoint string, mutate func(*ferrofedv1alpha1.Tracing)) func(*ferrofedv1alpha1.Gateway) {
	return func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Tracing = &ferrofedv1alpha1.Tracing{Endpoint: endpoint}
		if mutate != nil {
			mutate(g.Spec.Tracing)
		}
	}
}

// tracingCases are spec.tracing's rows: the CRD's CEL rules and the webhook give the
// same verdict, and a refusal by both contains want (the field's name and the rule's
// message).
var tracingCases = []struct {
	name   string
	mutate func(*ferrofedv1alpha1.Gateway)
	accept bool
	want   string
}{
	{"an http endpoint", withTracing("http://otel-collector.observability:4318", nil), true, ""},
	{"every field set", withTracing("https://collector.example.org/otlp", func(t *ferrofedv1alpha1.Tracing) {
		t.SamplingRatio, t.Timeout, t.ServiceName = ptr.To("0.25"), dur("2500ms"), ptr.To("ferrofed-edge")
		t.HeadersSecret = &ferrofedv1alpha1.SecretKeySelector{Name: "otel", Key: "headers"}
		t.CASecret = &ferrofedv1alpha1.SecretKeyRef{Name: "otel-ca"}
	}), true, ""},
	{"no endpoint", withTracing("", nil), false, "spec.tracing.endpoint"},
	{"a grpc endpoint", withTracing("grpc://c:4317", nil), false, "spec.tracing.endpoint must be an http or https base URL"},
	{"credentials in the endpoint", withTracing("https://u:p@c.example", nil), false, "spec.tracing.endpoint must be an http or https base URL"},
	{"a query in the endpoint", withTracing("https://c.example/?k=v", nil), false, "spec.tracing.endpoint must be an http or https base URL"},
	{"the traces path in the endpoint", withTracing("https://c.example/v1/traces", nil), false, "not ending in /v1/traces"},
	{"a ratio of 1.0", withTracing("http://c:4318", func(t *ferrofedv1alpha1.Tracing) { t.SamplingRatio = ptr.To("1.0") }), true, ""},
	{"a ratio above 1", withTracing("http://c:4318", func(t *ferrofedv1alpha1.Tracing) { t.SamplingRatio = ptr.To("1.01") }), false,
		"spec.tracing.samplingRatio must be a decimal string from 0 to 1"},
	{"a negative ratio", withTracing("http://c:4318", func(t *ferrofedv1alpha1.Tracing) { t.SamplingRatio = ptr.To("-0.1") }), false,
		"spec.tracing.samplingRatio must be a decimal string from 0 to 1"},
	{"a timeout of 60s", withTracing("http://c:4318", func(t *ferrofedv1alpha1.Tracing) { t.Timeout = dur("60s") }), true, ""},
	{"a timeout over 60s", withTracing("http://c:4318", func(t *ferrofedv1alpha1.Tracing) { t.Timeout = dur("61s") }), false,
		"spec.tracing.timeout must be greater than 0s and at most 60s"},
	{"a zero timeout", withTracing("http://c:4318", func(t *ferrofedv1alpha1.Tracing) { t.Timeout = dur("0s") }), false,
		"spec.tracing.timeout must be greater than 0s and at most 60s"},
	{"a CA with an http endpoint", withTracing("http://c:4318", func(t *ferrofedv1alpha1.Tracing) {
		t.CASecret = &ferrofedv1alpha1.SecretKeyRef{Name: "otel-ca"}
	}), false, "spec.tracing.caSecret needs an https spec.tracing.endpoint"},
	{"a service name of spaces", withTracing("http://c:4318", func(t *ferrofedv1alpha1.Tracing) { t.ServiceName = ptr.To("  ") }), false,
		"spec.tracing.serviceName must be printable ASCII"},
}

// TestTracingRulesOnCELAndWebhook runs spec.tracing's rows through the CRD's CEL rules
// (a namespace the webhook does not cover) and the webhook.
func TestTracingRulesOnCELAndWebhook(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	for _, tc := range tracingCases {
		t.Run(tc.name, func(t *testing.T) {
			gw := newGateway("cel-only", "tracing-case", tc.mutate)
			cel := celVerdict(ctx, t, gw.DeepCopy())
			wh := webhookVerdict(t, gw.DeepCopy())
			if cel.accepted != tc.accept || wh.accepted != tc.accept {
				t.Fatalf("CEL %s (%s), webhook %s (%s); want both %s", word(cel.accepted), cel.reason, word(wh.accepted), wh.reason, word(tc.accept))
			}
			if tc.accept {
				return
			}
			if !strings.Contains(cel.reason, tc.want) {
				t.Errorf("CEL said %q, want it to contain %q", cel.reason, tc.want)
			}
			if !strings.Contains(wh.reason, tc.want) {
				t.Errorf("webhook said %q, want it to contain %q", wh.reason, tc.want)
			}
		})
	}
}

// TestTracingInlineTableBesideSpecTracingIsRefused: the webhook refuses an inline
// [tracing] beside spec.tracing naming both; the CEL rules cannot read the inline
// document, the controller's ConfigValid=False does (with the same words).
func TestTracingInlineTableBesideSpecTracingIsRefused(t *testing.T) {
	needControlPlane(t)
	gw := newGateway("cel-only", "tracing-twice", withTracing("http://c:4318", nil))
	gw.Spec.Config = withIssuer("[tracing]\nendpoint = 'http://other:4318'\n")
	wh := webhookVerdict(t, gw)
	if wh.accepted {
		t.Fatal("the webhook accepted an inline [tracing] beside spec.tracing")
	}
	for _, name := range []string{"tracing: is set by the Gateway from spec.tracing", "spec.config.inline"} {
		if !strings.Contains(wh.reason, name) {
			t.Errorf("webhook said %q, want it to contain %q", wh.reason, name)
		}
	}
}

// TestTracingGatewayGetsTheResourceEnvAndItsMounts: spec.tracing renders [tracing],
// its two Secrets are mounted by the named key only, read-only, and the gateway
// container has the downward-API variables (a Gateway without tracing has them too).
func TestTracingGatewayGetsTheResourceEnvAndItsMounts(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "traced"}
	gw := newGateway(key.Namespace, key.Name, withTracing("https://otel.observability.svc:4318", func(t *ferrofedv1alpha1.Tracing) {
		t.SamplingRatio, t.Timeout = ptr.To("0.5"), dur("3s")
		t.HeadersSecret = &ferrofedv1alpha1.SecretKeySelector{Name: "otel-token", Key: "headers.txt"}
		t.CASecret = &ferrofedv1alpha1.SecretKeyRef{Name: "otel-ca", Key: "bundle.pem"}
	}))
	if err := k8s.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, gw) }()
	gw, dep := reconciled(ctx, t, key)
	if c := condition(gw, ferrofedv1alpha1.ConditionConfigValid); c.Status != metav1.ConditionTrue {
		t.Fatalf("ConfigValid = %s %s: %s", c.Status, c.Reason, c.Message)
	}
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, key, &cm); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"[tracing]", "endpoint = 'https://otel.observability.svc:4318'", "sampling_ratio = 0.5", "timeout_ms = 3000",
		"headers_file = '" + gatewayspec.TracingHeadersFile + "'", "ca_file = '" + gatewayspec.TracingCAFile + "'"} {
		if !strings.Contains(cm.Data[gatewayspec.ConfigFileName], w) {
			t.Errorf("rendered ferrofed.toml lacks %q:\n%s", w, cm.Data[gatewayspec.ConfigFileName])
		}
	}
	requireResourceEnv(t, gatewayContainer(dep), key.Name)
	items := map[string]string{}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Secret != nil && strings.HasPrefix(v.Name, "tracing-") {
			for _, it := range v.Secret.Items {
				items[v.Secret.SecretName] += it.Key + "->" + it.Path
			}
		}
	}
	if items["otel-token"] != "headers.txt->headers" || items["otel-ca"] != "bundle.pem->ca.crt" || len(items) != 2 {
		t.Errorf("tracing Secret volumes %v, want otel-token headers.txt->headers and otel-ca bundle.pem->ca.crt", items)
	}
	ro := map[string]bool{}
	for _, m := range gatewayContainer(dep).VolumeMounts {
		ro[m.MountPath] = m.ReadOnly
	}
	if !ro[gatewayspec.TracingHeadersDir] || !ro[gatewayspec.TracingCADir] {
		t.Errorf("mounts %v, want %s and %s read-only", ro, gatewayspec.TracingHeadersDir, gatewayspec.TracingCADir)
	}

	// The operator's own span of those reconciles: the Gateway's name and namespace
	// and the result, nothing of its spec.
	eventually(t, 10*time.Second, "a reconcile span of Gateway traced", func() error {
		for _, s := range reconcileSpans.kept() {
			if s.Name() != controllers.SpanReconcileGateway {
				continue
			}
			attrs := map[attribute.Key]string{}
			for _, kv := range s.Attributes() {
				attrs[kv.Key] = kv.Value.String()
				if strings.Contains(kv.Value.String(), "otel.observability") {
					t.Errorf("the reconcile span carries the spec's endpoint in %s", kv.Key)
				}
			}
			if attrs[controllers.AttrNamespace] == key.Namespace && attrs[controllers.AttrResult] != "" {
				return nil
			}
		}
		return fmt.Errorf("spans kept: %d, none a reconcile of %s with a result", len(reconcileSpans.kept()), key)
	})

	// Without tracing: the same variables, no tracing volume.
	plainKey := types.NamespacedName{Namespace: "reconcile", Name: "untraced"}
	plain := newGateway(plainKey.Namespace, plainKey.Name, nil)
	if err := k8s.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, plain) }()
	_, plainDep := reconciled(ctx, t, plainKey)
	requireResourceEnv(t, gatewayContainer(plainDep), plainKey.Name)
	for _, v := range plainDep.Spec.Template.Spec.Volumes {
		if strings.HasPrefix(v.Name, "tracing-") {
			t.Errorf("a Gateway without tracing has volume %s", v.Name)
		}
	}
}

func requireResourceEnv(t *testing.T, c corev1.Container, gatewayName string) {
	t.Helper()
	got := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			got[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
		} else {
			got[e.Name] = e.Value
		}
	}
	for name, want := range map[string]string{config.EnvPodName: "fieldRef:metadata.name", config.EnvPodNamespace: "fieldRef:metadata.namespace", config.EnvGatewayName: gatewayName} {
		if got[name] != want {
			t.Errorf("env %s = %q, want %q (env %v)", name, got[name], want, got)
		}
	}
}
