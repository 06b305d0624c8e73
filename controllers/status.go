package controllers

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// configOutcome is what rendering the Gateway's configuration gave: the rendered
// ferrofed.toml, or why there is none.
type configOutcome struct {
	rendered []byte
	// reason and message are set when the configuration is refused.
	reason  string
	message string
}

func (o configOutcome) valid() bool { return o.reason == "" }

// applyProblem is why the owned objects were not (all) applied: a name conflict, a
// refused apply, an image the operator does not allow. The zero value is none.
type applyProblem struct {
	reason  string
	message string
}

func (p applyProblem) Error() string { return p.reason + ": " + p.message }

// configValidCondition is True when the rendered configuration passed `config check`.
func configValidCondition(o configOutcome) metav1.Condition {
	if !o.valid() {
		return metav1.Condition{Type: ferrofedv1alpha1.ConditionConfigValid, Status: metav1.ConditionFalse,
			Reason: o.reason, Message: capMessage(o.message)}
	}
	return metav1.Condition{Type: ferrofedv1alpha1.ConditionConfigValid, Status: metav1.ConditionTrue,
		Reason: ferrofedv1alpha1.ReasonConfigValid, Message: "The rendered ferrofed.toml passed config check."}
}

// readyCondition is True when the Deployment has every desired pod ready and updated
// and nothing stopped the owned objects from being applied.
func readyCondition(gw *ferrofedv1alpha1.Gateway, dep *appsv1.Deployment, o configOutcome, ap applyProblem) metav1.Condition {
	c := metav1.Condition{Type: ferrofedv1alpha1.ConditionReady, Status: metav1.ConditionFalse}
	want := wantReplicas(gw, dep)
	switch {
	case ap.reason != "":
		c.Reason, c.Message = ap.reason, capMessage(ap.message)
	case dep == nil && !o.valid():
		c.Reason, c.Message = ferrofedv1alpha1.ReasonInvalidConfig, "No Deployment was created: the configuration is invalid."
	case dep == nil:
		c.Reason, c.Message = ferrofedv1alpha1.ReasonDeploymentNotFound, "The Deployment does not exist yet."
	case dep.Status.ReadyReplicas >= want && dep.Status.UpdatedReplicas >= want:
		c.Status, c.Reason = metav1.ConditionTrue, ferrofedv1alpha1.ReasonReplicasReady
		c.Message = fmt.Sprintf("%d of %d pods are ready.", dep.Status.ReadyReplicas, want)
	default:
		c.Reason = ferrofedv1alpha1.ReasonReplicasNotReady
		c.Message = fmt.Sprintf("%d of %d pods are ready.", dep.Status.ReadyReplicas, want)
	}
	return c
}

// progressingCondition is True while the Deployment has not observed its latest spec,
// or runs pods of an older template, or has too few updated pods.
func progressingCondition(gw *ferrofedv1alpha1.Gateway, dep *appsv1.Deployment, o configOutcome) metav1.Condition {
	c := metav1.Condition{Type: ferrofedv1alpha1.ConditionProgressing, Status: metav1.ConditionFalse}
	want := wantReplicas(gw, dep)
	switch {
	case dep == nil && !o.valid():
		c.Reason, c.Message = ferrofedv1alpha1.ReasonInvalidConfig, "Nothing is rolled out: the configuration is invalid."
	case dep == nil:
		c.Reason, c.Message = ferrofedv1alpha1.ReasonDeploymentNotFound, "The Deployment does not exist yet."
	case dep.Status.ObservedGeneration < dep.Generation || dep.Status.UpdatedReplicas < want || dep.Status.Replicas > dep.Status.UpdatedReplicas:
		c.Status, c.Reason = metav1.ConditionTrue, ferrofedv1alpha1.ReasonRollingOut
		c.Message = fmt.Sprintf("%d of %d pods run the latest template.", dep.Status.UpdatedReplicas, want)
	default:
		c.Reason, c.Message = ferrofedv1alpha1.ReasonRolloutComplete, fmt.Sprintf("All %d pods run the latest template.", want)
	}
	return c
}

// desiredStatus is the Gateway's status for its plan, the observed Deployment (nil when
// there is none) and configuration. Conditions keep their lastTransitionTime when
// unchanged.
// drained are drains reported since the last status, merged into status.drains.
func desiredStatus(gw *ferrofedv1alpha1.Gateway, plan lifecycle.Plan, dep *appsv1.Deployment, o configOutcome, ap applyProblem,
	drained []ferrofedv1alpha1.DrainRecord) ferrofedv1alpha1.GatewayStatus {
	st := *gw.Status.DeepCopy()
	st.Drains = mergeDrains(st.Drains, drained)
	st.ObservedGeneration = gw.Generation
	breakdown := gatewayspec.Breakdown(plan)
	st.TerminationGracePeriodSeconds, st.GracePeriod = plan.GracePeriodSeconds, &breakdown
	st.Selector = labels.SelectorFromSet(SelectorLabels(gw)).String()
	st.Replicas, st.ReadyReplicas = 0, 0
	if dep != nil {
		st.Replicas, st.ReadyReplicas = dep.Status.Replicas, dep.Status.ReadyReplicas
	}
	for _, c := range []metav1.Condition{
		readyCondition(gw, dep, o, ap),
		progressingCondition(gw, dep, o),
		configValidCondition(o),
		drainsCondition(st.Drains),
		auditCondition(st.Audit),
	} {
		c.ObservedGeneration = gw.Generation
		meta.SetStatusCondition(&st.Conditions, c)
	}
	return st
}

// maxConditionMessage bounds a condition's message well under the API's 32,768 bytes,
// so that a status with hundreds of problems is still written (and read by a human).
const maxConditionMessage = 4096

// capMessage keeps the lines of msg that fit in maxConditionMessage and says how many
// were left out: a status stays writable whatever the configuration holds.
func capMessage(msg string) string {
	if len(msg) <= maxConditionMessage {
		return msg
	}
	lines := strings.Split(msg, "\n")
	var b strings.Builder
	for i, l := range lines {
		more := fmt.Sprintf("\n  ... and %d more line(s)", len(lines)-i)
		if b.Len()+len(l)+1+len(more) > maxConditionMessage {
			if i == 0 { // one huge line: cut it
				cut := maxConditionMessage - len(more) - 3
				b.WriteString(l[:cut] + "...")
				more = fmt.Sprintf("\n  ... and %d more line(s)", len(lines)-1)
			}
			b.WriteString(more)
			return b.String()
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	return b.String()
}

// wantReplicas is how many pods the Gateway's workload should run: spec.replicas (or
// its default); with spec.autoscaling what the autoscaler last set on the Deployment,
// or minReplicas while it has set nothing the operator has seen.
func wantReplicas(gw *ferrofedv1alpha1.Gateway, dep *appsv1.Deployment) int32 {
	if !gw.Spec.Autoscaled() {
		return gw.Spec.ReplicasOrDefault()
	}
	if dep != nil && dep.Spec.Replicas != nil {
		return *dep.Spec.Replicas
	}
	return gw.Spec.FloorReplicas()
}
