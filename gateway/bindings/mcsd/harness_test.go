package mcsd_test

import (
	"fmt"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/assemble"
	"github.com/ferrofed/ferrofed/gateway/bindings/mcsd"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/test/doubles/mcsdsupplier"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

const (
	base = "/api"
	// system is the member identifier system of the tests' directories.
	system = "urn:oid:1.3.6.1.4.1.21367.13.20.7000"
	// domainSystem is the system of the Organization identifier whose value is the
	// member's patient identifier domain (registry.mcsd.patient_domain_identifier_system).
	domainSystem = "https://ferrofed.example/patient-domain"
)

// gateway is the gateway as assemble builds it, its registry read from a directory
// double, in front of real loopback members. It is mounted without the server
// (gatewaytest.Mounted), because the tests search and read the report while the
// registry is not ready yet (the server's gate would refuse them) and run refreshes
// and reloads by hand; the directory's limits and a recorder that refuses records
// are injected (assemble.Option).
type gateway struct {
	*gatewaytest.Gateway
	t       testing.TB
	dir     *mcsd.Directory
	double  *mcsdsupplier.Server
	members map[string]*members.Server
	rec     *gatewaytest.Recorder
	cfg     *config.Config
}

type gatewayOptions struct {
	// tables are more TOML, after [registry.mcsd].
	tables string
	// mcsd are more keys of [registry.mcsd].
	mcsd string
	// double is the directory; default a new one.
	double *mcsdsupplier.Server
	// limits are the directory's limits.
	limits mcsd.Limits
	// start runs the refresh loop (Start) instead of leaving refreshes to the test.
	start bool
}

func newGateway(t testing.TB, o gatewayOptions) *gateway {
	t.Helper()
	g := &gateway{t: t, members: map[string]*members.Server{}, double: o.double, rec: &gatewaytest.Recorder{}}
	if g.double == nil {
		g.double = mcsdsupplier.Start(t, mcsdsupplier.Options{})
	}
	tables := fmt.Sprintf("[registry.mcsd]\nurl = %q\nmember_identifier_system = %q\n%s\n%s", g.double.URL, system, o.mcsd, o.tables)
	// The production wiring, with the test's recorder and the directory's limits,
	// mounted without the server and its parts not started.
	limits := assemble.WithDirectoryOptions(func(d *mcsd.Options) { d.Limits = o.limits })
	g.Gateway = gatewaytest.Mounted(t, tables, gatewaytest.WithServer(fmt.Sprintf("base_path = %q\nrequest_timeout_ms = 5000\n", base)),
		gatewaytest.WithAssemble(assemble.WithRecorder(g.rec), limits))
	g.cfg = g.Config
	g.dir = g.Assembled.Directory()
	if o.start {
		if err := g.dir.Start(); err != nil {
			t.Fatal(err)
		}
	}
	return g
}
