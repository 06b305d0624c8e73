package authzen_test

import (
	"context"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/bindings/authzen"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/test/doubles/consentpdp"
)

// A consent question whose budget was spent before it left the gateway sends nothing
// and changes nothing (docs/bindings.md, "The dependency report": a request that
// never left the gateway changes nothing). It still fails closed.
func TestABudgetSpentBeforeTheRequestLeftChangesNothing(t *testing.T) {
	pdp := consentpdp.Start(t, consentpdp.Options{Rules: []consentpdp.Rule{{Permit: true}}})
	tr := dependencies.NewTracker()
	c, err := authzen.New(authzen.Options{Service: config.BindingService{URL: pdp.URL}, PurposeOfUse: config.DefaultPurposeOfUse, Tracker: tr})
	if err != nil {
		t.Fatal(err)
	}
	tr.SetService(authzen.Key, dependencies.Down, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Evaluate(ctx, authzen.Request{PatientSystem: "urn:oid:1.2", PatientValue: "x", ResourceType: "Observation", Members: []string{"a"}}); err == nil {
		t.Fatal("a consent question with no budget was answered")
	}
	if pdp.Requests() != 0 {
		t.Fatalf("the PDP got %d requests", pdp.Requests())
	}
	if got := tr.Report().Services[authzen.Key]; got != dependencies.Down {
		t.Fatalf("consent is %q, want it unchanged (down)", got)
	}
}
