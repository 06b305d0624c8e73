package xcpd_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/bindings/xcpd"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/test/doubles/respondinggateway"
)

// A localization whose budget was spent before it left the gateway sends nothing and
// changes nothing (docs/bindings.md, "The dependency report"), and neither does a
// patient XCPD cannot name (an identifier system that is no OID).
func TestARequestThatNeverLeftChangesNothing(t *testing.T) {
	gw := respondinggateway.Start(t, respondinggateway.Options{})
	tr := dependencies.NewTracker()
	c, err := xcpd.New(xcpd.Options{Service: config.BindingService{URL: gw.URL}, Tracker: tr})
	if err != nil {
		t.Fatal(err)
	}
	tr.SetService(xcpd.Key, dependencies.Failing, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Locate(ctx, "urn:oid:1.2", "x"); err == nil {
		t.Fatal("a localization with no budget succeeded")
	}
	if _, err := c.Locate(context.Background(), "https://mpi.example/id", "x"); !errors.Is(err, xcpd.ErrNotAsked) {
		t.Fatalf("a patient of no OID: %v", err)
	}
	if gw.Requests() != 0 {
		t.Fatalf("the responding gateway got %d requests", gw.Requests())
	}
	if got := tr.Report().Services[xcpd.Key]; got != dependencies.Failing {
		t.Fatalf("localizer is %q, want it unchanged (failing)", got)
	}
}
