package dependencies

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestFromHTTP(t *testing.T) {
	cases := []struct {
		name     string
		answered bool
		status   int
		want     State
	}{
		{"an answer of 200 is up", true, 200, Up},
		{"an answer of 400 is up: the member works, the request was wrong", true, 400, Up},
		{"an answer of 404 is up", true, 404, Up},
		{"an answer of 499 is up", true, 499, Up},
		{"an answer of 500 is failing", true, 500, Failing},
		{"an answer of 503 is failing", true, 503, Failing},
		{"no answer is down", false, 0, Down},
		{"an answer broken off after its status is down", false, 200, Down},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := FromHTTP(c.answered, c.status); got != c.want {
				t.Fatalf("FromHTTP(%v, %d) = %s, want %s", c.answered, c.status, got, c.want)
			}
		})
	}
}

func TestTrackerStartsUnknownAndKeepsStatesAcrossReload(t *testing.T) {
	tr := NewTracker("a-query", "b-query")
	if s, _ := tr.Endpoint("a-query"); s != Unknown {
		t.Fatalf("a never observed endpoint is %s, want unknown", s)
	}
	if prev, changed := tr.ObserveEndpoint("a-query", Up); prev != Unknown || !changed {
		t.Fatalf("the first observation replaced %q (changed %v)", prev, changed)
	}
	if _, changed := tr.ObserveEndpoint("a-query", Up); changed {
		t.Fatal("the same state again counts as a change")
	}
	tr.ObserveEndpoint("b-query", Down)
	if _, changed := tr.ObserveEndpoint("gone-query", Up); changed { // not a member: ignored
		t.Fatal("an unknown id changed")
	}
	tr.SetEndpoints([]string{"a-query", "c-query"})
	got := tr.Report().Endpoints
	want := map[string]State{"a-query": Up, "c-query": Unknown}
	if len(got) != len(want) {
		t.Fatalf("endpoints = %v, want %v", got, want)
	}
	for id, s := range want {
		if got[id] != s {
			t.Fatalf("endpoints = %v, want %v", got, want)
		}
	}
	tr.ObserveEndpoint("b-query", Up)
	if _, ok := tr.Endpoint("b-query"); ok {
		t.Fatal("a late observation brought a removed endpoint back")
	}
}

func TestAnyEndpointUp(t *testing.T) {
	tr := NewTracker("a-query", "b-query")
	if tr.AnyEndpointUp() {
		t.Fatal("unknown endpoints count as up")
	}
	tr.ObserveEndpoint("a-query", Failing)
	if tr.AnyEndpointUp() {
		t.Fatal("a failing endpoint counts as up")
	}
	tr.ObserveEndpoint("b-query", Up)
	if !tr.AnyEndpointUp() {
		t.Fatal("an up endpoint is not seen")
	}
}

func TestReportJSONHasTheSeedShape(t *testing.T) {
	tr := NewTracker("node-a-query", "node-b-query")
	tr.ObserveEndpoint("node-a-query", Up)
	tr.ObserveEndpoint("node-b-query", Down)
	tr.SetService("resolver", Up, "")
	tr.SetService("directory", Degraded, "registry-invalid")
	body, err := json.Marshal(tr.Report())
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"directory":"degraded","directory_fault":"registry-invalid","endpoints":{"node-a-query":"up","node-b-query":"down"},"resolver":"up"}`
	if string(body) != want {
		t.Fatalf("body = %s\nwant   %s", body, want)
	}
	tr.SetService("directory", Up, "")
	body, _ = json.Marshal(tr.Report())
	if strings.Contains(string(body), "_fault") {
		t.Fatalf("a fault outlived its degraded state: %s", body)
	}
}

func TestEmptyReportStillHasEndpoints(t *testing.T) {
	body, err := json.Marshal(NewTracker().Report())
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != `{"endpoints":{}}` {
		t.Fatalf("body = %s", body)
	}
}

func TestCollectorExportsOneSeriesPerState(t *testing.T) {
	tr := NewTracker("a-query")
	tr.ObserveEndpoint("a-query", Failing)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(tr.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 1 || families[0].GetName() != MetricName {
		t.Fatalf("gathered %v, want one family %s", families, MetricName)
	}
	got := map[string]float64{}
	for _, m := range families[0].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["dependency"] != MemberDependency || labels["endpoint"] != "a-query" {
			t.Fatalf("unexpected labels %v", labels)
		}
		got[labels["state"]] = m.GetGauge().GetValue()
	}
	want := map[string]float64{"up": 0, "down": 0, "failing": 1, "degraded": 0, "unknown": 0}
	if len(got) != len(want) {
		t.Fatalf("series = %v, want %v", got, want)
	}
	for s, v := range want {
		if got[s] != v {
			t.Fatalf("series = %v, want %v", got, want)
		}
	}
}

func TestLiveServiceIsReadAtEachReportAndLeavesWithRemove(t *testing.T) {
	tr := NewTracker()
	state := Unknown
	tr.SetService("audit_repository", Up, "stale")
	tr.SetServiceFunc("audit_repository", func() State { return state })
	if got := tr.Report().Services["audit_repository"]; got != Unknown {
		t.Fatalf("live key = %s, want unknown (the recorded state must not win)", got)
	}
	if f := tr.Report().Faults["audit_repository"]; f != "" {
		t.Fatalf("a recorded fault outlived SetServiceFunc: %q", f)
	}
	state = Degraded
	if got := tr.Report().Services["audit_repository"]; got != Degraded {
		t.Fatalf("live key = %s after its source changed, want degraded", got)
	}
	tr.RemoveService("audit_repository")
	if _, ok := tr.Report().Services["audit_repository"]; ok {
		t.Fatal("a removed live key is still reported")
	}
}

// A live key with a fault reports it beside its state while the fault holds, and
// drops it when it clears.
func TestALiveServiceReportsItsFault(t *testing.T) {
	tr := NewTracker()
	state, fault := Failing, "spool-storage-failed"
	tr.SetServiceFaultFunc("audit_repository", func() (State, string) { return state, fault })
	r := tr.Report()
	if r.Services["audit_repository"] != Failing || r.Faults["audit_repository"] != "spool-storage-failed" {
		t.Fatalf("report %+v, want failing with its fault", r)
	}
	body, err := r.MarshalJSON()
	if err != nil || !strings.Contains(string(body), `"audit_repository_fault":"spool-storage-failed"`) {
		t.Fatalf("body %s (%v), want the fault key", body, err)
	}
	state, fault = Up, ""
	if r := tr.Report(); r.Services["audit_repository"] != Up || r.Faults["audit_repository"] != "" {
		t.Fatalf("report %+v, want up without a fault", r)
	}
}
