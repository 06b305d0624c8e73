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
	"unique"

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

// podReport is what one poll of a pod read. The poller keeps one per polled pod for
// as long as the pod is polled (3,000 of them for 1,000 Gateways of 3 replicas), so
// it is kept small: its strings are the pod's name from the cache and fixed words,
// its states a short sorted slice of interned keys.
type podReport struct {
	pod string
	// phase is one of lifecyclePhases, or "".
	phase string
	// states holds each key's state, sorted by key; nil when the report could not be
	// read.
	states reportStates
	// failure is the class of what went wrong, "" when the report was read.
	failure string
	// auditNotUp counts the polls in a row in which an audit key was not up.
	auditNotUp int32
}

// reportStates are the states of one report's keys, sorted by key.
type reportStates []keyState

// keyState is one key of a report and its state. Keys are interned: every replica of
// a Gateway (and often every Gateway) reports the same ones.
type keyState struct {
	key   unique.Handle[string]
	state uint8 // its index in stateOrder
}

func (k keyState) Key() string   { return k.key.Value() }
func (k keyState) State() string { return stateOrder[k.state] }

// get is key's state, false when the report has no such key.
func (rs reportStates) get(key string) (string, bool) {
	i, found := slices.BinarySearchFunc(rs, key, func(k keyState, key string) int { return strings.Compare(k.Key(), key) })
	if !found {
		return "", false
	}
	return rs[i].State(), true
}

// statesOf makes a report's states from a map of key to state (a state of another
// word is unknown).
func statesOf(m map[string]string) reportStates {
	rs := make(reportStates, 0, len(m))
	for k, s := range m {
		rs = append(rs, keyState{key: unique.Make(k), state: uint8(stateIndex(s))})
	}
	slices.SortFunc(rs, func(a, b keyState) int { return strings.Compare(a.Key(), b.Key()) })
	return rs
}

// lifecyclePhases are the phases of a readiness answer the operator keeps.
var lifecyclePhases = []string{"booting", "serving", "draining"}

// knownPhase is phase as one of lifecyclePhases' own strings (so that no answer's
// bytes are kept), "" for any other word.
func knownPhase(phase string) string {
	if i := slices.Index(lifecyclePhases, phase); i >= 0 {
		return lifecyclePhases[i]
	}
	return ""
}

// parseReport reads the body of {base}/operator/dependencies: "endpoints" an object
// of endpoint id to state, every other key a binding's state, "<binding>_fault" left
// out. A key or state of another shape is refused, never passed on.
func parseReport(body []byte) (reportStates, error) {
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
			out[memberKeyPrefix+id] = s
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
		out[key] = s
	}
	if len(out) > maxReportKeys {
		return nil, fmt.Errorf("the report holds %d keys, more than %d", len(out), maxReportKeys)
	}
	return statesOf(out), nil
}

// stateIndex is s's index in stateOrder; a state of another word is unknown.
func stateIndex(s string) int {
	if i := slices.Index(stateOrder, s); i >= 0 {
		return i
	}
	return slices.Index(stateOrder, "unknown")
}

func worse(a, b string) bool { return stateIndex(a) < stateIndex(b) }

// summarize is status.dependencies (without lastPollTime) of one Gateway's reports.
func summarize(reports []podReport) *ferrofedv1alpha1.DependenciesStatus {
	d := &ferrofedv1alpha1.DependenciesStatus{ReplicasPolled: int32(len(reports))}
	keys := map[string]*ferrofedv1alpha1.DependencyKeyStatus{}
	for _, r := range reports {
		if r.states != nil {
			d.ReplicasRead++
		}
		for _, ks := range r.states {
			key, s := ks.Key(), ks.State()
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
	for _, ks := range r.states { // sorted by key
		if s := ks.State(); s != "up" {
			if len(p.NotUp) == maxPodNotUp {
				break
			}
			p.NotUp = append(p.NotUp, ks.Key()+"="+s)
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
func auditNotUp(states reportStates) bool {
	for _, k := range auditKeys {
		if s, ok := states.get(k); ok && s != "up" {
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
