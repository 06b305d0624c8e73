package patient_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/gateway/bindings/patient"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/server"
	"github.com/ferrofed/ferrofed/test/crashfs"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

const base = "/api"

// The identifier domains of the tests: the master patient index's, and one per member.
const (
	mpi     = "urn:oid:1.3.6.1.4.1.21367.13.20.9000"
	domainA = "urn:oid:1.3.6.1.4.1.21367.13.20.1000"
	domainB = "urn:oid:1.3.6.1.4.1.21367.13.20.2000"
	domainC = "urn:oid:1.3.6.1.4.1.21367.13.20.3000"
)

// gateway is a real gateway on loopback with the patient-scoped flow, in front of
// real loopback members a, b and c.
type gateway struct {
	*gatewaytest.Gateway
	t       testing.TB
	members map[string]*members.Server
	token   string
	// refuse makes the audit spool refuse every append (ENOSPC), with [audit];
	// refuseOnce refuses the next one only.
	refuse     func(on bool)
	refuseOnce func()
	// arr is the audit record repository, with [audit].
	arr *auditrepo.Server
	// log is the gateway's log.
	log gatewaytest.Log
}

type gatewayOptions struct {
	// tables are the binding tables, as TOML.
	tables string
	// audited adds an [audit] table with a spool (on an in-memory file system that
	// refuse can make refuse appends).
	audited bool
	// requestTimeout is server.request_timeout_ms; default 5 s.
	requestTimeout time.Duration
	// surfaceOnly mounts the surface without the server, whose listener refuses a long
	// request head itself (431) before the flow could.
	surfaceOnly bool
}

var memberDomains = map[string]string{"a": domainA, "b": domainB, "c": domainC}

// memberCommunities are the members' XCPD homeCommunityIds, as HL7v3 writes them.
var memberCommunities = map[string]string{"a": "1.3.6.1.4.1.21367.13.70.1", "b": "1.3.6.1.4.1.21367.13.70.2", "c": "1.3.6.1.4.1.21367.13.70.3"}

// newGateway starts the gateway of o.tables as assemble builds it; with o.audited or
// o.surfaceOnly its parts are put together here as assemble does, because the tests
// give the spool a file system that refuses appends, or check the surface alone,
// which assemble cannot.
func newGateway(t testing.TB, o gatewayOptions) *gateway {
	t.Helper()
	if o.requestTimeout == 0 {
		o.requestTimeout = 5 * time.Second
	}
	g := &gateway{t: t, members: map[string]*members.Server{}, refuse: func(bool) {}, refuseOnce: func() {}}
	var doc strings.Builder
	for _, id := range []string{"a", "b", "c"} {
		m := members.Start(t, members.Options{ID: id, Marker: "MEMBER-BODY-" + id})
		g.members[id] = m
		fmt.Fprintf(&doc, "[[registry.members]]\nid = %q\nquery_endpoint = %q\n", id, m.URL)
		if strings.Contains(o.tables, "[resolver]") || strings.Contains(o.tables, `protocol = "pixm"`) {
			fmt.Fprintf(&doc, "identifier_system = %q\n", memberDomains[id])
		}
		if strings.Contains(o.tables, `protocol = "xcpd"`) {
			fmt.Fprintf(&doc, "home_community_id = %q\n", "urn:oid:"+memberCommunities[id])
		}
	}
	var fsys *crashfs.FS
	if o.audited {
		g.arr = auditrepo.Start(t, auditrepo.Options{})
		fmt.Fprintf(&doc, "[audit]\ndestination = \"repository\"\nurl = %q\nspool_dir = \"/spool\"\n", g.arr.URL)
		fsys = crashfs.New()
		var refusing, once atomic.Bool
		fsys.Hook = func(op crashfs.Op, _ string) error {
			if op == crashfs.OpWrite && (refusing.Load() || once.CompareAndSwap(true, false)) {
				return syscall.ENOSPC
			}
			return nil
		}
		g.refuse = refusing.Store
		g.refuseOnce = func() { once.Store(true) }
	}
	doc.WriteString(o.tables)
	log := g.log.Logger()
	opts := []gatewaytest.Option{gatewaytest.WithLog(log),
		gatewaytest.WithServer(fmt.Sprintf("base_path = %q\nrequest_timeout_ms = %d\n", base, o.requestTimeout.Milliseconds()))}
	if fsys == nil && !o.surfaceOnly {
		g.Gateway = gatewaytest.Start(t, doc.String(), opts...)
	} else {
		g.Gateway = handWired(t, doc.String(), fsys, log, o.surfaceOnly, opts)
	}
	g.token = g.Token
	return g
}

// handWired is the gateway of tables with its audit spool on fsys (the OS's when nil),
// or its federation surface alone mounted as the server mounts it.
func handWired(t testing.TB, tables string, fsys *crashfs.FS, log logr.Logger, surfaceOnly bool, opts []gatewaytest.Option) *gatewaytest.Gateway {
	t.Helper()
	cfg, is := gatewaytest.Config(t, tables, opts...)
	metrics := bindings.NewMetrics()
	ao := audit.Options{Metrics: metrics, Logger: log}
	if fsys != nil {
		ao.FS = fsys
	}
	trail, err := audit.New(cfg, ao)
	if err != nil {
		t.Fatal(err)
	}
	flow, err := patient.New(cfg, patient.Options{Recorder: trail, Metrics: metrics, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	fed, err := federation.New(cfg, federation.Options{Audit: trail, Patient: flow, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	trail.Attach(fed.Tracker(), fed.Authorize())
	flow.Attach(fed.Tracker())
	surfaces := []server.Surface{fed}
	for _, s := range trail.Surfaces() {
		surfaces = append(surfaces, s)
	}
	if surfaceOnly {
		return gatewaytest.Mount(t, cfg, is, surfaces...)
	}
	srv, err := server.New(cfg, log, server.WithSurfaces(surfaces...))
	if err != nil {
		t.Fatal(err)
	}
	return gatewaytest.Serve(t, cfg, is, srv, trail.Start)
}
