package assemble

import (
	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/gateway/bindings/mcsd"
	"github.com/ferrofed/ferrofed/gateway/bindings/pmir"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/server"
	"github.com/ferrofed/ferrofed/gateway/storedquery"
	"github.com/ferrofed/ferrofed/gateway/tracing"
)

// Tracing is the tracing part ([tracing]).
func (g *Gateway) Tracing() *tracing.Tracing { return g.tracing }

// The parts a test of a whole gateway reaches into (test/gatewaytest): to run a
// refresh or a drift check now instead of waiting for its loop, or to read what a
// part's own tests read of it. Each but the federation is nil when its table is absent.

// Federation is the federation surface.
func (g *Gateway) Federation() *federation.Surface { return g.federation }

// Audit is the audit trail ([audit]).
func (g *Gateway) Audit() *audit.Trail { return g.audit }

// Directory is the mCSD directory ([registry.mcsd]).
func (g *Gateway) Directory() *mcsd.Directory { return g.directory }

// Feed is the PMIR identity feed ([pmir]).
func (g *Gateway) Feed() *pmir.Feed { return g.feed }

// Queries are the stored queries ([stored_queries]).
func (g *Gateway) Queries() *storedquery.Queries { return g.queries }

// Registrations are what the parts registered with the server, in the server's order:
// for the tests that mount the parts without the server (gatewaytest.Mounted).
func (g *Gateway) Registrations() []server.Registration { return g.parts }
