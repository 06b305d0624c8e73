package controllers

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

func TestParseReport(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       map[string]string
		err        string
	}{
		{"endpoints and bindings", `{"endpoints":{"a":"up","b-2":"down"},"consent":"degraded","consent_fault":"timeout","audit_repository":"up"}`,
			map[string]string{"member/a": "up", "member/b-2": "down", "consent": "degraded", "audit_repository": "up"}, ""},
		{"a state of another word is unknown", `{"endpoints":{"a":"sideways"},"resolver":"UP"}`,
			map[string]string{"member/a": "unknown", "resolver": "unknown"}, ""},
		{"no endpoints", `{"endpoints":{}}`, map[string]string{}, ""},
		{"not JSON", `<html>`, nil, "not a JSON object"},
		{"an endpoint id with a dot", `{"endpoints":{"a.b":"up"}}`, nil, "endpoint id of another shape"},
		{"an endpoint id that is a URL", `{"endpoints":{"https://member.test":"up"}}`, nil, "endpoint id of another shape"},
		{"a binding key with a slash", `{"endpoints":{},"a/b":"up"}`, nil, "key of another shape"},
		{"a binding whose state is an object", `{"endpoints":{},"consent":{"url":"x"}}`, nil, "key of another shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseReport([]byte(tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got == nil || len(got) != len(tc.want) {
				t.Fatalf("%v %v, want %v", got, err, tc.want)
			}
			if !slices.IsSortedFunc(got, func(a, b keyState) int { return strings.Compare(a.Key(), b.Key()) }) {
				t.Errorf("the states are not sorted by key: %v", got)
			}
			for k, v := range tc.want {
				if s, ok := got.get(k); !ok || s != v {
					t.Errorf("%s = %q (%v), want %q", k, s, ok, v)
				}
			}
		})
	}
	big := `{"endpoints":{`
	for i := range maxReportKeys + 1 {
		if i > 0 {
			big += ","
		}
		big += `"m` + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + strconv.Itoa(i) + `":"up"`
	}
	if _, err := parseReport([]byte(big + `}}`)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("a report of %d keys: %v", maxReportKeys+1, err)
	}
}

func report(pod string, states map[string]string) podReport {
	return podReport{pod: pod, phase: "serving", states: statesOf(states)}
}

func TestSummarizeTakesTheWorstStateAndCountsEach(t *testing.T) {
	d := summarize([]podReport{
		report("p0", map[string]string{"member/a": "up", "member/b": "down", "consent": "up"}),
		report("p1", map[string]string{"member/a": "up", "member/b": "up", "consent": "degraded"}),
		report("p2", map[string]string{"member/a": "up", "member/b": "failing", "consent": "up"}),
		{pod: "p3", failure: errUnreachable.Error()},
	})
	if d.ReplicasPolled != 4 || d.ReplicasRead != 3 || d.MembersReachable != "1/2" {
		t.Fatalf("polled %d read %d members %q", d.ReplicasPolled, d.ReplicasRead, d.MembersReachable)
	}
	want := []ferrofedv1alpha1.DependencyKeyStatus{
		{Key: "member/b", State: "down", Up: 1, Down: 1, Failing: 1},
		{Key: "consent", State: "degraded", Up: 2, Degraded: 1},
		{Key: "member/a", State: "up", Up: 3},
	}
	if len(d.Keys) != len(want) {
		t.Fatalf("keys %+v", d.Keys)
	}
	for i := range want {
		if d.Keys[i] != want[i] {
			t.Errorf("keys[%d] = %+v, want %+v", i, d.Keys[i], want[i])
		}
	}
	if len(d.Pods) != 4 || d.Pods[0].Name != "p0" || strings.Join(d.Pods[0].NotUp, ",") != "member/b=down" || d.Pods[3].Message == "" || d.Pods[3].Lifecycle != "" {
		t.Errorf("pods %+v", d.Pods)
	}
}

func TestSummarizeIsBounded(t *testing.T) {
	states := map[string]string{}
	for i := range ferrofedv1alpha1.MaxDependencyKeys + 7 {
		states["member/m"+strconv.Itoa(i)] = "down"
	}
	var reports []podReport
	for i := range ferrofedv1alpha1.MaxPolledPods + 3 {
		reports = append(reports, report("p"+strconv.Itoa(i), states))
	}
	d := summarize(reports)
	if len(d.Keys) != ferrofedv1alpha1.MaxDependencyKeys || d.KeysNotListed != 7 || len(d.Pods) != ferrofedv1alpha1.MaxPolledPods ||
		len(d.Pods[0].NotUp) != maxPodNotUp {
		t.Fatalf("keys %d (not listed %d), pods %d, notUp %d", len(d.Keys), d.KeysNotListed, len(d.Pods), len(d.Pods[0].NotUp))
	}
	members, _ := dependencyConditions(d, "")
	if n := strings.Count(members.Message, " down on "); n != maxNamedInMessage || !strings.Contains(members.Message, "and 118 more") {
		t.Errorf("the message names %d members: %s", n, members.Message)
	}
}

func TestDependencyConditions(t *testing.T) {
	for _, tc := range []struct {
		name              string
		reports           []podReport
		members, bindings metav1.ConditionStatus
		memberText        string
		bindingText       string
	}{
		{"nothing read", nil, metav1.ConditionUnknown, metav1.ConditionUnknown, "why", "why"},
		{"all up", []podReport{report("p0", map[string]string{"member/a": "up", "consent": "up"})},
			metav1.ConditionTrue, metav1.ConditionTrue, "(1/1)", "every binding up"},
		{"a member down on one of two", []podReport{report("p0", map[string]string{"member/a": "up", "member/b": "down"}),
			report("p1", map[string]string{"member/a": "up", "member/b": "up"})},
			metav1.ConditionFalse, metav1.ConditionTrue, "b down on 1 of 2 replicas", "every binding up"},
		{"an unknown member is no outage", []podReport{report("p0", map[string]string{"member/a": "unknown"})},
			metav1.ConditionTrue, metav1.ConditionTrue, "(0/1)", ""},
		{"a binding failing", []podReport{report("p0", map[string]string{"member/a": "up", "directory": "failing", "consent": "unknown"})},
			metav1.ConditionTrue, metav1.ConditionFalse, "", "directory failing on 1 of 1 replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d *ferrofedv1alpha1.DependenciesStatus
			if tc.reports != nil {
				d = summarize(tc.reports)
			}
			m, b := dependencyConditions(d, "why")
			if m.Status != tc.members || b.Status != tc.bindings {
				t.Fatalf("MembersReachable %s (%s), BindingsHealthy %s (%s)", m.Status, m.Message, b.Status, b.Message)
			}
			if !strings.Contains(m.Message, tc.memberText) || !strings.Contains(b.Message, tc.bindingText) {
				t.Errorf("messages %q / %q", m.Message, b.Message)
			}
			if strings.Contains(m.Message, "member/") {
				t.Errorf("the message keeps the key prefix: %s", m.Message)
			}
		})
	}
}

// The audit is degraded by two polls in a row of a replica, and not over the spool's
// own False.
func TestAuditDegradedAfterTwoPolls(t *testing.T) {
	once := report("p0", map[string]string{"audit_repository": "degraded"})
	once.auditNotUp = 1
	if _, ok := auditDegraded([]podReport{once}); ok {
		t.Fatal("one poll degraded the audit")
	}
	twice := once
	twice.auditNotUp = 2
	c, ok := auditDegraded([]podReport{twice, report("p1", map[string]string{"audit_repository": "up"})})
	if !ok || c.Status != metav1.ConditionFalse || c.Reason != ferrofedv1alpha1.ReasonAuditDegraded || !strings.Contains(c.Message, "p0") {
		t.Fatalf("%+v %v", c, ok)
	}
	st := ferrofedv1alpha1.GatewayStatus{Conditions: []metav1.Condition{{Type: ferrofedv1alpha1.ConditionAuditDelivering, Status: metav1.ConditionFalse,
		Reason: ferrofedv1alpha1.ReasonHandOverFailed}}}
	setDependencies(&st, 3, summarize([]podReport{twice}), []podReport{twice}, "")
	for _, c := range st.Conditions {
		if c.Type == ferrofedv1alpha1.ConditionAuditDelivering && c.Reason != ferrofedv1alpha1.ReasonHandOverFailed {
			t.Errorf("the spool's False was replaced: %+v", c)
		}
		if c.Type == ferrofedv1alpha1.ConditionMembersReachable && c.ObservedGeneration != 3 {
			t.Errorf("observedGeneration %d", c.ObservedGeneration)
		}
	}
	if !auditNotUp(statesOf(map[string]string{"audit_feed": "down"})) || auditNotUp(statesOf(map[string]string{"consent": "down", "audit_repository": "up"})) {
		t.Error("auditNotUp")
	}
}

func TestPollOptionsAreBounded(t *testing.T) {
	for _, tc := range []struct {
		o    PollOptions
		flag string
	}{
		{PollOptions{}, ""},
		{PollOptions{Interval: time.Second, Concurrency: MaxDependencyPollConcurrency}, ""},
		{PollOptions{Interval: 500 * time.Millisecond}, "--dependency-poll-interval"},
		{PollOptions{Interval: -time.Second}, "--dependency-poll-interval"},
		{PollOptions{Interval: time.Minute, Concurrency: -1}, "--dependency-poll-concurrency"},
		{PollOptions{Interval: time.Minute, Concurrency: MaxDependencyPollConcurrency + 1}, "--dependency-poll-concurrency"},
	} {
		err := tc.o.validate()
		if (tc.flag == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.flag)) {
			t.Errorf("%+v: %v, want the flag %q named", tc.o, err, tc.flag)
		}
	}
}
