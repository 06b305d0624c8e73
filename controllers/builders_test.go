package controllers

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func gateway(mutate func(*ferrofedv1alpha1.Gateway)) *ferrofedv1alpha1.Gateway {
	gw := &ferrofedv1alpha1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: "clinical", UID: "0d6c7c2e-4f39-4a5e-9a57-3f1d2b8c9e10", Generation: 1},
		Spec:       ferrofedv1alpha1.GatewaySpec{Image: "ghcr.io/ferrofed/ferrofed:v0.1.0", Config: configWithIssuer("")},
	}
	if mutate != nil {
		mutate(gw)
	}
	return gw
}

// configWithIssuer is the inline configuration toml with the issuer every test
// Gateway trusts (issuer.RemoteTable): the data plane asks for a bearer token by
// default, and a configuration with no issuer to verify it is refused
// (docs/operator.md, "The data plane's issuer").
func configWithIssuer(toml string) *ferrofedv1alpha1.GatewayConfig {
	return &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To(issuer.WithRemote(toml))}
}

func dur(s string) *metav1.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: d}
}

// goldenCases are the Gateways whose derived objects are kept in testdata/<name>.yaml.
var goldenCases = map[string]func(*ferrofedv1alpha1.Gateway){
	"defaults": nil,
	"base-path-and-tls": func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.BasePath = "/federation"
		g.Spec.Port = 8443
		g.Spec.TLS = &ferrofedv1alpha1.TLS{SecretName: "edge-tls"}
	},
	"mutual-tls-exec-probes": func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Port = 8443
		g.Spec.TLS = &ferrofedv1alpha1.TLS{SecretName: "edge-tls",
			ClientCASecret:            &ferrofedv1alpha1.SecretKeyRef{Name: "clinic-ca", Key: "bundle.pem"},
			HealthcheckIdentitySecret: ptr.To("edge-healthcheck")}
		g.Spec.Probes.Liveness.TimeoutSeconds = ptr.To[int32](3)
	},
	"explicit-budgets": func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Lifecycle = ferrofedv1alpha1.Lifecycle{
			RequestTimeout:       dur("20s"),
			DrainDelay:           dur("7500ms"),
			ShutdownTimeout:      dur("25s"),
			BindingsDrainTimeout: dur("3s"),
			TerminationHeadroom:  dur("2s"),
		}
	},
	"explicit-grace-period": func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Lifecycle.TerminationGracePeriodSeconds = ptr.To[int64](120)
	},
	"replicas-three-with-pdb": func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Replicas = ptr.To[int32](3)
	},
	"probes-and-scheduling": func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Probes.Readiness = ferrofedv1alpha1.ReadinessProbe{PeriodSeconds: ptr.To[int32](3), FailureThreshold: ptr.To[int32](4), TimeoutSeconds: ptr.To[int32](2)}
		g.Spec.Probes.Startup.InitialDelaySeconds = ptr.To[int32](5)
		g.Spec.Probes.Liveness.PeriodSeconds = ptr.To[int32](20)
		g.Spec.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.25"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		}
		g.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
		g.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gateway", Effect: corev1.TaintEffectNoSchedule}}
		g.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
				TopologyKey:   "kubernetes.io/hostname",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelInstance: "edge"}},
			}}},
		}}
	},
	// A persistent spool: a StatefulSet instead of the Deployment, and the hand-over Job
	// of claim 1 (after a scale-down from 3 to 1).
	"persistent-spool-and-handover-job": func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Replicas = ptr.To[int32](3)
		g.Spec.Audit = &ferrofedv1alpha1.Audit{Spool: &ferrofedv1alpha1.AuditSpool{
			VolumeClaimTemplate: &ferrofedv1alpha1.SpoolVolumeClaimTemplate{
				Metadata: &ferrofedv1alpha1.SpoolClaimMetadata{Labels: map[string]string{"team": "audit", LabelInstance: "not-this"},
					Annotations: map[string]string{"backup.example.org/keep": "true"}},
				Spec: &corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod},
					StorageClassName: ptr.To("local-path"),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}},
			}}}
		g.Spec.SecretMounts = []ferrofedv1alpha1.SecretMount{{SecretName: "audit-client", MountPath: "/etc/ferrofed/secrets/audit"}}
		g.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		g.Spec.Config = configWithIssuer(`
[audit]
destination = "repository"
url = "https://audit.example.org/fhir"
client_certificate_file = "/etc/ferrofed/secrets/audit/tls.crt"
client_key_file = "/etc/ferrofed/secrets/audit/tls.key"
`)
	},
	"audit-spool-and-secret-mounts": func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Audit = &ferrofedv1alpha1.Audit{Spool: &ferrofedv1alpha1.AuditSpool{SizeLimit: ptr.To(resource.MustParse("2Gi"))}}
		g.Spec.SecretMounts = []ferrofedv1alpha1.SecretMount{{SecretName: "audit-client", MountPath: "/etc/ferrofed/secrets/audit"}}
		g.Spec.Config = configWithIssuer(`
[audit]
destination = "repository"
url = "https://audit.example.org/fhir"
client_certificate_file = "/etc/ferrofed/secrets/audit/tls.crt"
client_key_file = "/etc/ferrofed/secrets/audit/tls.key"

[audit.feed]
url = "https://feed.example.org/fhir"
`)
	},
	// The data plane's issuer with its key set in a file: a Secret of the JWKS mounted
	// by spec.secretMounts, its path the issuer's jwks_file (docs/operator.md, "The
	// data plane's issuer").
	"issuer-jwks-file-from-a-secret-mount": func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.SecretMounts = []ferrofedv1alpha1.SecretMount{{SecretName: "clinic-jwks", MountPath: "/etc/ferrofed/secrets/issuers/clinic"}}
		g.Spec.Config = &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To(`
[[auth.issuers]]
issuer = "https://login.clinic.example.org"
audience = "ferrofed"
jwks_file = "/etc/ferrofed/secrets/issuers/clinic/jwks.json"
operator_scope = "ferrofed.operator"
`)}
	},
	// spec.tracing with both Secrets: [tracing] rendered, only the named keys mounted.
	"tracing-with-headers-and-ca": func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Tracing = &ferrofedv1alpha1.Tracing{
			Endpoint:      "https://otel-collector.observability.svc:4318",
			SamplingRatio: ptr.To("0.1"),
			Timeout:       dur("2s"),
			HeadersSecret: &ferrofedv1alpha1.SecretKeySelector{Name: "otel-token", Key: "headers"},
			CASecret:      &ferrofedv1alpha1.SecretKeyRef{Name: "otel-ca", Key: "ca.crt"},
			ServiceName:   ptr.To("ferrofed-edge"),
		}
	},
	// spec.autoscaling: a Deployment without replicas, the HorizontalPodAutoscaler
	// with both targets, a PodDisruptionBudget for minReplicas 2.
	"autoscaling-with-pdb": func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Autoscaling = &ferrofedv1alpha1.Autoscaling{MinReplicas: 2, MaxReplicas: 10,
			TargetCPUUtilizationPercentage: ptr.To[int32](70), TargetMemoryUtilizationPercentage: ptr.To[int32](85)}
	},
	// spec.topologySpreadConstraints replace the default spread; the one without a
	// labelSelector gets the pods' selector labels.
	"topology-spread-override": func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
			{MaxSkew: 2, TopologyKey: "topology.kubernetes.io/region", WhenUnsatisfiable: corev1.DoNotSchedule},
			{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}}},
		}
	},
	"inline-config-merged": func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Config = configWithIssuer(`
[server]
read_header_timeout_ms = 3000

[health]
check_timeout_ms = 250

[[registry.members]]
id = "node-a"
query_endpoint = "https://node-a.example.org/fhir"

[[registry.members]]
id = "node-b"
query_endpoint = "https://node-b.example.org/fhir"
`)
	},
}

func TestGoldenBuilders(t *testing.T) {
	for name, mutate := range goldenCases {
		t.Run(name+" derives the objects in testdata/"+name+".yaml", func(t *testing.T) {
			gw := gateway(mutate)
			var user []byte
			if c := gw.Spec.Config; c != nil && c.Inline != nil {
				user = []byte(*c.Inline)
			}
			plan := gatewayspec.Plan(&gw.Spec)
			rendered, err := gatewayspec.RenderAndCheck(&gw.Spec, plan, user)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			var out bytes.Buffer
			objects := []any{ConfigMap(gw, rendered, ""), Deployment(gw, plan, rendered), Service(gw, rendered), PodDisruptionBudget(gw), HorizontalPodAutoscaler(gw)}
			if gw.Spec.PersistentSpool() {
				objects = []any{ConfigMap(gw, rendered, ""), StatefulSet(gw, plan, rendered), Service(gw, rendered), PodDisruptionBudget(gw),
					HandOverJob(gw, rendered, SpoolClaimName(gw.Name, 1), 1)}
			}
			for _, obj := range objects {
				data, err := yaml.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				if string(data) == "null\n" {
					continue // no PodDisruptionBudget with one replica, no autoscaler without spec.autoscaling
				}
				out.WriteString("---\n")
				out.Write(data)
			}
			golden := filepath.Join("testdata", name+".yaml")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read %s (run with -update to create it): %v", golden, err)
			}
			if !bytes.Equal(want, out.Bytes()) {
				t.Errorf("%s differs from the builders' output; rerun with -update and review the diff:\n%s", golden, out.String())
			}
		})
	}
}

// probeCommand is what a rendered probe does, in one line: "GET <scheme> <path>" or
// "exec <argv>".
func probeCommand(p *corev1.Probe) string {
	switch {
	case p.HTTPGet != nil:
		return "GET " + string(p.HTTPGet.Scheme) + " " + p.HTTPGet.Path
	case p.Exec != nil:
		return "exec " + strings.Join(p.Exec.Command, " ")
	}
	return "none"
}

func TestProbesFollowClientCertificates(t *testing.T) {
	mtls := func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.TLS = &ferrofedv1alpha1.TLS{SecretName: "s", ClientCASecret: &ferrofedv1alpha1.SecretKeyRef{Name: "ca"}, HealthcheckIdentitySecret: ptr.To("id")}
	}
	const hc = "exec ferrofed healthcheck --config /etc/ferrofed/ferrofed.toml"
	tests := []struct {
		name                         string
		mutate                       func(*ferrofedv1alpha1.Gateway)
		startup, readiness, liveness string
	}{
		{"without TLS the kubelet GETs over http", nil,
			"GET HTTP /health/readiness", "GET HTTP /health/readiness", "GET HTTP /health"},
		{"with TLS alone the kubelet GETs over https", func(g *ferrofedv1alpha1.Gateway) {
			g.Spec.BasePath = "/gw"
			g.Spec.TLS = &ferrofedv1alpha1.TLS{SecretName: "s"}
		}, "GET HTTPS /gw/health/readiness", "GET HTTPS /gw/health/readiness", "GET HTTPS /gw/health"},
		{"with client certificates required the probes run the healthcheck, each 250ms under its timeoutSeconds", mtls,
			hc + " --timeout 750ms", hc + " --timeout 750ms", hc + " --liveness --timeout 750ms"},
		{"each probe's own timeoutSeconds sets its --timeout", func(g *ferrofedv1alpha1.Gateway) {
			mtls(g)
			g.Spec.Probes.Startup.TimeoutSeconds = ptr.To[int32](2)
			g.Spec.Probes.Readiness.TimeoutSeconds = ptr.To[int32](5)
			g.Spec.Probes.Liveness.TimeoutSeconds = ptr.To[int32](60)
		}, hc + " --timeout 1.75s", hc + " --timeout 4.75s", hc + " --liveness --timeout 59.75s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw := gateway(tt.mutate)
			var dep appsv1.Deployment
			raw, err := json.Marshal(Deployment(gw, gatewayspec.Plan(&gw.Spec), nil))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &dep); err != nil {
				t.Fatal(err)
			}
			c := dep.Spec.Template.Spec.Containers[0]
			for _, p := range []struct {
				name  string
				probe *corev1.Probe
				want  string
			}{{"startup", c.StartupProbe, tt.startup}, {"readiness", c.ReadinessProbe, tt.readiness}, {"liveness", c.LivenessProbe, tt.liveness}} {
				if got := probeCommand(p.probe); got != p.want {
					t.Errorf("%s probe: %q, want %q", p.name, got, p.want)
				}
				// The healthcheck's budget fits the kubelet's, with room to start.
				if p.probe.Exec != nil {
					timeout := p.probe.Exec.Command[len(p.probe.Exec.Command)-1]
					d, err := time.ParseDuration(timeout)
					if err != nil || d <= 0 || d >= time.Duration(p.probe.TimeoutSeconds)*time.Second {
						t.Errorf("%s probe: --timeout %s does not fit within timeoutSeconds %d", p.name, timeout, p.probe.TimeoutSeconds)
					}
				}
			}
		})
	}
}

func TestMutualTLSMountsOnlyTheNamedKeys(t *testing.T) {
	gw := gateway(func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.TLS = &ferrofedv1alpha1.TLS{SecretName: "s", ClientCASecret: &ferrofedv1alpha1.SecretKeyRef{Name: "ca"}, HealthcheckIdentitySecret: ptr.To("id")}
	})
	var dep appsv1.Deployment
	raw, _ := json.Marshal(Deployment(gw, gatewayspec.Plan(&gw.Spec), nil))
	if err := json.Unmarshal(raw, &dep); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		var items []string
		for _, it := range v.Secret.Items {
			items = append(items, it.Key+"->"+it.Path)
		}
		got[v.Secret.SecretName] = strings.Join(items, ",")
	}
	want := map[string]string{"s": "tls.crt->tls.crt,tls.key->tls.key", "ca": "ca.crt->ca.crt", "id": "tls.crt->tls.crt,tls.key->tls.key", "edge-page-token": "key->key"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Secret volumes %v, want %v", got, want)
	}
	for _, m := range dep.Spec.Template.Spec.Containers[0].VolumeMounts {
		if !m.ReadOnly && m.Name != "tmp" {
			t.Errorf("mount %s at %s is writable", m.Name, m.MountPath)
		}
	}
}

func renderedDeployment(t *testing.T, gw *ferrofedv1alpha1.Gateway) (appsv1.Deployment, []byte) {
	t.Helper()
	var user []byte
	if c := gw.Spec.Config; c != nil && c.Inline != nil {
		user = []byte(*c.Inline)
	}
	rendered, err := gatewayspec.RenderAndCheck(&gw.Spec, gatewayspec.Plan(&gw.Spec), user)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var dep appsv1.Deployment
	raw, err := json.Marshal(Deployment(gw, gatewayspec.Plan(&gw.Spec), rendered))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dep); err != nil {
		t.Fatal(err)
	}
	return dep, rendered
}

func TestAuditSpoolVolumeFollowsTheRepositoryDestination(t *testing.T) {
	inline := func(toml string) func(*ferrofedv1alpha1.Gateway) {
		return func(g *ferrofedv1alpha1.Gateway) {
			g.Spec.Config = configWithIssuer(toml)
		}
	}
	const repo = "[audit]\ndestination = 'repository'\nurl = 'https://a.example/fhir'\n"
	tests := []struct {
		name      string
		mutate    func(*ferrofedv1alpha1.Gateway)
		sizeLimit string // "" when no spool volume
		spoolDirs int    // audit.spool_dir and audit.feed.spool_dir rendered
	}{
		{"no [audit]: no spool", nil, "", 0},
		{"destination log: no spool", inline("[audit]\ndestination = 'log'\n"), "", 0},
		{"destination repository: a 1Gi emptyDir and audit.spool_dir", inline(repo), "1Gi", 1},
		{"with [audit.feed]: audit.feed.spool_dir too", inline(repo + "[audit.feed]\nurl = 'https://f.example/fhir'\n"), "1Gi", 2},
		{"spec.audit.spool.sizeLimit sets the limit", func(g *ferrofedv1alpha1.Gateway) {
			inline(repo)(g)
			g.Spec.Audit = &ferrofedv1alpha1.Audit{Spool: &ferrofedv1alpha1.AuditSpool{SizeLimit: ptr.To(resource.MustParse("300Mi"))}}
		}, "300Mi", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dep, rendered := renderedDeployment(t, gateway(tt.mutate))
			pod := dep.Spec.Template.Spec
			var limit string
			for _, v := range pod.Volumes {
				if v.Name == "audit-spool" && v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
					limit = v.EmptyDir.SizeLimit.String()
				}
			}
			if limit != tt.sizeLimit {
				t.Errorf("spool emptyDir sizeLimit %q, want %q", limit, tt.sizeLimit)
			}
			mounted := false
			for _, m := range pod.Containers[0].VolumeMounts {
				mounted = mounted || (m.Name == "audit-spool" && m.MountPath == gatewayspec.AuditSpoolDir && !m.ReadOnly)
			}
			if mounted != (tt.sizeLimit != "") {
				t.Errorf("spool mounted writable at %s: %v, want %v", gatewayspec.AuditSpoolDir, mounted, tt.sizeLimit != "")
			}
			if n := strings.Count(string(rendered), "spool_dir = '"+gatewayspec.AuditSpoolDir+"'"); n != tt.spoolDirs {
				t.Errorf("rendered %d spool_dir keys, want %d:\n%s", n, tt.spoolDirs, rendered)
			}
		})
	}
}

func TestSecretMountsAreWholeSecretsReadOnly(t *testing.T) {
	dep, _ := renderedDeployment(t, gateway(func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.SecretMounts = []ferrofedv1alpha1.SecretMount{
			{SecretName: "member-a", MountPath: "/etc/ferrofed/secrets/member-a"},
			{SecretName: "token", MountPath: "/etc/ferrofed/secrets/tokens/b"},
		}
	}))
	pod := dep.Spec.Template.Spec
	got := map[string]string{}
	for _, m := range pod.Containers[0].VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.Secret != nil && strings.HasPrefix(m.Name, "secret-mount-") {
				if !m.ReadOnly || len(v.Secret.Items) != 0 {
					t.Errorf("%s: readOnly %v, items %v; want read-only, the whole Secret", m.Name, m.ReadOnly, v.Secret.Items)
				}
				got[v.Secret.SecretName] = m.MountPath
			}
		}
	}
	want := map[string]string{"member-a": "/etc/ferrofed/secrets/member-a", "token": "/etc/ferrofed/secrets/tokens/b"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("secret mounts %v, want %v", got, want)
	}
}

func TestTracingMountsOnlyTheNamedKeysReadOnly(t *testing.T) {
	gw := gateway(func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Tracing = &ferrofedv1alpha1.Tracing{Endpoint: "https://c.example",
			HeadersSecret: &ferrofedv1alpha1.SecretKeySelector{Name: "otel", Key: "token-headers"},
			CASecret:      &ferrofedv1alpha1.SecretKeyRef{Name: "otel-ca", Key: "bundle.pem"}}
	})
	dep, rendered := renderedDeployment(t, gw)
	got := map[string]string{}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		var items []string
		for _, it := range v.Secret.Items {
			items = append(items, it.Key+"->"+it.Path)
		}
		got[v.Name+":"+v.Secret.SecretName] = strings.Join(items, ",")
	}
	want := map[string]string{"tracing-headers:otel": "token-headers->" + gatewayspec.TracingHeadersFileName,
		"tracing-ca:otel-ca": "bundle.pem->" + gatewayspec.TracingCAFileName, "page-token:edge-page-token": "key->key"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Secret volumes %v, want %v", got, want)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range dep.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounts[m.Name] = m
	}
	for name, dir := range map[string]string{"tracing-headers": gatewayspec.TracingHeadersDir, "tracing-ca": gatewayspec.TracingCADir} {
		if m, ok := mounts[name]; !ok || m.MountPath != dir || !m.ReadOnly {
			t.Errorf("mount %s = %+v, want read-only at %s", name, m, dir)
		}
	}
	for _, w := range []string{"headers_file = '" + gatewayspec.TracingHeadersFile + "'", "ca_file = '" + gatewayspec.TracingCAFile + "'"} {
		if !strings.Contains(string(rendered), w) {
			t.Errorf("rendered file lacks %q:\n%s", w, rendered)
		}
	}
}

// TestResourceEnvIsOnEveryGatewayContainer: the downward-API variables are set with
// tracing and without (an inline [tracing] reads them too).
func TestResourceEnvIsOnEveryGatewayContainer(t *testing.T) {
	for name, mutate := range map[string]func(*ferrofedv1alpha1.Gateway){
		"without tracing": nil,
		"with spec.tracing": func(g *ferrofedv1alpha1.Gateway) {
			g.Spec.Tracing = &ferrofedv1alpha1.Tracing{Endpoint: "http://c:4318"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dep, _ := renderedDeployment(t, gateway(mutate))
			got := map[string]string{}
			for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
				switch {
				case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
					got[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
				default:
					got[e.Name] = e.Value
				}
			}
			want := map[string]string{config.EnvPodName: "fieldRef:metadata.name", config.EnvPodNamespace: "fieldRef:metadata.namespace", config.EnvGatewayName: "edge"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("env %v, want %v", got, want)
			}
		})
	}
}
