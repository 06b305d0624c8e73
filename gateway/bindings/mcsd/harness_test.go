package mcsd_test

import (
	"fmt"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/bindings/mcsd"
	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/federation"
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

// gateway is the federation surface with its registry read from a directory double,
// mounted as the server mounts it, in front of real loopback members. It is mounted
// without the server (gatewaytest.Mount), and its parts are put together here as
// assemble does, because the tests search and read the report while the registry is
// not ready yet (the server's gate would refuse them), run refreshes and reloads by
// hand, give the directory limits of their own, and make the recorder refuse records:
// assemble and the server give none of that.
type gateway struct {
	*gatewaytest.Gateway
	t       testing.TB
	fed     *federation.Surface
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
	cfg, is := gatewaytest.Config(t, fmt.Sprintf("[registry.mcsd]\nurl = %q\nmember_identifier_system = %q\n%s\n%s",
		g.double.URL, system, o.mcsd, o.tables), gatewaytest.WithServer(fmt.Sprintf("base_path = %q\nrequest_timeout_ms = 5000\n", base)))
	g.cfg = cfg
	// The patient-scoped flow, when the tables configure one (nil otherwise): a
	// directory's registry gives it the members' keys.
	flow, err := patient.New(cfg, patient.Options{Recorder: g.rec})
	if err != nil {
		t.Fatal(err)
	}
	if g.fed, err = federation.New(cfg, federation.Options{Patient: flow}); err != nil {
		t.Fatal(err)
	}
	flow.Attach(g.fed.Tracker())
	g.dir, err = mcsd.New(mcsd.Options{Config: cfg, Registry: g.fed, Recorder: g.rec, Limits: o.limits})
	if err != nil {
		t.Fatal(err)
	}
	g.dir.Attach(g.fed.Tracker())
	g.Gateway = gatewaytest.Mount(t, cfg, is, g.fed, g.dir.Surface(nil))
	if o.start {
		if err := g.dir.Start(); err != nil {
			t.Fatal(err)
		}
	}
	return g
}
