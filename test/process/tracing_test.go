package process

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
	"github.com/ferrofed/ferrofed/test/doubles/consentpdp"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/pdqsupplier"
	"github.com/ferrofed/ferrofed/test/doubles/pixmanager"
	"github.com/ferrofed/ferrofed/test/doubles/respondinggateway"
	"github.com/ferrofed/ferrofed/test/otelcol"
)

// tracedGateway is a configuration of the shipped binary with [tracing] pointed at a
// real collector: base its data plane's base URL, ms its members by id.
type tracedGateway struct {
	base string
	path string
	ms   map[string]*members.Server
	urls map[string]string
	g    *gateway
}

// memberSpec is one member of a traced gateway: down makes its query_endpoint a port
// nothing listens on.
type memberSpec struct {
	id    string
	knobs double.Knobs
	down  bool
}

// startTraced writes and serves a configuration with the members of specs, extra
// appended (bindings, [server] keys go in server), and [tracing] to col.
func startTraced(t *testing.T, col *otelcol.Collector, server string, specs []memberSpec, extra string) *tracedGateway {
	t.Helper()
	var doc strings.Builder
	port := freePort(t)
	fmt.Fprintf(&doc, "[server]\nlisten = \"127.0.0.1:%d\"\nbase_path = \"/gw\"\ntermination_message_path = \"\"\n%s", port, server)
	tg := &tracedGateway{ms: map[string]*members.Server{}, urls: map[string]string{}}
	for i, s := range specs {
		url := fmt.Sprintf("http://127.0.0.1:%d/fhir", freePort(t))
		if !s.down {
			m := members.Start(t, members.Options{ID: s.id, Knobs: s.knobs})
			tg.ms[s.id] = m
			url = m.URL
		}
		tg.urls[s.id] = url
		fmt.Fprintf(&doc, "[[registry.members]]\nid = %q\nquery_endpoint = %q\n", s.id, url)
		if strings.Contains(extra, "[resolver]") {
			// What the patient-scoped bindings read of each member.
			fmt.Fprintf(&doc, "identifier_system = \"urn:oid:1.2.3.%d\"\nhome_community_id = \"urn:oid:1.2.3.10%d\"\n", i+1, i+1)
		}
	}
	doc.WriteString(extra)
	fmt.Fprintf(&doc, "[tracing]\nendpoint = %q\n", col.Endpoint())
	tg.path = filepath.Join(t.TempDir(), "ferrofed.toml")
	writeFile(t, tg.path, doc.String())
	tg.g = serve(t, tg.path)
	tg.base = fmt.Sprintf("http://127.0.0.1:%d/gw", port)
	waitReady(t, tg.base)
	return tg
}

// patientBindings starts the four patient-scoped bindings' doubles as
// TestTheBinaryRunsThePatientScopedFlow does (Alice is m1, held by node-a only) and
// returns their tables.
func patientBindings(t *testing.T) string {
	const (
		mpi = "urn:oid:1.2.3.9000"
		dA  = "urn:oid:1.2.3.1"
		dB  = "urn:oid:1.2.3.2"
		dC  = "urn:oid:1.2.3.3"
	)
	sup := pdqsupplier.Start(t, pdqsupplier.Options{Patients: []pdqsupplier.Patient{{ID: "m1", Identifiers: []pdqsupplier.Identifier{{System: mpi, Value: "MRN-1"}}, Family: "Mohr"}}})
	pix := pixmanager.Start(t, pixmanager.Options{Sets: []pixmanager.Set{{
		{ID: "m1", Identifiers: []pixmanager.Identifier{{System: mpi, Value: "MRN-1"}}},
		{ID: "xa", Identifiers: []pixmanager.Identifier{{System: dA, Value: "pa-1"}}},
		{ID: "xb", Identifiers: []pixmanager.Identifier{{System: dB, Value: "pb-1"}}},
		{ID: "xc", Identifiers: []pixmanager.Identifier{{System: dC, Value: "pc-1"}}},
	}}})
	pdp := consentpdp.Start(t, consentpdp.Options{Rules: []consentpdp.Rule{{Resource: "node-c", Permit: false}, {Permit: true}}})
	gw := respondinggateway.Start(t, respondinggateway.Options{Entries: []respondinggateway.Entry{{IDs: []respondinggateway.II{{Root: "1.2.3.9000", Extension: "MRN-1"}},
		Records: []respondinggateway.Record{{HomeCommunityID: "1.2.3.101"}, {HomeCommunityID: "1.2.3.103"}}}}})
	return fmt.Sprintf("[pdqm]\nurl = %q\n[resolver]\nurl = %q\n[consent]\nurl = %q\n[localizer]\nurl = %q\nprotocol = \"xcpd\"\n", sup.URL, pix.URL, pdp.URL, gw.URL)
}

// sendGet sends GET url with the token and headers, reads the answer and returns its status.
func sendGet(t *testing.T, url, token string, header http.Header) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// traceparent splits a W3C traceparent into its trace and parent span ids.
func traceparent(t *testing.T, v string) (traceID, parentID string) {
	t.Helper()
	parts := strings.Split(v, "-")
	if len(parts) != 4 || parts[0] != "00" {
		t.Fatalf("traceparent %q", v)
	}
	return parts[1], parts[2]
}

// searchOf is the member's request of a Patient search (the gateway may have asked it
// for other things).
func searchOf(t *testing.T, m *members.Server) members.Request {
	t.Helper()
	for _, r := range m.Log() {
		if strings.HasSuffix(r.Path, "/Patient") {
			return r
		}
	}
	t.Fatalf("member %s was not asked a Patient search", m.Opts.ID)
	return members.Request{}
}

// A federated search over three members, one slow and one down, is one trace: a
// server span and, its children, three client spans "member call" with each member's
// id and its outcome as meta.federation says it; each member that answered received a
// traceparent whose parent is its own client span.
func TestTracingAFederatedSearchIsOneTreeAndTheMembersJoinIt(t *testing.T) {
	col := otelcol.Start(t)
	tg := startTraced(t, col, "", []memberSpec{
		{id: "node-a"},
		{id: "node-b", knobs: double.Knobs{Delay: 300 * time.Millisecond}},
		{id: "node-c", down: true},
	}, "")
	var page struct {
		Meta struct {
			Federation []struct{ ID, Outcome string }
		}
	}
	get(t, tg.base+"/fhir/Patient?family=Smith", &page)
	want := map[string]string{}
	for _, r := range page.Meta.Federation {
		want[r.ID] = r.Outcome
	}
	if fmt.Sprint(want) != fmt.Sprint(map[string]string{"node-a": "ok", "node-b": "ok", "node-c": "unreachable"}) {
		t.Fatalf("meta.federation %v", want)
	}
	spans := col.WaitSpans(t, 4, 15*time.Second)
	var server *otelcol.Span
	for i, s := range spans {
		if s.Kind == "server" {
			if server != nil {
				t.Fatalf("two server spans: %s", otelcol.Names(spans))
			}
			server = &spans[i]
		}
	}
	if server == nil || server.Name != "GET /gw/fhir/:type" || server.Attributes["http.route"] != "/gw/fhir/:type" {
		t.Fatalf("no server span of the search: %s", otelcol.Names(spans))
	}
	calls := map[string]otelcol.Span{}
	for _, s := range spans {
		if s.Name != "member call" {
			continue
		}
		if s.Kind != "client" || s.TraceID != server.TraceID || s.ParentID != server.SpanID {
			t.Fatalf("member call %+v is not a client child of the server span %s", s, server.SpanID)
		}
		calls[fmt.Sprint(s.Attributes["ferrofed.member.id"])] = s
	}
	got := map[string]string{}
	for id, s := range calls {
		got[id] = fmt.Sprint(s.Attributes["ferrofed.member.outcome"])
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the client spans' outcomes %v, meta.federation %v", got, want)
	}
	if s := calls["node-b"]; s.End.Sub(s.Start) < 300*time.Millisecond {
		t.Errorf("the slow member's span lasted %v", s.End.Sub(s.Start))
	}
	if calls["node-c"].Status.Code != "error" || calls["node-a"].Attributes["http.response.status_code"] != int64(200) {
		t.Errorf("statuses: node-a %+v, node-c %+v", calls["node-a"], calls["node-c"])
	}
	for _, id := range []string{"node-a", "node-b"} {
		tid, parent := traceparent(t, searchOf(t, tg.ms[id]).Header.Get("Traceparent"))
		if tid != server.TraceID || parent != calls[id].SpanID {
			t.Errorf("%s received traceparent of trace %s parent %s, want %s %s", id, tid, parent, server.TraceID, calls[id].SpanID)
		}
	}
	t.Logf("the trace:\n%s", tree(spans))
}

// The patient-scoped flow's binding exchanges are client spans "binding {key}", each
// a child of the request's server span, with its key and outcome; the identity step
// is an event of the server span.
func TestTracingThePatientScopedFlowsBindingsAreChildrenOfTheServerSpan(t *testing.T) {
	col := otelcol.Start(t)
	tg := startTraced(t, col, "", []memberSpec{{id: "node-a"}, {id: "node-b"}, {id: "node-c"}}, patientBindings(t))
	operator, err := clients.Token(map[string]any{"sub": "app", "scope": issuer.ClientScope + " " + issuer.OperatorScope})
	if err != nil {
		t.Fatal(err)
	}
	if status := sendGet(t, tg.base+"/fhir/Observation?patient=Patient/m1", operator, nil); status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	var spans []otelcol.Span
	var server *otelcol.Span
	double.EventuallyWithin(t, 15*time.Second, "the bindings' spans", func() bool {
		spans = col.Spans(t)
		server = nil
		n := 0
		for i, s := range spans {
			if s.Kind == "server" {
				server = &spans[i]
			}
			if strings.HasPrefix(s.Name, "binding ") {
				n++
			}
		}
		return server != nil && n >= 4
	}, func() string { return otelcol.Names(spans) })
	bindings := map[string]string{}
	for _, s := range spans {
		if !strings.HasPrefix(s.Name, "binding ") {
			continue
		}
		if s.Kind != "client" || s.ParentID != server.SpanID {
			t.Errorf("%s is not a client child of the server span: %+v", s.Name, s)
		}
		bindings[fmt.Sprint(s.Attributes["ferrofed.binding"])] = fmt.Sprint(s.Attributes["ferrofed.binding.outcome"])
	}
	for _, key := range []string{"demographics", "resolver", "consent", "localizer"} {
		if bindings[key] != "success" {
			t.Errorf("binding %s: outcome %q (all: %v)", key, bindings[key], bindings)
		}
	}
	identity := false
	for _, e := range server.Events {
		identity = identity || e.Name == "identity"
	}
	if !identity {
		t.Errorf("no identity event on the server span: %+v", server.Events)
	}
	t.Logf("the trace:\n%s", tree(spans))
}

// THE PHI SCAN: searches with a marker value in every parameter (names, birth date,
// identifier system and value, _id, a patient reference) and a token in the header,
// through the federated, routed and patient-scoped flows; not one marker, token or
// member URL is in any byte the collector received, while the parameters' names are
// (so the scan can fail).
func TestTracingNoPatientDataReachesTheCollector(t *testing.T) {
	col := otelcol.Start(t)
	tg := startTraced(t, col, "", []memberSpec{{id: "node-a"}, {id: "node-b"}, {id: "node-c"}}, patientBindings(t))
	markers := map[string]string{
		"family":     "PHIFAMILYQZX",
		"given":      "PHIGIVENQZX",
		"name":       "PHINAMEQZX",
		"birthdate":  "1907-03-05",
		"identifier": "urn:oid:9.8.7.PHISYSQZX|PHIVALQZX",
		"_id":        "PHIIDQZX",
		"gender":     "PHIGENDERQZX",
	}
	var q []string
	for k, v := range markers {
		q = append(q, k+"="+v)
	}
	sort.Strings(q)
	query := strings.Join(q, "&")
	// The client's own trace headers, the baggage with a marker: never read.
	header := http.Header{"Baggage": {"patient=PHIBAGGAGEQZX"}, "X-Patient": {"PHIHEADERQZX"}}
	// A gateway without the patient-scoped bindings sends every search to the members
	// (federated and routed); one with them plans each patient-scoped search first.
	// Its audit trail goes to a repository: the spool's appends and the deliveries are
	// spans too.
	arr := auditrepo.Start(t, auditrepo.Options{})
	plain := startTraced(t, col, "", []memberSpec{{id: "node-a"}, {id: "node-b"}},
		fmt.Sprintf("[audit]\ndestination = \"repository\"\nurl = %q\nspool_dir = %q\n", arr.URL, t.TempDir()))
	for _, base := range []string{plain.base, tg.base} {
		sendGet(t, base+"/fhir/Patient?"+query, clientToken, header)
		sendGet(t, base+"/nodes/node-a/fhir/Patient?"+query, clientToken, header)
		sendGet(t, base+"/fhir/Observation?patient=Patient/PHIPATIENTQZX&code=PHICODEQZX", clientToken, header)
		sendGet(t, base+"/fhir/Observation?subject=Patient/PHISUBJECTQZX", clientToken, header)
		sendGet(t, base+"/fhir/Observation?patient.identifier=urn:oid:1.2.3.9000|PHIMRNQZX", clientToken, header)
		sendGet(t, base+"/fhir/Patient/PHIREADQZX", clientToken, header)
		sendGet(t, base+"/nodes/node-a/fhir/Patient/PHIROUTEDREADQZX", clientToken, header)
		sendGet(t, base+"/nodes/node-a/fhir/Observation?patient=Patient/PHIROUTEDPATQZX&date=1908-04-06", clientToken, header)
		// The patient-scoped flow that runs every binding, with the real patient.
		sendGet(t, base+"/fhir/Observation?patient=Patient/m1", clientToken, header)
	}
	for id, m := range plain.ms {
		for _, r := range m.Log() {
			if r.Header.Get("Baggage") != "" || r.Header.Get("X-Patient") != "" && r.Header.Get("Traceparent") == "" {
				t.Errorf("%s received baggage %q, traceparent %q", id, r.Header.Get("Baggage"), r.Header.Get("Traceparent"))
			}
		}
	}
	var spans []otelcol.Span
	double.EventuallyWithin(t, 15*time.Second, "the spans of the searches", func() bool {
		spans = col.Spans(t)
		servers, binds := 0, 0
		for _, s := range spans {
			if s.Kind == "server" {
				servers++
			}
			if strings.HasPrefix(s.Name, "binding ") {
				binds++
			}
		}
		return servers >= 18 && binds >= 4 && strings.Contains(otelcol.Names(spans), "binding audit_repository") &&
			strings.Contains(otelcol.Names(spans), "audit spool append")
	}, func() string { return otelcol.Names(spans) })
	// The routed calls are traced too: a member call under a server span of the
	// routed route.
	routed := map[string]bool{}
	for _, s := range spans {
		if s.Kind == "server" && strings.Contains(s.Name, "/nodes/") {
			routed[s.SpanID] = true
		}
	}
	routedCalls := 0
	for _, s := range spans {
		if s.Name == "member call" && routed[s.ParentID] {
			routedCalls++
		}
	}
	if routedCalls < 2 {
		t.Errorf("%d routed member calls traced: %s", routedCalls, otelcol.Names(spans))
	}
	raw := col.Raw(t)
	secrets := []string{"PHIBAGGAGEQZX", "PHIHEADERQZX", "PHIPATIENTQZX", "PHICODEQZX", "PHISUBJECTQZX", "PHIMRNQZX",
		"PHIREADQZX", "PHIROUTEDREADQZX", "PHIROUTEDPATQZX", "1908-04-06", "PHISYSQZX", "PHIVALQZX", clientToken, "MRN-1", "Patient/m1", "pa-1"}
	for _, v := range markers {
		secrets = append(secrets, v)
	}
	for _, g := range []*tracedGateway{tg, plain} {
		for _, u := range g.urls {
			secrets = append(secrets, u, strings.TrimPrefix(strings.TrimSuffix(u, "/fhir"), "http://"))
		}
	}
	for _, s := range secrets {
		if bytes.Contains(raw, []byte(s)) {
			i := bytes.Index(raw, []byte(s))
			t.Errorf("the collector received %q: …%s…", s, raw[max(0, i-200):min(len(raw), i+200)])
		}
	}
	for _, name := range []string{"family", "given", "birthdate", "identifier", "_id", "patient", "subject", "patient.identifier", "ferrofed.member.id", "binding demographics"} {
		if !bytes.Contains(raw, []byte(`"`+name+`"`)) && !bytes.Contains(raw, []byte(name)) {
			t.Errorf("the parameter name %q is not in what the collector received: the scan proves nothing", name)
		}
	}
	t.Logf("scanned %d bytes of %d spans for %d secrets", len(raw), len(spans), len(secrets))
}

// No probe and no metrics scrape makes a span: 20 of each, then one search whose span
// is the only one the collector receives.
func TestTracingProbesAndMetricsMakeNoSpans(t *testing.T) {
	col := otelcol.Start(t)
	tg := startTraced(t, col, "", []memberSpec{{id: "node-a"}}, "")
	for range 20 {
		for _, p := range []string{"/health", "/health/liveness", "/health/readiness", "/metrics"} {
			sendGet(t, tg.base+p, "", nil)
		}
	}
	sendGet(t, tg.base+"/fhir/Patient?family=x", clientToken, nil)
	col.WaitSpans(t, 2, 15*time.Second)
	time.Sleep(1500 * time.Millisecond) // one more export interval: anything queued is out
	spans := col.Spans(t)
	for _, s := range spans {
		route := fmt.Sprint(s.Attributes["http.route"])
		if strings.Contains(route, "health") || strings.Contains(route, "metrics") || strings.Contains(s.Name, "health") || strings.Contains(s.Name, "metrics") {
			t.Errorf("a probe made a span: %+v", s)
		}
	}
	if len(spans) != 2 {
		t.Errorf("want the search's server span and its member call only, got %s", otelcol.Names(spans))
	}
}

// SIGTERM: the drain span and its four steps are exported before the process exits,
// and so is the span of a request that arrived during the drain delay.
func TestTracingTheDrainSpanIsPushedBeforeExit(t *testing.T) {
	col := otelcol.Start(t)
	tg := startTraced(t, col, "drain_delay_ms = 1500\n", []memberSpec{{id: "node-a"}}, "")
	if err := tg.g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	time.Sleep(300 * time.Millisecond)
	if status := sendGet(t, tg.base+"/fhir/Patient?family=late", clientToken, nil); status != http.StatusOK {
		t.Fatalf("a search during the drain delay: %d", status)
	}
	select {
	case <-tg.g.exited:
		if tg.g.err != nil {
			t.Fatalf("serve exited with %v", tg.g.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	// Everything was pushed before the exit: the collector has it (its file exporter
	// may still be writing it).
	spans := col.WaitSpans(t, 7, 5*time.Second)
	byName := map[string]otelcol.Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	drain, ok := byName["drain"]
	if !ok || drain.ParentID != "" {
		t.Fatalf("no root drain span: %s", otelcol.Names(spans))
	}
	if d := drain.Start.Sub(signalled); d > time.Second || d < -time.Second {
		t.Errorf("the drain span starts %v from SIGTERM", d)
	}
	for _, step := range []string{"drain.delay", "drain.listener_closed", "drain.in_flight", "drain.bindings"} {
		s, ok := byName[step]
		if !ok || s.ParentID != drain.SpanID || s.TraceID != drain.TraceID {
			t.Errorf("step %s is not a child of the drain span: %+v", step, s)
		}
	}
	if byName["drain.delay"].End.Sub(byName["drain.delay"].Start) < 1400*time.Millisecond {
		t.Errorf("drain.delay lasted %v", byName["drain.delay"].End.Sub(byName["drain.delay"].Start))
	}
	late := false
	for _, s := range spans {
		late = late || s.Kind == "server" && s.Start.After(drain.Start)
	}
	if !late {
		t.Errorf("the search of the drain delay has no span: %s", otelcol.Names(spans))
	}
	if !strings.Contains(tg.g.stderr.String(), "Pushed the last spans") {
		t.Errorf("no push logged:\n%s", tg.g.stderr.String())
	}
}

// With [audit] to a repository, an audited request's spool append is an internal span
// of its server span, and the delivery of the events (no request made it) the root
// client span "binding audit_repository" of a trace of its own, whose traceparent the
// repository received.
func TestTracingTheAuditSpoolAppendAndDelivery(t *testing.T) {
	col := otelcol.Start(t)
	arr := auditrepo.Start(t, auditrepo.Options{})
	tg := startTraced(t, col, "", []memberSpec{{id: "node-a"}},
		fmt.Sprintf("[audit]\ndestination = \"repository\"\nurl = %q\nspool_dir = %q\n", arr.URL, t.TempDir()))
	if status := sendGet(t, tg.base+"/fhir/Patient?family=x", clientToken, nil); status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	var spans []otelcol.Span
	double.EventuallyWithin(t, 15*time.Second, "the audit's spans", func() bool {
		spans = col.Spans(t)
		names := otelcol.Names(spans)
		return strings.Contains(names, "audit spool append") && strings.Contains(names, "binding audit_repository")
	}, func() string { return otelcol.Names(spans) })
	servers := map[string]bool{}
	for _, s := range spans {
		if s.Kind == "server" {
			servers[s.SpanID] = true
		}
	}
	var delivery otelcol.Span
	for _, s := range spans {
		switch s.Name {
		case "audit spool append":
			if s.Kind != "internal" || !servers[s.ParentID] || s.Attributes["ferrofed.binding"] != "audit_repository" ||
				s.Attributes["ferrofed.binding.outcome"] != "stored" {
				t.Errorf("spool append %+v", s)
			}
		case "binding audit_repository":
			delivery = s
		}
	}
	if delivery.Kind != "client" || delivery.ParentID != "" || delivery.Attributes["ferrofed.binding.outcome"] != "success" {
		t.Errorf("delivery %+v", delivery)
	}
	found := false
	for _, r := range arr.Log() {
		if tp := r.Header.Get("Traceparent"); tp != "" {
			tid, parent := traceparent(t, tp)
			found = found || tid == delivery.TraceID && parent == delivery.SpanID
		}
	}
	if !found {
		t.Errorf("the repository never received the delivery span's traceparent")
	}
	t.Logf("the spans:\n%s", tree(spans))
}

// tree renders spans as the trees they form: name, kind and attributes, indented
// under their parents (docs/tracing.md's worked trace).
func tree(spans []otelcol.Span) string {
	children := map[string][]otelcol.Span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	var roots []otelcol.Span
	for _, s := range spans {
		if s.ParentID == "" || !ids[s.ParentID] {
			roots = append(roots, s)
			continue
		}
		children[s.ParentID] = append(children[s.ParentID], s)
	}
	var b strings.Builder
	var walk func(s otelcol.Span, depth int)
	walk = func(s otelcol.Span, depth int) {
		keys := make([]string, 0, len(s.Attributes))
		for k := range s.Attributes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var attrs []string
		for _, k := range keys {
			attrs = append(attrs, fmt.Sprintf("%s=%v", k, s.Attributes[k]))
		}
		var events []string
		for _, e := range s.Events {
			events = append(events, fmt.Sprintf("%s%v", e.Name, e.Attributes))
		}
		fmt.Fprintf(&b, "%s%s [%s, %s, %v] %s", strings.Repeat("  ", depth), s.Name, s.Kind, s.Status.Code,
			s.End.Sub(s.Start).Round(time.Millisecond), strings.Join(attrs, " "))
		if len(events) > 0 {
			fmt.Fprintf(&b, " events: %s", strings.Join(events, ", "))
		}
		b.WriteString("\n")
		kids := children[s.SpanID]
		sort.Slice(kids, func(i, j int) bool { return kids[i].Start.Before(kids[j].Start) })
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	sort.Slice(roots, func(i, j int) bool { return roots[i].Start.Before(roots[j].Start) })
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}

// TestTracingAReloadMovesTheSpansAndACollectorDownDropsThemCounted: the shipped binary
// traces to one real collector; a SIGHUP with [tracing] pointed at a second one moves the
// next request's spans there (none reach the first any more); with the second collector
// killed, the gateway serves as before and counts what it could not push in
// ferrofed_tracing_spans_dropped_total.
func TestTracingAReloadMovesTheSpansAndACollectorDownDropsThemCounted(t *testing.T) {
	first, second := otelcol.Start(t), otelcol.Start(t)
	tg := startTraced(t, first, "", []memberSpec{{id: "node-a"}}, "")
	if s := sendGet(t, tg.base+"/fhir/Patient?family=one", clientToken, nil); s != http.StatusOK {
		t.Fatalf("search answered %d", s)
	}
	first.WaitSpans(t, 2, 15*time.Second)
	before := len(first.Spans(t))

	config, err := os.ReadFile(tg.path)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, tg.path, strings.Replace(string(config), first.Endpoint(), second.Endpoint(), 1))
	if err := tg.g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	tg.g.waitLog(t, "Reloaded configuration")
	if s := sendGet(t, tg.base+"/fhir/Patient?family=two", clientToken, nil); s != http.StatusOK {
		t.Fatalf("search answered %d", s)
	}
	spans := second.WaitSpans(t, 2, 15*time.Second)
	if spans[0].Name == "" || !strings.Contains(tree(spans), "member call") {
		t.Fatalf("the second collector got %s", tree(spans))
	}
	time.Sleep(1500 * time.Millisecond) // one more export interval
	if n := len(first.Spans(t)); n != before {
		t.Fatalf("the first collector got %d span(s) after the reload, had %d", n, before)
	}

	second.Kill()
	for range 20 {
		if s := sendGet(t, tg.base+"/fhir/Patient?family=three", clientToken, nil); s != http.StatusOK {
			t.Fatalf("with the collector down a search answered %d", s)
		}
	}
	double.Eventually(t, "the spans the dead collector could not take counted dropped", func() bool {
		return droppedSpans(t, tg.base) >= 40 // 20 searches, a server and a member span each
	})
}

// droppedSpans sums ferrofed_tracing_spans_dropped_total over its reasons.
func droppedSpans(t *testing.T, base string) float64 {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, "ferrofed_tracing_spans_dropped_total"); ok {
			var v float64
			if _, err := fmt.Sscanf(rest[strings.LastIndexByte(rest, ' ')+1:], "%g", &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}
