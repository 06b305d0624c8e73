package pmir_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/identityregistry"
)

// Each row of the state table (docs/bindings.md, "Identity feed"), read through GET
// /operator/dependencies.
func TestEachStateRowThroughTheDependencyReport(t *testing.T) {
	rows := []struct {
		name   string
		script identityregistry.Script
		knobs  double.Knobs
		pmir   string
		want   string
	}{
		{name: "a subscription created and read requested or active is up", want: "up/-"},
		{name: "a create refused 422 is failing, refused", knobs: double.Knobs{Route: identityregistry.CreateRoute, Status: http.StatusUnprocessableEntity}, want: "failing/refused"},
		{name: "a create answered 500 is failing, refused", knobs: double.Knobs{Route: identityregistry.CreateRoute, Status: http.StatusInternalServerError}, want: "failing/refused"},
		{name: "a subscription in error is failing, refused", script: identityregistry.Script{ForceStatus: "error"}, want: "failing/refused"},
		{name: "a subscription off is failing, refused", script: identityregistry.Script{ForceStatus: "off"}, want: "failing/refused"},
		{name: "a create answered with no Subscription is failing, malformed", script: identityregistry.Script{CreateNoSubscription: true}, want: "failing/malformed"},
		{name: "an answer that is not JSON is failing, malformed", knobs: double.Knobs{Fault: double.FaultMalformed}, want: "failing/malformed"},
		{name: "a create without Location and id is failing, unmanageable", script: identityregistry.Script{CreateWithoutLocation: true}, want: "failing/unmanageable"},
		{name: "a Location on another origin is failing, unmanageable", script: identityregistry.Script{CreateForeignLocation: true}, want: "failing/unmanageable"},
		{name: "a registry refusing connections is down, unreachable", knobs: double.Knobs{Fault: double.FaultRefused}, want: "down/unreachable"},
		{name: "a registry silent past timeout_ms is down, unreachable", knobs: double.Knobs{Fault: double.FaultHang}, pmir: "timeout_ms = 200\n", want: "down/unreachable"},
		{name: "a registry resetting the connection is down, unreachable", knobs: double.Knobs{Fault: double.FaultReset}, want: "down/unreachable"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			reg := identityregistry.Start(t, identityregistry.Options{Script: row.script, Knobs: row.knobs})
			g := startGateway(t, harnessOptions{reg: reg, pmir: row.pmir})
			g.waitState(row.want)
			if _, body := g.Report(); strings.Contains(body, "PMIR-BODY") || strings.Contains(body, reg.URL) || strings.Contains(body, "127.0.0.1") {
				t.Fatalf("the report leaks the registry's words or URL: %s", body)
			}
			if err := reg.SetKnobs(double.Knobs{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// An exchange whose audit record is not stored is failing, audit-failed; the next
// stored one is up again.
func TestAnAuditRecordNotStoredIsAuditFailed(t *testing.T) {
	g := startGateway(t, harnessOptions{})
	g.waitState("up/-")
	g.rec.Fail.Store(true)
	g.waitState("failing/audit-failed")
	g.rec.Fail.Store(false)
	g.waitState("up/-")
	if g.rec.Count(`"code":"ITI-94"`) == 0 || g.rec.Count(`"code":"read"`) == 0 || g.rec.Count(`"code":"create"`) != 1 {
		t.Fatalf("the exchanges were not audited: %d events", g.rec.Count("AuditEvent"))
	}
}

// Without [pmir] neither key is in the report, and the feed route is not there.
func TestWithoutPMIRTheKeysAreAbsent(t *testing.T) {
	g := startGateway(t, harnessOptions{noPMIR: true})
	r, _ := g.Report()
	if _, ok := r["identity_registry"]; ok {
		t.Fatalf("identity_registry present: %v", r)
	}
	if _, ok := r["identity_registry_fault"]; ok {
		t.Fatalf("identity_registry_fault present: %v", r)
	}
	if status, _ := g.Do(http.MethodPost, "/pmir/$process-message", "", []byte("{}")); status != http.StatusNotFound {
		t.Fatalf("the feed route answered %d without [pmir]", status)
	}
}

// A subscription is requested until the registry activates it, then active; up all
// along, and read on every interval.
func TestActivationAfterADelayStaysUp(t *testing.T) {
	reg := identityregistry.Start(t, identityregistry.Options{ActivateAfter: 300 * time.Millisecond})
	g := startGateway(t, harnessOptions{reg: reg})
	g.waitState("up/-")
	double.Eventually(t, "the subscription is active", func() bool {
		subs := reg.Subscriptions()
		return len(subs) == 1 && subs[0].Status == "active"
	})
	reads := reg.Count(http.MethodGet, "/Subscription/1")
	double.Eventually(t, "the subscription is read again", func() bool { return reg.Count(http.MethodGet, "/Subscription/1") >= reads+2 })
	if g.state() != "up/-" || reg.Count(http.MethodPost, "/Subscription") != 1 {
		t.Fatalf("state %s after %d creates", g.state(), reg.Count(http.MethodPost, "/Subscription"))
	}
}

// A subscription that vanished at the registry is created again, and the report is
// up from the new one.
func TestAVanishedSubscriptionIsCreatedAgain(t *testing.T) {
	reg := identityregistry.Start(t, identityregistry.Options{})
	g := startGateway(t, harnessOptions{reg: reg})
	g.waitState("up/-")
	reg.Remove("1")
	double.Eventually(t, "a second subscription is created", func() bool {
		subs := reg.Subscriptions()
		return len(subs) == 1 && subs[0].ID == "2"
	})
	g.waitState("up/-")
	g.Stop()
	if n := reg.Count(http.MethodDelete, "/Subscription/2"); n != 1 {
		t.Fatalf("%d deletes of the new subscription at the drain", n)
	}
}

// A create the gateway cannot manage is not repeated: each would leave one more
// subscription behind.
func TestAnUnmanageableCreateIsNotRepeated(t *testing.T) {
	reg := identityregistry.Start(t, identityregistry.Options{Script: identityregistry.Script{CreateForeignLocation: true}})
	g := startGateway(t, harnessOptions{reg: reg})
	g.waitState("failing/unmanageable")
	searches := reg.Count(http.MethodGet, "/Subscription")
	double.Eventually(t, "later checks search", func() bool { return reg.Count(http.MethodGet, "/Subscription") >= searches+3 })
	// The search finds it (the registry holds it under its own origin): it is held from
	// then on, and the report is up.
	g.waitState("up/-")
	if n := reg.Count(http.MethodPost, "/Subscription"); n != 1 {
		t.Fatalf("%d creates, want 1", n)
	}
}

// A subscription a killed instance left behind is found by its endpoint and
// criteria and reused; one of ours in error is deleted; another gateway's is left.
func TestALeftoverIsReusedAndAStaleOneDeleted(t *testing.T) {
	reg := identityregistry.Start(t, identityregistry.Options{})
	leftover := func(endpoint string) {
		body := `{"resourceType":"Subscription","status":"requested","contact":[{"system":"url","value":"x"}],"criteria":"Patient",` +
			`"channel":{"type":"message","endpoint":"` + endpoint + `","payload":"application/fhir+json"}}`
		if status, _, err := identityregistry.Send(reg.URL+"/Subscription", "", []byte(body)); err != nil || status != http.StatusCreated {
			t.Fatalf("leftover: %d %v", status, err)
		}
	}
	leftover("http://gateway.test/gw/pmir/$process-message") // 1: ours, to reuse
	leftover("http://gateway.test/gw/pmir/$process-message") // 2: ours, a duplicate to delete
	leftover("http://other.test/pmir/$process-message")      // 3: another gateway's
	g := startGateway(t, harnessOptions{reg: reg})
	g.waitState("up/-")
	if n := reg.Count(http.MethodPost, "/Subscription"); n != 3 {
		t.Fatalf("the gateway created a subscription (%d creates) instead of reusing its leftover", n)
	}
	if n := reg.Count(http.MethodDelete, "/Subscription/2"); n != 1 {
		t.Fatalf("the duplicate was deleted %d times", n)
	}
	g.Stop()
	ids := []string{}
	for _, s := range reg.Subscriptions() {
		ids = append(ids, s.ID)
	}
	if strings.Join(ids, ",") != "3" {
		t.Fatalf("left at the registry: %v, want only another gateway's (3)", ids)
	}
}
