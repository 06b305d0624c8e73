package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// The printers are pure: a Gateway in, text out (golden files in testdata/). Times are
// printed as RFC 3339 in UTC, never as ages, so that an output reads the same later.

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// writeStatus is `status NAME`.
func writeStatus(w io.Writer, gw *ferrofedv1alpha1.Gateway) error {
	st := gw.Status
	fmt.Fprintf(w, "Gateway %s/%s (generation %d, status of generation %d)\n\n", gw.Namespace, gw.Name, gw.Generation, st.ObservedGeneration)
	tw := table(w)
	fmt.Fprintln(tw, "CONDITION\tSTATUS\tREASON\tMESSAGE")
	for _, c := range st.Conditions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, firstLine(c.Message))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nReplicas: %d, ready %d\n", st.Replicas, st.ReadyReplicas)
	if d := st.Dependencies; d != nil && len(d.Pods) > 0 {
		tw = table(w)
		fmt.Fprintln(tw, "POD\tLIFECYCLE\tNOT UP\tREAD")
		for _, p := range d.Pods {
			read := "yes"
			if p.Message != "" {
				read = "no: " + p.Message
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, orDash(p.Lifecycle), orDash(strings.Join(p.NotUp, ",")), read)
		}
		_ = tw.Flush()
	}
	writeGrace(w, st)
	writeDependencies(w, st.Dependencies)
	writeAudit(w, st.Audit)
	return nil
}

// writeGrace compares the grace period with the longest drain in status.drains.
func writeGrace(w io.Writer, st ferrofedv1alpha1.GatewayStatus) {
	fmt.Fprintf(w, "\nGrace period: %ds", st.TerminationGracePeriodSeconds)
	if b := st.GracePeriod; b != nil {
		how := "derived"
		if b.Explicit {
			how = "explicit"
		}
		fmt.Fprintf(w, " (%s: drain delay %s, shutdown timeout %s, bindings drain timeout %s, headroom %s)",
			how, b.DrainDelay, b.ShutdownTimeout, b.BindingsDrainTimeout, b.TerminationHeadroom)
	}
	fmt.Fprintln(w)
	var longest *ferrofedv1alpha1.DrainRecord
	for i := range st.Drains {
		if longest == nil || st.Drains[i].DurationMilliseconds > longest.DurationMilliseconds {
			longest = &st.Drains[i]
		}
	}
	if longest == nil {
		fmt.Fprintln(w, "Longest recent drain: none recorded")
		return
	}
	share := ""
	if longest.GracePeriodSeconds > 0 {
		share = fmt.Sprintf(", %.0f%% of its grace period of %ds", 100*float64(longest.DurationMilliseconds)/float64(longest.GracePeriodSeconds*1000), longest.GracePeriodSeconds)
	}
	fmt.Fprintf(w, "Longest recent drain: %s (%s, pod %s%s)\n", time.Duration(longest.DurationMilliseconds)*time.Millisecond, longest.Outcome, longest.Pod, share)
}

func writeDependencies(w io.Writer, d *ferrofedv1alpha1.DependenciesStatus) {
	if d == nil {
		fmt.Fprintln(w, "\nDependencies: not polled (see MembersReachable)")
		return
	}
	when := "never"
	if d.LastPollTime != nil {
		when = stamp(d.LastPollTime.Time)
	}
	fmt.Fprintf(w, "\nDependencies: read from %d of %d replicas polled, members reachable %s, as of %s\n", d.ReplicasRead, d.ReplicasPolled, orDash(d.MembersReachable), when)
	if len(d.Keys) == 0 {
		return
	}
	tw := table(w)
	fmt.Fprintln(tw, "KEY\tSTATE\tUP\tDOWN\tFAILING\tDEGRADED\tUNKNOWN")
	for _, k := range d.Keys {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\n", k.Key, k.State, k.Up, k.Down, k.Failing, k.Degraded, k.Unknown)
	}
	_ = tw.Flush()
	if d.KeysNotListed > 0 {
		fmt.Fprintf(w, "... and %d more keys not listed\n", d.KeysNotListed)
	}
}

func writeAudit(w io.Writer, a *ferrofedv1alpha1.AuditStatus) {
	if a == nil {
		fmt.Fprintln(w, "\nAudit backlog: no spool claims")
		return
	}
	fmt.Fprintf(w, "\nAudit backlog: %d records, %d bytes in %d claims (%d orphaned)", a.UndeliveredRecords, a.UndeliveredBytes,
		int32(len(a.Claims))+a.ClaimsNotListed, a.OrphanedClaims)
	if len(a.RetiringPods) > 0 {
		fmt.Fprintf(w, "; %d retiring pods", len(a.RetiringPods))
	}
	fmt.Fprintln(w)
}

// writeDrains is `drains NAME`.
func writeDrains(w io.Writer, gw *ferrofedv1alpha1.Gateway) error {
	if len(gw.Status.Drains) == 0 {
		fmt.Fprintf(w, "No drain recorded for Gateway %s/%s.\n", gw.Namespace, gw.Name)
		return nil
	}
	tw := table(w)
	fmt.Fprintln(tw, "POD\tENDED\tOUTCOME\tDURATION\tGRACE\tCUT\tABANDONED\tEXIT")
	for _, d := range gw.Status.Drains {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%ds\t%d\t%s\t%d\n", d.Pod, stamp(d.Ended.Time), d.Outcome,
			time.Duration(d.DurationMilliseconds)*time.Millisecond, d.GracePeriodSeconds, d.CutConnections,
			orDash(strings.Join(d.AbandonedBindings, ",")), d.ExitCode)
	}
	return tw.Flush()
}

// writeReport is `report NAME [--pod POD]`: the report in the gateway's own shape
// (docs/bindings.md, "The dependency report"), from status.dependencies: across the
// replicas each key's worst state; for one pod, the keys it does not report up with
// their state and every other key of the aggregate as up.
func writeReport(w io.Writer, gw *ferrofedv1alpha1.Gateway, pod string) error {
	d := gw.Status.Dependencies
	if d == nil {
		return fmt.Errorf("Gateway %s/%s has no status.dependencies: the operator has read no report of its pods (see its MembersReachable condition)", gw.Namespace, gw.Name)
	}
	states := map[string]string{}
	for _, k := range d.Keys {
		states[k.Key] = k.State
	}
	if pod != "" {
		i := slices.IndexFunc(d.Pods, func(p ferrofedv1alpha1.PolledPodStatus) bool { return p.Name == pod })
		if i < 0 {
			return fmt.Errorf("pod %s is not among the polled pods of Gateway %s/%s", pod, gw.Namespace, gw.Name)
		}
		p := d.Pods[i]
		if p.Message != "" {
			return fmt.Errorf("the report of pod %s could not be read: %s", pod, p.Message)
		}
		for k := range states {
			states[k] = "up"
		}
		for _, kv := range p.NotUp {
			if k, v, ok := strings.Cut(kv, "="); ok {
				states[k] = v
			}
		}
	}
	endpoints := map[string]string{}
	out := map[string]any{"endpoints": endpoints}
	for k, v := range states {
		if id, ok := strings.CutPrefix(k, "member/"); ok {
			endpoints[id] = v
		} else {
			out[k] = v
		}
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// writeCheck is `check -f FILE`: the manifest through the admission rules the webhook
// and the CRD's CEL rules share (gatewayspec.Validate), then what the operator would
// derive from it. A refusal returns errRefused after naming every field.
func writeCheck(w io.Writer, manifest []byte) error {
	var kind metav1.TypeMeta
	if err := yaml.Unmarshal(manifest, &kind); err != nil {
		return fmt.Errorf("the manifest is not YAML or JSON: %w", err)
	}
	if kind.Kind != "Gateway" || kind.APIVersion != ferrofedv1alpha1.GroupVersion.String() {
		return fmt.Errorf("the manifest is a %s %q, not a Gateway of %s", orDash(kind.APIVersion), kind.Kind, ferrofedv1alpha1.GroupVersion)
	}
	gw := &ferrofedv1alpha1.Gateway{}
	if err := yaml.UnmarshalStrict(manifest, gw); err != nil {
		return fmt.Errorf("the manifest is not a valid Gateway: %w", err)
	}
	errs, warnings := gatewayspec.Validate(gw)
	for _, warning := range warnings {
		fmt.Fprintf(w, "Warning: %s\n", warning)
	}
	if c := gw.Spec.Config; c != nil && c.ConfigMapRef != nil {
		fmt.Fprintf(w, "Note: spec.config.configMapRef %s is not read offline: its configuration is not checked\n", c.ConfigMapRef.Name)
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "Gateway %s: refused (%d problems)\n", gw.Name, len(errs))
		for _, e := range errs {
			fmt.Fprintf(w, "  %s: %s\n", e.Field, e.ErrorBody())
		}
		return errRefused
	}
	plan := gatewayspec.Plan(&gw.Spec)
	b := gatewayspec.Breakdown(plan)
	how := "derived"
	if b.Explicit {
		how = "explicit"
	}
	fmt.Fprintf(w, "Gateway %s: admitted\n", gw.Name)
	fmt.Fprintf(w, "terminationGracePeriodSeconds: %d (%s: drain delay %s, shutdown timeout %s, bindings drain timeout %s, headroom %s)\n",
		plan.GracePeriodSeconds, how, b.DrainDelay, b.ShutdownTimeout, b.BindingsDrainTimeout, b.TerminationHeadroom)
	tpl := controllers.Deployment(gw, plan, nil).Spec.Template.Spec.Containers[0]
	for _, p := range []struct {
		name  string
		probe *corev1ac.ProbeApplyConfiguration
	}{{"startup", tpl.StartupProbe}, {"readiness", tpl.ReadinessProbe}, {"liveness", tpl.LivenessProbe}} {
		fmt.Fprintf(w, "%s probe: %s\n", p.name, probeText(p.probe))
	}
	return nil
}

func probeText(p *corev1ac.ProbeApplyConfiguration) string {
	if p == nil {
		return "none"
	}
	var how bytes.Buffer
	switch {
	case p.HTTPGet != nil:
		fmt.Fprintf(&how, "%s GET %s", strings.ToUpper(string(ptr.Deref(p.HTTPGet.Scheme, "HTTP"))), ptr.Deref(p.HTTPGet.Path, "/"))
	case p.Exec != nil:
		fmt.Fprintf(&how, "exec %s", strings.Join(p.Exec.Command, " "))
	}
	fmt.Fprintf(&how, " every %ds, timeout %ds, failure threshold %d", ptr.Deref(p.PeriodSeconds, 0), ptr.Deref(p.TimeoutSeconds, 0), ptr.Deref(p.FailureThreshold, 0))
	return how.String()
}

func firstLine(s string) string {
	first, _, cut := strings.Cut(s, "\n")
	if cut {
		return first + " ..."
	}
	return first
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
