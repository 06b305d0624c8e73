package federation_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/gateway/server"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// faultyMembers are one member of each kind the issue names, plus a late good one.
func faultyMembers() []node {
	return []node{
		{id: "node-ok", opts: members.Options{Entries: 2}},
		{id: "node-400", opts: members.Options{Knobs: double.Knobs{Status: 400}}},
		{id: "node-500", opts: members.Options{Knobs: double.Knobs{Status: 500}}},
		{id: "node-hang", opts: members.Options{Knobs: double.Knobs{Fault: double.FaultHang}}},
		{id: "node-refused", opts: members.Options{Knobs: double.Knobs{Fault: double.FaultRefused}}},
		{id: "node-reset", opts: members.Options{Knobs: double.Knobs{Fault: double.FaultReset}}},
		{id: "node-late", opts: members.Options{Entries: 1, Knobs: double.Knobs{Delay: 50 * time.Millisecond}}},
	}
}

func TestAFederatedSearchRecordsEveryMemberAndTheReportEveryState(t *testing.T) {
	const requestTimeout = 600 * time.Millisecond
	h := newHarness(t, harnessOptions{requestTimeout: requestTimeout}, faultyMembers()...)

	h.wantStates(map[string]string{
		"node-ok-query": "unknown", "node-400-query": "unknown", "node-500-query": "unknown", "node-hang-query": "unknown",
		"node-refused-query": "unknown", "node-reset-query": "unknown", "node-late-query": "unknown",
	})

	start := time.Now()
	res, body := h.get("/fhir/Patient?name=smith&_count=10")
	took := time.Since(start)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != fhir.MediaType {
		t.Fatalf("status %d, content type %q: %s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	// The hanging member, which would never answer, is given up at the budget; the
	// margin is for a loaded CI machine, not for the gateway.
	if took > requestTimeout+time.Second {
		t.Fatalf("the query took %v with a request timeout of %v", took, requestTimeout)
	}
	var b searchAnswer
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	if b.ResourceType != "Bundle" || b.Type != "searchset" {
		t.Fatalf("not a searchset: %s", body)
	}
	want := []federation.Record{
		{ID: "node-ok", Outcome: outbound.OK, Status: 200, Entries: 2},
		{ID: "node-400", Outcome: outbound.NodeError, Status: 400},
		{ID: "node-500", Outcome: outbound.NodeError, Status: 500},
		{ID: "node-hang", Outcome: outbound.Timeout},
		{ID: "node-refused", Outcome: outbound.Unreachable},
		{ID: "node-reset", Outcome: outbound.Unreachable, Status: 200},
		{ID: "node-late", Outcome: outbound.OK, Status: 200, Entries: 1},
	}
	if len(b.Meta.Federation) != len(want) {
		t.Fatalf("meta.federation %+v", b.Meta.Federation)
	}
	for i, w := range want {
		got := b.Meta.Federation[i]
		if got.ID != w.ID || got.Outcome != w.Outcome || got.Status != w.Status || got.Entries != w.Entries {
			t.Errorf("record %d = %+v, want %+v", i, got, w)
		}
	}
	if d := b.Meta.Federation[3].DurationMS; d < (requestTimeout - 200*time.Millisecond).Milliseconds() {
		t.Errorf("the hanging member's duration is %d ms", d)
	}
	if d := b.Meta.Federation[6].DurationMS; d < 50 {
		t.Errorf("the late member's duration is %d ms, below its 50 ms delay", d)
	}
	// The matches, in registry order, then one OperationOutcome entry for each member
	// that is not ok, naming it.
	var ids, outcomes []string
	for _, e := range b.Entry {
		switch e.Search.Mode {
		case "match":
			ids = append(ids, e.Resource.ResourceType+"/"+e.Resource.ID)
		case "outcome":
			outcomes = append(outcomes, e.Resource.Issue[0].Severity+" "+e.Resource.Issue[0].Code+" "+e.Resource.Issue[0].Diagnostics)
		}
	}
	if strings.Join(ids, ",") != "Patient/node-ok.node-ok-1,Patient/node-ok.node-ok-2,Patient/node-late.node-late-1" {
		t.Fatalf("entries %v", ids)
	}
	wantOutcomes := []string{
		"warning processing member node-400 answered HTTP 400",
		"warning processing member node-500 answered HTTP 500",
		"warning timeout member node-hang did not answer within the request budget",
		"warning transient member node-refused is unreachable",
		"warning transient member node-reset broke its answer off (HTTP 200)",
	}
	if len(outcomes) != len(wantOutcomes) {
		t.Fatalf("outcome entries %q", outcomes)
	}
	for i, w := range wantOutcomes {
		if !strings.HasPrefix(outcomes[i], w) {
			t.Errorf("outcome entry %d = %q, want %q…", i, outcomes[i], w)
		}
	}
	if got := h.members["node-ok"].LastRequest(); got.Path != "/fhir/Patient" || got.RawQuery != "name=smith&_count=10" {
		t.Fatalf("the member was asked %+v", got)
	}

	raw := h.wantStates(map[string]string{
		"node-ok-query": "up", "node-400-query": "up", "node-500-query": "failing", "node-hang-query": "down",
		"node-refused-query": "down", "node-reset-query": "down", "node-late-query": "up",
	})
	h.assertReportLeaksNothing(raw)
}

// assertReportLeaksNothing checks the raw report against everything it must never
// hold: a URL, an address, a port, a member's body, a credential.
func (h *harness) assertReportLeaksNothing(raw []byte) {
	h.t.Helper()
	body := string(raw)
	forbidden := []string{"http", "://", "127.0.0.1", "localhost", "/fhir", h.Token, "Bearer", "OperationOutcome", "Bundle", "MEMBER-BODY"}
	for _, u := range h.urls {
		pu, _ := url.Parse(u)
		forbidden = append(forbidden, u, pu.Host, ":"+pu.Port(), pu.Port())
	}
	for _, m := range h.members {
		forbidden = append(forbidden, m.Opts.Marker, m.Addr)
	}
	for _, f := range forbidden {
		if f != "" && strings.Contains(body, f) {
			h.t.Fatalf("the report %s contains %q", body, f)
		}
	}
}

func TestARequestThatNeverLeftTheGatewayChangesNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a"})
	for _, path := range []string{"/fhir/patient", "/fhir/Pat1ent", "/fhir/P", "/fhir/Patient_"} {
		res, body := h.get(path)
		if res.StatusCode != 404 || res.Header.Get("Content-Type") != fhir.MediaType || !strings.Contains(string(body), `"resourceType":"OperationOutcome"`) {
			t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
		}
	}
	res, body := h.get("/nodes/node-a/fhir/../../admin")
	if res.StatusCode != 400 && res.StatusCode != 404 {
		t.Fatalf("a dot-segment path answered %d %s", res.StatusCode, body)
	}
	if res, body := h.get("/nodes/nobody/fhir/Patient"); res.StatusCode != 404 || !strings.Contains(string(body), `"code":"not-found"`) {
		t.Fatalf("an unknown member answered %d %s", res.StatusCode, body)
	}
	if n := h.members["node-a"].Requests(); n != 0 {
		t.Fatalf("the member got %d requests", n)
	}
	h.wantStates(map[string]string{"node-a-query": "unknown"})
}

func TestAClientThatLeavesCancelsTheMemberCallsAndRecordsNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{requestTimeout: 10 * time.Second},
		node{id: "node-hang", opts: members.Options{Knobs: double.Knobs{Fault: double.FaultHang}}},
		node{id: "node-slow", opts: members.Options{Knobs: double.Knobs{Delay: 5 * time.Second}}})
	for _, path := range []string{"/fhir/Patient", "/nodes/node-hang/fhir/Patient/1"} {
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		_, _, err := h.do(ctx, http.MethodGet, path, "", nil)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("GET %s: err %v", path, err)
		}
		for _, id := range []string{"node-hang", "node-slow"} {
			if path != "/fhir/Patient" && id == "node-slow" {
				continue
			}
			select {
			case <-h.members[id].Cancelled():
			case <-time.After(2 * time.Second):
				t.Fatalf("GET %s: %s did not see its request cancelled", path, id)
			}
		}
	}
	h.wantStates(map[string]string{"node-hang-query": "unknown", "node-slow-query": "unknown"})
}

func TestARoutedRequestIsStreamedBackWithoutTheClientsCredentials(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a"})
	header := http.Header{
		"Cookie":     {"session=secret"},
		"Connection": {"X-Hop"},
		"X-Hop":      {"1"},
		"X-Keep":     {"kept"},
		"Accept":     {fhir.MediaType},
	}
	res, body, err := h.do(context.Background(), http.MethodGet, "/nodes/node-a/fhir/Patient/node-a-7?_elements=id", "Bearer "+h.Client, header)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != fhir.MediaType || !strings.Contains(string(body), `"id":"node-a-7"`) {
		t.Fatalf("status %d %q %s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	got := h.members["node-a"].LastRequest()
	if got.Path != "/fhir/Patient/node-a-7" || got.RawQuery != "_elements=id" {
		t.Fatalf("the member was asked %s?%s", got.Path, got.RawQuery)
	}
	for _, k := range []string{"Authorization", "Cookie", "X-Hop"} {
		if v := got.Header.Get(k); v != "" {
			t.Errorf("the member got %s: %q", k, v)
		}
	}
	if got.Header.Get("X-Keep") != "kept" || got.Header.Get("Accept") != fhir.MediaType {
		t.Errorf("end-to-end headers were dropped: %v", got.Header)
	}
	h.wantStates(map[string]string{"node-a-query": "up"})
}

func TestRoutedRequestsReportTheMembersState(t *testing.T) {
	h := newHarness(t, harnessOptions{requestTimeout: 500 * time.Millisecond}, faultyMembers()...)
	cases := []struct {
		id     string
		status int // 0: the connection breaks
		state  string
	}{
		{"node-ok", 200, "up"},
		{"node-400", 400, "up"},
		{"node-500", 500, "failing"},
		{"node-hang", 504, "down"},
		{"node-refused", 502, "down"},
		{"node-reset", 0, "down"},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			res, body, err := h.do(context.Background(), http.MethodGet, "/nodes/"+c.id+"/fhir/Patient/1", "", nil)
			if c.status == 0 {
				if err == nil {
					t.Fatalf("a body broken off at the member reached the client whole: %d %s", res.StatusCode, body)
				}
			} else if err != nil || res.StatusCode != c.status {
				t.Fatalf("status %v err %v, want %d", res, err, c.status)
			}
			if c.status >= 502 && !strings.Contains(string(body), "OperationOutcome") {
				t.Fatalf("a gateway error without an OperationOutcome: %s", body)
			}
			if s := h.Endpoints()[c.id+"-query"]; s != c.state {
				t.Fatalf("state %s, want %s", s, c.state)
			}
		})
	}
}

func TestARoutedAnswerIsFlushedAsItArrives(t *testing.T) {
	release := make(chan struct{})
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", fhir.MediaType)
		w.Header().Set("Set-Cookie", "member=1")
		w.Header().Set("Connection", "X-Member-Hop")
		w.Header().Set("X-Member-Hop", "1")
		w.Header().Set("X-Member-Keep", "1")
		_, _ = w.Write([]byte(`{"part":1}` + "\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte(`{"part":2}` + "\n"))
	}))
	defer member.Close()
	h := newHarness(t, harnessOptions{}, node{id: "node-s", url: member.URL + "/fhir"})
	res, err := h.send(context.Background(), http.MethodGet, "/nodes/node-s/fhir/Binary/1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.Header.Get("Set-Cookie") != "" || res.Header.Get("X-Member-Hop") != "" || res.Header.Get("X-Member-Keep") != "1" {
		t.Fatalf("response headers %v", res.Header)
	}
	r := bufio.NewReader(res.Body)
	first, err := r.ReadString('\n')
	if err != nil || first != `{"part":1}`+"\n" {
		t.Fatalf("first line %q %v (before the member finished)", first, err)
	}
	close(release)
	second, _ := r.ReadString('\n')
	if second != `{"part":2}`+"\n" {
		t.Fatalf("second line %q", second)
	}
}

func TestTheProbeAsksEveryMembersMetadata(t *testing.T) {
	h := newHarness(t, harnessOptions{requestTimeout: 500 * time.Millisecond}, faultyMembers()...)
	res, body, err := h.do(context.Background(), http.MethodPost, "/operator/probe", "", nil)
	if err != nil || res.StatusCode != 401 {
		t.Fatalf("a probe without a token: %v %v %s", res, err, body)
	}
	for id, m := range h.members {
		if m.Requests() != 0 {
			t.Fatalf("a refused probe reached %s", id)
		}
	}
	res, body, err = h.do(context.Background(), http.MethodPost, "/operator/probe", "Bearer "+h.Token, nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("probe: %v %v %s", res, err, body)
	}
	var answer struct {
		Members []federation.ProbeRecord `json:"members"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		t.Fatal(err)
	}
	want := []federation.ProbeRecord{
		{ID: "node-ok", Outcome: outbound.OK, Status: 200},
		{ID: "node-400", Outcome: outbound.NodeError, Status: 400},
		{ID: "node-500", Outcome: outbound.NodeError, Status: 500},
		{ID: "node-hang", Outcome: outbound.Timeout},
		{ID: "node-refused", Outcome: outbound.Unreachable},
		{ID: "node-reset", Outcome: outbound.Unreachable, Status: 200},
		{ID: "node-late", Outcome: outbound.OK, Status: 200},
	}
	if len(answer.Members) != len(want) {
		t.Fatalf("probe %s", body)
	}
	for i, w := range want {
		got := answer.Members[i]
		got.DurationMS = 0
		if got != w {
			t.Errorf("probe record %d = %+v, want %+v", i, got, w)
		}
	}
	if p := h.members["node-ok"].LastRequest().Path; p != "/fhir/metadata" {
		t.Fatalf("the probe asked %s", p)
	}
	for _, k := range []string{"http", "127.0.0.1", "MEMBER-BODY", "CapabilityStatement"} {
		if strings.Contains(string(body), k) {
			t.Fatalf("the probe answer holds %q: %s", k, body)
		}
	}
	raw := h.wantStates(map[string]string{
		"node-ok-query": "up", "node-400-query": "up", "node-500-query": "failing", "node-hang-query": "down",
		"node-refused-query": "down", "node-reset-query": "down", "node-late-query": "up",
	})
	h.assertReportLeaksNothing(raw)
}

func TestTheOperatorSurfaceNeedsTheOperatorScope(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a"})
	for _, c := range []struct {
		method, path, auth string
		status             int
	}{
		{http.MethodGet, "/operator/dependencies", "", 401},
		{http.MethodGet, "/operator/dependencies", "Bearer nope", 401},
		{http.MethodPost, "/operator/probe", "Bearer nope", 401},
		{http.MethodGet, "/operator/dependencies", "Bearer " + h.Token, 200},
	} {
		res, body, err := h.do(context.Background(), c.method, c.path, c.auth, nil)
		if err != nil || res.StatusCode != c.status {
			t.Fatalf("%s %s with %q: %v %v %s", c.method, c.path, c.auth, res, err, body)
		}
		if c.status == 401 && !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("a 401 without a Bearer challenge")
		}
	}
}

func TestWithoutAnIssuerTheOperatorSurfaceIsClosed(t *testing.T) {
	h := newHarness(t, harnessOptions{noIssuer: true}, node{id: "node-a"})
	res, body, err := h.do(context.Background(), http.MethodGet, "/operator/dependencies", "Bearer a.b.c", nil)
	if err != nil || res.StatusCode != 401 || !strings.Contains(string(body), "no token issuer is configured") {
		t.Fatalf("%v %v %s", res, err, body)
	}
}

func TestUnusableMemberAnswersAreNodeErrorsOfMembersThatAreUp(t *testing.T) {
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html>MEMBER-BODY-html</html>")
	}))
	defer html.Close()
	h := newHarness(t, harnessOptions{maxBody: 4096},
		node{id: "node-big", opts: members.Options{Entries: 200}},
		node{id: "node-html", url: html.URL + "/fhir"},
		node{id: "node-ok", opts: members.Options{Entries: 1}})
	_, body := h.get("/fhir/Observation")
	var b searchAnswer
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	want := []federation.Record{
		{ID: "node-big", Outcome: outbound.NodeError, Status: 200},
		{ID: "node-html", Outcome: outbound.NodeError, Status: 200},
		{ID: "node-ok", Outcome: outbound.OK, Status: 200, Entries: 1},
	}
	for i, w := range want {
		got := b.Meta.Federation[i]
		got.DurationMS = 0
		if got != w {
			t.Errorf("record %d = %+v, want %+v", i, got, w)
		}
	}
	if b.matches() != 1 || len(b.Entry) != 3 {
		t.Fatalf("%d matches of %d entries, want 1 and an outcome entry for each of the two others", b.matches(), len(b.Entry))
	}
	h.wantStates(map[string]string{"node-big-query": "up", "node-html-query": "up", "node-ok-query": "up"})
}

func TestTheMetricFollowsTheReport(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a", opts: members.Options{Knobs: double.Knobs{Status: 503}}})
	h.get("/fhir/Patient")
	// The dependency states, registered as the composition root registers them.
	registry := prometheus.NewPedanticRegistry()
	registry.MustRegister(h.Part("federation").Collectors...)
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if f.GetName() == "ferrofed_dependency_state" && labels["endpoint"] == "node-a-query" && labels["state"] == "failing" {
				found = m.GetGauge().GetValue() == 1
			}
		}
	}
	if !found {
		t.Fatal("ferrofed_dependency_state{endpoint=node-a-query,state=failing} is not 1")
	}
}

func TestReadinessChecks(t *testing.T) {
	names := func(p server.Registration) string {
		var out []string
		for _, c := range p.Checks {
			out = append(out, c.Name())
		}
		return strings.Join(out, ",")
	}
	h := newHarness(t, harnessOptions{}, node{id: "node-a", opts: members.Options{Knobs: double.Knobs{Status: 500}}})
	if got := names(h.Part("federation")); got != "registry,clients" {
		t.Fatalf("checks %s", got)
	}
	for _, c := range h.Part("federation").Checks {
		if err := c.Check(context.Background()); err != nil {
			t.Fatalf("%s: %v", c.Name(), err)
		}
	}
	// A failing member does not make the gateway unready.
	h.get("/fhir/Patient")
	for _, c := range h.Part("federation").Checks {
		if err := c.Check(context.Background()); err != nil {
			t.Fatalf("%s with a failing member: %v", c.Name(), err)
		}
	}

	gated := newHarness(t, harnessOptions{memberReady: true}, node{id: "node-a"})
	if got := names(gated.Part("federation")); got != "registry,clients,members" {
		t.Fatalf("checks %s", got)
	}
	members := gated.Part("federation").Checks[2]
	if err := members.Check(context.Background()); err == nil {
		t.Fatal("the members check passed with no member observed")
	}
	if res, body, err := gated.do(context.Background(), http.MethodPost, "/operator/probe", "Bearer "+gated.Token, nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("probe: %v %v %s", res, err, body)
	}
	if err := members.Check(context.Background()); err != nil {
		t.Fatalf("the members check after a probe saw one up: %v", err)
	}
}

func TestReloadKeepsTheStatesOfMembersThatStay(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a"}, node{id: "node-b"})
	h.get("/fhir/Patient")
	cfg := *h.Config
	cfg.Registry.Members = []config.Member{cfg.Registry.Members[0], {ID: "node-c", QueryEndpoint: "http://127.0.0.1:1/fhir", EndpointID: "node-c-query"}}
	if err := h.Reload(&cfg); err != nil {
		t.Fatal(err)
	}
	h.wantStates(map[string]string{"node-a-query": "up", "node-c-query": "unknown"})
	bad := cfg
	bad.Registry.Members = []config.Member{{ID: "x", QueryEndpoint: "not a url"}}
	if err := h.Reload(&bad); err == nil {
		t.Fatal("a registry without a usable URL was accepted")
	}
	h.wantStates(map[string]string{"node-a-query": "up", "node-c-query": "unknown"})
}

func TestAMembersOwnTimeoutBoundsIt(t *testing.T) {
	h := newHarness(t, harnessOptions{requestTimeout: 5 * time.Second},
		node{id: "node-slow", opts: members.Options{Knobs: double.Knobs{Delay: 4 * time.Second}}, timeout: 100 * time.Millisecond},
		node{id: "node-ok", opts: members.Options{Knobs: double.Knobs{Delay: 30 * time.Millisecond}}})
	start := time.Now()
	_, body := h.get("/fhir/Patient")
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the query took %v; the slow member's timeout_ms is 100", took)
	}
	var b searchAnswer
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if b.Meta.Federation[0].Outcome != outbound.Timeout || b.Meta.Federation[1].Outcome != outbound.OK {
		t.Fatalf("records %+v", b.Meta.Federation)
	}
	start = time.Now()
	if res, _ := h.get("/nodes/node-slow/fhir/Patient/1"); res.StatusCode != http.StatusGatewayTimeout || time.Since(start) > 2*time.Second {
		t.Fatalf("routed: %d after %v", res.StatusCode, time.Since(start))
	}
	h.wantStates(map[string]string{"node-slow-query": "down", "node-ok-query": "up"})
}

func TestARoutedPostCarriesItsBody(t *testing.T) {
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", fhir.MediaType)
		w.Header().Set("Location", "Patient/new")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"method":%q,"path":%q,"type":%q,"body":%s}`, r.Method, r.URL.Path, r.Header.Get("Content-Type"), body)
	}))
	defer member.Close()
	h := newHarness(t, harnessOptions{}, node{id: "node-w", url: member.URL + "/fhir"})
	res, err := h.send(context.Background(), http.MethodPost, "/nodes/node-w/fhir/Patient", strings.NewReader(`{"resourceType":"Patient"}`),
		http.Header{"Content-Type": {fhir.MediaType}})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	const want = `{"method":"POST","path":"/fhir/Patient","type":"application/fhir+json","body":{"resourceType":"Patient"}}`
	if res.StatusCode != http.StatusCreated || res.Header.Get("Location") != "Patient/new" || string(body) != want {
		t.Fatalf("%d %v %s", res.StatusCode, res.Header, body)
	}
}
