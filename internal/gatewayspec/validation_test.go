package gatewayspec

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
)

// withIssuer is the inline configuration toml with the issuer every test Gateway
// trusts (issuer.RemoteTable): the data plane asks for a bearer token by default, and
// a configuration with no issuer to verify it is refused (TestTheDataPlaneNeedsAnIssuer).
func withIssuer(toml string) *ferrofedv1alpha1.GatewayConfig {
	return &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To(issuer.WithRemote(toml))}
}

func d(s string) *metav1.Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: v}
}

func TestRenderConfigIsDeterministicAndMergesTheRest(t *testing.T) {
	spec := &ferrofedv1alpha1.GatewaySpec{Image: "x", Port: 9090, BasePath: "/fed"}
	user := []byte(issuer.WithRemote("[health]\ncheck_timeout_ms = 250\n[server]\nread_header_timeout_ms = 3000\n"))
	first, err := RenderAndCheck(spec, Plan(spec), user)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, _ := config.Render(Owned(spec, Plan(spec)), user)
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
		"[server.tls]\nkey_file = \"k\"\n":                 "server.tls: is set by the Gateway from spec.tls (secretName, and clientCASecret with healthcheckIdentitySecret for client certificates)",
	}
	for user, want := range cases {
		spec := &ferrofedv1alpha1.GatewaySpec{}
		_, err := config.Render(Owned(spec, Plan(spec)), []byte(user))
		if err == nil || !strings.Contains(ConfigMessage(err), want) {
			t.Errorf("render %q: %v, want a problem containing %q", user, err, want)
		}
	}
}

func TestValidateNamesFieldPaths(t *testing.T) {
	cases := []struct {
		name      string
		lifecycle ferrofedv1alpha1.Lifecycle
		field     string
	}{
		{"a short shutdownTimeout is reported on it", ferrofedv1alpha1.Lifecycle{ShutdownTimeout: d("1s")}, "spec.lifecycle.shutdownTimeout"},
		{"an explicit grace period inside the drain is reported on it", ferrofedv1alpha1.Lifecycle{TerminationGracePeriodSeconds: ptr.To[int64](45)}, "spec.lifecycle.terminationGracePeriodSeconds"},
		{"a derived grace period equal to the drain is reported on the headroom", ferrofedv1alpha1.Lifecycle{TerminationHeadroom: d("0s")}, "spec.lifecycle.terminationHeadroom"},
		{"a sub-millisecond budget is reported on it", ferrofedv1alpha1.Lifecycle{BindingsDrainTimeout: d("1500us")}, "spec.lifecycle.bindingsDrainTimeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "x", Lifecycle: tc.lifecycle, Config: withIssuer("")}}
			errs, _ := Validate(g)
			if len(errs) != 1 || errs[0].Field != tc.field {
				t.Errorf("errors = %v, want one on %s", errs, tc.field)
			}
		})
	}
}

func TestEveryKeyTheSpecOwnsIsAKeyOfTheSchema(t *testing.T) {
	// A key named here but absent from config.Server would reserve nothing.
	spec := &ferrofedv1alpha1.GatewaySpec{TLS: &ferrofedv1alpha1.TLS{SecretName: "s"}, Lifecycle: ferrofedv1alpha1.Lifecycle{TerminationGracePeriodSeconds: ptr.To[int64](90)}}
	owned := Owned(spec, Plan(spec))
	owned.Audit = AuditOwned(2) // what a configuration with [audit.feed] gets
	rendered, err := config.Render(owned, nil)
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
	s := &ferrofedv1alpha1.GatewaySpec{Probes: ferrofedv1alpha1.Probes{Readiness: ferrofedv1alpha1.ReadinessProbe{PeriodSeconds: ptr.To[int32](10), FailureThreshold: ptr.To[int32](3)}}}
	plan := Plan(s)
	grace, b := plan.GracePeriodSeconds, Breakdown(plan)
	if grace != 70 || b.DrainDelay != "30s" || !b.DrainDelayDerived || b.Explicit {
		t.Errorf("grace = %d %+v, want 70 = 30s derived delay + 30s + 5s + 5s", grace, b)
	}
}

func TestThePageTokenKeyIsTheOperatorsSecret(t *testing.T) {
	spec := &ferrofedv1alpha1.GatewaySpec{}
	rendered, err := RenderAndCheck(spec, Plan(spec), []byte(issuer.WithRemote("[federation]\nstrict_fhir = true\n")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"page_token_key_file = '" + PageTokenKeyFile + "'", "strict_fhir = true"} {
		if !strings.Contains(string(rendered), want) {
			t.Errorf("rendered file lacks %q:\n%s", want, rendered)
		}
	}
	_, err = config.Render(Owned(spec, Plan(spec)), []byte("[federation]\npage_token_key_file = '/x'\n"))
	if err == nil || !strings.Contains(ConfigMessage(err), "federation.page_token_key_file: is set by the operator") {
		t.Fatalf("a user's page_token_key_file was not refused: %v", err)
	}
}

func TestARecentDrainNearItsGracePeriodWarns(t *testing.T) {
	g := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "x", Config: withIssuer("")}}
	g.Status.Drains = []ferrofedv1alpha1.DrainRecord{{Pod: "a", DurationMilliseconds: 20000, GracePeriodSeconds: 26}}
	if _, warnings := Validate(g); len(warnings) != 0 {
		t.Fatalf("a drain at 77%% of its grace period warned: %q", warnings)
	}
	g.Status.Drains = append(g.Status.Drains, ferrofedv1alpha1.DrainRecord{Pod: "b", DurationMilliseconds: 22000, GracePeriodSeconds: 26})
	_, warnings := Validate(g)
	if len(warnings) != 1 || !strings.Contains(warnings[0], "pod b took 22000ms, 84% of its 26s grace period") {
		t.Fatalf("warnings = %q, want one naming pod b at 84%%", warnings)
	}
}

func TestMutualTLSRendersTheMountedFilesAndNeedsBothSecrets(t *testing.T) {
	cases := []struct {
		name     string
		tls      *ferrofedv1alpha1.TLS
		rendered []string // keys of server.tls with their values
		refusal  string
	}{
		{"TLS alone renders the key pair", &ferrofedv1alpha1.TLS{SecretName: "s"},
			[]string{"certificate_file = '" + TLSCertFile + "'", "key_file = '" + TLSKeyFile + "'"}, ""},
		{"a client CA and an identity render the CA and the identity's two files", &ferrofedv1alpha1.TLS{SecretName: "s", ClientCASecret: &ferrofedv1alpha1.SecretKeyRef{Name: "ca", Key: "bundle.pem"}, HealthcheckIdentitySecret: ptr.To("id")},
			[]string{"client_ca_file = '" + ClientCAFile + "'", "healthcheck_identity_file = '" + HealthcheckIdentityCertFile + "'", "healthcheck_identity_key_file = '" + HealthcheckIdentityKeyFile + "'"}, ""},
		{"a client CA alone is refused", &ferrofedv1alpha1.TLS{SecretName: "s", ClientCASecret: &ferrofedv1alpha1.SecretKeyRef{Name: "ca"}}, nil, clientCAWithoutIdentityMessage},
		{"an identity alone is refused", &ferrofedv1alpha1.TLS{SecretName: "s", HealthcheckIdentitySecret: ptr.To("id")}, nil, identityWithoutClientCAMessage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "x", TLS: tc.tls, Config: withIssuer("")}}
			errs, _ := Validate(g)
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
			rendered, err := RenderAndCheck(&g.Spec, Plan(&g.Spec), []byte(*g.Spec.Config.Inline))
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

const repositoryAudit = "[audit]\ndestination = 'repository'\nurl = 'https://a.example/fhir'\n"

func TestSpoolsMustFitTheSizeLimit(t *testing.T) {
	tests := []struct {
		name      string
		inline    string
		sizeLimit string
		refused   bool
	}{
		{"the default 256Mi spool fits the default 1Gi", repositoryAudit, "", false},
		{"two default spools fit 512Mi exactly", repositoryAudit + "[audit.feed]\nurl = 'https://f.example/fhir'\n", "512Mi", false},
		{"two default spools do not fit 511Mi", repositoryAudit + "[audit.feed]\nurl = 'https://f.example/fhir'\n", "511Mi", true},
		{"a 2GiB max_spool_bytes does not fit 1Gi", repositoryAudit + "max_spool_bytes = 2147483648\n", "", true},
		{"destination log has no spool to fit", "[audit]\ndestination = 'log'\n", "4Mi", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "i", Config: withIssuer(tt.inline)}}
			if tt.sizeLimit != "" {
				g.Spec.Audit = &ferrofedv1alpha1.Audit{Spool: &ferrofedv1alpha1.AuditSpool{SizeLimit: ptr.To(resource.MustParse(tt.sizeLimit))}}
			}
			errs, _ := Validate(g)
			msg := errs.ToAggregate()
			if tt.refused != (msg != nil) {
				t.Fatalf("refused = %v, want %v", msg, tt.refused)
			}
			if tt.refused && (!strings.Contains(msg.Error(), "audit.max_spool_bytes") || !strings.Contains(msg.Error(), "spec.audit.spool.sizeLimit")) {
				t.Errorf("refusal %q names neither audit.max_spool_bytes nor spec.audit.spool.sizeLimit", msg)
			}
		})
	}
}

func TestAuditWarnings(t *testing.T) {
	tests := []struct {
		name      string
		inline    string
		drain     string
		wantShort bool
		wantLoss  bool
	}{
		{"no [audit]: no warning", "", "500ms", false, false},
		{"repository with the default 5s drain: the emptyDir warning", repositoryAudit, "", false, true},
		{"repository with a 999ms drain: both", repositoryAudit, "999ms", true, true},
		{"repository with a 1s drain: only the emptyDir warning", repositoryAudit, "1s", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "i", Config: withIssuer(tt.inline)}}
			if tt.drain != "" {
				d, _ := time.ParseDuration(tt.drain)
				g.Spec.Lifecycle.BindingsDrainTimeout = &metav1.Duration{Duration: d}
			}
			errs, warnings := Validate(g)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			all := strings.Join(warnings, "\n")
			if got := strings.Contains(all, "less than 1s for the audit spool's final sync"); got != tt.wantShort {
				t.Errorf("short-drain warning %v, want %v: %q", got, tt.wantShort, all)
			}
			if got := strings.Contains(all, "ferrofed_audit_undelivered_at_exit"); got != tt.wantLoss {
				t.Errorf("emptyDir warning %v, want %v: %q", got, tt.wantLoss, all)
			}
		})
	}
}

func TestSecretMountsAndSizeLimitGoTwins(t *testing.T) {
	tests := []struct {
		name   string
		mounts []string
		limit  string
		want   string // the field refused, "" for none
	}{
		{"paths under /etc/ferrofed/secrets/", []string{"/etc/ferrofed/secrets/a", "/etc/ferrofed/secrets/b/c"}, "", ""},
		{"the directory itself", []string{"/etc/ferrofed/secrets/"}, "", "spec.secretMounts[0].mountPath"},
		{"outside", []string{"/etc/ferrofed/secrets/a", "/etc/passwd"}, "", "spec.secretMounts[1].mountPath"},
		{"a .. segment", []string{"/etc/ferrofed/secrets/../tls"}, "", "spec.secretMounts[0].mountPath"},
		{"a trailing /", []string{"/etc/ferrofed/secrets/a/"}, "", "spec.secretMounts[0].mountPath"},
		{"a duplicate", []string{"/etc/ferrofed/secrets/a", "/etc/ferrofed/secrets/a"}, "", "spec.secretMounts"},
		{"a 2Mi sizeLimit", nil, "2Mi", "spec.audit.spool.sizeLimit"},
		{"a 129Gi sizeLimit", nil, "129Gi", "spec.audit.spool.sizeLimit"},
		{"a 4Mi sizeLimit", nil, "4Mi", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "i", Config: withIssuer("")}}
			for i, p := range tt.mounts {
				g.Spec.SecretMounts = append(g.Spec.SecretMounts, ferrofedv1alpha1.SecretMount{SecretName: fmt.Sprint("s", i), MountPath: p})
			}
			if tt.limit != "" {
				g.Spec.Audit = &ferrofedv1alpha1.Audit{Spool: &ferrofedv1alpha1.AuditSpool{SizeLimit: ptr.To(resource.MustParse(tt.limit))}}
			}
			errs, _ := Validate(g)
			var got string
			if len(errs) > 0 {
				got = errs[0].Field
			}
			if got != tt.want || len(errs) > 1 {
				t.Errorf("refused %v, want field %q", errs, tt.want)
			}
		})
	}
}

// TestTheDataPlaneNeedsAnIssuer: a Gateway's data plane asks for a bearer token unless
// its configuration says data_plane = "open" (docs/operator.md, "The data plane's
// issuer"). With no issuer to verify the token the Gateway is refused on
// spec.config.inline, naming auth.data_plane and auth.issuers; an open data plane is
// admitted with the gateway's own warning; an issuer whose key set is a file of a
// spec.secretMounts Secret is admitted with none.
func TestTheDataPlaneNeedsAnIssuer(t *testing.T) {
	jwksFile := &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To("[[auth.issuers]]\nissuer = 'https://login.clinic.example.org'\n" +
		"audience = 'ferrofed'\noperator_scope = 'ferrofed.operator'\njwks_file = '/etc/ferrofed/secrets/issuers/clinic/jwks.json'\n")}
	tests := []struct {
		name    string
		config  *ferrofedv1alpha1.GatewayConfig
		refusal []string // pieces of the one refusal; none when admitted
		warning string   // a piece of a warning; "" for no warning
	}{
		{"no configuration at all", nil, []string{"auth.data_plane", `is "required" (the default)`, "auth.issuers"}, ""},
		{"a configuration without an issuer", &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To("[health]\ncheck_timeout_ms = 250\n")},
			[]string{"auth.data_plane", "auth.issuers"}, ""},
		{"required written out, without an issuer", &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To("[auth]\ndata_plane = 'required'\n")},
			[]string{"auth.data_plane", "auth.issuers"}, ""},
		{"an issuer by its jwks_url", withIssuer(""), nil, ""},
		{"an issuer whose jwks_file is a secretMount's", jwksFile, nil, ""},
		{"an open data plane, written out", &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To("[auth]\ndata_plane = 'open'\n")}, nil,
			`spec.config: auth.data_plane: is "open": anyone who can reach the gateway`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "i", Config: tt.config,
				SecretMounts: []ferrofedv1alpha1.SecretMount{{SecretName: "clinic-jwks", MountPath: "/etc/ferrofed/secrets/issuers/clinic"}}}}
			errs, warnings := Validate(g)
			switch {
			case tt.refusal == nil && len(errs) > 0:
				t.Fatalf("refused: %v", errs)
			case tt.refusal != nil && (len(errs) != 1 || errs[0].Field != "spec.config.inline" || errs[0].BadValue != "auth.data_plane"):
				t.Fatalf("errors = %v, want one on spec.config.inline with the key auth.data_plane", errs)
			}
			for _, want := range tt.refusal {
				if !strings.Contains(errs[0].Detail, want) {
					t.Errorf("the refusal %q does not say %q", errs[0].Detail, want)
				}
			}
			all := strings.Join(warnings, "\n")
			if (tt.warning == "") != (len(warnings) == 0) || !strings.Contains(all, tt.warning) {
				t.Errorf("warnings = %q, want %q", warnings, tt.warning)
			}
		})
	}
}

// claimTemplate is a persistent spool of storage (none when empty) and access modes.
func claimTemplate(storage string, modes ...corev1.PersistentVolumeAccessMode) *ferrofedv1alpha1.Audit {
	t := &ferrofedv1alpha1.SpoolVolumeClaimTemplate{Spec: &corev1.PersistentVolumeClaimSpec{AccessModes: modes}}
	if storage != "" {
		t.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(storage)}
	}
	return &ferrofedv1alpha1.Audit{Spool: &ferrofedv1alpha1.AuditSpool{VolumeClaimTemplate: t}}
}

// TestSpoolClaimGoTwins: the webhook's twins of the CEL rules on the claim template,
// and its storage against audit.max_spool_bytes × spools and the file system's headroom.
func TestSpoolClaimGoTwins(t *testing.T) {
	feed := repositoryAudit + "max_spool_bytes = 134217728\n[audit.feed]\nurl = 'https://f.example/fhir'\n"
	tests := []struct {
		name   string
		inline string
		audit  *ferrofedv1alpha1.Audit
		want   []string // every piece the refusal names; none: admitted
	}{
		{"1Gi ReadWriteOnce", repositoryAudit, claimTemplate("1Gi", corev1.ReadWriteOnce), nil},
		{"4Mi ReadWriteOncePod", "", claimTemplate("4Mi", corev1.ReadWriteOncePod), nil},
		{"with sizeLimit too", repositoryAudit, func() *ferrofedv1alpha1.Audit {
			a := claimTemplate("1Gi", corev1.ReadWriteOnce)
			a.Spool.SizeLimit = ptr.To(resource.MustParse("1Gi"))
			return a
		}(), []string{"spec.audit.spool", "mutually exclusive"}},
		{"ReadWriteMany", repositoryAudit, claimTemplate("1Gi", corev1.ReadWriteMany), []string{"spec.audit.spool.volumeClaimTemplate.spec.accessModes"}},
		{"no access mode", repositoryAudit, claimTemplate("1Gi"), []string{"spec.audit.spool.volumeClaimTemplate.spec.accessModes"}},
		{"no spec", repositoryAudit, &ferrofedv1alpha1.Audit{Spool: &ferrofedv1alpha1.AuditSpool{VolumeClaimTemplate: &ferrofedv1alpha1.SpoolVolumeClaimTemplate{}}},
			[]string{"spec.audit.spool.volumeClaimTemplate.spec.accessModes", "spec.audit.spool.volumeClaimTemplate.spec.resources"}},
		{"no storage", repositoryAudit, claimTemplate("", corev1.ReadWriteOnce), []string{"requests.storage is required, from 4Mi to 128Gi"}},
		{"3Mi", repositoryAudit, claimTemplate("3Mi", corev1.ReadWriteOnce), []string{"requests.storage is required, from 4Mi to 128Gi"}},
		{"129Gi", repositoryAudit, claimTemplate("129Gi", corev1.ReadWriteOnce), []string{"requests.storage is required, from 4Mi to 128Gi"}},
		{"two 128Mi spools and their headroom fit 352Mi", feed, claimTemplate("352Mi", corev1.ReadWriteOnce), nil},
		{"two 128Mi spools and their headroom do not fit a byte less", feed, claimTemplate("369098751", corev1.ReadWriteOnce),
			[]string{"audit.max_spool_bytes (134217728) × 2 spool(s) is 268435456 bytes; with 100663296 bytes for the claim's own file system",
				"the claim needs 369098752 bytes, more than spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage (369098751, 369098751 bytes)",
				"raise spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage to at least 352Mi, or lower audit.max_spool_bytes to at most 134217727"}},
		{"two 128Mi spools, no headroom in 256Mi", feed, claimTemplate("256Mi", corev1.ReadWriteOnce),
			[]string{"more than spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage (256Mi, 268435456 bytes)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "i", Config: withIssuer(tt.inline), Audit: tt.audit}}
			errs, _ := Validate(g)
			if (len(errs) > 0) != (len(tt.want) > 0) {
				t.Fatalf("errors %v, want refusal naming %q", errs, tt.want)
			}
			msg := fmt.Sprint(errs.ToAggregate())
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("refusal %q does not name %q", msg, w)
				}
			}
		})
	}
}

// TestPersistentSpoolWarnings: no emptyDir loss warning with a claim; the final sync
// warned under 2s; one replica warned for its rollouts; a claim with no spool to keep
// warned (not for a configMapRef, which admission does not read).
func TestPersistentSpoolWarnings(t *testing.T) {
	tests := []struct {
		name     string
		inline   *string
		replicas int32
		drain    string
		want     []string
		notWant  []string
	}{
		{"two replicas, the default 5s", ptr.To(repositoryAudit), 2, "", nil, []string{"emptyDir", "less than", "spec.replicas is 1", "no [audit]"}},
		{"a 1999ms drain", ptr.To(repositoryAudit), 2, "1999ms", []string{"leaves less than 2s for the audit spool's final sync"}, []string{"emptyDir"}},
		{"a 2s drain", ptr.To(repositoryAudit), 2, "2s", nil, []string{"less than"}},
		{"one replica", ptr.To(repositoryAudit), 1, "", []string{"spec.replicas is 1 with a persistent spool"}, nil},
		{"no [audit]", ptr.To(""), 2, "", []string{"no [audit] table with destination \"repository\""}, nil},
		{"a configMapRef", nil, 2, "", nil, []string{"no [audit]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "i", Replicas: ptr.To(tt.replicas), Audit: claimTemplate("1Gi", corev1.ReadWriteOnce)}}
			if tt.inline != nil {
				g.Spec.Config = withIssuer(*tt.inline)
			} else {
				g.Spec.Config = &ferrofedv1alpha1.GatewayConfig{ConfigMapRef: &ferrofedv1alpha1.ConfigMapKeyRef{Name: "cm"}}
			}
			if tt.drain != "" {
				g.Spec.Lifecycle.BindingsDrainTimeout = d(tt.drain)
			}
			_, warnings := Validate(g)
			all := strings.Join(warnings, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("warnings %q, want %q", all, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(all, w) {
					t.Errorf("warnings %q, want none with %q", all, w)
				}
			}
		})
	}
}

// TestReferencedConfigWarnings: a configMapRef's content, read, draws the warnings its
// inline twin draws (the same text), never a refusal; one that cannot be read draws one
// warning saying why, and one that does not pass config check one naming its problem;
// nothing is read from a Gateway refused for its spec.
func TestReferencedConfigWarnings(t *testing.T) {
	const member = "[[registry.members]]\nid = 'a'\nquery_endpoint = 'https://a.example/fhir'\n"
	emptyDir := func(*ferrofedv1alpha1.Gateway) {}
	claim := func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Audit = claimTemplate("1Gi", corev1.ReadWriteOnce)
		g.Spec.Lifecycle.BindingsDrainTimeout = d("1500ms")
	}
	tests := []struct {
		name    string
		toml    string // the ConfigMap's content; "" with readErr
		readErr error
		spec    func(*ferrofedv1alpha1.Gateway)
		want    []string
		notWant []string
	}{
		{"an [audit] repository with an emptyDir spool", issuer.WithRemote(repositoryAudit), nil, emptyDir,
			[]string{"the audit spool is an emptyDir (spec.audit.spool, 1Gi)"}, []string{"could not be read", "config check"}},
		{"a persistent spool and a 1500ms bindingsDrainTimeout", issuer.WithRemote(repositoryAudit), nil, claim,
			[]string{"spec.lifecycle.bindingsDrainTimeout (1.5s) leaves less than 2s for the audit spool's final sync"}, []string{"emptyDir"}},
		{"a persistent spool and no [audit] repository", issuer.WithRemote(member), nil, claim,
			[]string{"no [audit] table with destination \"repository\""}, nil},
		{"an open data plane", member + "[auth]\ndata_plane = 'open'\n", nil, emptyDir,
			[]string{`spec.config: auth.data_plane: is "open"`}, nil},
		{"a missing ConfigMap", "", errors.New("ConfigMap cm does not exist in namespace ns"), emptyDir,
			[]string{`spec.config.configMapRef (ConfigMap cm, key "ferrofed.toml") could not be read for warnings: ConfigMap cm does not exist in namespace ns`}, []string{"emptyDir"}},
		{"a key the spec owns", issuer.WithRemote("[server]\nlisten = '0.0.0.0:9000'\n"), nil, emptyDir,
			[]string{"does not pass config check", "server.listen: is set by the Gateway from spec.port"}, nil},
		{"no issuer", member, nil, emptyDir, []string{"does not pass config check", "auth.data_plane"}, nil},
		{"twelve unknown keys", issuer.WithRemote("[health]\n" + twelveUnknown()), nil, emptyDir,
			[]string{"does not pass config check", "health.k7: unknown key", "and 2 more problem(s), in the ConfigValid condition"}, []string{"health.k8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "i", Replicas: ptr.To(int32(2)),
				Config: &ferrofedv1alpha1.GatewayConfig{ConfigMapRef: &ferrofedv1alpha1.ConfigMapKeyRef{Name: "cm"}}}}
			tt.spec(g)
			var read []string
			errs, warnings := ValidateReferenced(g, func(name, key string) ([]byte, error) {
				read = append(read, name+"/"+key)
				return []byte(tt.toml), tt.readErr
			})
			if len(errs) > 0 {
				t.Fatalf("refused: %v", errs.ToAggregate())
			}
			if len(read) != 1 || read[0] != "cm/ferrofed.toml" {
				t.Errorf("read %q, want cm/ferrofed.toml once", read)
			}
			all := strings.Join(warnings, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("warnings %q, want %q", all, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(all, w) {
					t.Errorf("warnings %q, want none with %q", all, w)
				}
			}
			if tt.readErr == nil {
				// The same warnings as the same configuration inline.
				inline := g.DeepCopy()
				inline.Spec.Config = &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To(tt.toml)}
				if _, iw := Validate(inline); !strings.Contains(all, strings.Join(iw, "\n")) {
					t.Errorf("warnings %q, want the inline twin's %q", all, iw)
				}
			}
		})
	}
	t.Run("not read when the spec is refused", func(t *testing.T) {
		g := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "i",
			Config: &ferrofedv1alpha1.GatewayConfig{ConfigMapRef: &ferrofedv1alpha1.ConfigMapKeyRef{Name: "cm", Key: "k"}}}}
		g.Spec.Lifecycle.RequestTimeout = d("1500us")
		errs, _ := ValidateReferenced(g, func(string, string) ([]byte, error) { t.Error("read"); return nil, nil })
		if len(errs) == 0 {
			t.Error("a sub-millisecond requestTimeout admitted")
		}
	})
	t.Run("nothing read, nothing said of the content", func(t *testing.T) {
		g := &ferrofedv1alpha1.Gateway{Spec: ferrofedv1alpha1.GatewaySpec{Image: "i",
			Config: &ferrofedv1alpha1.GatewayConfig{ConfigMapRef: &ferrofedv1alpha1.ConfigMapKeyRef{Name: "cm"}}}}
		if errs, warnings := Validate(g); len(errs) > 0 || len(warnings) > 0 {
			t.Errorf("Validate of a configMapRef: %v, warnings %q; want neither", errs, warnings)
		}
	})
}

func twelveUnknown() string {
	var b strings.Builder
	for i := range 12 {
		fmt.Fprintf(&b, "k%d = 1\n", i)
	}
	return b.String()
}
