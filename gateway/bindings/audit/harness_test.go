package audit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/assemble"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

// waitAfter is the tests' delivery interval: a record older than it waits.
const waitAfter = 300 * time.Millisecond

// gateway is a real gateway on loopback: the server with the federation surface and
// the audit trail, as assemble builds them, one member and an audit repository.
type gateway struct {
	*gatewaytest.Gateway
	t      testing.TB
	noScop string // operator token without the scope
	arr    *auditrepo.Server
	feed   *auditrepo.Server // the [audit.feed] repository, %FEED%
	member *members.Server
	trail  *audit.Trail
}

type harnessOptions struct {
	// audit is the [audit] table's body after `[audit]`; "" for no table. %ARR% and
	// %SPOOL% are replaced.
	audit string
	// spoolDir is the spool directory; default a new one.
	spoolDir string
	// arr is the repository; default a new one.
	arr *auditrepo.Server
	// arrURL, when set, replaces %ARR% instead of arr's URL (another repository).
	arrURL string
	// fs is the spools' file system; default the OS's.
	fs spool.FS
	// log receives the gateway's log.
	log logr.Logger
	// server is added to the [server] table (budgets, termination_message_path).
	server string
	// memberDelay is how long the member waits before each answer (a member across a
	// network); default none.
	memberDelay time.Duration
	// members is how many members the gateway federates (a, b, c, …), each with
	// memberDelay; default 1.
	members int
	// waitAfter is the delivery interval; default the tests' short one. The delivery
	// linger is a tenth of it, at most 50 ms (production's).
	waitAfter time.Duration
}

const repositoryTable = "destination = \"repository\"\nurl = \"%ARR%\"\nspool_dir = \"%SPOOL%\"\n"

func startGateway(t testing.TB, o harnessOptions) *gateway {
	t.Helper()
	g := &gateway{t: t, arr: o.arr, member: members.Start(t, members.Options{ID: "a", Knobs: double.Knobs{Delay: o.memberDelay}})}
	if g.arr == nil {
		g.arr = auditrepo.Start(t, auditrepo.Options{PoisonMarker: "POISON"})
	}
	g.feed = auditrepo.Start(t, auditrepo.Options{})
	if o.spoolDir == "" {
		o.spoolDir = t.TempDir()
	}
	doc := fmt.Sprintf("[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n", g.member.URL)
	for i := 1; i < o.members; i++ {
		id := string(rune('a' + i))
		m := members.Start(t, members.Options{ID: id, Knobs: double.Knobs{Delay: o.memberDelay}})
		doc += fmt.Sprintf("[[registry.members]]\nid = %q\nquery_endpoint = %q\n", id, m.URL)
	}
	if o.audit != "" {
		arrURL := g.arr.URL
		if o.arrURL != "" {
			arrURL = o.arrURL
		}
		doc += "[audit]\n" + strings.NewReplacer("%ARR%", arrURL, "%FEED%", g.feed.URL, "%SPOOL%", o.spoolDir).Replace(o.audit)
	}
	log := o.log
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	if o.waitAfter == 0 {
		o.waitAfter = waitAfter
	}
	// The production wiring, with the tests' shorter delivery interval and backoff
	// and, when given, a spool file system that fails.
	tune := assemble.WithAuditOptions(func(ao *audit.Options) {
		ao.FS, ao.WaitAfter, ao.BackoffBase, ao.BackoffMax = o.fs, o.waitAfter, 20*time.Millisecond, 100*time.Millisecond
	})
	is := issuer.New(t)
	g.Gateway = gatewaytest.Start(t, doc, gatewaytest.WithIssuer(is), gatewaytest.WithServer(o.server), gatewaytest.WithLog(log),
		gatewaytest.WithAssemble(tune))
	g.trail = g.Assembled.Audit()
	g.noScop = is.Sign(t, "bob", "other")
	return g
}
