package pdqm_test

import (
	"context"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/bindings/pdqm"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/test/doubles/pdqsupplier"
)

// A lookup whose budget was spent before it left the gateway sends nothing and
// changes nothing (docs/bindings.md, "The dependency report").
func TestABudgetSpentBeforeTheRequestLeftChangesNothing(t *testing.T) {
	s := pdqsupplier.Start(t, pdqsupplier.Options{})
	tr := dependencies.NewTracker()
	c, err := pdqm.New(pdqm.Options{Service: config.BindingService{URL: s.URL}, Tracker: tr})
	if err != nil {
		t.Fatal(err)
	}
	tr.SetService(pdqm.Key, dependencies.Failing, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Lookup(ctx, pdqm.Criteria{System: "urn:oid:1.2", Value: "x"}); err == nil {
		t.Fatal("a lookup with no budget succeeded")
	}
	if s.Requests() != 0 {
		t.Fatalf("the supplier got %d requests", s.Requests())
	}
	if got := tr.Report().Services[pdqm.Key]; got != dependencies.Failing {
		t.Fatalf("demographics is %q, want it unchanged (failing)", got)
	}
}
