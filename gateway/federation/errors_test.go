package federation_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// outcomeOf reads an OperationOutcome answer.
func outcomeOf(t *testing.T, body []byte) fhir.OperationOutcome {
	t.Helper()
	var oo fhir.OperationOutcome
	if err := json.Unmarshal(body, &oo); err != nil || oo.ResourceType != "OperationOutcome" || len(oo.Issue) == 0 {
		t.Fatalf("not an OperationOutcome: %s", body)
	}
	return oo
}

func TestEveryAnswerThatIsNotASuccessIsAnOperationOutcome(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a"}, node{id: "node-b"})
	xml := http.Header{"Accept": {"application/fhir+xml"}}
	cases := []struct {
		name, method, path string
		header             http.Header
		status             int
		says               string
	}{
		{"the FHIR base itself is an unknown route", "GET", "/fhir", nil, 404, "not-found"},
		{"the FHIR base with a slash is an unknown route", "GET", "/fhir/", nil, 404, "not-found"},
		{"a history under a type is an unknown route", "GET", "/fhir/Patient/1/_history/2", nil, 404, "not-found"},
		{"a path under a lower-case name is an unknown route", "GET", "/fhir/foo/bar", nil, 404, "not-found"},
		{"/nodes alone is an unknown route", "GET", "/nodes", nil, 404, "not-found"},
		{"a member without /fhir is an unknown route", "GET", "/nodes/node-a", nil, 404, "not-found"},
		{"another API of a member is an unknown route", "GET", "/nodes/node-a/admin", nil, 404, "not-found"},
		{"a member that is not configured", "GET", "/nodes/nobody/fhir/Patient", nil, 404, "no member has this id"},
		{"a create on the federated type is not allowed", "POST", "/fhir/Patient", nil, 405, "GET, HEAD only"},
		{"a delete on the federated type is not allowed", "DELETE", "/fhir/Patient", nil, 405, "GET, HEAD only"},
		{"GET _search is not allowed", "GET", "/fhir/Patient/_search", nil, 405, "POST only"},
		{"a write to the metadata is not allowed", "PUT", "/fhir/metadata", nil, 405, "GET, HEAD only"},
		{"TRACE is not routed to a member", "TRACE", "/nodes/node-a/fhir/Patient", nil, 405, "not-supported"},
		{"an XML Accept on a search", "GET", "/fhir/Patient", xml, 406, "XML"},
		{"an XML Accept on the metadata", "GET", "/fhir/metadata", xml, 406, "XML"},
		{"an XML _format on a search", "GET", "/fhir/Patient?_format=xml", nil, 406, "XML"},
		{"an XML Accept on a routed read", "GET", "/nodes/node-a/fhir/Patient/1", xml, 406, "XML"},
		{"an XML _format on a routed read", "GET", "/nodes/node-a/fhir/Patient/1?_format=application/fhir%2Bxml", nil, 406, "XML"},
		{"an Accept of HTML on a search", "GET", "/fhir/Patient", http.Header{"Accept": {"text/html"}}, 406, "XML"},
		{"a _count that is not a number", "GET", "/fhir/Patient?_count=ten", nil, 400, "_count"},
		{"a negative _count", "GET", "/fhir/Patient?_count=-1", nil, 400, "_count"},
		{"two _count", "GET", "/fhir/Patient?_count=1&_count=2", nil, 400, "_count"},
		{"a _sort the gateway cannot merge", "GET", "/fhir/Patient?_sort=gender", nil, 400, `_sort: the gateway cannot merge Patient results sorted by \"gender\"`},
		{"a _sort of another type's key", "GET", "/fhir/Encounter?_sort=birthdate", nil, 400, "_sort"},
		{"a query that is not form-encoded", "GET", "/fhir/Patient?name=%zz", nil, 400, "form-encoded"},
		{"a page token that is not one", "GET", "/fhir/Patient?_page=nope", nil, 400, "_page"},
		{"a read of an id that names no member", "GET", "/fhir/Patient/123", nil, 404, "{member}.{id}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := h.members["node-a"].Requests() + h.members["node-b"].Requests()
			res, body, err := h.do(context.Background(), c.method, c.path, "", c.header)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != c.status || res.Header.Get("Content-Type") != fhir.MediaType || !strings.Contains(string(body), c.says) {
				t.Fatalf("%d %q %s; want %d saying %q", res.StatusCode, res.Header.Get("Content-Type"), body, c.status, c.says)
			}
			outcomeOf(t, body)
			if c.status == 405 && res.Header.Get("Allow") == "" {
				t.Fatal("a 405 without Allow")
			}
			if after := h.members["node-a"].Requests() + h.members["node-b"].Requests(); after != before {
				t.Fatalf("a refused request reached a member (%d requests)", after-before)
			}
		})
	}
}

func TestWhenNoMemberSucceedsTheStatusSaysWhyWithOneIssuePerMember(t *testing.T) {
	for _, c := range []struct {
		name   string
		nodes  []node
		status int
		codes  []string
	}{
		{"every member answering 5xx is a 502", []node{{id: "a", opts: members.Options{Knobs: double.Knobs{Status: 500}}}, {id: "b", opts: members.Options{Knobs: double.Knobs{Status: 503}}}}, 502, []string{"processing", "processing"}},
		{"every member unreachable is a 502", []node{{id: "a", opts: members.Options{Knobs: double.Knobs{Fault: double.FaultRefused}}}, {id: "b", opts: members.Options{Knobs: double.Knobs{Fault: double.FaultRefused}}}}, 502, []string{"transient", "transient"}},
		{"every member timing out is a 504", []node{{id: "a", opts: members.Options{Knobs: double.Knobs{Fault: double.FaultHang}}}, {id: "b", opts: members.Options{Knobs: double.Knobs{Fault: double.FaultHang}}}}, 504, []string{"timeout", "timeout"}},
		{"every member refusing (406, 400) is a 400", []node{{id: "a", opts: members.Options{Knobs: double.Knobs{Status: 406}}}, {id: "b", opts: members.Options{Knobs: double.Knobs{Status: 400}}}}, 400, []string{"processing", "processing"}},
		{"a timeout and a 5xx are a 502", []node{{id: "a", opts: members.Options{Knobs: double.Knobs{Fault: double.FaultHang}}}, {id: "b", opts: members.Options{Knobs: double.Knobs{Status: 500}}}}, 502, []string{"timeout", "processing"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{requestTimeout: 300 * time.Millisecond}, c.nodes...)
			res, body := h.get("/fhir/Patient")
			if res.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, c.status, body)
			}
			oo := outcomeOf(t, body)
			if len(oo.Issue) != len(c.nodes) {
				t.Fatalf("%d issues for %d members: %s", len(oo.Issue), len(c.nodes), body)
			}
			for i, is := range oo.Issue {
				if is.Severity != "error" || is.Code != c.codes[i] || !strings.Contains(is.Diagnostics, "member "+c.nodes[i].id+" ") {
					t.Errorf("issue %d = %+v, want code %s naming member %s", i, is, c.codes[i], c.nodes[i].id)
				}
			}
			h.assertNoMemberAddress(body)
		})
	}
}

// assertNoMemberAddress checks that no member's URL, address or port is in body.
func (h *harness) assertNoMemberAddress(body []byte) {
	h.t.Helper()
	for _, u := range h.urls {
		pu, _ := url.Parse(u)
		for _, f := range []string{u, pu.Host} {
			if strings.Contains(string(body), f) {
				h.t.Fatalf("the answer holds the member address %q: %s", f, body)
			}
		}
	}
}

func TestPreferHandlingIsForwardedAndHonoured(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a", opts: members.Options{Entries: 2}}, node{id: "node-b", opts: members.Options{Entries: 3}})

	t.Run("strict makes a member's 400 for an unknown parameter the answer", func(t *testing.T) {
		res, body, err := h.do(context.Background(), "GET", "/fhir/Patient?colour=blue", "", http.Header{"Prefer": {"handling=strict"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := h.members["node-b"].LastRequest().Header.Get("Prefer"); got != "handling=strict" {
			t.Fatalf("the member was sent Prefer %q", got)
		}
		oo := outcomeOf(t, body)
		if res.StatusCode != 400 || !strings.Contains(oo.Issue[0].Diagnostics, "member node-a answered HTTP 400") ||
			len(oo.Issue) < 2 || !strings.Contains(oo.Issue[1].Diagnostics, `unknown search parameter "colour"`) {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		h.assertNoMemberAddress(body)
	})
	t.Run("lenient turns the member's warning into its OperationOutcome entry", func(t *testing.T) {
		res, body, err := h.do(context.Background(), "GET", "/fhir/Patient?colour=blue", "", http.Header{"Prefer": {"handling=lenient"}})
		if err != nil {
			t.Fatal(err)
		}
		var b searchAnswer
		if err := json.Unmarshal(body, &b); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		if res.StatusCode != 200 || b.matches() != 5 {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		var named []string
		for _, e := range b.Entry {
			if e.Search.Mode == "outcome" {
				if len(e.Resource.Issue) < 2 || !strings.Contains(e.Resource.Issue[1].Diagnostics, `unknown search parameter "colour" ignored`) {
					t.Fatalf("outcome entry %+v", e.Resource.Issue)
				}
				named = append(named, e.Resource.Issue[0].Diagnostics)
			}
		}
		if strings.Join(named, "|") != "member node-a reported on the search|member node-b reported on the search" {
			t.Fatalf("outcome entries %q", named)
		}
	})
	t.Run("without Prefer a member's 400 is its outcome entry, its diagnostics carried", func(t *testing.T) {
		strict := newHarness(t, harnessOptions{}, node{id: "node-s", opts: members.Options{Handling: "strict"}}, node{id: "node-l", opts: members.Options{Entries: 1}})
		res, body := strict.get("/fhir/Patient?colour=blue")
		var b searchAnswer
		if err := json.Unmarshal(body, &b); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		if res.StatusCode != 200 || b.matches() != 1 {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		found := false
		for _, e := range b.Entry {
			if e.Search.Mode == "outcome" && strings.HasPrefix(e.Resource.Issue[0].Diagnostics, "member node-s answered HTTP 400") {
				found = len(e.Resource.Issue) == 2 && strings.Contains(e.Resource.Issue[1].Diagnostics, `"colour"`) && e.Resource.Issue[0].Severity == "warning"
			}
		}
		if !found {
			t.Fatalf("no outcome entry for node-s with its diagnostics: %s", body)
		}
	})
}

func TestWithStrictFHIREveryAnswerIsPlainR4(t *testing.T) {
	h := newHarness(t, harnessOptions{strictFHIR: true, requestTimeout: 300 * time.Millisecond}, append(faultyMembers(), node{id: "node-n", opts: members.Options{NumericIDs: true, Entries: 30}})...)
	for _, path := range []string{"/fhir/Patient?_count=7", "/fhir/Patient?_sort=-_lastUpdated", "/fhir/Observation?_summary=count", "/fhir/metadata", "/fhir/Patient/1", "/fhir/nope"} {
		_, body := h.get(path) // the harness validates every answer with strict_fhir
		if strings.Contains(string(body), `"federation"`) {
			t.Fatalf("%s holds meta.federation under strict_fhir: %.300s", path, body)
		}
	}
	_, body := h.get("/fhir/Patient")
	var b searchAnswer
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if len(b.Meta.Extension) != 8 {
		t.Fatalf("%d member extensions, want 8", len(b.Meta.Extension))
	}
}
