package audit_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
	"github.com/ferrofed/ferrofed/test/crashfs"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
)

// Each row of the state table of audit_repository and audit_feed (docs/audit-spool.md,
// "The state of audit_repository and audit_feed") through the real route, GET
// {base}/operator/dependencies, with the repository double driving the spool's
// condition.
func TestTheStatesThroughTheDependencyReport(t *testing.T) {
	cases := []struct {
		name string
		// table is the [audit] table ("" for none).
		table string
		// act drives the gateway and the repository; it returns the marker whose event
		// must have reached the repository, "" for none.
		act  func(g *gateway) string
		key  string
		want string
		// then runs once the state is seen.
		then func(t *testing.T, g *gateway)
	}{
		{
			name: "nothing spooled since start is unknown", table: repositoryTable,
			act: func(*gateway) string { return "" }, key: "audit_repository", want: "unknown",
		},
		{
			name: "the last delivery succeeded and nothing waits is up", table: repositoryTable,
			act: func(g *gateway) string {
				if s := g.search("UPMARK"); s != http.StatusOK {
					g.t.Fatalf("search answered %d", s)
				}
				return "UPMARK"
			}, key: "audit_repository", want: "up",
		},
		{
			name: "a failed delivery being retried is degraded", table: repositoryTable,
			act: func(g *gateway) string {
				g.arr.Script(t, double.Statuses(503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503)...)
				g.search("RETRYMARK")
				return ""
			}, key: "audit_repository", want: "degraded",
			then: func(t *testing.T, g *gateway) {
				g.arr.Script(t) // healthy again: the retry delivers and the state comes back
				double.Eventually(t, "up after the retry delivered", func() bool { return g.State("audit_repository") == "up" })
				if delivered(g.arr, "RETRYMARK") < 1 {
					t.Fatal("the retried event was not delivered")
				}
			},
		},
		{
			name: "a message older than one delivery interval waiting is degraded", table: repositoryTable,
			act: func(g *gateway) string {
				g.arr.Set(t, double.Knobs{Fault: double.FaultHold}) // the delivery is in flight and stays there: nothing fails
				g.search("WAITMARK")
				return ""
			}, key: "audit_repository", want: "degraded",
			then: func(t *testing.T, g *gateway) {
				g.arr.Set(t, double.Knobs{})
				double.Eventually(t, "up once the held delivery went through", func() bool { return g.State("audit_repository") == "up" })
			},
		},
		{
			name: "anything in quarantine is degraded until an operator clears it", table: repositoryTable,
			act: func(g *gateway) string {
				g.search("POISON")
				g.search("GOODMARK")
				return "GOODMARK"
			}, key: "audit_repository", want: "degraded",
			then: func(t *testing.T, g *gateway) {
				entries := listQuarantine(t, g, 1)
				if entries[0].Destination != "repository" || entries[0].Reason.Kind != "rejected" || entries[0].Reason.Status != 422 {
					t.Fatalf("entry %+v, want the 422 of the repository", entries[0])
				}
				if status, _ := g.Do(http.MethodDelete, "/operator/audit/quarantine/repository/"+entries[0].ID, g.Token, nil); status != http.StatusNoContent {
					t.Fatalf("DELETE answered %d", status)
				}
				// The repository stored GOODMARK before the loop read its answer and
				// acknowledged it: up once it did.
				double.Eventually(t, "up after the drop", func() bool { return g.State("audit_repository") == "up" })
			},
		},
		{
			name: "the feed has its own spool and its own key", table: repositoryTable + "[audit.feed]\nurl = \"%FEED%\"\nspool_dir = \"%SPOOL%\"\n",
			act: func(g *gateway) string {
				g.search("FEEDMARK")
				return "FEEDMARK"
			}, key: "audit_feed", want: "up",
			then: func(t *testing.T, g *gateway) {
				double.Eventually(t, "audit_repository up as well", func() bool { return g.State("audit_repository") == "up" })
				// One event, two destinations: each repository got it.
				double.Eventually(t, "the feed's delivery", func() bool { return delivered(g.feed, "FEEDMARK") == 1 })
			},
		},
		{
			name: "audit to the log has no report key", table: "destination = \"log\"\n",
			act: func(g *gateway) string {
				if s := g.search("LOGMARK"); s != http.StatusOK {
					g.t.Fatalf("search answered %d", s)
				}
				return ""
			}, key: "audit_repository", want: "absent",
			then: func(t *testing.T, g *gateway) {
				if got := g.State("audit_feed"); got != "absent" {
					t.Fatalf("audit_feed is %s", got)
				}
				if status, _ := g.Do(http.MethodGet, "/operator/audit/quarantine", g.Token, nil); status != http.StatusNotFound {
					t.Fatalf("the quarantine route answered %d without a spool", status)
				}
			},
		},
		{
			name: "no [audit] table has no report key", table: "",
			act: func(g *gateway) string { g.search("NOAUDIT"); return "" }, key: "audit_repository", want: "absent",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, harnessOptions{audit: tc.table})
			marker := tc.act(g)
			if marker != "" {
				double.Eventually(t, "the event of "+marker+" delivered", func() bool { return delivered(g.arr, marker) >= 1 })
			}
			double.Eventually(t, "audit state "+tc.want, func() bool { return g.State(tc.key) == tc.want })
			if tc.then != nil {
				tc.then(t, g)
			}
		})
	}
}

// Records left by a previous run wait: the restarted gateway is degraded at once,
// before any delivery, and up once they are delivered.
func TestRecordsLeftByAPreviousRunAreDegraded(t *testing.T) {
	dir := t.TempDir()
	arr := auditrepo.Start(t, auditrepo.Options{})
	arr.Set(t, double.Knobs{Fault: double.FaultHold})
	g := startGateway(t, harnessOptions{audit: repositoryTable, spoolDir: dir, arr: arr})
	for _, m := range []string{"LEFT1", "LEFT2", "LEFT3"} {
		if s := g.search(m); s != http.StatusOK {
			t.Fatalf("search answered %d", s)
		}
	}
	g.Stop()
	arr.Set(t, double.Knobs{})
	arr.Script(t, double.Statuses(503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503)...)
	g2 := startGateway(t, harnessOptions{audit: repositoryTable, spoolDir: dir, arr: arr})
	if got := g2.State("audit_repository"); got != "degraded" {
		t.Fatalf("a restart over undelivered records is %s, want degraded", got)
	}
	arr.Script(t)
	double.Eventually(t, "every record of the previous run delivered", func() bool {
		return delivered(arr, "LEFT1") >= 1 && delivered(arr, "LEFT2") >= 1 && delivered(arr, "LEFT3") >= 1
	})
	double.Eventually(t, "up", func() bool { return g2.State("audit_repository") == "up" })
}

type listedEntry struct {
	Destination string `json:"destination"`
	ID          string `json:"id"`
	Reason      struct {
		Kind   string `json:"kind"`
		Status int    `json:"status"`
	} `json:"reason"`
}

// listQuarantine waits for n entries and returns them; the body never holds one.
func listQuarantine(t *testing.T, g *gateway, n int) []listedEntry {
	t.Helper()
	var body struct {
		Entries []listedEntry  `json:"entries"`
		Total   map[string]int `json:"total"`
	}
	double.Eventually(t, "the quarantine lists the entries", func() bool {
		status, raw := g.Do(http.MethodGet, "/operator/audit/quarantine", g.Token, nil)
		if status != http.StatusOK {
			t.Fatalf("GET quarantine answered %d", status)
		}
		if strings.Contains(string(raw), "POISON") || strings.Contains(string(raw), "AuditEvent") {
			t.Fatalf("the listing carries a body: %s", raw)
		}
		_ = json.Unmarshal(raw, &body)
		return len(body.Entries) == n && body.Total["repository"] == n
	})
	return body.Entries
}

// The quarantine routes: the operator token and its scope, retry and drop by id.
func TestTheQuarantineRoutes(t *testing.T) {
	g := startGateway(t, harnessOptions{audit: repositoryTable})
	g.search("POISON")
	entries := listQuarantine(t, g, 1)
	id := entries[0].ID
	for _, c := range []struct {
		name, method, path, token string
		want                      int
	}{
		{"a listing without a token is a 401", http.MethodGet, "/operator/audit/quarantine", "", http.StatusUnauthorized},
		{"a listing without the scope is a 403", http.MethodGet, "/operator/audit/quarantine", g.noScop, http.StatusForbidden},
		{"a drop without the scope is a 403", http.MethodDelete, "/operator/audit/quarantine/repository/" + id, g.noScop, http.StatusForbidden},
		{"a retry of an unknown destination is a 404", http.MethodPost, "/operator/audit/quarantine/feed/" + id + "/retry", g.Token, http.StatusNotFound},
		{"a drop of an unknown id is a 404", http.MethodDelete, "/operator/audit/quarantine/repository/999999", g.Token, http.StatusNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			if status, body := g.Do(c.method, c.path, c.token, nil); status != c.want {
				t.Fatalf("%s %s answered %d (%s), want %d", c.method, c.path, status, body, c.want)
			}
		})
	}
	t.Run("a retry spools the record again and the repository refuses it again", func(t *testing.T) {
		before := g.arr.Requests()
		if status, body := g.Do(http.MethodPost, "/operator/audit/quarantine/repository/"+id+"/retry", g.Token, nil); status != http.StatusNoContent {
			t.Fatalf("retry answered %d: %s", status, body)
		}
		again := listQuarantine(t, g, 1)
		if again[0].ID == id {
			t.Fatal("the retried record is still under its old id")
		}
		if g.arr.Requests() <= before {
			t.Fatal("the retry sent nothing")
		}
		// The spool counts an entry once its directory is synced, a moment after the
		// listing shows it.
		double.Eventually(t, "degraded with an entry in quarantine", func() bool { return g.State("audit_repository") == "degraded" })
		if status, _ := g.Do(http.MethodDelete, "/operator/audit/quarantine/repository/"+again[0].ID, g.Token, nil); status != http.StatusNoContent {
			t.Fatalf("drop answered %d", status)
		}
		listQuarantine(t, g, 0)
	})
}

// A spool append that fails makes the request fail closed under on_failure =
// "refuse" (503 OperationOutcome: nothing of the members' answers; a routed request
// asks no member at all) and served under "serve".
func TestAnEventThatCannotBeStored(t *testing.T) {
	for _, c := range []struct {
		name, table string
		want        int
	}{
		{"refuse answers 503 and releases nothing", repositoryTable, http.StatusServiceUnavailable},
		{"serve serves", repositoryTable + "on_failure = \"serve\"\n", http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := crashfs.New()
			g := startGateway(t, harnessOptions{audit: c.table, spoolDir: "/spool", fs: fs})
			fs.Hook = func(op crashfs.Op, name string) error {
				if op == crashfs.OpWrite || op == crashfs.OpSync {
					return syscall.ENOSPC
				}
				return nil
			}
			before := g.member.Requests()
			status, body := g.Do(http.MethodGet, "/fhir/Patient?name=NOSPACE", g.Client, nil)
			if status != c.want {
				t.Fatalf("answered %d (%s), want %d", status, body, c.want)
			}
			asked := g.member.Requests() - before
			switch c.want {
			case http.StatusServiceUnavailable:
				var oo struct {
					ResourceType string `json:"resourceType"`
				}
				if json.Unmarshal(body, &oo) != nil || oo.ResourceType != "OperationOutcome" {
					t.Fatalf("the 503 is no OperationOutcome: %s", body)
				}
				if strings.Contains(string(body), g.member.Opts.Marker) {
					t.Fatalf("the refusal carries the member's answer: %s", body)
				}
				before = g.member.Requests()
				if status, _ := g.Do(http.MethodGet, "/nodes/a/fhir/Patient/a-1", g.Client, nil); status != http.StatusServiceUnavailable {
					t.Fatalf("a routed request answered %d", status)
				}
				if n := g.member.Requests() - before; n != 0 {
					t.Fatalf("a refused routed request asked the member %d times", n)
				}
			default:
				if asked == 0 || !strings.Contains(string(body), g.member.Opts.Marker) {
					t.Fatalf("a served request asked the member %d times: %s", asked, body)
				}
			}
			// The spool that cannot store is audit_repository failing, with its class
			// (docs/audit-spool.md, "When the spool cannot store").
			r, raw := g.Report()
			if r["audit_repository"] != "failing" || r["audit_repository_fault"] != spool.FaultStorage {
				t.Fatalf("the report says %s, want audit_repository failing with fault %s", raw, spool.FaultStorage)
			}
			fs.Hook = nil
			if status, _ := g.Do(http.MethodGet, "/fhir/Patient?name=SPACEAGAIN", g.Client, nil); status != http.StatusOK {
				t.Fatalf("after the disk came back the search answered %d", status)
			}
			if r, raw := g.Report(); r["audit_repository"] == "failing" || r["audit_repository_fault"] != nil {
				t.Fatalf("once a record was stored again the report says %s", raw)
			}
			double.Eventually(t, "the next event delivered", func() bool { return delivered(g.arr, "SPACEAGAIN") >= 1 })
		})
	}
}
