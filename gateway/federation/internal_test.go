package federation

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/ferrofed/ferrofed/gateway/auth"
	"github.com/ferrofed/ferrofed/gateway/calllimit"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/gateway/searchquery"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// The tests of the surface's internals. Each builds the surface alone, with the
// dependency report and the operator-token check the composition root would hand it,
// and neither mounts nor serves it: every test of a running gateway is in package
// federation_test, on the production wiring (harness_test.go, test/gatewaytest).

// newSurface is the surface of tables, opts.Tracker a new one when nil.
func newSurface(t *testing.T, tables string, opts Options) *Surface {
	t.Helper()
	// The surface alone, with no access guard in front: its data plane is written open.
	cfg, err := config.Parse([]byte(tables+"\n[auth]\ndata_plane = \"open\"\n"), "t.toml", config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Tracker == nil {
		opts.Tracker = dependencies.NewTracker()
	}
	if opts.Operators, err = auth.NewOperators(cfg.Auth.Issuers, auth.Options{}); err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestARequestWhoseBudgetWasSpentBeforeSendingChangesNothing(t *testing.T) {
	m := members.Start(t, members.Options{ID: "node-a"})
	s := newSurface(t, fmt.Sprintf("[[registry.members]]\nid = \"node-a\"\nquery_endpoint = %q\n", m.URL), Options{})
	st := s.state.Load()
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	srch := &search{c: s.caller, cs: s.newCalls(st, nil), reg: st.reg, resourceType: "Patient", count: 10, first: true, gw: "http://gw", maxExtras: 1000}
	for _, m := range st.reg.members {
		srch.positions = append(srch.positions, &position{m: m, cursor: "/Patient", remaining: -1})
	}
	res := srch.run(ctx, calllimit.Budget(ctx, time.Second), false, st.key, nil)
	if res.status != http.StatusGatewayTimeout || len(res.records) != 1 || res.records[0].Outcome != outbound.Timeout {
		t.Fatalf("page %+v", res)
	}
	if n := m.Requests(); n != 0 {
		t.Fatalf("the member got %d requests", n)
	}
	if r := s.tracker.Report(); len(r.Endpoints) != 1 || r.Endpoints["node-a-query"] != dependencies.Unknown {
		t.Fatalf("report %+v, want node-a-query unknown", r.Endpoints)
	}
}

func TestWithoutAKeyFileTheProcessMakesItsOwnAndSaysSo(t *testing.T) {
	build := func(federation string) (string, searchquery.Key) {
		var logs strings.Builder
		s := newSurface(t, "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a.test/fhir\"\n"+federation,
			Options{Logger: funcr.New(func(prefix, args string) { logs.WriteString(args + "\n") }, funcr.Options{})})
		return logs.String(), s.state.Load().key
	}
	logs, own1 := build("")
	if !strings.Contains(logs, "Made a page token key of its own") || !strings.Contains(logs, "federation.page_token_key_file") {
		t.Fatalf("logs %q", logs)
	}
	_, own2 := build("")
	if string(own1) == string(own2) || len(own1) < 32 {
		t.Fatal("two processes made the same key, or a short one")
	}
	file := filepath.Join(t.TempDir(), "page-token.key")
	if err := os.WriteFile(file, []byte("0123456789abcdef0123456789abcdef-shared\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs, shared1 := build(fmt.Sprintf("[federation]\npage_token_key_file = %q\n", file))
	_, shared2 := build(fmt.Sprintf("[federation]\npage_token_key_file = %q\n", file))
	if strings.Contains(logs, "of its own") || string(shared1) != string(shared2) {
		t.Fatalf("with a key file: logs %q, keys differ %v", logs, string(shared1) != string(shared2))
	}
}
