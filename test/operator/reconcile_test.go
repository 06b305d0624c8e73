package operator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
)

const settle = 30 * time.Second

func getGateway(ctx context.Context, t *testing.T, key types.NamespacedName) *ferrofedv1alpha1.Gateway {
	t.Helper()
	gw := &ferrofedv1alpha1.Gateway{}
	if err := k8s.Get(ctx, key, gw); err != nil {
		t.Fatal(err)
	}
	return gw
}

// updateGateway changes the Gateway with mutate, retrying on conflicts.
func updateGateway(ctx context.Context, t *testing.T, key types.NamespacedName, mutate func(*ferrofedv1alpha1.Gateway)) {
	t.Helper()
	for range 10 {
		gw := getGateway(ctx, t, key)
		mutate(gw)
		err := k8s.Update(ctx, gw)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("update Gateway: %v", err)
		}
	}
	t.Fatal("update Gateway: conflicts")
}

// reconciled waits until the status describes the current generation and the Deployment
// exists, and returns both.
func reconciled(ctx context.Context, t *testing.T, key types.NamespacedName) (*ferrofedv1alpha1.Gateway, *appsv1.Deployment) {
	t.Helper()
	var gw *ferrofedv1alpha1.Gateway
	dep := &appsv1.Deployment{}
	eventually(t, settle, "Gateway "+key.Name+" reconciled", func() error {
		gw = getGateway(ctx, t, key)
		if gw.Status.ObservedGeneration != gw.Generation {
			return fmt.Errorf("status.observedGeneration %d, generation %d", gw.Status.ObservedGeneration, gw.Generation)
		}
		return k8s.Get(ctx, key, dep)
	})
	return gw, dep
}

func condition(gw *ferrofedv1alpha1.Gateway, t string) metav1.Condition {
	if c := meta.FindStatusCondition(gw.Status.Conditions, t); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func requireOwned(t *testing.T, gw *ferrofedv1alpha1.Gateway, obj client.Object) {
	t.Helper()
	owner := metav1.GetControllerOf(obj)
	if owner == nil || owner.UID != gw.UID || owner.Kind != "Gateway" || !ptr.Deref(owner.BlockOwnerDeletion, false) {
		t.Errorf("%T %s: controller owner reference = %+v, want the Gateway %s", obj, obj.GetName(), owner, gw.UID)
	}
}

func gatewayContainer(dep *appsv1.Deployment) corev1.Container {
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name == controllers.ContainerName {
			return c
		}
	}
	return corev1.Container{}
}

func TestReconcileDerivesTheDeploymentAndFollowsChanges(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "edge"}
	gw := newGateway(key.Namespace, key.Name, func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.BasePath = "/federation"
		g.Spec.Config = withIssuer("[health]\ncheck_timeout_ms = 200\n")
	})
	if err := k8s.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}

	gw, dep := reconciled(ctx, t, key)
	t.Run("the Deployment carries the derived grace period and the probes", func(t *testing.T) {
		pod := dep.Spec.Template.Spec
		if g := ptr.Deref(pod.TerminationGracePeriodSeconds, 0); g != 50 {
			t.Errorf("terminationGracePeriodSeconds = %d, want 50 (10s derived delay + 30s + 5s + 5s)", g)
		}
		c := gatewayContainer(dep)
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/federation/health/readiness" ||
			c.StartupProbe == nil || c.StartupProbe.HTTPGet.Path != "/federation/health/readiness" ||
			c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/federation/health" {
			t.Errorf("probes = %+v / %+v / %+v", c.StartupProbe, c.ReadinessProbe, c.LivenessProbe)
		}
		if s := dep.Spec.Strategy.RollingUpdate; s == nil || s.MaxUnavailable.IntValue() != 0 || s.MaxSurge.IntValue() != 1 {
			t.Errorf("rolling update = %+v, want maxUnavailable 0, maxSurge 1", s)
		}
		if gw.Status.TerminationGracePeriodSeconds != 50 || condition(gw, ferrofedv1alpha1.ConditionConfigValid).Status != metav1.ConditionTrue {
			t.Errorf("status = %+v", gw.Status)
		}
	})
	t.Run("every owned object has the Gateway as controller", func(t *testing.T) {
		for _, obj := range []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}} {
			if err := k8s.Get(ctx, key, obj); err != nil {
				t.Fatal(err)
			}
			requireOwned(t, gw, obj)
		}
	})

	hash := dep.Spec.Template.Annotations[controllers.AnnotationConfigHash]
	t.Run("a new drainDelay changes the grace period and the config hash", func(t *testing.T) {
		updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) { g.Spec.Lifecycle.DrainDelay = dur("20s") })
		eventually(t, settle, "Deployment follows drainDelay", func() error {
			_, dep = reconciled(ctx, t, key)
			if g := ptr.Deref(dep.Spec.Template.Spec.TerminationGracePeriodSeconds, 0); g != 60 {
				return fmt.Errorf("terminationGracePeriodSeconds %d, want 60", g)
			}
			return nil
		})
		if dep.Spec.Template.Annotations[controllers.AnnotationConfigHash] == hash {
			t.Errorf("the config hash did not change with drainDelay")
		}
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, key, cm); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(cm.Data["ferrofed.toml"], "drain_delay_ms = 20000") {
			t.Errorf("rendered ferrofed.toml lacks drain_delay_ms = 20000:\n%s", cm.Data["ferrofed.toml"])
		}
	})

	t.Run("a configuration config check refuses leaves the Deployment untouched", func(t *testing.T) {
		_, before := reconciled(ctx, t, key)
		updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) {
			g.Spec.Config = withIssuer("[health]\ncheck_timeout_ms = 200\nno_such_key = true\n")
			g.Spec.Lifecycle.DrainDelay = dur("25s") // would change the Deployment, were it applied
		})
		var c metav1.Condition
		eventually(t, settle, "ConfigValid=False", func() error {
			gw, _ = reconciled(ctx, t, key)
			if c = condition(gw, ferrofedv1alpha1.ConditionConfigValid); c.Status != metav1.ConditionFalse {
				return fmt.Errorf("ConfigValid = %s", c.Status)
			}
			return nil
		})
		if c.Reason != ferrofedv1alpha1.ReasonInvalidConfig || !strings.Contains(c.Message, "health.no_such_key: unknown key") {
			t.Errorf("ConfigValid = %s %q, want InvalidConfig naming health.no_such_key", c.Reason, c.Message)
		}
		after := &appsv1.Deployment{}
		if err := k8s.Get(ctx, key, after); err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != before.ResourceVersion {
			t.Errorf("the Deployment changed (resourceVersion %s → %s)", before.ResourceVersion, after.ResourceVersion)
		}
	})

	t.Run("replicas 2 adds a PodDisruptionBudget and replicas 1 removes it", func(t *testing.T) {
		updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) {
			g.Spec.Config = withIssuer("[health]\ncheck_timeout_ms = 200\n")
			g.Spec.Replicas = ptr.To[int32](2)
		})
		pdb := &policyv1.PodDisruptionBudget{}
		eventually(t, settle, "PodDisruptionBudget created", func() error { return k8s.Get(ctx, key, pdb) })
		requireOwned(t, gw, pdb)
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("maxUnavailable = %v, want 1", pdb.Spec.MaxUnavailable)
		}
		updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) { g.Spec.Replicas = ptr.To[int32](1) })
		eventually(t, settle, "PodDisruptionBudget deleted", func() error {
			if err := k8s.Get(ctx, key, &policyv1.PodDisruptionBudget{}); err == nil {
				return errors.New("still there")
			} else if !apierrors.IsNotFound(err) {
				return fmt.Errorf("get: %w", err)
			}
			return nil
		})
	})
}

func TestReferencedConfigMapIsWatched(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "from-configmap"}
	user := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: "user-config"},
		Data:       map[string]string{"ferrofed.toml": issuer.WithRemote("[server]\nlisten = \"0.0.0.0:9000\"\n")},
	}
	if err := k8s.Create(ctx, user); err != nil {
		t.Fatal(err)
	}
	gw := newGateway(key.Namespace, key.Name, func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Config = &ferrofedv1alpha1.GatewayConfig{ConfigMapRef: &ferrofedv1alpha1.ConfigMapKeyRef{Name: user.Name}}
	})
	if err := k8s.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "ConfigValid=False for a key the spec owns", func() error {
		gw = getGateway(ctx, t, key)
		c := condition(gw, ferrofedv1alpha1.ConditionConfigValid)
		if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "server.listen: is set by the Gateway from spec.port") {
			return fmt.Errorf("ConfigValid = %s %q", c.Status, c.Message)
		}
		return nil
	})
	if err := k8s.Get(ctx, key, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment exists for a refused configuration (%v)", err)
	}
	user.Data["ferrofed.toml"] = issuer.WithRemote("[health]\ncache_ttl_ms = 500\n")
	if err := k8s.Update(ctx, user); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "fixing the referenced ConfigMap rolls out", func() error {
		gw, _ := reconciled(ctx, t, key)
		if c := condition(gw, ferrofedv1alpha1.ConditionConfigValid); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("ConfigValid = %s %q", c.Status, c.Message)
		}
		return nil
	})
}

// TestUnchangedGatewayCostsNoWrite reconciles settled Gateways again, directly and
// through a watch event, and counts the reconciler's writes and events.
func TestUnchangedGatewayCostsNoWrite(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	full := func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Replicas = ptr.To[int32](3)
		g.Spec.TLS = &ferrofedv1alpha1.TLS{SecretName: "quiet-tls"}
		g.Spec.Lifecycle.DrainDelay = dur("7.5s")
		g.Spec.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("0.5"), corev1.ResourceMemory: resource.MustParse("0.5Gi"),
		}}
		g.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
		g.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		g.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 50, PodAffinityTerm: corev1.PodAffinityTerm{
				TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			}}},
		}}
		g.Spec.Config = withIssuer("[[registry.members]]\nid = \"node-a\"\nquery_endpoint = \"https://a.example.org/fhir\"\n")
	}
	// Mutual TLS (exec probes, the client CA and identity volumes), an audit spool
	// (an emptyDir with a size limit) and a secret mount: the fields each adds to the
	// applied set are the apiserver's too.
	mutualTLSAndAudit := func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Port = 8443
		g.Spec.TLS = &ferrofedv1alpha1.TLS{SecretName: "edge-tls",
			ClientCASecret:            &ferrofedv1alpha1.SecretKeyRef{Name: "clinic-ca", Key: "bundle.pem"},
			HealthcheckIdentitySecret: ptr.To("edge-healthcheck")}
		g.Spec.Audit = &ferrofedv1alpha1.Audit{Spool: &ferrofedv1alpha1.AuditSpool{SizeLimit: ptr.To(resource.MustParse("2Gi"))}}
		g.Spec.SecretMounts = []ferrofedv1alpha1.SecretMount{{SecretName: "audit-client", MountPath: "/etc/ferrofed/secrets/audit"}}
		g.Spec.Config = withIssuer("[audit]\ndestination = \"repository\"\nurl = \"https://audit.example.org/fhir\"\n" +
			"client_certificate_file = \"/etc/ferrofed/secrets/audit/tls.crt\"\nclient_key_file = \"/etc/ferrofed/secrets/audit/tls.key\"\n" +
			"[audit.feed]\nurl = \"https://feed.example.org/fhir\"\n")
	}
	// A persistent spool: the StatefulSet and its volumeClaimTemplate.
	persistent := func(g *ferrofedv1alpha1.Gateway) {
		mutualTLSAndAudit(g)
		g.Spec.Audit = nil
		spoolClaim("2Gi", corev1.ReadWriteOnce)(g)
		g.Spec.Audit.Spool.VolumeClaimTemplate.Spec.StorageClassName = ptr.To("local-path")
		g.Spec.Audit.Spool.VolumeClaimTemplate.Metadata = &ferrofedv1alpha1.SpoolClaimMetadata{Annotations: map[string]string{"a": "b"}}
	}
	// spec.autoscaling: the HorizontalPodAutoscaler, a Deployment without replicas
	// whose count ferrofed-operator-replicas holds (handed over once, not at each
	// reconcile), and the spec's spread constraints.
	autoscaledAndSpread := func(g *ferrofedv1alpha1.Gateway) {
		withAutoscaling(2, 5, func(a *ferrofedv1alpha1.Autoscaling) { a.TargetMemoryUtilizationPercentage = ptr.To[int32](70) })(g)
		withSpread(spreadOn("topology.kubernetes.io/region", 2, corev1.DoNotSchedule))(g)
	}
	for name, mutate := range map[string]func(*ferrofedv1alpha1.Gateway){"quiet-defaults": nil, "quiet-full": full, "quiet-mtls-audit": mutualTLSAndAudit,
		"quiet-persistent-spool": persistent, "quiet-autoscaled": autoscaledAndSpread} {
		t.Run(name+" is reconciled again with zero writes", func(t *testing.T) {
			key := types.NamespacedName{Namespace: "reconcile", Name: name}
			if err := k8s.Create(ctx, newGateway(key.Namespace, key.Name, mutate)); err != nil {
				t.Fatal(err)
			}
			if name == "quiet-persistent-spool" {
				statefulSetOf(ctx, t, key)
				eventually(t, settle, "the status of the current generation", func() error {
					if g := getGateway(ctx, t, key); g.Status.ObservedGeneration != g.Generation || len(g.Finalizers) == 0 {
						return fmt.Errorf("observedGeneration %d of %d, finalizers %v", g.Status.ObservedGeneration, g.Generation, g.Finalizers)
					}
					return nil
				})
			} else {
				reconciled(ctx, t, key)
			}
			time.Sleep(time.Second) // let the events of our own writes be reconciled
			w, e := writes.Load(), eventsSent.Load()
			for range 3 {
				if _, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
					t.Fatal(err)
				}
			}
			updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) { // a watch event, no spec change
				if g.Annotations == nil {
					g.Annotations = map[string]string{}
				}
				g.Annotations["example.org/touched"] = "yes"
			})
			time.Sleep(time.Second)
			if dw, de := writes.Load()-w, eventsSent.Load()-e; dw != 0 || de != 0 {
				t.Errorf("reconciling the unchanged Gateway wrote %d times and sent %d events, want 0 and 0", dw, de)
			}
		})
	}
}

// TestANewGatewayIsToldInOneEvent: the objects a new Gateway gets are created with one
// request each and told in one Event, in the order they were made.
func TestANewGatewayIsToldInOneEvent(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "told-once"}
	if err := k8s.Create(ctx, newGateway(key.Namespace, key.Name, func(g *ferrofedv1alpha1.Gateway) { g.Spec.Replicas = ptr.To[int32](2) })); err != nil {
		t.Fatal(err)
	}
	reconciled(ctx, t, key)
	want := "Created Secret told-once-page-token, ConfigMap told-once, Deployment told-once, Service told-once and PodDisruptionBudget told-once."
	eventually(t, settle, "one Created event naming every object", func() error {
		var evs eventsv1.EventList
		if err := k8s.List(ctx, &evs, client.InNamespace(key.Namespace)); err != nil {
			return err
		}
		var created []string
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Gateway" && e.Regarding.Name == key.Name && e.Reason == "Created" {
				created = append(created, e.Note)
			}
		}
		if len(created) != 1 || created[0] != want {
			return fmt.Errorf("Created events %q, want one %q", created, want)
		}
		return nil
	})
}

func TestDriftOfAnOwnedFieldIsRepaired(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "drifting"}
	if err := k8s.Create(ctx, newGateway(key.Namespace, key.Name, nil)); err != nil {
		t.Fatal(err)
	}
	_, dep := reconciled(ctx, t, key)
	dep.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	if err := k8s.Update(ctx, dep, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "the grace period is restored", func() error {
		if err := k8s.Get(ctx, key, dep); err != nil {
			return err
		}
		if g := ptr.Deref(dep.Spec.Template.Spec.TerminationGracePeriodSeconds, 0); g != 50 {
			return fmt.Errorf("terminationGracePeriodSeconds %d", g)
		}
		return nil
	})
}

// TestMutualTLSGatewayRendersExecProbes: the operator renders a mutual-TLS Gateway
// without reading its Secrets (none of them exists here): the kubelet mounts them, and
// the probes are `ferrofed healthcheck` in the pod.
func TestMutualTLSGatewayRendersExecProbes(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "mtls"}
	gw := newGateway(key.Namespace, key.Name, func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.TLS = &ferrofedv1alpha1.TLS{SecretName: "mtls-serving", ClientCASecret: &ferrofedv1alpha1.SecretKeyRef{Name: "mtls-ca"},
			HealthcheckIdentitySecret: ptr.To("mtls-healthcheck")}
	})
	if err := k8s.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, gw) }()
	gw, dep := reconciled(ctx, t, key)
	if c := condition(gw, ferrofedv1alpha1.ConditionConfigValid); c.Status != metav1.ConditionTrue {
		t.Fatalf("ConfigValid = %s %s: %s", c.Status, c.Reason, c.Message)
	}
	c := gatewayContainer(dep)
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.Exec == nil || p.HTTPGet != nil || len(p.Exec.Command) < 2 || p.Exec.Command[1] != "healthcheck" {
			t.Errorf("%s probe = %+v, want an exec probe running ferrofed healthcheck", name, p)
		}
	}
	if cmd := strings.Join(c.LivenessProbe.Exec.Command, " "); !strings.Contains(cmd, "--liveness") {
		t.Errorf("liveness probe runs %q, want --liveness", cmd)
	}
	secrets := map[string]bool{}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			secrets[v.Secret.SecretName] = true
		}
	}
	for _, s := range []string{"mtls-serving", "mtls-ca", "mtls-healthcheck"} {
		if !secrets[s] {
			t.Errorf("Secret %s is not mounted; volumes %v", s, secrets)
		}
	}
}

// TestAuditGatewayGetsTheSpoolVolume: an [audit] table with destination "repository"
// gets an emptyDir of spec.audit.spool.sizeLimit at the spool directory the operator
// renders; spec.secretMounts are mounted read-only; without [audit] the volume goes.
func TestAuditGatewayGetsTheSpoolVolume(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "audited"}
	gw := newGateway(key.Namespace, key.Name, func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Config = withIssuer("[audit]\ndestination = \"repository\"\nurl = \"https://audit.example.org/fhir\"\nbearer_token_file = \"/etc/ferrofed/secrets/audit/token\"\n")
		g.Spec.Audit = &ferrofedv1alpha1.Audit{Spool: &ferrofedv1alpha1.AuditSpool{SizeLimit: ptr.To(resource.MustParse("512Mi"))}}
		g.Spec.SecretMounts = []ferrofedv1alpha1.SecretMount{{SecretName: "audit-token", MountPath: "/etc/ferrofed/secrets/audit"}}
	})
	if err := k8s.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, gw) }()
	gw, dep := reconciled(ctx, t, key)
	if c := condition(gw, ferrofedv1alpha1.ConditionConfigValid); c.Status != metav1.ConditionTrue {
		t.Fatalf("ConfigValid = %s %s: %s", c.Status, c.Reason, c.Message)
	}
	spool := func(dep *appsv1.Deployment) (limit string, mounted bool) {
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name == "audit-spool" && v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
				limit = v.EmptyDir.SizeLimit.String()
			}
		}
		for _, m := range gatewayContainer(dep).VolumeMounts {
			mounted = mounted || (m.Name == "audit-spool" && m.MountPath == gatewayspec.AuditSpoolDir && !m.ReadOnly)
		}
		return limit, mounted
	}
	if limit, mounted := spool(dep); limit != "512Mi" || !mounted {
		t.Errorf("spool emptyDir sizeLimit %q, mounted writable at %s: %v; want 512Mi, true", limit, gatewayspec.AuditSpoolDir, mounted)
	}
	var token bool
	for _, m := range gatewayContainer(dep).VolumeMounts {
		for _, v := range dep.Spec.Template.Spec.Volumes {
			token = token || (v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == "audit-token" && m.MountPath == "/etc/ferrofed/secrets/audit" && m.ReadOnly)
		}
	}
	if !token {
		t.Error("Secret audit-token is not mounted read-only at /etc/ferrofed/secrets/audit")
	}
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, key, cm); err != nil {
		t.Fatal(err)
	}
	if rendered := cm.Data[gatewayspec.ConfigFileName]; !strings.Contains(rendered, "spool_dir = '"+gatewayspec.AuditSpoolDir+"'") {
		t.Errorf("rendered ferrofed.toml has no audit.spool_dir %s:\n%s", gatewayspec.AuditSpoolDir, rendered)
	}

	updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) { g.Spec.Config = withIssuer("") })
	eventually(t, settle, "the spool volume removed with [audit]", func() error {
		_, dep := reconciled(ctx, t, key)
		if limit, mounted := spool(dep); limit != "" || mounted {
			return fmt.Errorf("spool volume %q, mounted %v", limit, mounted)
		}
		return nil
	})
}
