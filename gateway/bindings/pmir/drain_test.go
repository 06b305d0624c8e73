package pmir_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/identityregistry"
)

// Drain step 4 deletes the subscription held, once.
func TestDrainDeletesTheSubscriptionOnce(t *testing.T) {
	reg := identityregistry.Start(t, identityregistry.Options{})
	g := startGateway(t, harnessOptions{reg: reg})
	g.waitState("up/-")
	g.Stop()
	if n := reg.Count(http.MethodDelete, "/Subscription"); n != 1 {
		t.Fatalf("%d deletes, want 1", n)
	}
	if len(reg.Subscriptions()) != 0 {
		t.Fatal("the subscription is left at the registry")
	}
	if !strings.Contains(g.log.String(), `"identity_registry_subscription"="deleted"`) {
		t.Fatalf("drain step 4's line does not say the subscription was deleted:\n%s", g.log)
	}
	if g.rec.Count(`"code":"delete"`) != 1 {
		t.Fatal("the delete was not audited")
	}
}

// A delete refused (500) leaves the subscription: a warning names its id.
func TestARefusedDeleteIsWarnedOfByID(t *testing.T) {
	reg := identityregistry.Start(t, identityregistry.Options{})
	g := startGateway(t, harnessOptions{reg: reg})
	g.waitState("up/-")
	reg.Set(t, double.Knobs{Route: identityregistry.DeleteRoute, Status: http.StatusInternalServerError})
	g.Stop()
	log := g.log.String()
	if !strings.Contains(log, "Warning: could not delete the PMIR subscription") || !strings.Contains(log, `"subscription"="1"`) {
		t.Fatalf("no warning naming the subscription:\n%s", log)
	}
	if strings.Contains(log, "PMIR-BODY") {
		t.Fatal("the registry's words are in the log")
	}
}

// A delete that hangs is bounded by pmir.timeout_ms; once the bindings budget runs
// out the binding warns naming the subscription's id, and Stop returns when the
// delete ended, so that the server can abandon it by name meanwhile.
func TestAHangingDeleteIsAbandonedWithAWarning(t *testing.T) {
	reg := identityregistry.Start(t, identityregistry.Options{})
	g := startGateway(t, harnessOptions{reg: reg, pmir: "timeout_ms = 1500\n"})
	g.waitState("up/-")
	reg.Set(t, double.Knobs{Route: identityregistry.DeleteRoute, Fault: double.FaultHang})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := g.feed.Stop(ctx)
	took := time.Since(start)
	if err == nil || took < time.Second || took > 5*time.Second {
		t.Fatalf("Stop returned %v after %s; want an error once the delete's own timeout (1.5 s) ended", err, took)
	}
	log := g.log.String()
	if !strings.Contains(log, "Warning: abandoned the PMIR subscription") || !strings.Contains(log, `"subscription"="1"`) {
		t.Fatalf("no warning naming the subscription:\n%s", log)
	}
	if n := reg.Count(http.MethodDelete, "/Subscription"); n != 1 {
		t.Fatalf("%d deletes, want 1", n)
	}
}
