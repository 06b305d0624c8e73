package process

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
	"github.com/ferrofed/ferrofed/test/doubles/identityregistry"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/doubles/pixmanager"
)

// pmirGateway is the configuration of a gateway with [pmir] on a free port: its
// path, base URL, termination log and tokens.
type pmirGateway struct {
	path, base, terminationLog string
	operatorToken, feedToken   string
}

// writePMIRConfig writes a gateway configuration with [pmir] pointing at reg; extra
// is appended (another table), server added to [server].
func writePMIRConfig(t *testing.T, reg *identityregistry.Server, server, extra string) pmirGateway {
	t.Helper()
	dir := t.TempDir()
	jwks := clients.JWKS
	port := freePort(t)
	g := pmirGateway{path: filepath.Join(dir, "ferrofed.toml"), base: fmt.Sprintf("http://127.0.0.1:%d/gw", port),
		terminationLog: filepath.Join(dir, "termination-log"),
		operatorToken:  clients.Sign(t, "registry", issuer.OperatorScope), feedToken: clients.Sign(t, "registry", "pmir.feed")}
	var member string
	if !strings.Contains(extra, "[[registry.members]]") {
		member = fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n", members.Start(t, members.Options{ID: "a"}).URL)
	}
	writeFile(t, g.path, fmt.Sprintf(`[server]
listen = "127.0.0.1:%d"
base_path = "/gw"
termination_message_path = %q
%s
%s
[[auth.issuers]]
issuer = "https://issuer.test"
audience = "ferrofed"
jwks_file = %q
operator_scope = "ferrofed.operator"
[pmir]
url = %q
endpoint = "%s/pmir/$process-message"
feed_scope = "pmir.feed"
check_interval_ms = 200
%s
`, port, g.terminationLog, server, member, jwks, reg.URL, g.base, extra))
	return g
}

// report reads identity_registry/identity_registry_fault from the binary.
func (g pmirGateway) report(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.base+"/operator/dependencies", nil)
	req.Header.Set("Authorization", "Bearer "+g.operatorToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var r map[string]any
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%v/%v", r["identity_registry"], r["identity_registry_fault"])
}

func pmirExample(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "doubles", "identityregistry", "testdata", "ihe", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// SIGTERM sends exactly one DELETE of the subscription, within the bindings budget,
// and the drain abandons nothing. The feed route refuses a token without the feed
// scope and takes one with it.
func TestSIGTERMDeletesThePMIRSubscriptionOnce(t *testing.T) {
	reg := identityregistry.Start(t, identityregistry.Options{ActivateAfter: 100 * time.Millisecond})
	const budget = 2 * time.Second
	g := writePMIRConfig(t, reg, "bindings_drain_timeout_ms = 2000", "")
	p := serve(t, g.path)
	waitReady(t, g.base)
	double.Eventually(t, "the subscription is active and up", func() bool {
		subs := reg.Subscriptions()
		return len(subs) == 1 && subs[0].Status == "active" && g.report(t) == "up/<nil>"
	})

	merge := pmirExample(t, "ex-PMIRBundleMerge.json")
	if status, body, err := identityregistry.Send(g.base+"/pmir/$process-message", g.operatorToken, merge); err != nil || status != http.StatusForbidden {
		t.Fatalf("the operator's token without the feed scope: %d %s %v", status, body, err)
	}
	if status, _, err := identityregistry.Send(g.base+"/pmir/$process-message", "", merge); err != nil || status != http.StatusUnauthorized {
		t.Fatalf("no token: %d %v", status, err)
	}
	if statuses, err := reg.SendToSubscribers(g.feedToken, merge); err != nil || len(statuses) != 1 || statuses[0] != http.StatusOK {
		t.Fatalf("the registry's feed: %v %v", statuses, err)
	}

	// Without [audit] and the patient-scoped bindings, the feed's own surface exports
	// the binding metrics.
	res, err := http.Get(g.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(metrics), `ferrofed_binding_requests_total{binding="identity_registry",outcome="success"}`) {
		t.Fatal("no exchange of identity_registry in the metrics")
	}

	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	double.Eventually(t, "a DELETE of the subscription", func() bool { return reg.Count(http.MethodDelete, "/Subscription") >= 1 })
	if took := time.Since(sent); took > budget {
		t.Fatalf("the DELETE came %s after SIGTERM, past the bindings budget %s", took, budget)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	if p.err != nil {
		t.Fatalf("serve exited with %v", p.err)
	}
	if n := reg.Count(http.MethodDelete, "/Subscription"); n != 1 {
		t.Fatalf("%d DELETEs, want exactly 1", n)
	}
	if len(reg.Subscriptions()) != 0 {
		t.Fatal("the subscription is left at the registry")
	}
	data, err := os.ReadFile(g.terminationLog)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := lifecycle.ParseTerminationMessage(data); err != nil || len(m.Abandoned) != 0 {
		t.Fatalf("termination message %s: %+v %v", data, m, err)
	}
}

// A DELETE that hangs is abandoned with a warning naming the subscription; the
// process still ends within drain delay + shutdown timeout + bindings budget + 1 s,
// and the termination message lists identity_registry as abandoned.
func TestAHangingPMIRDeleteIsAbandoned(t *testing.T) {
	reg := identityregistry.Start(t, identityregistry.Options{Knobs: double.Knobs{Route: identityregistry.DeleteRoute, Fault: double.FaultHang}})
	const (
		drainDelay = 200 * time.Millisecond
		shutdown   = time.Second
		budget     = time.Second
	)
	g := writePMIRConfig(t, reg, "drain_delay_ms = 200\nrequest_timeout_ms = 1000\nshutdown_timeout_ms = 1000\nbindings_drain_timeout_ms = 1000", "timeout_ms = 10000\n")
	p := serve(t, g.path)
	waitReady(t, g.base)
	double.Eventually(t, "a subscription held", func() bool { return len(reg.Subscriptions()) == 1 && g.report(t) == "up/<nil>" })

	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	limit := drainDelay + shutdown + budget + time.Second
	select {
	case <-p.exited:
	case <-time.After(limit + 5*time.Second):
		t.Fatal("serve did not exit")
	}
	if took := time.Since(sent); took > limit {
		t.Fatalf("serve took %s to exit, past %s", took, limit)
	}
	if p.err != nil {
		t.Fatalf("serve exited with %v", p.err)
	}
	log := p.stderr.String()
	if !strings.Contains(log, "Warning: abandoned the PMIR subscription") || !strings.Contains(log, `"subscription":"1"`) {
		t.Fatalf("no warning naming the subscription:\n%s", log)
	}
	if n := reg.Count(http.MethodDelete, "/Subscription"); n != 1 {
		t.Fatalf("%d DELETEs, want 1", n)
	}
	data, err := os.ReadFile(g.terminationLog)
	if err != nil {
		t.Fatal(err)
	}
	m, err := lifecycle.ParseTerminationMessage(data)
	if err != nil || strings.Join(m.Abandoned, ",") != "identity_registry" {
		t.Fatalf("termination message %s: %+v %v; want identity_registry abandoned", data, m, err)
	}
}

// A gateway killed with SIGKILL leaves its subscription; the next start finds it by
// its endpoint and criteria and reuses it instead of creating another, and its
// SIGTERM deletes it.
func TestARestartAfterSIGKILLFindsTheLeftoverSubscription(t *testing.T) {
	reg := identityregistry.Start(t, identityregistry.Options{})
	g := writePMIRConfig(t, reg, "", "")
	first := serve(t, g.path)
	waitReady(t, g.base)
	double.Eventually(t, "a subscription held", func() bool { return len(reg.Subscriptions()) == 1 && g.report(t) == "up/<nil>" })
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	if n := reg.Count(http.MethodDelete, "/Subscription"); n != 0 {
		t.Fatalf("a killed gateway sent %d DELETEs", n)
	}

	second := serve(t, g.path)
	waitReady(t, g.base)
	searches := func() int {
		n := 0
		for _, r := range reg.Log() {
			if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/Subscription") && r.Query.Get("url") == g.base+"/pmir/$process-message" {
				n++
			}
		}
		return n
	}
	double.Eventually(t, "the restarted gateway is up", func() bool { return searches() >= 2 && g.report(t) == "up/<nil>" })
	if n := reg.Count(http.MethodPost, "/Subscription"); n != 1 {
		t.Fatalf("%d creates: the restart did not reuse the leftover", n)
	}
	second.waitLog(t, "Found a PMIR subscription a previous instance left: reused it")
	second.stop(t)
	if n := reg.Count(http.MethodDelete, "/Subscription/1"); n != 1 || len(reg.Subscriptions()) != 0 {
		t.Fatalf("%d DELETEs of the leftover; %d left", n, len(reg.Subscriptions()))
	}
}

// A merge message from the registry clears the resolver's cache: the next search
// asks the PIXm manager again, where before it was answered from the cache.
func TestAPMIRMergeClearsTheResolverCache(t *testing.T) {
	const (
		mpi = "urn:oid:1.2.3.9000"
		dA  = "urn:oid:1.2.3.1"
	)
	pix := pixmanager.Start(t, pixmanager.Options{Sets: []pixmanager.Set{{
		{ID: "m1", Identifiers: []pixmanager.Identifier{{System: mpi, Value: "MRN-1"}}},
		{ID: "xa", Identifiers: []pixmanager.Identifier{{System: dA, Value: "pa-1"}}},
	}}})
	member := members.Start(t, members.Options{ID: "node-a"})
	reg := identityregistry.Start(t, identityregistry.Options{})
	extra := fmt.Sprintf("[resolver]\nurl = %q\ncache_ttl_ms = 60000\n[[registry.members]]\nid = \"node-a\"\nquery_endpoint = %q\nidentifier_system = %q\n", pix.URL, member.URL, dA)
	// [resolver] and the member come after [pmir]'s keys in the document: tables, so
	// they close [pmir] first.
	g := writePMIRConfig(t, reg, "", extra)
	p := serve(t, g.path)
	waitReady(t, g.base)
	double.Eventually(t, "a subscription active", func() bool {
		subs := reg.Subscriptions()
		return len(subs) == 1 && subs[0].Status == "active"
	})
	search := func() {
		t.Helper()
		res, err := clientGet(g.base + "/fhir/Observation?patient.identifier=" + mpi + "%7CMRN-1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("search: %d %s", res.StatusCode, body)
		}
	}
	search()
	search()
	if n := pix.Requests(); n != 1 {
		t.Fatalf("the manager was asked %d times for two searches, want 1 (cached)", n)
	}
	if statuses, err := reg.SendToSubscribers(g.feedToken, pmirExample(t, "ex-PMIRBundleMerge.json")); err != nil || len(statuses) != 1 || statuses[0] != http.StatusOK {
		t.Fatalf("the registry's feed: %v %v", statuses, err)
	}
	search()
	if n := pix.Requests(); n != 2 {
		t.Fatalf("the manager was asked %d times, want 2: the merge did not clear the cache", n)
	}
	p.waitLog(t, `"merges":1`, `"invalidatedCaches":true`)
	p.stop(t)
}

// With [audit] delivering to a repository, every exchange with the registry reaches
// it as a BALP AuditEvent with ITI-94, the search with its query, and a feed message
// with ITI-93; the delete of drain step 4 is stored before the spool closes.
func TestThePMIRExchangesReachTheAuditRepository(t *testing.T) {
	arr := auditrepo.Start(t, auditrepo.Options{})
	reg := identityregistry.Start(t, identityregistry.Options{})
	g := writePMIRConfig(t, reg, "", fmt.Sprintf("[audit]\ndestination = \"repository\"\nurl = %q\nspool_dir = %q\n", arr.URL, t.TempDir()))
	p := serve(t, g.path)
	waitReady(t, g.base)
	double.Eventually(t, "a subscription held", func() bool { return len(reg.Subscriptions()) == 1 && g.report(t) == "up/<nil>" })
	if statuses, err := reg.SendToSubscribers(g.feedToken, pmirExample(t, "ex-PMIRBundleUpdate.json")); err != nil || len(statuses) != 1 || statuses[0] != http.StatusOK {
		t.Fatalf("the registry's feed: %v %v", statuses, err)
	}
	has := func(substrs ...string) bool {
		for _, e := range arr.Received() {
			all := true
			for _, s := range substrs {
				all = all && strings.Contains(string(e.Body), s)
			}
			if all {
				return true
			}
		}
		return false
	}
	double.Eventually(t, "the create, the search, a read and the feed message delivered", func() bool {
		return has(`"code":"ITI-94"`, `"code":"create"`) && has(`"code":"ITI-94"`, `"code":"search"`) &&
			has(`"code":"ITI-94"`, `"code":"read"`) && has(`"code":"ITI-93"`, "MessageHeader/ex-messageheader-update")
	})
	searched := false
	for _, e := range arr.Received() {
		for _, q := range e.Queries {
			searched = searched || strings.Contains(q, "criteria=Patient")
		}
	}
	if !searched {
		t.Fatal("the search's event carries no query")
	}
	// Drain step 4: the spool closes once the subscription is deleted, so that the
	// delete's record is stored too (delivered after the next start).
	p.stop(t)
	p.waitLog(t, `"identity_registry_subscription":"deleted"`, `"audit_repository_undelivered":`)
	if log := p.stderr.String(); strings.Contains(log, "could not be stored") {
		t.Fatalf("an audit record of the feed was not stored:\n%s", log)
	}
}

// `config check` builds the feed and sends nothing to the registry; a SIGHUP that
// changes [pmir] logs that it needs a restart and keeps the subscription.
func TestConfigCheckAndReloadLeaveTheSubscriptionAlone(t *testing.T) {
	reg := identityregistry.Start(t, identityregistry.Options{})
	g := writePMIRConfig(t, reg, "", "")
	if code, out, errOut := configCheck(t, g.path); code != 0 {
		t.Fatalf("config check exited %d: %s %s", code, out, errOut)
	}
	if n := reg.Requests(); n != 0 {
		t.Fatalf("config check sent %d requests to the registry", n)
	}
	p := serve(t, g.path)
	waitReady(t, g.base)
	double.Eventually(t, "a subscription held", func() bool { return len(reg.Subscriptions()) == 1 && g.report(t) == "up/<nil>" })
	data, err := os.ReadFile(g.path)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, g.path, strings.Replace(string(data), "check_interval_ms = 200", "check_interval_ms = 300", 1))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, "Configuration changed but needs a restart: pmir")
	if n := reg.Count(http.MethodPost, "/Subscription"); n != 1 || len(reg.Subscriptions()) != 1 {
		t.Fatalf("the reload touched the subscription: %d creates", n)
	}
	p.stop(t)
}
