package patient_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/assemble"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/test/crashfs"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

const base = "/api"

// gateway is a real gateway on loopback with the patient-scoped flow, in front of
// real loopback members a, b and c.
type gateway struct {
	*gatewaytest.Gateway
	t       testing.TB
	members map[string]*members.Server
	// token is a data-plane token of another caller than Client: subject alice.
	token string
	// operator is a data-plane token of Client's caller (subject app) that holds the
	// operator scope too: search asks with it, so that the tests of the flow read every
	// record, excluded_by included, as only an operator is shown them (docs/security.md).
	operator string
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

// newGateway starts the gateway of o.tables as assemble builds it; with o.audited its
// spool has a file system that refuses appends when told (assemble.WithAuditOptions),
// and with o.surfaceOnly its parts are mounted without the server
// (gatewaytest.Mounted).
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
		if strings.Contains(o.tables, "[resolver]") || strings.Contains(o.tables, `protocol = "pixm"`) || strings.Contains(o.tables, "[consent]") {
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
	if fsys != nil {
		opts = append(opts, gatewaytest.WithAssemble(assemble.WithAuditOptions(func(ao *audit.Options) { ao.FS = fsys })))
	}
	if o.surfaceOnly {
		g.Gateway = gatewaytest.Mounted(t, doc.String(), opts...)
	} else {
		g.Gateway = gatewaytest.Start(t, doc.String(), opts...)
	}
	g.token = g.Issuer.Sign(t, "alice", issuer.ClientScope)
	g.operator = g.Issuer.Sign(t, "app", issuer.ClientScope+" "+issuer.OperatorScope)
	return g
}
