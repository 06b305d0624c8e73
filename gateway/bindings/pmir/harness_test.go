package pmir_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/assemble"
	"github.com/ferrofed/ferrofed/gateway/bindings/pmir"
	"github.com/ferrofed/ferrofed/test/doubles/identityregistry"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

const feedScope = "pmir.feed"

// gateway is a real gateway on loopback with the federation surface and the identity
// feed, as assemble builds them, one member and a PMIR registry double.
type gateway struct {
	*gatewaytest.Gateway
	t           testing.TB
	feedToken   string // token with the feed scope only
	reg         *identityregistry.Server
	rec         *gatewaytest.Recorder
	log         *gatewaytest.Log
	invalidated atomic.Int64
	feed        *pmir.Feed
}

type harnessOptions struct {
	// pmir is added to the [pmir] table (after url, endpoint, feed_scope and a
	// check interval of 100 ms).
	pmir string
	// noPMIR leaves the table out.
	noPMIR bool
	// reg is the registry; default a new one.
	reg *identityregistry.Server
	// server is added to the [server] table.
	server string
}

func startGateway(t testing.TB, o harnessOptions) *gateway {
	t.Helper()
	g := &gateway{t: t, reg: o.reg, rec: &gatewaytest.Recorder{}, log: &gatewaytest.Log{}}
	if g.reg == nil {
		g.reg = identityregistry.Start(t, identityregistry.Options{})
	}
	member := members.Start(t, members.Options{ID: "a"})
	doc := fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n", member.URL)
	if !o.noPMIR {
		doc += fmt.Sprintf("[pmir]\nurl = %q\nendpoint = \"http://gateway.test/gw/pmir/$process-message\"\nfeed_scope = %q\ncheck_interval_ms = 100\n", g.reg.URL, feedScope) + o.pmir
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the gateway's log:\n%s", g.log)
		}
	})
	// The production wiring, with a recorder the tests can make refuse (a full spool)
	// and a count of the feed's cache invalidations.
	is := issuer.New(t)
	g.Gateway = gatewaytest.Start(t, doc, gatewaytest.WithIssuer(is), gatewaytest.WithServer("base_path = \"/gw\"\n"+o.server),
		gatewaytest.WithLog(g.log.Logger()),
		gatewaytest.WithAssemble(assemble.WithRecorder(g.rec), assemble.WithInvalidate(func() { g.invalidated.Add(1) })))
	g.feed = g.Assembled.Feed()
	g.feedToken = is.Sign(t, "registry", feedScope)
	return g
}
