package operator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
)

// withAutoscaling sets spec.autoscaling from minReplicas to maxReplicas, then mutate.
func withAutoscaling(minReplicas, maxReplicas int32, mutate func(*ferrofedv1alpha1.Autoscaling)) func(*ferrofedv1alpha1.Gateway) {
	return func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Autoscaling = &ferrofedv1alpha1.Autoscaling{MinReplicas: minReplicas, MaxReplicas: maxReplicas}
		if mutate != nil {
			mutate(g.Spec.Autoscaling)
		}
	}
}

func withResources(requests, limits corev1.ResourceList) func(*ferrofedv1alpha1.Gateway) {
	return func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Resources = corev1.ResourceRequirements{Requests: requests, Limits: limits}
	}
}

func withSpread(cs ...corev1.TopologySpreadConstraint) func(*ferrofedv1alpha1.Gateway) {
	return func(g *ferrofedv1alpha1.Gateway) { g.Spec.TopologySpreadConstraints = cs }
}

func spreadOn(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction) corev1.TopologySpreadConstraint {
	return corev1.TopologySpreadConstraint{TopologyKey: key, MaxSkew: maxSkew, WhenUnsatisfiable: when}
}

func nineSpreads() []corev1.TopologySpreadConstraint {
	var out []corev1.TopologySpreadConstraint
	for i := range 9 {
		out = append(out, spreadOn(fmt.Sprint("example.org/level-", i), 1, corev1.ScheduleAnyway))
	}
	return out
}

var (
	cpu    = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}
	memory = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
)

// autoscalingCases are spec.autoscaling's and spec.topologySpreadConstraints' rows: the
// CRD's CEL rules and the webhook give the same verdict, and a refusal by both
// contains want in both (the rule's whole message, when the rule is a CEL rule: word
// for word the same).
var autoscalingCases = []struct {
	name   string
	mutate func(*ferrofedv1alpha1.Gateway)
	accept bool
	want   string
}{
	{"minReplicas 2, maxReplicas 10, no target (cpu 80)", withAutoscaling(2, 10, nil), true, ""},
	{"minReplicas equal to maxReplicas", withAutoscaling(3, 3, nil), true, ""},
	{"both targets with the default requests", withAutoscaling(1, 4, func(a *ferrofedv1alpha1.Autoscaling) {
		a.TargetCPUUtilizationPercentage, a.TargetMemoryUtilizationPercentage = ptr.To[int32](60), ptr.To[int32](75)
	}), true, ""},
	{"spec.replicas with spec.autoscaling", all(withAutoscaling(2, 5, nil), func(g *ferrofedv1alpha1.Gateway) { g.Spec.Replicas = ptr.To[int32](2) }), false,
		"spec.replicas and spec.autoscaling are mutually exclusive: with spec.autoscaling the HorizontalPodAutoscaler sets the number of pods between minReplicas and maxReplicas; remove spec.replicas, or spec.autoscaling"},
	{"maxReplicas below minReplicas", withAutoscaling(4, 3, nil), false,
		"spec.autoscaling.maxReplicas must be at least spec.autoscaling.minReplicas"},
	{"minReplicas 0", withAutoscaling(0, 3, nil), false, "spec.autoscaling.minReplicas"},
	{"maxReplicas 1001", withAutoscaling(1, 1001, nil), false, "spec.autoscaling.maxReplicas"},
	{"a CPU target of 0", withAutoscaling(1, 3, func(a *ferrofedv1alpha1.Autoscaling) { a.TargetCPUUtilizationPercentage = ptr.To[int32](0) }), false,
		"spec.autoscaling.targetCPUUtilizationPercentage"},
	{"a CPU target of 101", withAutoscaling(1, 3, func(a *ferrofedv1alpha1.Autoscaling) { a.TargetCPUUtilizationPercentage = ptr.To[int32](101) }), false,
		"spec.autoscaling.targetCPUUtilizationPercentage"},
	{"a memory target of 101", withAutoscaling(1, 3, func(a *ferrofedv1alpha1.Autoscaling) { a.TargetMemoryUtilizationPercentage = ptr.To[int32](101) }), false,
		"spec.autoscaling.targetMemoryUtilizationPercentage"},
	{"autoscaling with a persistent spool", all(inline(auditRepository), spoolClaim("1Gi", corev1.ReadWriteOnce), withAutoscaling(2, 4, nil)), false,
		"spec.autoscaling is not supported with spec.audit.spool.volumeClaimTemplate: the operator picks the spool claims to hand over and delete by spec.replicas, and every scale-down of an autoscaler would hand one over (a Job, then a new volume at the next scale-up); set spec.replicas, or keep the emptyDir spool"},
	{"the default CPU target with resources requesting memory only", all(withAutoscaling(1, 3, nil), withResources(memory, nil)), false,
		"spec.autoscaling's CPU target (targetCPUUtilizationPercentage, 80 when no target is set) is a share of the CPU request: spec.resources sets no cpu in requests or limits; add spec.resources.requests.cpu, or leave spec.resources empty for the operator's default requests"},
	{"a CPU target with a cpu limit only (the request's default)", all(withAutoscaling(1, 3, nil), withResources(nil, cpu)), true, ""},
	{"a memory target with resources requesting cpu only", all(withAutoscaling(1, 3, func(a *ferrofedv1alpha1.Autoscaling) {
		a.TargetMemoryUtilizationPercentage = ptr.To[int32](70)
	}), withResources(cpu, nil)), false,
		"spec.autoscaling.targetMemoryUtilizationPercentage is a share of the memory request: spec.resources sets no memory in requests or limits; add spec.resources.requests.memory, or leave spec.resources empty for the operator's default requests"},
	{"a memory target alone with memory requested only", all(withAutoscaling(1, 3, func(a *ferrofedv1alpha1.Autoscaling) {
		a.TargetMemoryUtilizationPercentage = ptr.To[int32](70)
	}), withResources(memory, nil)), true, ""},
	{"spread constraints of the spec", withSpread(spreadOn("topology.kubernetes.io/region", 2, corev1.DoNotSchedule)), true, ""},
	{"a spread constraint of maxSkew 0", withSpread(spreadOn("kubernetes.io/hostname", 0, corev1.ScheduleAnyway)), false,
		"spec.topologySpreadConstraints: every constraint needs maxSkew of at least 1 and whenUnsatisfiable DoNotSchedule or ScheduleAnyway"},
	{"a spread constraint with another whenUnsatisfiable", withSpread(spreadOn("kubernetes.io/hostname", 1, "Sometimes")), false,
		"spec.topologySpreadConstraints: every constraint needs maxSkew of at least 1 and whenUnsatisfiable DoNotSchedule or ScheduleAnyway"},
	{"9 spread constraints", withSpread(nineSpreads()...), false, "spec.topologySpreadConstraints: Too many: 9"},
}

// TestAutoscalingRulesOnCELAndWebhook runs the rows through the CRD's CEL rules (a
// namespace the webhook does not cover) and the webhook.
func TestAutoscalingRulesOnCELAndWebhook(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	for _, tc := range autoscalingCases {
		t.Run(tc.name, func(t *testing.T) {
			gw := newGateway("cel-only", "autoscaling-case", tc.mutate)
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

// replicasManagers are the managers whose managedFields entry of dep holds spec.replicas,
// each as manager/operation[/subresource].
func replicasManagers(t *testing.T, dep *appsv1.Deployment) []string {
	t.Helper()
	var out []string
	for _, e := range dep.ManagedFields {
		var fields struct {
			Spec map[string]json.RawMessage `json:"f:spec"`
		}
		if e.FieldsV1 == nil {
			continue
		}
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			t.Fatal(err)
		}
		if _, ok := fields.Spec["f:replicas"]; ok {
			name := e.Manager + "/" + string(e.Operation)
			if e.Subresource != "" {
				name += "/" + e.Subresource
			}
			out = append(out, name)
		}
	}
	return out
}

// deploymentReplicas waits until the Deployment of key has want replicas and check
// passes on it, and returns it.
func deploymentReplicas(ctx context.Context, t *testing.T, key types.NamespacedName, want int32, what string, check func(*appsv1.Deployment) error) *appsv1.Deployment {
	t.Helper()
	dep := &appsv1.Deployment{}
	eventually(t, settle, what, func() error {
		if err := k8s.Get(ctx, key, dep); err != nil {
			return err
		}
		if got := ptr.Deref(dep.Spec.Replicas, -1); got != want {
			return fmt.Errorf("spec.replicas %d, want %d (held by %v)", got, want, replicasManagers(t, dep))
		}
		if check != nil {
			return check(dep)
		}
		return nil
	})
	return dep
}

// notHeldByTheOperator is nil when the operator's apply does not hold spec.replicas.
func notHeldByTheOperator(t *testing.T) func(*appsv1.Deployment) error {
	return func(dep *appsv1.Deployment) error {
		for _, m := range replicasManagers(t, dep) {
			if m == controllers.FieldOwner+"/Apply" {
				return fmt.Errorf("spec.replicas is held by %v, the operator's apply among them", replicasManagers(t, dep))
			}
		}
		return nil
	}
}

func hpaOf(ctx context.Context, key types.NamespacedName) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	return hpa, k8s.Get(ctx, key, hpa)
}

// TestTheAutoscalerOwnsTheReplicas: with spec.autoscaling the operator owns an
// HorizontalPodAutoscaler of the Deployment (made again when deleted), hands spec.replicas
// over within [minReplicas, maxReplicas] and never sets it back: a stand-in for the
// autoscaler's controller (none runs here) scales through /scale with its own field
// manager, and a reconcile that applies the Deployment again keeps its count. Turned
// off, spec.replicas is the spec's again and the autoscaler goes; turned on again, the
// count carries over (it does not fall to the Deployment's default of 1).
func TestTheAutoscalerOwnsTheReplicas(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "autoscaled"}
	if err := k8s.Create(ctx, newGateway(key.Namespace, key.Name, withAutoscaling(2, 6, func(a *ferrofedv1alpha1.Autoscaling) {
		a.TargetCPUUtilizationPercentage = ptr.To[int32](65)
	}))); err != nil {
		t.Fatal(err)
	}
	gw, _ := reconciled(ctx, t, key)
	deploymentReplicas(ctx, t, key, 2, "a new autoscaled Deployment starts at minReplicas, held by another manager than the operator's apply", notHeldByTheOperator(t))
	var hpa *autoscalingv2.HorizontalPodAutoscaler
	eventually(t, settle, "the HorizontalPodAutoscaler", func() (err error) { hpa, err = hpaOf(ctx, key); return err })
	requireOwned(t, gw, hpa)
	if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != key.Name || ptr.Deref(hpa.Spec.MinReplicas, 0) != 2 || hpa.Spec.MaxReplicas != 6 ||
		len(hpa.Spec.Metrics) != 1 || ptr.Deref(hpa.Spec.Metrics[0].Resource.Target.AverageUtilization, 0) != 65 {
		t.Errorf("HorizontalPodAutoscaler spec %+v, want Deployment %s from 2 to 6 at cpu 65%%", hpa.Spec, key.Name)
	}
	if err := k8s.Get(ctx, key, &policyv1.PodDisruptionBudget{}); err != nil {
		t.Errorf("minReplicas 2: the PodDisruptionBudget: %v", err)
	}

	// The Gateway's own /scale writes spec.replicas, which spec.autoscaling refuses.
	gwScale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 4}}
	if err := k8s.SubResource("scale").Update(ctx, gw, client.WithSubResourceBody(gwScale)); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec.replicas and spec.autoscaling are mutually exclusive") {
		t.Errorf("kubectl scale of an autoscaled Gateway: %v, want it refused naming spec.replicas and spec.autoscaling", err)
	}

	// The autoscaler's stand-in scales to 5 through /scale.
	dep := &appsv1.Deployment{}
	if err := k8s.Get(ctx, key, dep); err != nil {
		t.Fatal(err)
	}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5}}
	if err := k8s.SubResource("scale").Update(ctx, dep, client.WithSubResourceBody(scale), client.FieldOwner("autoscaler-stand-in")); err != nil {
		t.Fatal(err)
	}
	// A change of the pod template makes the operator apply the Deployment again.
	updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) { g.Spec.Lifecycle.TerminationGracePeriodSeconds = ptr.To[int64](77) })
	reconciled(ctx, t, key)
	deploymentReplicas(ctx, t, key, 5, "the Deployment applied again keeps the autoscaler's 5 replicas", func(d *appsv1.Deployment) error {
		if g := ptr.Deref(d.Spec.Template.Spec.TerminationGracePeriodSeconds, 0); g != 77 {
			return fmt.Errorf("terminationGracePeriodSeconds %d, want 77: not applied again yet", g)
		}
		return notHeldByTheOperator(t)(d)
	})

	// A deleted HorizontalPodAutoscaler comes back.
	if err := k8s.Delete(ctx, hpa); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "the deleted HorizontalPodAutoscaler made again", func() error {
		again, err := hpaOf(ctx, key)
		if err == nil && again.UID == hpa.UID {
			return fmt.Errorf("still the deleted one")
		}
		return err
	})

	// Off: spec.replicas 3 is the Deployment's again, and the autoscaler goes.
	updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) { g.Spec.Autoscaling, g.Spec.Replicas = nil, ptr.To[int32](3) })
	reconciled(ctx, t, key)
	deploymentReplicas(ctx, t, key, 3, "autoscaling off gives the Deployment spec.replicas", nil)
	eventually(t, settle, "the HorizontalPodAutoscaler deleted", func() error {
		switch _, err := hpaOf(ctx, key); {
		case err == nil:
			return fmt.Errorf("it still exists")
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("get: %w, want NotFound", err)
		}
		return nil
	})

	// On again, from 3 pods: handed over as 3, within [2, 6], not reset to 1.
	updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Replicas = nil
		withAutoscaling(2, 6, nil)(g)
	})
	reconciled(ctx, t, key)
	eventually(t, settle, "the HorizontalPodAutoscaler made again", func() error { _, err := hpaOf(ctx, key); return err })
	deploymentReplicas(ctx, t, key, 3, "autoscaling on again keeps the Deployment's 3 pods", notHeldByTheOperator(t))
}

// TestDefaultSpreadReachesThePods: the Deployment's pods get the default spread (nodes
// and zones, ScheduleAnyway, matched per pod-template-hash); the spec's constraints
// replace them.
func TestDefaultSpreadReachesThePods(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "reconcile", Name: "spread"}
	if err := k8s.Create(ctx, newGateway(key.Namespace, key.Name, nil)); err != nil {
		t.Fatal(err)
	}
	_, dep := reconciled(ctx, t, key)
	got := dep.Spec.Template.Spec.TopologySpreadConstraints
	if len(got) != 2 || got[0].TopologyKey != corev1.LabelHostname || got[1].TopologyKey != corev1.LabelTopologyZone ||
		got[0].WhenUnsatisfiable != corev1.ScheduleAnyway || got[1].WhenUnsatisfiable != corev1.ScheduleAnyway ||
		len(got[0].MatchLabelKeys) != 1 || got[0].MatchLabelKeys[0] != appsv1.DefaultDeploymentUniqueLabelKey ||
		got[0].LabelSelector == nil || got[0].LabelSelector.MatchLabels[controllers.LabelInstance] != key.Name {
		t.Errorf("default spread %+v, want hostname and zone, ScheduleAnyway, the pods' selector, pod-template-hash", got)
	}
	updateGateway(ctx, t, key, withSpread(spreadOn("topology.kubernetes.io/region", 2, corev1.DoNotSchedule)))
	reconciled(ctx, t, key)
	eventually(t, settle, "the spec's spread constraint alone", func() error {
		if err := k8s.Get(ctx, key, dep); err != nil {
			return err
		}
		got := dep.Spec.Template.Spec.TopologySpreadConstraints
		if len(got) != 1 || got[0].TopologyKey != "topology.kubernetes.io/region" || got[0].MaxSkew != 2 || got[0].LabelSelector == nil ||
			!metav1.HasLabel(metav1.ObjectMeta{Labels: got[0].LabelSelector.MatchLabels}, controllers.LabelInstance) {
			return fmt.Errorf("spread %+v", got)
		}
		return nil
	})
}
