package consentpdp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/consentpdp"
)

// block is one fenced example of the spec: its kind (json or http), its text, and the
// anchor line after it ("" when none).
type block struct {
	kind, text, anchor string
}

var fence = regexp.MustCompile(`^~~~ ?(json|http)\s*$`)

func spec(t *testing.T) []block {
	t.Helper()
	b, err := os.ReadFile("testdata/openid/authorization-api-1_0.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []block
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) != "~~~" {
			j++
		}
		bl := block{kind: m[1], text: strings.Join(lines[i+1:j], "\n")}
		if j+1 < len(lines) && strings.HasPrefix(lines[j+1], "{: #") {
			bl.anchor = strings.Fields(lines[j+1])[1][1:]
		}
		out = append(out, bl)
		i = j
	}
	if len(out) < 30 {
		t.Fatalf("found %d example blocks in the spec", len(out))
	}
	return out
}

func anchored(t *testing.T, bs []block, anchor string) block {
	t.Helper()
	for _, b := range bs {
		if b.anchor == anchor {
			return b
		}
	}
	t.Fatalf("no example #%s", anchor)
	return block{}
}

// httpMessage splits an http block into its first line, headers and body.
func httpMessage(t *testing.T, text string) (string, http.Header, string) {
	t.Helper()
	head, body, _ := strings.Cut(text, "\n\n")
	sc := bufio.NewScanner(strings.NewReader(head))
	sc.Scan()
	first := sc.Text()
	h := http.Header{}
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			t.Fatalf("header line %q", sc.Text())
		}
		h.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return first, h, body
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func post(t *testing.T, url, body string, header http.Header) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		req.Header[k] = vs
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, b}
}

func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("answer is no JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("example is no JSON: %v: %s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// examplePolicy decides the spec's examples as their published responses do.
var examplePolicy = []consentpdp.Rule{
	{Resource: "1", Permit: true},
	{Resource: "3", Permit: true},
	{Resource: "boxcarring.md", Action: "can_read", Permit: true},
	{Resource: "subject-search.md", Context: map[string]any{"error": map[string]any{"status": 404, "message": "Resource not found"}}},
	{Resource: "resource-search.md", Action: "can_edit", Context: map[string]any{"reason": "Subject is a viewer of the resource"}},
	{Resource: "123", Action: "can_read", Subject: "alice@example.com", Permit: true},
}

func TestPublishedExamples(t *testing.T) {
	bs := spec(t)
	s := consentpdp.Start(t, consentpdp.Options{Rules: append(examplePolicy, consentpdp.Rule{Resource: "1", Action: "can_read", Permit: true})})
	for _, semantic := range []string{"execute_all", "deny_on_first_deny", "permit_on_first_permit"} {
		t.Run("the "+semantic+" example answers the published response", func(t *testing.T) {
			for i, b := range bs {
				if b.kind == "json" && strings.Contains(b.text, `"evaluations_semantic": "`+semantic+`"`) && strings.Contains(b.text, `"type": "document"`) {
					a := post(t, s.URL+consentpdp.EvaluationsPath, b.text, nil)
					if a.status != 200 {
						t.Fatalf("status %d: %s", a.status, a.body)
					}
					sameJSON(t, a.body, bs[i+1].text)
					return
				}
			}
			t.Fatal("no example request")
		})
	}
	t.Run("the HTTPS evaluations example answers the published response, with its request id", func(t *testing.T) {
		first, h, body := httpMessage(t, anchored(t, bs, "example-access-evaluations-request").text)
		if !strings.HasPrefix(first, "POST "+consentpdp.EvaluationsPath+" ") {
			t.Fatalf("request line %q", first)
		}
		token := strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
		s := consentpdp.Start(t, consentpdp.Options{Rules: examplePolicy, Token: token})
		a := post(t, s.URL+consentpdp.EvaluationsPath, body, h)
		if a.status != 200 {
			t.Fatalf("status %d: %s", a.status, a.body)
		}
		_, rh, rbody := httpMessage(t, anchored(t, bs, "example-access-evaluations-response").text)
		sameJSON(t, a.body, rbody)
		if a.header.Get("X-Request-ID") != rh.Get("X-Request-ID") || a.header.Get("Content-Type") != rh.Get("Content-Type") {
			t.Fatalf("headers %v, want X-Request-ID and Content-Type of %v", a.header, rh)
		}
		h.Del("Authorization")
		if a := post(t, s.URL+consentpdp.EvaluationsPath, body, h); a.status != 401 || !bytes.Contains(a.body, []byte("AUTHZEN-BODY")) {
			t.Fatalf("without the token: %d %s", a.status, a.body)
		}
	})
	t.Run("the HTTPS evaluation example answers the published response", func(t *testing.T) {
		_, h, body := httpMessage(t, anchored(t, bs, "example-access-evaluation-request").text)
		s := consentpdp.Start(t, consentpdp.Options{Rules: []consentpdp.Rule{{Resource: "1", Action: "can_read", Permit: true}}})
		a := post(t, s.URL+consentpdp.EvaluationPath, body, h)
		_, _, rbody := httpMessage(t, anchored(t, bs, "example-access-evaluation-response").text)
		sameJSON(t, a.body, rbody)
	})
	t.Run("the request examples are accepted, one decision per evaluation", func(t *testing.T) {
		a := post(t, s.URL+consentpdp.EvaluationPath, anchored(t, bs, "request-example").text, nil)
		sameJSON(t, a.body, `{"decision": true}`)
		n := 0
		for _, b := range bs {
			if b.kind != "json" || !strings.Contains(b.text, `"id": "resource-search.md"`) {
				continue
			}
			n++
			a := post(t, s.URL+consentpdp.EvaluationsPath, b.text, nil)
			var got struct{ Evaluations []consentpdp.Decision }
			if err := json.Unmarshal(a.body, &got); err != nil || a.status != 200 || len(got.Evaluations) != 3 {
				t.Fatalf("%d %s (%v) for\n%s", a.status, a.body, err, b.text)
			}
		}
		if n != 3 {
			t.Fatalf("%d request examples of three documents, want 3", n)
		}
	})
	t.Run("the options example lacks the action the spec requires: a 400 naming it", func(t *testing.T) {
		for _, b := range bs {
			if b.kind == "json" && strings.Contains(b.text, `"another_option"`) {
				a := post(t, s.URL+consentpdp.EvaluationsPath, b.text, nil)
				if a.status != 400 || !strings.HasPrefix(string(a.body), "evaluations[0].action is required") {
					t.Fatalf("%d %s", a.status, a.body)
				}
				return
			}
		}
		t.Fatal("no options example")
	})
	t.Run("the metadata has the published keys", func(t *testing.T) {
		var want map[string]any
		for _, b := range bs {
			if b.kind == "http" && strings.Contains(b.text, `"policy_decision_point"`) {
				_, _, body := httpMessage(t, b.text)
				if err := json.Unmarshal([]byte(body), &want); err != nil {
					t.Fatal(err)
				}
			}
		}
		resp, err := http.Get(s.URL + consentpdp.MetadataPath)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got map[string]string
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"policy_decision_point", "access_evaluation_endpoint"} {
			if _, ok := want[k]; !ok || got[k] == "" {
				t.Fatalf("key %s: published %v, got %v", k, want, got)
			}
		}
		if got["access_evaluations_endpoint"] != s.URL+consentpdp.EvaluationsPath || !strings.HasPrefix(got["access_evaluation_endpoint"], got["policy_decision_point"]) {
			t.Fatalf("metadata %v", got)
		}
	})
}

// ferrofed is the request the consent binding sends (docs/bindings.md, "Consent").
func ferrofed(patient, purpose string, members ...string) string {
	var items []string
	for _, m := range members {
		items = append(items, `{"resource": {"type": "member", "id": "`+m+`"}}`)
	}
	return `{"subject": {"type": "client", "id": "app-1", "properties": {"iss": "https://idp"}},
	"action": {"name": "query", "properties": {"purposeOfUse": "` + purpose + `"}},
	"context": {"patient": {"system": "urn:oid:1.2.3", "value": "` + patient + `"}, "resourceType": "Observation"},
	"evaluations": [` + strings.Join(items, ",") + `],
	"options": {"evaluations_semantic": "execute_all"}}`
}

const treat = "http://terminology.hl7.org/CodeSystem/v3-ActReason|TREAT"

var policy = []consentpdp.Rule{
	{Patient: "urn:oid:1.2.3|P1", Resource: "node-b", Context: map[string]any{"reason": "policy_denied"}},
	{Patient: "urn:oid:1.2.3|P1", Purpose: treat, Permit: true},
	{Patient: "urn:oid:1.2.3|P2", Resource: "node-a", Permit: true},
}

func decisions(t *testing.T, body []byte, key string) []consentpdp.Decision {
	t.Helper()
	var m map[string][]consentpdp.Decision
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	ds, ok := m[key]
	if !ok {
		t.Fatalf("no %q in %s", key, body)
	}
	return ds
}

func TestPolicy(t *testing.T) {
	s := consentpdp.Start(t, consentpdp.Options{Rules: policy})
	for _, tc := range []struct {
		name, patient, purpose string
		members                []string
		want                   []bool
	}{
		{"a patient's rules per member, in the request's order", "P1", treat, []string{"node-a", "node-b", "node-c"}, []bool{true, false, true}},
		{"another purpose of use falls through to no rule: denied", "P1", "urn:x|HRESCH", []string{"node-a", "node-b"}, []bool{false, false}},
		{"a rule on one member only", "P2", treat, []string{"node-c", "node-a"}, []bool{false, true}},
		{"a patient without rules is denied everywhere", "P9", treat, []string{"node-a"}, []bool{false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, s.URL+consentpdp.EvaluationsPath, ferrofed(tc.patient, tc.purpose, tc.members...), nil)
			if a.status != 200 {
				t.Fatalf("%d %s", a.status, a.body)
			}
			ds := decisions(t, a.body, "evaluations")
			var got []bool
			for _, d := range ds {
				got = append(got, d.Decision)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	a := post(t, s.URL+consentpdp.EvaluationsPath, ferrofed("P1", treat, "node-b"), nil)
	if ds := decisions(t, a.body, "evaluations"); ds[0].Context["reason"] != "policy_denied" {
		t.Fatalf("deny context %v", ds[0].Context)
	}
	if r, ok := s.Last(); !ok || r.Method != "POST" || r.Path != consentpdp.EvaluationsPath || !bytes.Contains(r.Body, []byte(`"node-b"`)) {
		t.Fatalf("log %+v", r)
	}
}

func TestSemantics(t *testing.T) {
	s := consentpdp.Start(t, consentpdp.Options{Rules: []consentpdp.Rule{{Resource: "y", Permit: true}}})
	body := func(semantic string) string {
		return `{"subject": {"type": "u", "id": "a"}, "action": {"name": "read"}, "options": {"evaluations_semantic": "` + semantic + `"},
		"evaluations": [{"resource": {"type": "d", "id": "y"}}, {"resource": {"type": "d", "id": "n"}}, {"resource": {"type": "d", "id": "y"}}]}`
	}
	for _, tc := range []struct {
		semantic string
		want     int
	}{{"execute_all", 3}, {"deny_on_first_deny", 2}, {"permit_on_first_permit", 1}} {
		a := post(t, s.URL+consentpdp.EvaluationsPath, body(tc.semantic), nil)
		if got := len(decisions(t, a.body, "evaluations")); got != tc.want {
			t.Errorf("%s: %d decisions, want %d", tc.semantic, got, tc.want)
		}
	}
	if a := post(t, s.URL+consentpdp.EvaluationsPath, body("first_wins"), nil); a.status != 400 || !strings.Contains(string(a.body), "options.evaluations_semantic") {
		t.Errorf("unknown semantic: %d %s", a.status, a.body)
	}
}

func TestRefusals(t *testing.T) {
	s := consentpdp.Start(t, consentpdp.Options{Marker: "M-7"})
	for _, tc := range []struct {
		name, path, body, ctype, want string
		status                        int
	}{
		{"a body that is no JSON", consentpdp.EvaluationsPath, "{", "application/json", "the body is not a JSON request", 400},
		{"another content type", consentpdp.EvaluationsPath, "{}", "text/plain", "Content-Type must be application/json", 400},
		{"an evaluation without subject", consentpdp.EvaluationPath, `{"action": {"name": "r"}, "resource": {"type": "d", "id": "1"}}`, "application/json", "request.subject is required", 400},
		{"a subject without id", consentpdp.EvaluationPath, `{"subject": {"type": "u"}, "action": {"name": "r"}, "resource": {"type": "d", "id": "1"}}`, "application/json", "request.subject needs a type and an id", 400},
		{"an item without resource", consentpdp.EvaluationsPath, `{"subject": {"type": "u", "id": "a"}, "action": {"name": "r"}, "evaluations": [{"resource": {"type": "d", "id": "1"}}, {"context": {}}]}`, "application/json", "evaluations[1].resource is required", 400},
		{"an action without name", consentpdp.EvaluationsPath, `{"subject": {"type": "u", "id": "a"}, "action": {}, "evaluations": [{"resource": {"type": "d", "id": "1"}}]}`, "application/json", "evaluations[0].action needs a name", 400},
		{"another path", "/access/v2/evaluations", "{}", "application/json", "no API at", 404},
	} {
		t.Run(tc.name+" is refused with the marker", func(t *testing.T) {
			a := post(t, s.URL+tc.path, tc.body, http.Header{"Content-Type": {tc.ctype}})
			if a.status != tc.status || !strings.HasPrefix(string(a.body), tc.want) || !strings.HasSuffix(string(a.body), " M-7") {
				t.Fatalf("%d %q, want %d %q…M-7", a.status, a.body, tc.status, tc.want)
			}
		})
	}
	t.Run("evaluations without items is a single evaluation", func(t *testing.T) {
		a := post(t, s.URL+consentpdp.EvaluationsPath, `{"subject": {"type": "u", "id": "a"}, "action": {"name": "r"}, "resource": {"type": "d", "id": "1"}, "evaluations": []}`, nil)
		sameJSON(t, a.body, `{"decision": false}`)
	})
}

func TestKnobs(t *testing.T) {
	req := ferrofed("P1", treat, "node-a", "node-b", "node-c")
	t.Run("omit leaves the last decisions out", func(t *testing.T) {
		s := consentpdp.Start(t, consentpdp.Options{Rules: policy, Omit: 2})
		if ds := decisions(t, post(t, s.URL+consentpdp.EvaluationsPath, req, nil).body, "evaluations"); len(ds) != 1 || !ds[0].Decision {
			t.Fatalf("decisions %v", ds)
		}
	})
	t.Run("the legacy key is decisions", func(t *testing.T) {
		s := consentpdp.Start(t, consentpdp.Options{Rules: policy, LegacyKey: true})
		if ds := decisions(t, post(t, s.URL+consentpdp.EvaluationsPath, req, nil).body, "decisions"); len(ds) != 3 {
			t.Fatalf("decisions %v", ds)
		}
	})
	t.Run("status 500 is a text error with the marker", func(t *testing.T) {
		s := consentpdp.Start(t, consentpdp.Options{Knobs: double.Knobs{Status: 500}})
		a := post(t, s.URL+consentpdp.EvaluationsPath, req, nil)
		if a.status != 500 || !strings.HasSuffix(string(a.body), "AUTHZEN-BODY") || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") {
			t.Fatalf("%d %v %s", a.status, a.header, a.body)
		}
	})
	t.Run("malformed is a 200 no JSON reader takes", func(t *testing.T) {
		s := consentpdp.Start(t, consentpdp.Options{Knobs: double.Knobs{Fault: double.FaultMalformed}})
		a := post(t, s.URL+consentpdp.EvaluationsPath, req, nil)
		if a.status != 200 || json.Valid(a.body) || !bytes.Contains(a.body, []byte("AUTHZEN-BODY")) {
			t.Fatalf("%d %s", a.status, a.body)
		}
	})
	t.Run("refused, then reset", func(t *testing.T) {
		s := consentpdp.Start(t, consentpdp.Options{Knobs: double.Knobs{Fault: double.FaultRefused}})
		c := &http.Client{Timeout: 200 * time.Millisecond}
		resp, err := c.Post(s.URL+consentpdp.EvaluationsPath, "application/json", strings.NewReader(req))
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("refused: %v", err)
		}
		if err := s.SetKnobs(double.Knobs{Fault: double.FaultReset}); err != nil {
			t.Fatal(err)
		}
		resp, err = c.Post(s.URL+consentpdp.EvaluationsPath, "application/json", strings.NewReader(req))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.ReadAll(resp.Body); err == nil {
			t.Fatal("reset: the whole body was read")
		}
	})
	t.Run("hang answers nothing within the caller's budget", func(t *testing.T) {
		s := consentpdp.Start(t, consentpdp.Options{Knobs: double.Knobs{Fault: double.FaultHang}})
		c := &http.Client{Timeout: 100 * time.Millisecond}
		resp, err := c.Post(s.URL+consentpdp.EvaluationsPath, "application/json", strings.NewReader(req))
		if err == nil {
			resp.Body.Close()
			t.Fatal("answered")
		}
		if s.Requests() != 1 {
			t.Fatalf("requests %d", s.Requests())
		}
	})
}
