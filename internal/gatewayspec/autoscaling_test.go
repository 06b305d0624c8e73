package gatewayspec

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// TestAutoscalingGoTwins: each rule of spec.autoscaling and
// spec.topologySpreadConstraints refuses naming its field (test/operator checks the
// messages against the CEL rules' through the apiserver).
func TestAutoscalingGoTwins(t *testing.T) {
	auto := func(minReplicas, maxReplicas int32) *ferrofedv1alpha1.Autoscaling {
		return &ferrofedv1alpha1.Autoscaling{MinReplicas: minReplicas, MaxReplicas: maxReplicas}
	}
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	mem := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	spread := func(n int, maxSkew int32, when corev1.UnsatisfiableConstraintAction) []corev1.TopologySpreadConstraint {
		var out []corev1.TopologySpreadConstraint
		for i := range n {
			out = append(out, corev1.TopologySpreadConstraint{MaxSkew: maxSkew, TopologyKey: fmt.Sprint("k", i), WhenUnsatisfiable: when})
		}
		return out
	}
	tests := []struct {
		name   string
		mutate func(*ferrofedv1alpha1.GatewaySpec)
		want   []string // the fields refused, in order
	}{
		{"autoscaling from 1 to 1", func(s *ferrofedv1alpha1.GatewaySpec) { s.Autoscaling = auto(1, 1) }, nil},
		{"replicas with autoscaling", func(s *ferrofedv1alpha1.GatewaySpec) { s.Replicas, s.Autoscaling = ptr.To[int32](2), auto(2, 3) }, []string{"spec.replicas"}},
		{"max below min", func(s *ferrofedv1alpha1.GatewaySpec) { s.Autoscaling = auto(3, 2) }, []string{"spec.autoscaling.maxReplicas"}},
		{"min 0", func(s *ferrofedv1alpha1.GatewaySpec) { s.Autoscaling = auto(0, 2) }, []string{"spec.autoscaling.minReplicas"}},
		{"max 1001", func(s *ferrofedv1alpha1.GatewaySpec) { s.Autoscaling = auto(1, 1001) }, []string{"spec.autoscaling.maxReplicas"}},
		{"cpu 0 and memory 101", func(s *ferrofedv1alpha1.GatewaySpec) {
			s.Autoscaling = auto(1, 2)
			s.Autoscaling.TargetCPUUtilizationPercentage, s.Autoscaling.TargetMemoryUtilizationPercentage = ptr.To[int32](0), ptr.To[int32](101)
		}, []string{"spec.autoscaling.targetCPUUtilizationPercentage", "spec.autoscaling.targetMemoryUtilizationPercentage"}},
		{"a persistent spool", func(s *ferrofedv1alpha1.GatewaySpec) {
			s.Autoscaling = auto(2, 3)
			s.Audit = &ferrofedv1alpha1.Audit{Spool: &ferrofedv1alpha1.AuditSpool{VolumeClaimTemplate: &ferrofedv1alpha1.SpoolVolumeClaimTemplate{
				Spec: &corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}}}
		}, []string{"spec.autoscaling"}},
		{"the default cpu target, memory requested only", func(s *ferrofedv1alpha1.GatewaySpec) {
			s.Autoscaling, s.Resources.Requests = auto(1, 2), mem
		}, []string{"spec.autoscaling"}},
		{"the default cpu target, a cpu limit", func(s *ferrofedv1alpha1.GatewaySpec) { s.Autoscaling, s.Resources.Limits = auto(1, 2), cpu }, nil},
		{"a memory target, cpu requested only", func(s *ferrofedv1alpha1.GatewaySpec) {
			s.Autoscaling, s.Resources.Requests = auto(1, 2), cpu
			s.Autoscaling.TargetMemoryUtilizationPercentage = ptr.To[int32](80)
		}, []string{"spec.autoscaling"}},
		{"a memory target alone, memory requested only", func(s *ferrofedv1alpha1.GatewaySpec) {
			s.Autoscaling, s.Resources.Requests = auto(1, 2), mem
			s.Autoscaling.TargetMemoryUtilizationPercentage = ptr.To[int32](80)
		}, nil},
		{"8 spread constraints", func(s *ferrofedv1alpha1.GatewaySpec) {
			s.TopologySpreadConstraints = spread(8, 1, corev1.DoNotSchedule)
		}, nil},
		{"9 spread constraints", func(s *ferrofedv1alpha1.GatewaySpec) {
			s.TopologySpreadConstraints = spread(9, 1, corev1.DoNotSchedule)
		},
			[]string{"spec.topologySpreadConstraints"}},
		{"maxSkew 0", func(s *ferrofedv1alpha1.GatewaySpec) {
			s.TopologySpreadConstraints = spread(2, 0, corev1.ScheduleAnyway)
		},
			[]string{"spec.topologySpreadConstraints[0]"}},
		{"an unknown whenUnsatisfiable", func(s *ferrofedv1alpha1.GatewaySpec) { s.TopologySpreadConstraints = spread(1, 1, "Never") },
			[]string{"spec.topologySpreadConstraints[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &ferrofedv1alpha1.GatewaySpec{Image: "i"}
			tt.mutate(s)
			var got []string
			for _, e := range validateAutoscaling(s) {
				got = append(got, e.Field)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("refused %v, want %v", got, tt.want)
			}
		})
	}
}
