package operator_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// apiCase is a rule of the resource beyond the budgets: some only the webhook can check
// (the inline TOML), some both layers hold.
type apiCase struct {
	name          string
	mutate        func(*ferrofedv1alpha1.Gateway)
	celAccept     bool
	webhookAccept bool
	// want is a piece of the webhook's refusal, or of one of its warnings.
	want string
}

// inline sets the Gateway's inline configuration to toml and the issuer of its data
// plane (withIssuer); inlineAlone, to toml alone.
func inline(toml string) func(*ferrofedv1alpha1.Gateway) {
	return func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Config = withIssuer(toml)
	}
}

func inlineAlone(toml string) func(*ferrofedv1alpha1.Gateway) {
	return func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Config = &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To(toml)}
	}
}

var apiCases = []apiCase{
	{"a valid inline configuration", inline("[[registry.members]]\nid = \"a\"\nquery_endpoint = \"https://a.example.org/fhir\"\n"), true, true, ""},
	{"an inline key the spec owns, server.listen", inline("[server]\nlisten = \"0.0.0.0:9000\"\n"), true, false,
		"server.listen: is set by the Gateway from spec.port; set spec.port instead"},
	{"an inline lifecycle key the spec owns", inline("[server]\ndrain_delay_ms = 1000\n"), true, false,
		"server.drain_delay_ms: is set by the Gateway from spec.lifecycle.drainDelay"},
	{"an inline TLS table the spec owns", inline("[server.tls]\ncertificate_file = \"/x.pem\"\n"), true, false,
		"server.tls: is set by the Gateway from spec.tls (secretName, and clientCASecret with healthcheckIdentitySecret for client certificates)"},
	{"an unknown inline key", inline("[health]\nno_such_key = 1\n"), true, false, "health.no_such_key: unknown key"},
	{"an inline member without an endpoint", inline("[[registry.members]]\nid = \"a\"\n"), true, false,
		"registry.members[0].query_endpoint: is required"},
	{"inline text that is not TOML", inline("[health\n"), true, false, "spec.config.inline"},
	{"inline and configMapRef together", func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Config = &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To(""), ConfigMapRef: &ferrofedv1alpha1.ConfigMapKeyRef{Name: "x", Key: "k"}}
	}, false, false, "mutually exclusive"},
	{"a sub-millisecond requestTimeout", func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Lifecycle.RequestTimeout, g.Spec.Lifecycle.ShutdownTimeout = dur("1500us"), dur("30s")
	}, false, false, "whole number of milliseconds"},
	{"a basePath ending in a slash", func(g *ferrofedv1alpha1.Gateway) { g.Spec.BasePath = "/fed/" }, false, false,
		"server.base_path"},
	{"a basePath with a dot-dot segment", func(g *ferrofedv1alpha1.Gateway) { g.Spec.BasePath = "/fed/.." }, false, false,
		"server.base_path"},
	{"a basePath with a dot segment", func(g *ferrofedv1alpha1.Gateway) { g.Spec.BasePath = "/./fed" }, false, false,
		"server.base_path"},
	{"a basePath segment that only starts with dots", func(g *ferrofedv1alpha1.Gateway) { g.Spec.BasePath = "/..fed/.well" }, true, true, ""},
	{"a drainDelay shorter than the readiness poll draws a warning", func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Lifecycle.DrainDelay = dur("1s")
	}, true, true, "spec.lifecycle.drainDelay (1s) is shorter than the readiness poll (10s"},
	{"headroom under 5s draws a warning", func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Lifecycle.TerminationHeadroom = dur("2s")
	}, true, true, "spec.lifecycle.terminationHeadroom leaves 2s of headroom"},
	{"an audit repository draws the emptyDir warning", inline(auditRepository), true, true,
		"the audit spool is an emptyDir (spec.audit.spool, 1Gi): it survives container restarts but not the pod's deletion"},
	{"an audit repository with a 500ms bindingsDrainTimeout draws the final-sync warning", func(g *ferrofedv1alpha1.Gateway) {
		inline(auditRepository)(g)
		g.Spec.Lifecycle.BindingsDrainTimeout = dur("500ms")
	}, true, true, "spec.lifecycle.bindingsDrainTimeout (500ms) leaves less than 1s for the audit spool's final sync"},
	{"an inline audit.spool_dir the spec owns", inline(auditRepository + "spool_dir = \"/data\"\n"), true, false,
		"audit.spool_dir: is set by the Gateway from spec.audit.spool"},
	{"an inline audit.feed.spool_dir the spec owns", inline(auditRepository + "[audit.feed]\nurl = \"https://f.example.org/fhir\"\nspool_dir = \"/data\"\n"), true, false,
		"audit.feed.spool_dir: is set by the Gateway from spec.audit.spool"},
	{"two spools of max_spool_bytes over spec.audit.spool.sizeLimit", func(g *ferrofedv1alpha1.Gateway) {
		inline(auditRepository + "max_spool_bytes = 134217728\n[audit.feed]\nurl = \"https://f.example.org/fhir\"\n")(g)
		g.Spec.Audit = &ferrofedv1alpha1.Audit{Spool: &ferrofedv1alpha1.AuditSpool{SizeLimit: ptr.To(resource.MustParse("200Mi"))}}
	}, true, false, "audit.max_spool_bytes (134217728) × 2 spool(s) is 268435456 bytes, more than spec.audit.spool.sizeLimit (200Mi"},
	{"a sizeLimit under 4Mi", func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Audit = &ferrofedv1alpha1.Audit{Spool: &ferrofedv1alpha1.AuditSpool{SizeLimit: ptr.To(resource.MustParse("1Mi"))}}
	}, false, false, "spec.audit.spool.sizeLimit must be from 4Mi to 128Gi"},
	{"a sizeLimit over 128Gi", func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Audit = &ferrofedv1alpha1.Audit{Spool: &ferrofedv1alpha1.AuditSpool{SizeLimit: ptr.To(resource.MustParse("200Gi"))}}
	}, false, false, "spec.audit.spool.sizeLimit must be from 4Mi to 128Gi"},
	{"secretMounts under /etc/ferrofed/secrets/", secretMounts("/etc/ferrofed/secrets/audit", "/etc/ferrofed/secrets/members/a"), true, true, ""},
	{"a secretMount outside /etc/ferrofed/secrets/", secretMounts("/etc/ferrofed/secrets/a", "/etc/ferrofed/tls"), false, false,
		"spec.secretMounts[1].mountPath"},
	{"a secretMount with a dot-dot segment", secretMounts("/etc/ferrofed/secrets/../tls"), false, false, "spec.secretMounts[0].mountPath"},
	{"two secretMounts at one path", secretMounts("/etc/ferrofed/secrets/a", "/etc/ferrofed/secrets/a"), false, false,
		"two entries have the same mountPath"},
	{"17 secretMounts", secretMounts(seventeenPaths()...), false, false, "spec.secretMounts: Too many: 17"},
	// The data plane asks for a bearer token by default (docs/operator.md, "The data
	// plane's issuer"): an issuer to verify it with, or data_plane = "open" written out.
	{"a configuration with no issuer for the data plane", inlineAlone(memberTable), true, false,
		`auth.data_plane: is "required" (the default) but no [[auth.issuers]] is configured that is not read_only: add an issuer under auth.issuers`},
	{"no configuration at all", func(g *ferrofedv1alpha1.Gateway) { g.Spec.Config = nil }, true, false, "auth.data_plane"},
	{"data_plane = \"required\" with no issuer", inlineAlone(memberTable + "[auth]\ndata_plane = \"required\"\n"), true, false, "auth.data_plane"},
	{"an open data plane draws the gateway's warning", inlineAlone(memberTable + "[auth]\ndata_plane = \"open\"\n"), true, true,
		`spec.config: auth.data_plane: is "open": anyone who can reach the gateway can search every member for every patient, with no token`},
	{"an issuer whose jwks_file is a secretMount's", func(g *ferrofedv1alpha1.Gateway) {
		secretMounts("/etc/ferrofed/secrets/issuers/clinic")(g)
		inlineAlone(memberTable + jwksFileIssuer)(g)
	}, true, true, ""},
}

const (
	memberTable    = "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"https://a.example.org/fhir\"\n"
	jwksFileIssuer = "[[auth.issuers]]\nissuer = \"https://login.clinic.example.org\"\naudience = \"ferrofed\"\n" +
		"jwks_file = \"/etc/ferrofed/secrets/issuers/clinic/jwks.json\"\noperator_scope = \"ferrofed.operator\"\n"
)

const auditRepository = "[audit]\ndestination = \"repository\"\nurl = \"https://audit.example.org/fhir\"\n"

func secretMounts(paths ...string) func(*ferrofedv1alpha1.Gateway) {
	return func(g *ferrofedv1alpha1.Gateway) {
		for i, p := range paths {
			g.Spec.SecretMounts = append(g.Spec.SecretMounts, ferrofedv1alpha1.SecretMount{SecretName: fmt.Sprint("s", i), MountPath: p})
		}
	}
}

func seventeenPaths() []string {
	var out []string
	for i := range 17 {
		out = append(out, fmt.Sprint("/etc/ferrofed/secrets/m", i))
	}
	return out
}

func TestAPIRulesOnCELAndWebhook(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	for _, tc := range apiCases {
		t.Run(tc.name, func(t *testing.T) {
			gw := newGateway("cel-only", "api-case", tc.mutate)
			if cel := celVerdict(ctx, t, gw.DeepCopy()); cel.accepted != tc.celAccept {
				t.Errorf("CEL rules %s, want %s: %s", word(cel.accepted), word(tc.celAccept), cel.reason)
			}
			wh := webhookVerdict(t, gw.DeepCopy())
			if wh.accepted != tc.webhookAccept {
				t.Errorf("webhook %s, want %s: %s", word(wh.accepted), word(tc.webhookAccept), wh.reason)
			}
			said := wh.reason + "\n" + strings.Join(wh.warnings, "\n")
			if !strings.Contains(said, tc.want) {
				t.Errorf("webhook said %q, want it to contain %q", said, tc.want)
			}
		})
	}
}

// TestApiserverCallsTheWebhook checks the installed webhook configuration end to end:
// the apiserver sends Gateways to the operator, and relays its refusals (a key the spec
// owns, a data plane with no issuer) and warnings (a short drain delay, an open data
// plane).
func TestApiserverCallsTheWebhook(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	var mu sync.Mutex
	var warnings []string
	cfg := rest.CopyConfig(restConfig)
	cfg.WarningHandler = warningFunc(func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, msg)
	})
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	owned := newGateway("webhook", "owned-key", inline("[server]\nbase_path = \"/x\"\n"))
	err = c.Create(ctx, owned, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "vgateway.ferrofed.io") || !strings.Contains(err.Error(), "server.base_path: is set by the Gateway from spec.basePath") {
		t.Errorf("create with an owned key: %v, want the webhook's refusal naming server.base_path and spec.basePath", err)
	}

	noIssuer := newGateway("webhook", "no-issuer", inlineAlone(memberTable))
	err = c.Create(ctx, noIssuer, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "vgateway.ferrofed.io") || !strings.Contains(err.Error(), "auth.data_plane") || !strings.Contains(err.Error(), "auth.issuers") {
		t.Errorf("create with no issuer for the data plane: %v, want the webhook's refusal naming auth.data_plane and auth.issuers", err)
	}

	short := newGateway("webhook", "short-delay", func(g *ferrofedv1alpha1.Gateway) { g.Spec.Lifecycle.DrainDelay = dur("0s") })
	if err := c.Create(ctx, short, client.DryRunAll); err != nil {
		t.Fatalf("create with a short drainDelay: %v", err)
	}
	open := newGateway("webhook", "open-data-plane", inlineAlone(memberTable+"[auth]\ndata_plane = \"open\"\n"))
	if err := c.Create(ctx, open, client.DryRunAll); err != nil {
		t.Fatalf("create with an open data plane: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(warnings, "\n")
	if !strings.Contains(all, "is shorter than the readiness poll") {
		t.Errorf("warnings = %q, want the readiness-poll warning", warnings)
	}
	if !strings.Contains(all, `spec.config: auth.data_plane: is "open"`) {
		t.Errorf("warnings = %q, want the open data plane's", warnings)
	}
}

type warningFunc func(string)

func (f warningFunc) HandleWarningHeader(_ int, _ string, msg string) { f(msg) }

// TestMutualTLSNeedsAHealthcheckIdentity: with client certificates required the probes
// are `ferrofed healthcheck`, which must present an identity; the CRD's rules and the
// webhook refuse one setting without the other, each naming both fields.
func TestMutualTLSNeedsAHealthcheckIdentity(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	tlsOf := func(ca *ferrofedv1alpha1.SecretKeyRef, identity string) func(*ferrofedv1alpha1.Gateway) {
		return func(g *ferrofedv1alpha1.Gateway) {
			g.Spec.TLS = &ferrofedv1alpha1.TLS{SecretName: "edge-tls", ClientCASecret: ca}
			if identity != "" {
				g.Spec.TLS.HealthcheckIdentitySecret = ptr.To(identity)
			}
		}
	}
	both := []string{"spec.tls.clientCASecret", "spec.tls.healthcheckIdentitySecret"}
	tests := []struct {
		name   string
		mutate func(*ferrofedv1alpha1.Gateway)
		accept bool
		names  []string
	}{
		{"a client CA with a healthcheck identity", tlsOf(&ferrofedv1alpha1.SecretKeyRef{Name: "ca"}, "edge-healthcheck"), true, nil},
		{"a client CA under its own key with a healthcheck identity", tlsOf(&ferrofedv1alpha1.SecretKeyRef{Name: "ca", Key: "bundle.pem"}, "edge-healthcheck"), true, nil},
		{"a client CA without a healthcheck identity", tlsOf(&ferrofedv1alpha1.SecretKeyRef{Name: "ca"}, ""), false, both},
		{"a healthcheck identity without a client CA", tlsOf(nil, "edge-healthcheck"), false, both},
		{"TLS without either", tlsOf(nil, ""), true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gw := newGateway("cel-only", "mtls-case", tc.mutate)
			for layer, v := range map[string]verdict{
				"CRD CEL rules": celVerdict(ctx, t, gw.DeepCopy()),
				"webhook":       webhookVerdict(t, gw.DeepCopy()).verdict,
			} {
				if v.accepted != tc.accept {
					t.Errorf("%s %s, want %s: %s", layer, word(v.accepted), word(tc.accept), v.reason)
					continue
				}
				for _, name := range tc.names {
					if !strings.Contains(v.reason, name) {
						t.Errorf("%s refused without naming %s: %s", layer, name, v.reason)
					}
				}
			}
		})
	}
	// The key's default is the CRD's: "ca.crt".
	gw := newGateway("cel-only", "mtls-default-key", tlsOf(&ferrofedv1alpha1.SecretKeyRef{Name: "ca"}, "id"))
	if err := k8s.Create(ctx, gw, client.DryRunAll); err != nil {
		t.Fatalf("dry-run create: %v", err)
	}
	if got := gw.Spec.TLS.ClientCASecret.Key; got != ferrofedv1alpha1.DefaultClientCAKey {
		t.Errorf("spec.tls.clientCASecret.key defaulted to %q, want %q", got, ferrofedv1alpha1.DefaultClientCAKey)
	}
	// A key that is no Secret key name is refused by the CRD, naming the field.
	bad := newGateway("cel-only", "mtls-bad-key", tlsOf(&ferrofedv1alpha1.SecretKeyRef{Name: "ca", Key: "../ca"}, "id"))
	if v := celVerdict(ctx, t, bad); v.accepted || !strings.Contains(v.reason, "spec.tls.clientCASecret.key") {
		t.Errorf("a clientCASecret.key of \"../ca\": %s %s, want refused naming spec.tls.clientCASecret.key", word(v.accepted), v.reason)
	}
}

// The webhook server offers HTTP/1.1 alone (controllers.ManagerOptions): a client
// that asks for h2 first gets http/1.1, so no HTTP/2 stream reset can reach it.
func TestTheWebhookServerOffersHTTP1Only(t *testing.T) {
	u, err := url.Parse(webhookURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg := webhookClient.Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.NextProtos = []string{"h2", "http/1.1"}
	conn, err := tls.Dial("tcp", u.Host, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
		t.Errorf("a client offering h2 and http/1.1 negotiated %q, want http/1.1", got)
	}
}

// Every admission review the apiserver sends is timed in
// ferrofed_operator_webhook_duration_seconds, on the operator's metrics registry.
func TestTheWebhookIsTimed(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	before := webhookReviews(t)
	c, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := c.Create(ctx, newGateway("webhook", fmt.Sprintf("timed-%d", i), nil), client.DryRunAll); err != nil {
			t.Fatal(err)
		}
	}
	if got := webhookReviews(t) - before; got < 3 {
		t.Errorf("ferrofed_operator_webhook_duration_seconds counted %d reviews for 3 dry-run creates", got)
	}
}

func webhookReviews(t *testing.T) uint64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "ferrofed_operator_webhook_duration_seconds" {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatal("ferrofed_operator_webhook_duration_seconds is not registered")
	return 0
}
