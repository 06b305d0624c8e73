package controllers

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

func autoscaled(minReplicas, maxReplicas int32) func(*ferrofedv1alpha1.Gateway) {
	return func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Autoscaling = &ferrofedv1alpha1.Autoscaling{MinReplicas: minReplicas, MaxReplicas: maxReplicas}
	}
}

// TestAutoscalingLeavesTheReplicasToTheAutoscaler: with spec.autoscaling the
// Deployment's configuration has no replicas and an autoscaler exists; without it,
// replicas are the spec's and there is no autoscaler.
func TestAutoscalingLeavesTheReplicasToTheAutoscaler(t *testing.T) {
	for _, tc := range []struct {
		name         string
		mutate       func(*ferrofedv1alpha1.Gateway)
		wantReplicas *int32
		wantHPA      bool
		wantMetrics  []string
	}{
		{"no autoscaling, replicas unset", nil, ptr.To[int32](1), false, nil},
		{"no autoscaling, replicas 4", func(g *ferrofedv1alpha1.Gateway) { g.Spec.Replicas = ptr.To[int32](4) }, ptr.To[int32](4), false, nil},
		{"autoscaling with no target: cpu 80", autoscaled(2, 5), nil, true, []string{"cpu=80"}},
		{"autoscaling on memory only", func(g *ferrofedv1alpha1.Gateway) {
			autoscaled(1, 3)(g)
			g.Spec.Autoscaling.TargetMemoryUtilizationPercentage = ptr.To[int32](60)
		}, nil, true, []string{"memory=60"}},
		{"autoscaling on both", func(g *ferrofedv1alpha1.Gateway) {
			autoscaled(1, 3)(g)
			g.Spec.Autoscaling.TargetCPUUtilizationPercentage = ptr.To[int32](50)
			g.Spec.Autoscaling.TargetMemoryUtilizationPercentage = ptr.To[int32](60)
		}, nil, true, []string{"cpu=50", "memory=60"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := gateway(tc.mutate)
			d := Deployment(gw, gatewayspec.Plan(&gw.Spec), nil)
			if got := d.Spec.Replicas; (got == nil) != (tc.wantReplicas == nil) || (got != nil && *got != *tc.wantReplicas) {
				t.Errorf("Deployment replicas = %v, want %v", ptr.Deref(got, -1), ptr.Deref(tc.wantReplicas, -1))
			}
			hpa := HorizontalPodAutoscaler(gw)
			if (hpa != nil) != tc.wantHPA {
				t.Fatalf("HorizontalPodAutoscaler = %v, want one: %v", hpa != nil, tc.wantHPA)
			}
			if hpa == nil {
				return
			}
			ref := hpa.Spec.ScaleTargetRef
			if *ref.Kind != "Deployment" || *ref.Name != gw.Name || *ref.APIVersion != "apps/v1" {
				t.Errorf("scaleTargetRef = %s %s %s, want apps/v1 Deployment %s", *ref.APIVersion, *ref.Kind, *ref.Name, gw.Name)
			}
			if *hpa.Spec.MinReplicas != gw.Spec.Autoscaling.MinReplicas || *hpa.Spec.MaxReplicas != gw.Spec.Autoscaling.MaxReplicas {
				t.Errorf("min/max = %d/%d, want the spec's", *hpa.Spec.MinReplicas, *hpa.Spec.MaxReplicas)
			}
			var metrics []string
			for _, m := range hpa.Spec.Metrics {
				metrics = append(metrics, fmt.Sprintf("%s=%d", *m.Resource.Name, *m.Resource.Target.AverageUtilization))
			}
			if !slices.Equal(metrics, tc.wantMetrics) {
				t.Errorf("metrics = %v, want %v", metrics, tc.wantMetrics)
			}
		})
	}
}

// TestThePodDisruptionBudgetFollowsTheFloor: a budget when the spec asks for two pods
// or more at the least (replicas, or minReplicas), none otherwise.
func TestThePodDisruptionBudgetFollowsTheFloor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*ferrofedv1alpha1.Gateway)
		want   bool
	}{
		{"replicas unset", nil, false},
		{"replicas 2", func(g *ferrofedv1alpha1.Gateway) { g.Spec.Replicas = ptr.To[int32](2) }, true},
		{"minReplicas 1, maxReplicas 10", autoscaled(1, 10), false},
		{"minReplicas 2", autoscaled(2, 2), true},
	} {
		if got := PodDisruptionBudget(gateway(tc.mutate)) != nil; got != tc.want {
			t.Errorf("%s: a PodDisruptionBudget = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSpreadConstraints: the defaults spread over nodes and zones, never refusing to
// schedule, with the Deployment's pod-template-hash; the spec's replace them whole.
func TestSpreadConstraints(t *testing.T) {
	def := SpreadConstraints(gateway(nil), appsv1.DefaultDeploymentUniqueLabelKey)
	if len(def) != 2 {
		t.Fatalf("%d default constraints, want 2", len(def))
	}
	for i, key := range []string{"kubernetes.io/hostname", "topology.kubernetes.io/zone"} {
		c := def[i]
		if *c.TopologyKey != key || *c.MaxSkew != 1 || *c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			t.Errorf("default %d = %s maxSkew %d %s, want %s maxSkew 1 ScheduleAnyway", i, *c.TopologyKey, *c.MaxSkew, *c.WhenUnsatisfiable, key)
		}
		if c.LabelSelector.MatchLabels[LabelInstance] != "edge" || len(c.MatchLabelKeys) != 1 || c.MatchLabelKeys[0] != "pod-template-hash" {
			t.Errorf("default %d selects %v with matchLabelKeys %v, want the pods' labels and pod-template-hash", i, c.LabelSelector.MatchLabels, c.MatchLabelKeys)
		}
	}
	if sts := SpreadConstraints(gateway(nil)); len(sts[0].MatchLabelKeys) != 0 {
		t.Errorf("a StatefulSet's defaults have matchLabelKeys %v, want none", sts[0].MatchLabelKeys)
	}
	own := SpreadConstraints(gateway(func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 3, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule}}
	}), appsv1.DefaultDeploymentUniqueLabelKey)
	if len(own) != 1 || *own[0].TopologyKey != "rack" || *own[0].MaxSkew != 3 || own[0].LabelSelector.MatchLabels[LabelInstance] != "edge" || len(own[0].MatchLabelKeys) != 0 {
		t.Errorf("the spec's constraint became %+v, want it alone, with the pods' selector", own)
	}
}

// TestReplicasSeed: spec.replicas is handed over, within [min, max], only when no
// manager but the operator's apply holds it.
func TestReplicasSeed(t *testing.T) {
	held := []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "scale",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)}}
	ours := []metav1.ManagedFieldsEntry{{Manager: FieldOwner, Operation: metav1.ManagedFieldsOperationApply,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{},"f:selector":{}}}`)}}
	live := func(n int32, managed []metav1.ManagedFieldsEntry) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ManagedFields: managed, ResourceVersion: "41"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(n)}}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*ferrofedv1alpha1.Gateway)
		live   *appsv1.Deployment
		want   int32 // 0: no seed
	}{
		{"no autoscaling", nil, live(3, ours), 0},
		{"no live Deployment", autoscaled(2, 5), nil, 0},
		{"held by the operator: handed over as it is", autoscaled(2, 5), live(3, ours), 3},
		{"held by the operator, under minReplicas", autoscaled(2, 5), live(1, ours), 2},
		{"held by the operator, over maxReplicas", autoscaled(2, 5), live(9, ours), 5},
		{"held by nobody (defaulted at creation)", autoscaled(2, 5), live(1, nil), 2},
		{"held by the autoscaler", autoscaled(2, 5), live(4, append(held, ours...)), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed := replicasSeed(gateway(tc.mutate), tc.live)
			switch {
			case tc.want == 0 && seed != nil:
				t.Errorf("seed of %d replicas, want none", *seed.Spec.Replicas)
			case tc.want != 0 && seed == nil:
				t.Errorf("no seed, want %d replicas", tc.want)
			case seed != nil && *seed.Spec.Replicas != tc.want:
				t.Errorf("seed of %d replicas, want %d", *seed.Spec.Replicas, tc.want)
			case seed != nil && ptr.Deref(seed.ResourceVersion, "") != "41":
				t.Errorf("seed with resourceVersion %q, want the live one's, 41 (a precondition)", ptr.Deref(seed.ResourceVersion, ""))
			}
		})
	}
}

// TestWantReplicas: the status counts against the spec's replicas, or with autoscaling
// the Deployment's (minReplicas before the operator has seen one).
func TestWantReplicas(t *testing.T) {
	dep := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](7)}}
	for _, tc := range []struct {
		name   string
		mutate func(*ferrofedv1alpha1.Gateway)
		dep    *appsv1.Deployment
		want   int32
	}{
		{"spec.replicas 3", func(g *ferrofedv1alpha1.Gateway) { g.Spec.Replicas = ptr.To[int32](3) }, dep, 3},
		{"autoscaled, the Deployment's", autoscaled(2, 9), dep, 7},
		{"autoscaled, no Deployment yet", autoscaled(2, 9), nil, 2},
	} {
		if got := wantReplicas(gateway(tc.mutate), tc.dep); got != tc.want {
			t.Errorf("%s: want %d replicas, got %d", tc.name, tc.want, got)
		}
	}
}
