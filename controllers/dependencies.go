package controllers

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// The pure part of reading the pods' dependency reports (docs/operator.md, "The
// operator reads its pods"): a report's parse, the sum over the replicas, and the
// conditions it sets.

// The states of a report key, worst first (gateway/dependencies).
var stateOrder = []string{"down", "failing", "degraded", "unknown", "up"}

// memberKeyPrefix starts a member endpoint's key in status.dependencies.
const memberKeyPrefix = "member/"

// maxReportKeys bounds the keys one report may hold; maxNamedInMessage how many keys a
// condition's message names.
const (
	maxReportKeys      = 512
	maxNamedInMessage  = 10
	maxPodNotUp        = 16
	auditDegradedPolls = 2
)

var (
	endpointIDRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	bindingKeyRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,40}$`)
)

// auditKeys are the report keys of the audit trail's destinations.
var auditKeys = []string{"audit_repository", "audit_feed"}

// podReport is what one poll of a pod read.
type podReport struct {
	pod   string
	phase string
	// states maps each key to its state; nil when the report could not be read.
	states map[string]string
	// failure is the class of what went wrong, "" when the report was read.
	failure string
	// auditNotUp counts the polls in a row in which an audit key was not up.
	auditNotUp int
}

// parseReport reads the body of {base}/operator/dependencies: "endpoints" an object
// of endpoint id to state, every other key a binding's state, "<binding>_fault" left
// out. A key or state of another shape is refused, never passed on.
func parseReport(body []byte) (map[string]string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, errors.New("the report is not a JSON object")
	}
	out := map[string]string{}
	if raw, ok := top["endpoints"]; ok {
		var eps map[string]string
		if err := json.Unmarshal(raw, &eps); err != nil {
			return nil, errors.New("the report's endpoints are not an object of states")
		}
		for id, s := range eps {
			if !endpointIDRE.MatchString(id) {
				return nil, errors.New("the report names an endpoint id of another shape")
			}
			out[memberKeyPrefix+id] = knownState(s)
		}
	}
	for key, raw := range top {
		if key == "endpoints" || strings.HasSuffix(key, "_fault") {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || !bindingKeyRE.MatchString(key) {
			return nil, errors.New("the report holds a key of another shape")
		}
		out[key] = knownState(s)
	}
	if len(out) > maxReportKeys {
		return nil, fmt.Errorf("the report holds %d keys, more than %d", len(out), maxReportKeys)
	}
	return out, nil
}

func knownState(s string) string {
	if slices.Contains(stateOrder, s) {
		return s
	}
	return "unknown"
}

func worse(a, b string) bool { return slices.Index(stateOrder, a) < slices.Index(stateOrder, b) }

// summarize is status.dependencies (without lastPollTime) of one Gateway's reports.
func summarize(reports []podReport) *ferrofedv1alpha1.DependenciesStatus {
	d := &ferrofedv1alpha1.DependenciesStatus{ReplicasPolled: int32(len(reports))}
	keys := map[string]*ferrofedv1alpha1.DependencyKeyStatus{}
	for _, r := range reports {
		if r.states != nil {
			d.ReplicasRead++
		}
		for key, s := range r.states {
			k := keys[key]
			if k == nil {
				k = &ferrofedv1alpha1.DependencyKeyStatus{Key: key, State: s}
				keys[key] = k
			}
			if worse(s, k.State) {
				k.State = s
			}
			*countOf(k, s)++
		}
	}
	members, up := 0, 0
	for _, k := range keys {
		if strings.HasPrefix(k.Key, memberKeyPrefix) {
			members++
			if k.Up == d.ReplicasRead {
				up++
			}
		}
	}
	if members > 0 {
		d.MembersReachable = fmt.Sprintf("%d/%d", up, members)
	}
	list := slices.Collect(maps.Values(keys))
	slices.SortFunc(list, func(a, b *ferrofedv1alpha1.DependencyKeyStatus) int {
		return cmp.Or(cmp.Compare(slices.Index(stateOrder, a.State), slices.Index(stateOrder, b.State)), strings.Compare(a.Key, b.Key))
	})
	for i, k := range list {
		if i == ferrofedv1alpha1.MaxDependencyKeys {
			d.KeysNotListed = int32(len(list) - i)
			break
		}
		d.Keys = append(d.Keys, *k)
	}
	sorted := slices.Clone(reports)
	slices.SortFunc(sorted, func(a, b podReport) int { return strings.Compare(a.pod, b.pod) })
	for i, r := range sorted {
		if i == ferrofedv1alpha1.MaxPolledPods {
			break
		}
		d.Pods = append(d.Pods, podStatus(r))
	}
	return d
}

func countOf(k *ferrofedv1alpha1.DependencyKeyStatus, s string) *int32 {
	switch s {
	case "up":
		return &k.Up
	case "down":
		return &k.Down
	case "failing":
		return &k.Failing
	case "degraded":
		return &k.Degraded
	}
	return &k.Unknown
}

func podStatus(r podReport) ferrofedv1alpha1.PolledPodStatus {
	p := ferrofedv1alpha1.PolledPodStatus{Name: r.pod, Lifecycle: r.phase, Message: r.failure}
	for _, key := range slices.Sorted(maps.Keys(r.states)) {
		if s := r.states[key]; s != "up" {
			if len(p.NotUp) == maxPodNotUp {
				break
			}
			p.NotUp = append(p.NotUp, key+"="+s)
		}
	}
	return p
}

// dependencyConditions are MembersReachable and BindingsHealthy of d (nil: not polled).
func dependencyConditions(d *ferrofedv1alpha1.DependenciesStatus, why string) (members, bindings metav1.Condition) {
	members = metav1.Condition{Type: ferrofedv1alpha1.ConditionMembersReachable}
	bindings = metav1.Condition{Type: ferrofedv1alpha1.ConditionBindingsHealthy}
	if d == nil || d.ReplicasRead == 0 {
		for _, c := range []*metav1.Condition{&members, &bindings} {
			c.Status, c.Reason, c.Message = metav1.ConditionUnknown, ferrofedv1alpha1.ReasonNotPolled, why
		}
		return members, bindings
	}
	var down, unhealthy []string
	for _, k := range d.Keys {
		member := strings.HasPrefix(k.Key, memberKeyPrefix)
		switch {
		case member && (k.State == "down" || k.State == "failing"):
			down = append(down, fmt.Sprintf("%s %s on %d of %d replicas", strings.TrimPrefix(k.Key, memberKeyPrefix), k.State, k.Down+k.Failing, d.ReplicasRead))
		case !member && k.State != "up" && k.State != "unknown":
			unhealthy = append(unhealthy, fmt.Sprintf("%s %s on %d of %d replicas", k.Key, k.State, k.Down+k.Failing+k.Degraded, d.ReplicasRead))
		}
	}
	members.Status, members.Reason = metav1.ConditionTrue, ferrofedv1alpha1.ReasonAllMembersReachable
	members.Message = fmt.Sprintf("Every replica read (%d) reports every member endpoint it asked reachable (%s).", d.ReplicasRead, d.MembersReachable)
	if len(down) > 0 {
		members.Status, members.Reason = metav1.ConditionFalse, ferrofedv1alpha1.ReasonMembersDown
		members.Message = "Members not reachable: " + named(down) + "."
	}
	bindings.Status, bindings.Reason = metav1.ConditionTrue, ferrofedv1alpha1.ReasonAllBindingsUp
	bindings.Message = fmt.Sprintf("Every replica read (%d) reports every binding up.", d.ReplicasRead)
	if len(unhealthy) > 0 {
		bindings.Status, bindings.Reason = metav1.ConditionFalse, ferrofedv1alpha1.ReasonBindingsUnhealthy
		bindings.Message = "Bindings not up: " + named(unhealthy) + "."
	}
	return members, bindings
}

// named joins at most maxNamedInMessage items and counts the rest.
func named(items []string) string {
	if len(items) <= maxNamedInMessage {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:maxNamedInMessage], "; ") + fmt.Sprintf("; and %d more", len(items)-maxNamedInMessage)
}

// auditDegraded is the AuditDelivering condition the reports ask for, or false when
// they ask for none: False when a replica reported an audit key not up in
// auditDegradedPolls polls in a row.
func auditDegraded(reports []podReport) (metav1.Condition, bool) {
	var pods []string
	for _, r := range reports {
		if r.auditNotUp >= auditDegradedPolls {
			pods = append(pods, r.pod)
		}
	}
	if len(pods) == 0 {
		return metav1.Condition{}, false
	}
	slices.Sort(pods)
	return metav1.Condition{Type: ferrofedv1alpha1.ConditionAuditDelivering, Status: metav1.ConditionFalse, Reason: ferrofedv1alpha1.ReasonAuditDegraded,
		Message: fmt.Sprintf("%d replica(s) report the audit destination not up in %d polls in a row (%s): their records wait in the spool.",
			len(pods), auditDegradedPolls, named(pods))}, true
}

// auditNotUp reports whether states hold an audit key that is not up.
func auditNotUp(states map[string]string) bool {
	for _, k := range auditKeys {
		if s, ok := states[k]; ok && s != "up" {
			return true
		}
	}
	return false
}

// setDependencies writes d and its conditions into st; the audit condition only when
// the reports degrade it and the spool's claims have nothing worse to say.
func setDependencies(st *ferrofedv1alpha1.GatewayStatus, generation int64, d *ferrofedv1alpha1.DependenciesStatus, reports []podReport, why string) {
	st.Dependencies = d
	members, bindings := dependencyConditions(d, why)
	conds := []metav1.Condition{members, bindings}
	if audit, ok := auditDegraded(reports); ok && !meta.IsStatusConditionFalse(st.Conditions, ferrofedv1alpha1.ConditionAuditDelivering) {
		conds = append(conds, audit)
	}
	for _, c := range conds {
		c.ObservedGeneration = generation
		c.Message = capMessage(c.Message)
		meta.SetStatusCondition(&st.Conditions, c)
	}
}
