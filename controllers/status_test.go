package controllers

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

func deployment(generation, observed int64, replicas, updated, ready int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: generation},
		Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas,
			UpdatedReplicas: updated, ReadyReplicas: ready},
	}
}

var (
	validConfig   = configOutcome{rendered: []byte("x")}
	invalidConfig = configOutcome{reason: ferrofedv1alpha1.ReasonInvalidConfig, message: "server.listen: bad"}
)

func TestConditions(t *testing.T) {
	two := func(g *ferrofedv1alpha1.Gateway) { g.Spec.Replicas = ptr.To[int32](2) }
	cases := []struct {
		name                      string
		mutate                    func(*ferrofedv1alpha1.Gateway)
		dep                       *appsv1.Deployment
		config                    configOutcome
		apply                     applyProblem
		ready, progressing, valid metav1.ConditionStatus
		readyReason, progReason   string
	}{
		{"no Deployment yet is neither ready nor progressing", nil, nil, validConfig, applyProblem{},
			"False", "False", "True", ferrofedv1alpha1.ReasonDeploymentNotFound, ferrofedv1alpha1.ReasonDeploymentNotFound},
		{"an invalid config without a Deployment says why", nil, nil, invalidConfig, applyProblem{},
			"False", "False", "False", ferrofedv1alpha1.ReasonInvalidConfig, ferrofedv1alpha1.ReasonInvalidConfig},
		{"a Deployment not yet observed is rolling out", nil, deployment(1, 0, 0, 0, 0), validConfig, applyProblem{},
			"False", "True", "True", ferrofedv1alpha1.ReasonReplicasNotReady, ferrofedv1alpha1.ReasonRollingOut},
		{"every pod ready and updated is ready and complete", two, deployment(3, 3, 2, 2, 2), validConfig, applyProblem{},
			"True", "False", "True", ferrofedv1alpha1.ReasonReplicasReady, ferrofedv1alpha1.ReasonRolloutComplete},
		{"an old pod still running is progressing", two, deployment(3, 3, 3, 2, 2), validConfig, applyProblem{},
			"True", "True", "True", ferrofedv1alpha1.ReasonReplicasReady, ferrofedv1alpha1.ReasonRollingOut},
		{"one pod of two ready is not ready", two, deployment(3, 3, 2, 2, 1), validConfig, applyProblem{},
			"False", "False", "True", ferrofedv1alpha1.ReasonReplicasNotReady, ferrofedv1alpha1.ReasonRolloutComplete},
		{"a name conflict says so, whatever the Deployment", nil, deployment(1, 1, 1, 1, 1), validConfig,
			applyProblem{ferrofedv1alpha1.ReasonNameConflict, "Service edge already exists"},
			"False", "False", "True", ferrofedv1alpha1.ReasonNameConflict, ferrofedv1alpha1.ReasonRolloutComplete},
		{"a refused apply says so before DeploymentNotFound", nil, nil, validConfig,
			applyProblem{ferrofedv1alpha1.ReasonApplyFailed, "ConfigMap edge: too long"},
			"False", "False", "True", ferrofedv1alpha1.ReasonApplyFailed, ferrofedv1alpha1.ReasonDeploymentNotFound},
		{"an invalid config keeps reporting the running Deployment", nil, deployment(1, 1, 1, 1, 1), invalidConfig, applyProblem{},
			"True", "False", "False", ferrofedv1alpha1.ReasonReplicasReady, ferrofedv1alpha1.ReasonRolloutComplete},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gw := gateway(tc.mutate)
			r, p, v := readyCondition(gw, tc.dep, tc.config, tc.apply), progressingCondition(gw, tc.dep, tc.config), configValidCondition(tc.config)
			if r.Status != tc.ready || r.Reason != tc.readyReason {
				t.Errorf("Ready = %s/%s, want %s/%s", r.Status, r.Reason, tc.ready, tc.readyReason)
			}
			if p.Status != tc.progressing || p.Reason != tc.progReason {
				t.Errorf("Progressing = %s/%s, want %s/%s", p.Status, p.Reason, tc.progressing, tc.progReason)
			}
			if v.Status != tc.valid {
				t.Errorf("ConfigValid = %s, want %s", v.Status, tc.valid)
			}
			if !tc.config.valid() && v.Message != tc.config.message {
				t.Errorf("ConfigValid message = %q, want the config's own %q", v.Message, tc.config.message)
			}
		})
	}
}

func TestDesiredStatusIsStableWhenNothingChanged(t *testing.T) {
	gw := gateway(nil)
	dep := deployment(1, 1, 1, 1, 1)
	gw.Status = desiredStatus(gw, gatewayspec.Plan(&gw.Spec), dep, validConfig, applyProblem{}, nil)
	again := desiredStatus(gw, gatewayspec.Plan(&gw.Spec), dep, validConfig, applyProblem{}, nil)
	for i := range again.Conditions {
		if !again.Conditions[i].LastTransitionTime.Equal(&gw.Status.Conditions[i].LastTransitionTime) {
			t.Errorf("condition %s moved its lastTransitionTime without changing", again.Conditions[i].Type)
		}
	}
	if again.TerminationGracePeriodSeconds != 50 || again.GracePeriod.DrainDelay != "10s" || !again.GracePeriod.DrainDelayDerived {
		t.Errorf("grace period = %d %+v, want 50 with a derived drain delay of 10s", again.TerminationGracePeriodSeconds, again.GracePeriod)
	}
	if again.Selector != "app.kubernetes.io/instance=edge,app.kubernetes.io/name=ferrofed" {
		t.Errorf("selector = %q", again.Selector)
	}
}

func TestCapMessageKeepsAStatusWritable(t *testing.T) {
	var lines []string
	for i := range 300 {
		lines = append(lines, fmt.Sprintf("  registry.members[%d].query_endpoint: must be an absolute http or https URL, not a relative one", i))
	}
	tests := []struct {
		name, in string
		wantMore string
	}{
		{"a short message is kept whole", "one problem", ""},
		{"300 problems keep the first and count the rest", "spec.config.inline: 300 problem(s)\n" + strings.Join(lines, "\n"), "more line(s)"},
		{"one huge line is cut", strings.Repeat("x", 40000), "... and 0 more line(s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := capMessage(tt.in)
			if len(got) > maxConditionMessage {
				t.Fatalf("%d bytes, over %d", len(got), maxConditionMessage)
			}
			if tt.wantMore == "" && got != tt.in {
				t.Fatalf("a message under the cap changed: %q", got)
			}
			if tt.wantMore != "" && (!strings.Contains(got, tt.wantMore) || !strings.HasPrefix(got, tt.in[:20])) {
				t.Fatalf("capped message %q lacks its start or %q", got[len(got)-60:], tt.wantMore)
			}
		})
	}
}
