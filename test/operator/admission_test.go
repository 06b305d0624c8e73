package operator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// budgetCase is one Gateway the four layers must agree on. With the defaults the drain
// is 10s (derived: readiness 5s × 2) + 30s (shutdown = request) + 5s (bindings) = 45s,
// and the derived grace period 50s.
type budgetCase struct {
	name   string
	mutate func(l *ferrofedv1alpha1.Lifecycle, p *ferrofedv1alpha1.Probes)
	accept bool
	// configBlind, when set, says why `config check` cannot see this case: layer (d)
	// is then skipped, and the other three must still agree.
	configBlind string
	// names are the spec.lifecycle fields every layer's refusal must name (layer (d)
	// names their ferrofed.toml keys, see tomlKey).
	names []string
}

var budgetCases = []budgetCase{
	{"every budget at its default", nil, true, "", nil},
	{"shutdownTimeout equal to requestTimeout", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.RequestTimeout, l.ShutdownTimeout = dur("30s"), dur("30s")
	}, true, "", nil},
	{"shutdownTimeout one millisecond shorter than requestTimeout", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.RequestTimeout, l.ShutdownTimeout = dur("30s"), dur("29999ms")
	}, false, "", []string{"shutdownTimeout", "requestTimeout"}},
	{"absent shutdownTimeout follows a longer requestTimeout", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.RequestTimeout = dur("45s")
	}, true, "", nil},
	{"shutdownTimeout shorter than the default requestTimeout", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.ShutdownTimeout = dur("10s")
	}, false, "", []string{"shutdownTimeout", "requestTimeout"}},
	{"zero requestTimeout", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.RequestTimeout = dur("0s")
	}, false, "", []string{"requestTimeout"}},
	{"one-millisecond requestTimeout", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.RequestTimeout = dur("1ms")
	}, true, "", nil},
	{"fractional requestTimeout with an equal shutdownTimeout", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.RequestTimeout, l.ShutdownTimeout = dur("1.5s"), dur("1500ms")
	}, true, "", nil},
	{"fractional shutdownTimeout a millisecond short", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.RequestTimeout, l.ShutdownTimeout = dur("2.5s"), dur("2499ms")
	}, false, "", []string{"shutdownTimeout", "requestTimeout"}},
	{"zero drainDelay", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.DrainDelay = dur("0s")
	}, true, "", nil},
	{"negative drainDelay", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.DrainDelay = dur("-1s")
	}, false, "", []string{"drainDelay"}},
	{"drainDelay of exactly one hour", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.DrainDelay = dur("1h")
	}, true, "", nil},
	{"drainDelay a millisecond over one hour", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.DrainDelay = dur("1h0m0.001s")
	}, false, "", []string{"drainDelay"}},
	{"shutdownTimeout of two hours", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.ShutdownTimeout = dur("2h")
	}, false, "", []string{"shutdownTimeout"}},
	{"zero bindingsDrainTimeout", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.BindingsDrainTimeout = dur("0s")
	}, true, "", nil},
	{"bindingsDrainTimeout of 61 minutes", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.BindingsDrainTimeout = dur("61m")
	}, false, "", []string{"bindingsDrainTimeout"}},
	{"explicit grace period equal to the drain", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.TerminationGracePeriodSeconds = ptr.To[int64](45)
	}, false, "", []string{"terminationGracePeriodSeconds", "drainDelay", "shutdownTimeout", "bindingsDrainTimeout"}},
	{"explicit grace period one second past the drain", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.TerminationGracePeriodSeconds = ptr.To[int64](46)
	}, true, "", nil},
	{"explicit grace period under a fractional drain", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.DrainDelay, l.TerminationGracePeriodSeconds = dur("10.5s"), ptr.To[int64](45)
	}, false, "", []string{"terminationGracePeriodSeconds", "drainDelay", "shutdownTimeout", "bindingsDrainTimeout"}},
	{"explicit grace period just past a fractional drain", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.DrainDelay, l.TerminationGracePeriodSeconds = dur("10.5s"), ptr.To[int64](46)
	}, true, "", nil},
	{"explicit grace period of zero", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.TerminationGracePeriodSeconds = ptr.To[int64](0)
	}, false, "", []string{"terminationGracePeriodSeconds", "drainDelay"}},
	{"explicit grace period of a day", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.TerminationGracePeriodSeconds = ptr.To[int64](86400)
	}, true, "", nil},
	{"zero headroom on a whole-second drain", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.TerminationHeadroom = dur("0s")
	}, false, "", []string{"terminationHeadroom", "drainDelay", "shutdownTimeout", "bindingsDrainTimeout"}},
	{"zero headroom on a fractional drain", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.TerminationHeadroom, l.DrainDelay = dur("0s"), dur("2500ms")
	}, true, "", nil},
	{"zero headroom with an explicit grace period past the drain", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.TerminationHeadroom, l.TerminationGracePeriodSeconds = dur("0s"), ptr.To[int64](46)
	}, true, "", nil},
	{"negative headroom", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.TerminationHeadroom = dur("-1s")
	}, false, "", []string{"terminationHeadroom"}},
	{"headroom of two hours", func(l *ferrofedv1alpha1.Lifecycle, _ *ferrofedv1alpha1.Probes) {
		l.TerminationHeadroom = dur("2h")
	}, false, "terminationHeadroom is no ferrofed.toml key; it only lengthens the rendered grace period", []string{"terminationHeadroom"}},
	{"derived drainDelay from slower probes, grace period equal to the drain", func(l *ferrofedv1alpha1.Lifecycle, p *ferrofedv1alpha1.Probes) {
		p.Readiness.PeriodSeconds, p.Readiness.FailureThreshold = ptr.To[int32](10), ptr.To[int32](3)
		l.TerminationGracePeriodSeconds = ptr.To[int64](65)
	}, false, "", []string{"terminationGracePeriodSeconds", "drainDelay"}},
	{"derived drainDelay from slower probes, grace period one past the drain", func(l *ferrofedv1alpha1.Lifecycle, p *ferrofedv1alpha1.Probes) {
		p.Readiness.PeriodSeconds, p.Readiness.FailureThreshold = ptr.To[int32](10), ptr.To[int32](3)
		l.TerminationGracePeriodSeconds = ptr.To[int64](66)
	}, true, "", nil},
	{"every budget at its bound", func(l *ferrofedv1alpha1.Lifecycle, p *ferrofedv1alpha1.Probes) {
		l.RequestTimeout, l.DrainDelay, l.ShutdownTimeout = dur("1h"), dur("1h"), dur("1h")
		l.BindingsDrainTimeout, l.TerminationHeadroom = dur("1h"), dur("1h")
	}, true, "", nil},
}

// TestBudgetsAgreeAcrossLayers runs every case through (a) the CRD's CEL rules on the
// apiserver with no webhook, (b) the webhook the operator serves, (c) gateway/lifecycle
// and (d) config check on the configuration rendered for the case. All must agree.
func TestBudgetsAgreeAcrossLayers(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	for i, tc := range budgetCases {
		t.Run(tc.name, func(t *testing.T) {
			gw := newGateway("cel-only", fmt.Sprintf("case-%d", i), func(g *ferrofedv1alpha1.Gateway) {
				if tc.mutate != nil {
					tc.mutate(&g.Spec.Lifecycle, &g.Spec.Probes)
				}
			})
			verdicts := map[string]verdict{
				"(a) CRD CEL rules": celVerdict(ctx, t, gw.DeepCopy()),
				"(b) webhook":       webhookVerdict(t, gw.DeepCopy()).verdict,
				"(c) lifecycle":     lifecycleVerdict(gw),
			}
			if tc.configBlind == "" {
				verdicts["(d) config check"] = configVerdict(gw)
			}
			for layer, v := range verdicts {
				t.Logf("%s %s %s", layer, word(v.accepted), v.reason)
				if v.accepted != tc.accept {
					t.Errorf("case %q: layer %s %s, want %s; its reason: %s", tc.name, layer, word(v.accepted), word(tc.accept), v.reason)
					continue
				}
				for _, name := range tc.names {
					want := "spec.lifecycle." + name
					if layer == "(d) config check" {
						want = tomlKey[name]
					}
					if !v.accepted && !strings.Contains(v.reason, want) {
						t.Errorf("case %q: layer %s refused without naming %s: %s", tc.name, layer, want, v.reason)
					}
				}
			}
			if !tc.accept && len(tc.names) == 0 {
				t.Errorf("case %q is refused but names no field its refusals must name", tc.name)
			}
		})
	}
}

// tomlKey is the ferrofed.toml key a refusal of `config check` names for a spec field.
// The headroom is no key: it only lengthens the rendered grace period, which is what
// config check then refuses.
var tomlKey = map[string]string{
	"requestTimeout":                "server.request_timeout_ms",
	"drainDelay":                    "server.drain_delay_ms",
	"shutdownTimeout":               "server.shutdown_timeout_ms",
	"bindingsDrainTimeout":          "server.bindings_drain_timeout_ms",
	"terminationGracePeriodSeconds": "server.termination_grace_period_seconds",
	"terminationHeadroom":           "server.termination_grace_period_seconds",
}

type verdict struct {
	accepted bool
	reason   string
}

func word(accepted bool) string {
	if accepted {
		return "accepted"
	}
	return "refused"
}

func celVerdict(ctx context.Context, t *testing.T, gw *ferrofedv1alpha1.Gateway) verdict {
	err := k8s.Create(ctx, gw, client.DryRunAll)
	switch {
	case err == nil:
		return verdict{accepted: true}
	case apierrors.IsInvalid(err):
		return verdict{reason: err.Error()}
	default:
		t.Fatalf("dry-run create: %v", err)
		return verdict{}
	}
}

type webhookAnswer struct {
	verdict
	warnings []string
}

// webhookVerdict sends an AdmissionReview to the webhook server, as the apiserver would.
func webhookVerdict(t *testing.T, gw *ferrofedv1alpha1.Gateway) webhookAnswer {
	gw.APIVersion, gw.Kind = ferrofedv1alpha1.GroupVersion.String(), "Gateway"
	raw, err := json.Marshal(gw)
	if err != nil {
		t.Fatal(err)
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("case-" + gw.Name),
			Kind:      metav1.GroupVersionKind{Group: "ferrofed.io", Version: "v1alpha1", Kind: "Gateway"},
			Resource:  metav1.GroupVersionResource{Group: "ferrofed.io", Version: "v1alpha1", Resource: "gateways"},
			Name:      gw.Name,
			Namespace: gw.Namespace,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	}
	body, _ := json.Marshal(review)
	resp, err := webhookClient.Post(webhookURL, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("call the webhook: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook answered %s", resp.Status)
	}
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		t.Fatalf("decode the webhook's answer: %v", err)
	}
	a := webhookAnswer{verdict: verdict{accepted: out.Response.Allowed}, warnings: out.Response.Warnings}
	if out.Response.Result != nil {
		a.reason = out.Response.Result.Message
	}
	return a
}

func lifecycleVerdict(gw *ferrofedv1alpha1.Gateway) verdict {
	ps := gatewayspec.Budgets(&gw.Spec).Validate(gatewayspec.LifecycleFields)
	if len(ps) == 0 {
		return verdict{accepted: true}
	}
	var msgs []string
	for _, p := range ps {
		msgs = append(msgs, p.Error())
	}
	return verdict{reason: strings.Join(msgs, "; ")}
}

// configVerdict is `config check` on the configuration rendered from the spec and its
// inline configuration (the issuer of its data plane).
func configVerdict(gw *ferrofedv1alpha1.Gateway) verdict {
	var user []byte
	if c := gw.Spec.Config; c != nil && c.Inline != nil {
		user = []byte(*c.Inline)
	}
	rendered, err := config.Render(gatewayspec.Owned(&gw.Spec, gatewayspec.Plan(&gw.Spec)), user)
	if err != nil {
		return verdict{reason: "render: " + err.Error()}
	}
	if _, err := config.Parse(rendered, "rendered", config.Options{SkipFiles: true}); err != nil {
		return verdict{reason: err.Error()}
	}
	return verdict{accepted: true}
}
