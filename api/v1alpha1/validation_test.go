package v1alpha1

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ferrofed/ferrofed/gateway/config"
)

func d(s string) *metav1.Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: v}
}

func TestRenderConfigIsDeterministicAndMergesTheRest(t *testing.T) {
	spec := &GatewaySpec{Image: "x", Port: 9090, BasePath: "/fed"}
	user := []byte("[health]\ncheck_timeout_ms = 250\n[server]\nread_header_timeout_ms = 3000\n")
	first, err := RenderAndCheck(spec, spec.Plan(), user)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, _ := config.Render(spec.Owned(spec.Plan()), user)
		if !bytes.Equal(first, again) {
			t.Fatalf("rendering twice gave two documents:\n%s\n---\n%s", first, again)
		}
	}
	for _, want := range []string{
		"listen = ':9090'", "base_path = '/fed'", "drain_delay_ms = 10000", "request_timeout_ms = 30000",
		"shutdown_timeout_ms = 30000", "bindings_drain_timeout_ms = 5000", "termination_grace_period_seconds = 50",
		"read_header_timeout_ms = 3000", "check_timeout_ms = 250",
	} {
		if !strings.Contains(string(first), want) {
			t.Errorf("rendered ferrofed.toml lacks %q:\n%s", want, first)
		}
	}
}

func TestRenderConfigRefusesKeysTheSpecOwns(t *testing.T) {
	cases := map[string]string{
		"[server]\nlisten = \"0.0.0.0:1\"\n":               "server.listen: is set by the Gateway from spec.port",
		"[server]\nshutdown_timeout_ms = 1\n":              "server.shutdown_timeout_ms: is set by the Gateway from spec.lifecycle.shutdownTimeout",
		"[server]\ntermination_grace_period_seconds = 9\n": "spec.lifecycle.terminationGracePeriodSeconds",
		"[server.tls]\nkey_file = \"k\"\n":                 "server.tls: is set by the Gateway from spec.tls.secretName",
	}
	for user, want := range cases {
		spec := &GatewaySpec{}
		_, err := config.Render(spec.Owned(spec.Plan()), []byte(user))
		if err == nil || !strings.Contains(ConfigMessage(err), want) {
			t.Errorf("render %q: %v, want a problem containing %q", user, err, want)
		}
	}
}

func TestValidateNamesFieldPaths(t *testing.T) {
	cases := []struct {
		name      string
		lifecycle Lifecycle
		field     string
	}{
		{"a short shutdownTimeout is reported on it", Lifecycle{ShutdownTimeout: d("1s")}, "spec.lifecycle.shutdownTimeout"},
		{"an explicit grace period inside the drain is reported on it", Lifecycle{TerminationGracePeriodSeconds: ptr.To[int64](45)}, "spec.lifecycle.terminationGracePeriodSeconds"},
		{"a derived grace period equal to the drain is reported on the headroom", Lifecycle{TerminationHeadroom: d("0s")}, "spec.lifecycle.terminationHeadroom"},
		{"a sub-millisecond budget is reported on it", Lifecycle{BindingsDrainTimeout: d("1500us")}, "spec.lifecycle.bindingsDrainTimeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &Gateway{Spec: GatewaySpec{Image: "x", Lifecycle: tc.lifecycle}}
			errs, _ := g.Validate()
			if len(errs) != 1 || errs[0].Field != tc.field {
				t.Errorf("errors = %v, want one on %s", errs, tc.field)
			}
		})
	}
}

func TestEveryKeyTheSpecOwnsIsAKeyOfTheSchema(t *testing.T) {
	// A key named here but absent from config.Server would reserve nothing.
	spec := &GatewaySpec{TLS: &TLS{SecretName: "s"}, Lifecycle: Lifecycle{TerminationGracePeriodSeconds: ptr.To[int64](90)}}
	rendered, err := config.Render(spec.Owned(spec.Plan()), nil)
	if err != nil {
		t.Fatal(err)
	}
	for key := range ownedFields {
		leaf := key[strings.LastIndex(key, ".")+1:]
		if !strings.Contains(string(rendered), leaf) {
			t.Errorf("%s is reserved for the spec but the spec never renders it:\n%s", key, rendered)
		}
	}
}

func TestGracePeriodFollowsTheProbes(t *testing.T) {
	s := &GatewaySpec{Probes: Probes{Readiness: ReadinessProbe{PeriodSeconds: ptr.To[int32](10), FailureThreshold: ptr.To[int32](3)}}}
	plan := s.Plan()
	grace, b := plan.GracePeriodSeconds, Breakdown(plan)
	if grace != 70 || b.DrainDelay != "30s" || !b.DrainDelayDerived || b.Explicit {
		t.Errorf("grace = %d %+v, want 70 = 30s derived delay + 30s + 5s + 5s", grace, b)
	}
}

func TestThePageTokenKeyIsTheOperatorsSecret(t *testing.T) {
	spec := &GatewaySpec{}
	rendered, err := RenderAndCheck(spec, spec.Plan(), []byte("[federation]\nstrict_fhir = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"page_token_key_file = '" + PageTokenKeyFile + "'", "strict_fhir = true"} {
		if !strings.Contains(string(rendered), want) {
			t.Errorf("rendered file lacks %q:\n%s", want, rendered)
		}
	}
	_, err = config.Render(spec.Owned(spec.Plan()), []byte("[federation]\npage_token_key_file = '/x'\n"))
	if err == nil || !strings.Contains(ConfigMessage(err), "federation.page_token_key_file: is set by the operator") {
		t.Fatalf("a user's page_token_key_file was not refused: %v", err)
	}
}

func TestARecentDrainNearItsGracePeriodWarns(t *testing.T) {
	g := &Gateway{Spec: GatewaySpec{Image: "x"}}
	g.Status.Drains = []DrainRecord{{Pod: "a", DurationMilliseconds: 20000, GracePeriodSeconds: 26}}
	if _, warnings := g.Validate(); len(warnings) != 0 {
		t.Fatalf("a drain at 77%% of its grace period warned: %q", warnings)
	}
	g.Status.Drains = append(g.Status.Drains, DrainRecord{Pod: "b", DurationMilliseconds: 22000, GracePeriodSeconds: 26})
	_, warnings := g.Validate()
	if len(warnings) != 1 || !strings.Contains(warnings[0], "pod b took 22000ms, 84% of its 26s grace period") {
		t.Fatalf("warnings = %q, want one naming pod b at 84%%", warnings)
	}
}

func TestMutualTLSRendersTheMountedFilesAndNeedsBothSecrets(t *testing.T) {
	cases := []struct {
		name     string
		tls      *TLS
		rendered []string // keys of server.tls with their values
		refusal  string
	}{
		{"TLS alone renders the key pair", &TLS{SecretName: "s"},
			[]string{"certificate_file = '" + TLSCertFile + "'", "key_file = '" + TLSKeyFile + "'"}, ""},
		{"a client CA and an identity render the CA and the identity's two files", &TLS{SecretName: "s", ClientCASecret: &SecretKeyRef{Name: "ca", Key: "bundle.pem"}, HealthcheckIdentitySecret: ptr.To("id")},
			[]string{"client_ca_file = '" + ClientCAFile + "'", "healthcheck_identity_file = '" + HealthcheckIdentityCertFile + "'", "healthcheck_identity_key_file = '" + HealthcheckIdentityKeyFile + "'"}, ""},
		{"a client CA alone is refused", &TLS{SecretName: "s", ClientCASecret: &SecretKeyRef{Name: "ca"}}, nil, clientCAWithoutIdentityMessage},
		{"an identity alone is refused", &TLS{SecretName: "s", HealthcheckIdentitySecret: ptr.To("id")}, nil, identityWithoutClientCAMessage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &Gateway{Spec: GatewaySpec{Image: "x", TLS: tc.tls}}
			errs, _ := g.Validate()
			if tc.refusal != "" {
				if len(errs) != 1 || errs[0].Field != "spec.tls.healthcheckIdentitySecret" || errs[0].Detail != tc.refusal {
					t.Fatalf("errors = %v, want one on spec.tls.healthcheckIdentitySecret: %s", errs, tc.refusal)
				}
				for _, f := range []string{"spec.tls.clientCASecret", "spec.tls.healthcheckIdentitySecret"} {
					if !strings.Contains(errs[0].Detail, f) {
						t.Errorf("the refusal does not name %s", f)
					}
				}
				return
			}
			if len(errs) != 0 {
				t.Fatalf("errors = %v", errs)
			}
			rendered, err := RenderAndCheck(&g.Spec, g.Spec.Plan(), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.rendered {
				if !strings.Contains(string(rendered), want) {
					t.Errorf("rendered file lacks %q:\n%s", want, rendered)
				}
			}
		})
	}
}
