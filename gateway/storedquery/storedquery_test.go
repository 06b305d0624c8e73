package storedquery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/storedquery"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// puts are the PUTs of OperationDefinition/id a member received.
func puts(m *members.Server, id string) int {
	n := 0
	for _, r := range m.Log() {
		if r.Method == http.MethodPut && r.Path == "/fhir/OperationDefinition/"+id {
			n++
		}
	}
	return n
}

func answerOf(t *testing.T, body []byte) storedquery.Answer {
	t.Helper()
	var a storedquery.Answer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return a
}

func digestOf(t *testing.T, m *members.Server, id string) string {
	t.Helper()
	raw, ok := m.OperationDefinition(id)
	if !ok {
		return ""
	}
	d, err := storedquery.Digest(raw)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestAnUploadIsPutOnEverySupportingMemberAndNoOther(t *testing.T) {
	a := members.Start(t, members.Options{ID: "a", OperationDefinitions: true})
	b := members.Start(t, members.Options{ID: "b", OperationDefinitions: true})
	c := members.Start(t, members.Options{ID: "c"})
	g := startGateway(t, issuer.New(t), t.TempDir(), a, b, c)

	t.Run("the operator routes need the operator scope", func(t *testing.T) {
		if status, _ := g.Do(http.MethodGet, "/operator/stored-queries", "", nil); status != http.StatusUnauthorized {
			t.Fatalf("without a token: %d", status)
		}
		if status, _ := g.Do(http.MethodPut, "/operator/stored-queries/high-risk", g.noScope, definition("high-risk", "high-risk", highRisk)); status != http.StatusForbidden {
			t.Fatalf("without the scope: %d", status)
		}
		if puts(a, "high-risk")+puts(b, "high-risk") != 0 {
			t.Fatal("a refused upload reached a member")
		}
	})

	status, body := g.Do(http.MethodPut, "/operator/stored-queries/high-risk", g.Token, definition("high-risk", "high-risk", highRisk))
	if status != http.StatusCreated {
		t.Fatalf("upload: %d %s", status, body)
	}
	ans := answerOf(t, body)
	if ans.Members["a"].Result != storedquery.Updated || ans.Members["b"].Result != storedquery.Updated || ans.Members["c"].Result != storedquery.Unsupported {
		t.Fatalf("members: %+v", ans.Members)
	}
	if puts(a, "high-risk") != 1 || puts(b, "high-risk") != 1 || puts(c, "high-risk") != 0 {
		t.Fatalf("PUTs: a %d, b %d, c %d; want 1, 1, 0", puts(a, "high-risk"), puts(b, "high-risk"), puts(c, "high-risk"))
	}
	for _, r := range c.Log() {
		if r.Path != "/fhir/metadata" {
			t.Fatalf("the member without support was sent %s %s", r.Method, r.Path)
		}
	}
	if digestOf(t, a, "high-risk") != ans.Digest || digestOf(t, b, "high-risk") != ans.Digest {
		t.Fatalf("the members' copies differ from the store's digest %s", ans.Digest)
	}
	// Every call updated the member it reached: all three answered.
	if eps := g.Endpoints(); eps["a-query"] != "up" || eps["b-query"] != "up" || eps["c-query"] != "up" {
		t.Fatalf("endpoints: %v", eps)
	}

	t.Run("the stored query is listed and read back", func(t *testing.T) {
		status, body := g.Do(http.MethodGet, "/operator/stored-queries", g.Token, nil)
		var l storedquery.ListBody
		if status != http.StatusOK || json.Unmarshal(body, &l) != nil || len(l.StoredQueries) != 1 {
			t.Fatalf("list: %d %s", status, body)
		}
		if e := l.StoredQueries[0]; e.ID != "high-risk" || e.Code != "high-risk" || e.Resource != "Observation" || e.Digest != ans.Digest {
			t.Fatalf("listed %+v", e)
		}
		status, body = g.Do(http.MethodGet, "/operator/stored-queries/high-risk", g.Token, nil)
		if status != http.StatusOK || string(body) != string(definition("high-risk", "high-risk", highRisk)) {
			t.Fatalf("read: %d %s", status, body)
		}
		if status, _ := g.Do(http.MethodGet, "/operator/stored-queries/nope", g.Token, nil); status != http.StatusNotFound {
			t.Fatalf("an unknown id: %d", status)
		}
	})

	t.Run("a second upload replaces it", func(t *testing.T) {
		status, body := g.Do(http.MethodPost, "/operator/stored-queries", g.Token, definition("high-risk", "high-risk", highRisk+"&date=ge2020"))
		if status != http.StatusOK || answerOf(t, body).Digest == ans.Digest {
			t.Fatalf("replace: %d %s", status, body)
		}
		if puts(a, "high-risk") != 2 {
			t.Fatalf("a got %d PUTs", puts(a, "high-risk"))
		}
	})

	t.Run("a code another query has is refused", func(t *testing.T) {
		if status, body := g.Do(http.MethodPut, "/operator/stored-queries/other", g.Token, definition("other", "high-risk", highRisk)); status != http.StatusConflict {
			t.Fatalf("%d %s", status, body)
		}
	})

	t.Run("a delete withdraws it from the members", func(t *testing.T) {
		status, body := g.Do(http.MethodDelete, "/operator/stored-queries/high-risk", g.Token, nil)
		if status != http.StatusOK || answerOf(t, body).Members["a"].Result != storedquery.Deleted {
			t.Fatalf("delete: %d %s", status, body)
		}
		if _, ok := a.OperationDefinition("high-risk"); ok {
			t.Fatal("a still holds the copy")
		}
		if status, _ := g.Do(http.MethodGet, "/operator/stored-queries/high-risk", g.Token, nil); status != http.StatusNotFound {
			t.Fatalf("read after delete: %d", status)
		}
	})
}

// drift is the list's drift of id.
func drift(t *testing.T, g *gateway, id string) map[string]storedquery.MemberResult {
	t.Helper()
	status, body := g.Do(http.MethodGet, "/operator/stored-queries", g.Token, nil)
	var l storedquery.ListBody
	if status != http.StatusOK || json.Unmarshal(body, &l) != nil {
		t.Fatalf("list: %d %s", status, body)
	}
	for _, e := range l.StoredQueries {
		if e.ID == id {
			return e.Drift
		}
	}
	t.Fatalf("%s is not listed: %s", id, body)
	return nil
}

func TestDriftIsReportedPerMemberTheMemberStaysUpAndARepairEndsIt(t *testing.T) {
	a := members.Start(t, members.Options{ID: "a", OperationDefinitions: true})
	b := members.Start(t, members.Options{ID: "b", OperationDefinitions: true})
	down := members.Start(t, members.Options{ID: "down", OperationDefinitions: true})
	g := startGateway(t, issuer.New(t), t.TempDir(), a, b, down)
	status, body := g.Do(http.MethodPut, "/operator/stored-queries/high-risk", g.Token, definition("high-risk", "high-risk", highRisk))
	if status != http.StatusCreated {
		t.Fatalf("upload: %d %s", status, body)
	}
	digest := answerOf(t, body).Digest

	a.Tamper("high-risk", func(od map[string]any) { od["code"] = "tampered" })
	b.Tamper("high-risk", nil)
	down.Close()
	// The drift check runs every second (drift_interval_ms = 1000).
	var d map[string]storedquery.MemberResult
	double.Eventually(t, "drift reported", func() bool {
		d = drift(t, g, "high-risk")
		return d["a"].Result == storedquery.Different && d["b"].Result == storedquery.Missing
	}, func() string { return fmt.Sprintf("%+v", d) })
	if d["down"].Result != storedquery.Unreachable {
		t.Fatalf("the stopped member: %+v", d["down"])
	}
	eps := g.Endpoints()
	if eps["a-query"] != "up" || eps["b-query"] != "up" {
		t.Fatalf("a member whose copy drifted answered: it is up; got %v", eps)
	}
	if eps["down-query"] != "down" {
		t.Fatalf("a member that did not answer the drift check is down; got %v", eps)
	}
	if status, _ := g.Do(http.MethodGet, "/health/readiness", "", nil); status != http.StatusOK {
		t.Fatalf("drift made the gateway unready: %d", status)
	}

	status, body = g.Do(http.MethodPost, "/operator/stored-queries/high-risk/repair", g.Token, nil)
	if status != http.StatusOK {
		t.Fatalf("repair: %d %s", status, body)
	}
	rep := answerOf(t, body)
	for _, id := range []string{"a", "b"} {
		if r := rep.Members[id]; r.Result != storedquery.InSync || r.Digest != digest {
			t.Fatalf("repair of %s: %+v, want in-sync with %s", id, r, digest)
		}
	}
	if digestOf(t, a, "high-risk") != digest || digestOf(t, b, "high-risk") != digest {
		t.Fatal("the repaired copies do not have the store's digest")
	}
	if err := g.queries.CheckDrift(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := drift(t, g, "high-risk"); d["a"].Result != storedquery.InSync || d["b"].Result != storedquery.InSync {
		t.Fatalf("drift after the repair: %+v", d)
	}
}

func TestAClientRunsAStoredQueryWithItsParametersSubstitutedSafely(t *testing.T) {
	a := members.Start(t, members.Options{ID: "a", OperationDefinitions: true})
	g := startGateway(t, issuer.New(t), t.TempDir(), a)
	if status, body := g.Do(http.MethodPut, "/operator/stored-queries/high-risk", g.Token, definition("high-risk", "high-risk", highRisk)); status != http.StatusCreated {
		t.Fatalf("upload: %d %s", status, body)
	}
	run := func(t *testing.T, query string) (int, url.Values) {
		t.Helper()
		status, body := g.Do(http.MethodGet, "/fhir/Observation?"+query, g.Client, nil)
		if status != http.StatusOK {
			return status, nil
		}
		var bundle struct {
			ResourceType string `json:"resourceType"`
		}
		if json.Unmarshal(body, &bundle) != nil || bundle.ResourceType != "Bundle" {
			t.Fatalf("not a Bundle: %s", body)
		}
		last := a.LastRequest()
		if last.Path != "/fhir/Observation" {
			t.Fatalf("the member was asked %s", last.Path)
		}
		v, err := url.ParseQuery(last.RawQuery)
		if err != nil {
			t.Fatal(err)
		}
		return status, v
	}
	t.Run("the parameters given are put in, an optional one left out drops its search parameter", func(t *testing.T) {
		// A.p1 is member a's p1 (docs/data-plane.md, "References in a search"): a is
		// the one member asked, in its own id.
		status, v := run(t, "_query=high-risk&patient=a.p1&_count=5")
		if status != http.StatusOK || v.Get("subject") != "Patient/p1" || v.Get("status") != "final" || v.Has("code") || v.Get("_count") != "5" || v.Has("_query") || v.Has("patient") {
			t.Fatalf("%d %v", status, v)
		}
	})
	t.Run("a value that tries to add parameters stays one value", func(t *testing.T) {
		status, v := run(t, "_query=high-risk&patient="+url.QueryEscape("p1&_id=x&status=entered-in-error")+"&code="+url.QueryEscape("a=b#c"))
		if status != http.StatusOK || v.Get("subject") != "Patient/p1&_id=x&status=entered-in-error" || v.Has("_id") || len(v["status"]) != 1 || v.Get("code") != "a=b#c" {
			t.Fatalf("%d %v", status, v)
		}
	})
	for _, tc := range []struct{ name, query string }{
		{"an unknown stored query is a 404", "_query=nope&patient=p1"},
		{"a required parameter missing is a 400", "_query=high-risk"},
		{"a parameter the query does not take is a 400", "_query=high-risk&patient=p1&subject=Patient/other"},
		{"a parameter given twice is a 400", "_query=high-risk&patient=p1&patient=p2"},
		{"_query given twice is a 400", "_query=high-risk&_query=high-risk&patient=p1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := a.Requests()
			status, _ := run(t, tc.query)
			want := http.StatusBadRequest
			if strings.Contains(tc.name, "404") {
				want = http.StatusNotFound
			}
			if status != want || a.Requests() != before {
				t.Fatalf("%d (want %d), member asked %d times", status, want, a.Requests()-before)
			}
		})
	}
	t.Run("a stored query runs on its own resource type only", func(t *testing.T) {
		if status, _ := g.Do(http.MethodGet, "/fhir/Patient?_query=high-risk&patient=p1", g.Client, nil); status != http.StatusBadRequest {
			t.Fatalf("%d", status)
		}
	})
}

func TestHostileDefinitionsAreRefusedAndReachNoMember(t *testing.T) {
	a := members.Start(t, members.Options{ID: "a", OperationDefinitions: true})
	dir := t.TempDir()
	g := startGateway(t, issuer.New(t), dir, a)
	big := "Observation?subject=Patient/{{%patient}}&code=" + strings.Repeat("x", 1<<20)
	cases := []struct {
		name   string
		body   []byte
		status int
	}{
		{"a template of 1 MB", definition("big", "big", big), http.StatusRequestEntityTooLarge},
		{"a template just over its own limit", definition("big", "big", "Observation?code="+strings.Repeat("x", storedquery.MaxTemplateBytes)), http.StatusBadRequest},
		{"a placeholder in a parameter's name", definition("inject", "inject", "Observation?{{%patient}}=x"), http.StatusBadRequest},
		{"a placeholder that is half a name", definition("inject", "inject", "Observation?subject{{%patient}}=x"), http.StatusBadRequest},
		{"a parameter that is not declared", definition("inject", "inject", "Observation?subject={{%other}}"), http.StatusBadRequest},
		{"a FHIRPath expression", definition("inject", "inject", "Observation?subject={{%patient.id}}"), http.StatusBadRequest},
		{"an unclosed placeholder", definition("inject", "inject", "Observation?subject={{%patient"), http.StatusBadRequest},
		{"a template that sets _query", definition("inject", "inject", "Observation?_query=other&subject={{%patient}}"), http.StatusBadRequest},
		{"a template that sets _page", definition("inject", "inject", "Observation?_page=x&subject={{%patient}}"), http.StatusBadRequest},
		{"a template of another type", definition("inject", "inject", "Patient?_id={{%patient}}"), http.StatusBadRequest},
		{"a template with a fragment", definition("inject", "inject", "Observation?subject={{%patient}}#x"), http.StatusBadRequest},
		{"not JSON", []byte("{"), http.StatusBadRequest},
		{"not an OperationDefinition", []byte(`{"resourceType":"Patient","id":"x"}`), http.StatusBadRequest},
		{"an id that is a path", definition("../x", "x", highRisk), http.StatusBadRequest},
		{"an id that is a dot file", definition("..", "x", highRisk), http.StatusBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			status, body := g.Do(http.MethodPost, "/operator/stored-queries", g.Token, tc.body)
			if status != tc.status {
				t.Fatalf("%d %s; want %d", status, body, tc.status)
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 || a.Requests() != 0 {
		t.Fatalf("a refused definition was stored (%d files) or sent (%d requests)", len(entries), a.Requests())
	}
	t.Run("a declared parameter named like the search's own is refused", func(t *testing.T) {
		var od map[string]any
		_ = json.Unmarshal(definition("x", "x", "Observation?subject={{%_count}}"), &od)
		od["parameter"] = []map[string]any{{"name": "_count", "use": "in", "min": 0, "max": "1", "type": "string"}}
		body, _ := json.Marshal(od)
		if status, _ := g.Do(http.MethodPost, "/operator/stored-queries", g.Token, body); status != http.StatusBadRequest {
			t.Fatalf("%d", status)
		}
	})
}

func TestTwoGatewaysOnOneStoreAnswerTheSameList(t *testing.T) {
	a := members.Start(t, members.Options{ID: "a", OperationDefinitions: true})
	dir := t.TempDir()
	k := issuer.New(t)
	g1 := startGateway(t, k, dir, a)
	g2 := startGateway(t, k, dir, a)
	ids := func(g *gateway) []string {
		t.Helper()
		status, body := g.Do(http.MethodGet, "/operator/stored-queries", g.Token, nil)
		var l storedquery.ListBody
		if status != http.StatusOK || json.Unmarshal(body, &l) != nil {
			t.Fatalf("list: %d %s", status, body)
		}
		var out []string
		for _, e := range l.StoredQueries {
			out = append(out, e.ID+"@"+e.Digest)
		}
		return out
	}
	same := func(what string, n int) {
		t.Helper()
		l1, l2 := ids(g1), ids(g2)
		if len(l1) != n || !slices.Equal(l1, l2) {
			t.Fatalf("%s: %v and %v", what, l1, l2)
		}
	}
	if status, body := g1.Do(http.MethodPut, "/operator/stored-queries/one", g1.Token, definition("one", "one", highRisk)); status != http.StatusCreated {
		t.Fatalf("%d %s", status, body)
	}
	same("after an upload to the first", 1)
	if status, body := g2.Do(http.MethodPut, "/operator/stored-queries/two", g2.Token, definition("two", "two", highRisk)); status != http.StatusCreated {
		t.Fatalf("%d %s", status, body)
	}
	same("after an upload to the second", 2)
	// Both run what either stored.
	for _, g := range []*gateway{g1, g2} {
		if status, body := g.Do(http.MethodGet, "/fhir/Observation?_query=two&patient=a.p", g.Client, nil); status != http.StatusOK {
			t.Fatalf("%d %s", status, body)
		}
	}
	if status, _ := g2.Do(http.MethodDelete, "/operator/stored-queries/one", g2.Token, nil); status != http.StatusOK {
		t.Fatalf("delete: %d", status)
	}
	same("after a delete on the second", 1)
}

func TestAReadOnlyStoreAnswers409NamingTheResourceToApply(t *testing.T) {
	a := members.Start(t, members.Options{ID: "a", OperationDefinitions: true})
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/high-risk.json", definition("high-risk", "high-risk", highRisk), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, issuer.New(t), dir, a)
	storedquery.MakeReadOnly(g.queries.Store())
	for _, tc := range []struct{ method, path string }{
		{http.MethodPut, "/operator/stored-queries/other"},
		{http.MethodDelete, "/operator/stored-queries/high-risk"},
	} {
		status, body := g.Do(tc.method, tc.path, g.Token, definition("other", "other", highRisk))
		var e struct {
			Error    string `json:"error"`
			Resource struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			} `json:"resource"`
		}
		if status != http.StatusConflict || json.Unmarshal(body, &e) != nil || e.Error != "store_read_only" || e.Resource.Kind != "StoredQuery" || e.Resource.APIVersion != "ferrofed.io/v1alpha1" {
			t.Fatalf("%s: %d %s", tc.method, status, body)
		}
	}
	if a.Requests() != 0 {
		t.Fatal("a refused upload reached a member")
	}
	// What the operator rendered is served and repaired as any other store.
	if status, body := g.Do(http.MethodPost, "/operator/stored-queries/high-risk/repair", g.Token, nil); status != http.StatusOK || answerOf(t, body).Members["a"].Result != storedquery.InSync {
		t.Fatalf("repair: %d %s", status, body)
	}
}

func TestReadinessHasTheStoredQueriesCheck(t *testing.T) {
	dir := t.TempDir() + "/store"
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, issuer.New(t), dir, members.Start(t, members.Options{ID: "a"}))
	status, body := g.Do(http.MethodGet, "/health/readiness", "", nil)
	if status != http.StatusOK || !strings.Contains(string(body), `"stored_queries":"ok"`) {
		t.Fatalf("%d %s", status, body)
	}
	if err := os.Rename(dir, dir+".gone"); err != nil {
		t.Fatal(err)
	}
	double.Eventually(t, "an unreadable store makes the gateway not ready", func() bool {
		status, body = g.Do(http.MethodGet, "/health/readiness", "", nil)
		return status == http.StatusServiceUnavailable && strings.Contains(string(body), "stored_queries")
	}, func() string { return fmt.Sprintf("%d %s", status, body) })
}
