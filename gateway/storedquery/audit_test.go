package storedquery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/assemble"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/gateway/storedquery"
	"github.com/ferrofed/ferrofed/test/crashfs"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

// event is what the tests read of an AuditEvent.
type event struct {
	ResourceType string `json:"resourceType"`
	Meta         struct {
		Profile []string `json:"profile"`
	} `json:"meta"`
	Type struct {
		Code string `json:"code"`
	} `json:"type"`
	Subtype []struct {
		System string `json:"system"`
		Code   string `json:"code"`
	} `json:"subtype"`
	Action   string `json:"action"`
	Recorded string `json:"recorded"`
	Outcome  string `json:"outcome"`
	Agent    []struct {
		Who struct {
			Identifier *struct {
				System string `json:"system"`
				Value  string `json:"value"`
			} `json:"identifier"`
		} `json:"who"`
		Requestor bool `json:"requestor"`
	} `json:"agent"`
	Entity []struct {
		What struct {
			Display string `json:"display"`
		} `json:"what"`
	} `json:"entity"`
}

// eventsOf is the events of interaction r kept, by the member they name.
func eventsOf(t *testing.T, r *gatewaytest.Recorder, interaction string) map[string][]event {
	t.Helper()
	out := map[string][]event{}
	for _, raw := range r.Events() {
		var e event
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("an event is not JSON: %v: %s", err, raw)
		}
		if e.ResourceType != "AuditEvent" || e.Type.Code != "rest" || len(e.Subtype) == 0 || len(e.Agent) != 2 || len(e.Entity) != 1 || e.Recorded == "" || len(e.Meta.Profile) != 1 {
			t.Fatalf("not a BALP RESTful AuditEvent: %s", raw)
		}
		if e.Subtype[0].Code != interaction {
			continue
		}
		dest := e.Agent[1].Who.Identifier
		if dest == nil || dest.System != audit.MemberSystem || !e.Agent[0].Requestor {
			t.Fatalf("the destination is not the member: %s", raw)
		}
		out[dest.Value] = append(out[dest.Value], e)
	}
	return out
}

func TestEveryMemberExchangeOfAStoredQueryIsAudited(t *testing.T) {
	a := members.Start(t, members.Options{ID: "a", OperationDefinitions: true})
	b := members.Start(t, members.Options{ID: "b", OperationDefinitions: true})
	c := members.Start(t, members.Options{ID: "c"})
	rec := &gatewaytest.Recorder{}
	g := startAudited(t, issuer.New(t), t.TempDir(), "", assemble.WithRecorder(rec), a, b, c)

	status, body := g.Do(http.MethodPut, "/operator/stored-queries/high-risk", g.Token, definition("high-risk", "high-risk", highRisk))
	if status != http.StatusCreated {
		t.Fatalf("upload: %d %s", status, body)
	}
	updates := eventsOf(t, rec, "update")
	if len(updates) != 2 || len(updates["a"]) != 1 || len(updates["b"]) != 1 {
		t.Fatalf("an upload to 2 supporting members: update events %+v, want one naming each of a and b", updates)
	}
	for m, evs := range updates {
		e := evs[0]
		if e.Action != "U" || e.Outcome != "0" || e.Entity[0].What.Display != "OperationDefinition/high-risk" ||
			e.Meta.Profile[0] != "https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.Update" {
			t.Fatalf("the update event of %s: %+v", m, e)
		}
	}

	t.Run("a drift check reads each copy and audits each read", func(t *testing.T) {
		if err := g.queries.CheckDrift(context.Background()); err != nil {
			t.Fatal(err)
		}
		reads := eventsOf(t, rec, "read")
		if len(reads["a"]) == 0 || len(reads["b"]) == 0 || len(reads["c"]) != 0 {
			t.Fatalf("read events: %+v", reads)
		}
		if e := reads["a"][0]; e.Action != "R" || e.Entity[0].What.Display != "OperationDefinition/high-risk" {
			t.Fatalf("the read event: %+v", e)
		}
	})

	t.Run("a refused audit record fails the upload's exchanges", func(t *testing.T) {
		rec.Fail.Store(true)
		defer rec.Fail.Store(false)
		status, body := g.Do(http.MethodPut, "/operator/stored-queries/high-risk", g.Token, definition("high-risk", "high-risk", highRisk))
		if status != http.StatusOK {
			t.Fatalf("upload: %d %s", status, body)
		}
		ans := answerOf(t, body)
		if ans.Members["a"].Result != storedquery.AuditFailed || ans.Members["b"].Result != storedquery.AuditFailed || ans.Members["c"].Result != storedquery.Unsupported {
			t.Fatalf("members: %+v", ans.Members)
		}
	})

	t.Run("a refused audit record leaves the drift of that round unknown", func(t *testing.T) {
		b.Tamper("high-risk", nil)
		rec.Fail.Store(true)
		err := g.queries.CheckDrift(context.Background())
		rec.Fail.Store(false)
		if err != nil {
			t.Fatal(err)
		}
		if d := g.queries.Drift("high-risk"); d["a"].Result != storedquery.AuditFailed || d["b"].Result != storedquery.AuditFailed {
			t.Fatalf("drift: %+v", d)
		}
		if err := g.queries.CheckDrift(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := g.queries.Drift("high-risk"); d["a"].Result != storedquery.InSync || d["b"].Result != storedquery.Missing {
			t.Fatalf("drift once stored again: %+v", d)
		}
	})

	t.Run("a repair is audited: its PUT and its read", func(t *testing.T) {
		before := len(eventsOf(t, rec, "update")["b"])
		status, body := g.Do(http.MethodPost, "/operator/stored-queries/high-risk/repair", g.Token, nil)
		if status != http.StatusOK || answerOf(t, body).Members["b"].Result != storedquery.InSync {
			t.Fatalf("repair: %d %s", status, body)
		}
		if after := len(eventsOf(t, rec, "update")["b"]); after != before+1 {
			t.Fatalf("update events of b: %d, want %d", after, before+1)
		}
	})
}

// TestTheTrailStoresAnEventPerMemberAndARefusingSpoolFailsTheUpload runs the stored
// queries over the real audit trail: its spool on a file system that can refuse
// appends, its repository the test double.
func TestTheTrailStoresAnEventPerMemberAndARefusingSpoolFailsTheUpload(t *testing.T) {
	a := members.Start(t, members.Options{ID: "a", OperationDefinitions: true})
	b := members.Start(t, members.Options{ID: "b", OperationDefinitions: true})
	arr := auditrepo.Start(t, auditrepo.Options{})
	fsys := crashfs.New()
	var refusing atomic.Bool
	fsys.Hook = func(op crashfs.Op, _ string) error {
		if op == crashfs.OpWrite && refusing.Load() {
			return syscall.ENOSPC
		}
		return nil
	}
	table := fmt.Sprintf("[audit]\ndestination = \"repository\"\nurl = %q\nspool_dir = \"/spool\"\n", arr.URL)
	g := startAudited(t, issuer.New(t), t.TempDir(), table, assemble.WithAuditOptions(func(o *audit.Options) { o.FS = fsys }), a, b)

	status, body := g.Do(http.MethodPut, "/operator/stored-queries/high-risk", g.Token, definition("high-risk", "high-risk", highRisk))
	if status != http.StatusCreated {
		t.Fatalf("upload: %d %s", status, body)
	}
	named := func() map[string]int {
		n := map[string]int{}
		for _, e := range arr.Received() {
			var ev struct {
				Action string `json:"action"`
				Agent  []struct {
					Who struct {
						Identifier *struct {
							Value string `json:"value"`
						} `json:"identifier"`
					} `json:"who"`
				} `json:"agent"`
			}
			if json.Unmarshal(e.Body, &ev) != nil || ev.Action != "U" || len(ev.Agent) != 2 || ev.Agent[1].Who.Identifier == nil {
				continue
			}
			n[ev.Agent[1].Who.Identifier.Value]++
		}
		return n
	}
	var n map[string]int
	double.Eventually(t, "the repository got one update event naming each of a and b", func() bool {
		n = named()
		return n["a"] == 1 && n["b"] == 1 && len(n) == 2
	}, func() string { return fmt.Sprintf("got %v", n) })

	refusing.Store(true)
	status, body = g.Do(http.MethodPut, "/operator/stored-queries/high-risk", g.Token, definition("high-risk", "high-risk", highRisk))
	refusing.Store(false)
	if status != http.StatusOK {
		t.Fatalf("upload: %d %s", status, body)
	}
	if ans := answerOf(t, body); ans.Members["a"].Result != storedquery.AuditFailed || ans.Members["b"].Result != storedquery.AuditFailed {
		t.Fatalf("with the spool refusing appends: %+v", ans.Members)
	}
}
