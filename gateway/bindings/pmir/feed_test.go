package pmir_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/bindings/pmir"
)

// published reads one of the guide's examples (test/doubles/identityregistry/testdata/ihe).
func published(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "test", "doubles", "identityregistry", "testdata", "ihe", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The guide's four feed messages read as what they do.
func TestParseMessageReadsThePublishedExamples(t *testing.T) {
	for name, want := range map[string]pmir.Message{
		"ex-PMIRBundleCreate.json": {HeaderID: "ex-messageheader-create", Changes: pmir.Changes{Creates: 2}},
		"ex-PMIRBundleUpdate.json": {HeaderID: "ex-messageheader-update", Changes: pmir.Changes{Updates: 1}},
		"ex-PMIRBundleMerge.json":  {HeaderID: "ex-messageheader-merge", Changes: pmir.Changes{Merges: 1}},
		"ex-PMIRBundleDelete.json": {HeaderID: "ex-messageheader-delete", Changes: pmir.Changes{Deletes: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := pmir.ParseMessage(published(t, name))
			if err != nil || m != want {
				t.Fatalf("got %+v, %v; want %+v", m, err, want)
			}
			if m.Changes.Invalidates() == (want.Changes.Creates > 0) {
				t.Fatalf("Invalidates() = %v", m.Changes.Invalidates())
			}
		})
	}
}

func TestParseMessageRefusesWhatIsNotPMIR(t *testing.T) {
	merge := string(published(t, "ex-PMIRBundleMerge.json"))
	for name, body := range map[string]string{
		"not JSON":            "<Bundle/>",
		"a searchset":         strings.Replace(merge, `"type":"message"`, `"type":"searchset"`, 1),
		"another event":       strings.Replace(merge, "urn:ihe:iti:pmir:2019:patient-feed", "urn:x", 1),
		"a header without id": strings.Replace(merge, `"id":"ex-messageheader-merge",`, "", 1),
		"a transaction":       strings.Replace(merge, `"type":"history"`, `"type":"transaction"`, 1),
		"a PATCH":             strings.Replace(merge, `"method":"PUT"`, `"method":"PATCH"`, 1),
		"an Observation":      strings.Replace(merge, `"resourceType":"Patient"`, `"resourceType":"Observation"`, 1),
		"one entry":           `{"resourceType":"Bundle","type":"message","entry":[{"resource":{"resourceType":"MessageHeader"}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			if body == merge {
				t.Fatal("the case changed nothing")
			}
			if m, err := pmir.ParseMessage([]byte(body)); err == nil {
				t.Fatalf("accepted: %+v", m)
			}
		})
	}
}

// The feed route: a token with the feed scope is needed; a merge, an update and a
// delete clear the caches, a create does not; the answer is ITI-93's response.
func TestTheFeedRoute(t *testing.T) {
	g := startGateway(t, harnessOptions{})
	const path = "/pmir/$process-message"
	merge := published(t, "ex-PMIRBundleMerge.json")
	if status, _ := g.Do(http.MethodPost, path, "", merge); status != http.StatusUnauthorized {
		t.Fatalf("no token: %d", status)
	}
	if status, body := g.Do(http.MethodPost, path, g.Token, merge); status != http.StatusForbidden || !strings.Contains(string(body), "insufficient_scope") {
		t.Fatalf("the operator's token without the feed scope: %d %s", status, body)
	}
	if g.invalidated.Load() != 0 {
		t.Fatal("a refused message cleared the caches")
	}
	status, body := g.Do(http.MethodPost, path, g.feedToken, merge)
	if status != http.StatusOK {
		t.Fatalf("merge: %d %s", status, body)
	}
	var resp struct {
		ResourceType, Type string
		Entry              []struct {
			Resource struct {
				ResourceType string
				EventURI     string `json:"eventUri"`
				Response     struct{ Identifier, Code string }
			}
		}
	}
	if err := json.Unmarshal(body, &resp); err != nil || resp.Type != "message" || len(resp.Entry) != 1 {
		t.Fatalf("response %s (%v)", body, err)
	}
	h := resp.Entry[0].Resource
	if h.EventURI != pmir.FeedResponseEvent || h.Response.Identifier != "ex-messageheader-merge" || h.Response.Code != "ok" {
		t.Fatalf("response header %+v", h)
	}
	if g.invalidated.Load() != 1 {
		t.Fatalf("the merge cleared the caches %d times", g.invalidated.Load())
	}
	// In this order: a create clears nothing, an update and a delete clear once each.
	for _, step := range []struct {
		name string
		want int64
	}{{"ex-PMIRBundleCreate.json", 1}, {"ex-PMIRBundleUpdate.json", 2}, {"ex-PMIRBundleDelete.json", 3}} {
		name, want := step.name, step.want
		if status, body := g.Do(http.MethodPost, path, g.feedToken, published(t, name)); status != http.StatusOK {
			t.Fatalf("%s: %d %s", name, status, body)
		}
		if g.invalidated.Load() != want {
			t.Fatalf("after %s the caches were cleared %d times, want %d", name, g.invalidated.Load(), want)
		}
	}
	if status, body := g.Do(http.MethodPost, path, g.feedToken, []byte(`{"resourceType":"Bundle","type":"searchset"}`)); status != http.StatusBadRequest || !strings.Contains(string(body), "OperationOutcome") {
		t.Fatalf("a message that is not PMIR's: %d %s", status, body)
	}
	big := make([]byte, pmir.MaxFeedBytes+1)
	if status, _ := g.Do(http.MethodPost, path, g.feedToken, big); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a message past the cap: %d", status)
	}
	if n := g.rec.Count(`"code":"ITI-93"`); n != 5 {
		t.Fatalf("%d feed messages audited, want 5 (4 taken, 1 refused as not PMIR's)", n)
	}
	// Its audit record not stored: 503, the registry sends it again; failing, audit-failed.
	g.rec.Fail.Store(true)
	if status, _ := g.Do(http.MethodPost, path, g.feedToken, merge); status != http.StatusServiceUnavailable {
		t.Fatalf("a message whose audit record was not stored: %d", status)
	}
	if s := g.state(); s != "failing/audit-failed" {
		t.Fatalf("state %s", s)
	}
}

// Hostile messages within the cap: deep nesting is refused, a history of as many
// entries as 1 MiB holds is read, neither panics.
func TestHostileFeedMessages(t *testing.T) {
	deep := strings.Repeat("[", 200000) + strings.Repeat("]", 200000)
	if _, err := pmir.ParseMessage([]byte(deep)); err == nil {
		t.Fatal("200,000 levels of nesting accepted")
	}
	merge := string(published(t, "ex-PMIRBundleMerge.json"))
	i := strings.Index(merge, `{"fullUrl":"https://profiles.ihe.net/ITI/PMIR/Patient/ex-patient-merge"`)
	j := strings.LastIndex(merge, "]}}]}")
	entry := merge[i:j]
	n := (pmir.MaxFeedBytes - len(merge)) / (len(entry) + 1)
	many := merge[:i] + strings.TrimSuffix(strings.Repeat(entry+",", n), ",") + merge[j:]
	if len(many) > pmir.MaxFeedBytes {
		t.Fatalf("the message is %d bytes", len(many))
	}
	m, err := pmir.ParseMessage([]byte(many))
	if err != nil || m.Changes.Merges < 1000 {
		t.Fatalf("a long history: %+v %v", m, err)
	}
	g := startGateway(t, harnessOptions{})
	if status, _ := g.Do(http.MethodPost, "/pmir/$process-message", g.feedToken, []byte(many)); status != http.StatusOK {
		t.Fatalf("a long history within the cap answered %d", status)
	}
	if status, _ := g.Do(http.MethodPost, "/pmir/$process-message", g.feedToken, []byte(strings.Repeat("[", pmir.MaxFeedBytes/2)+strings.Repeat("]", pmir.MaxFeedBytes/2))); status != http.StatusBadRequest {
		t.Fatalf("deep nesting answered %d", status)
	}
}

// The answer to the guide's create message reads as the guide's own response,
// ex-messageheader-create-response: the same eventUri, identifier and code.
func TestTheFeedAnswersAsThePublishedResponse(t *testing.T) {
	g := startGateway(t, harnessOptions{})
	status, body := g.Do(http.MethodPost, "/pmir/$process-message", g.feedToken, published(t, "ex-PMIRBundleCreate.json"))
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	type header struct {
		ResourceType string `json:"resourceType"`
		EventURI     string `json:"eventUri"`
		Response     struct {
			Identifier string `json:"identifier"`
			Code       string `json:"code"`
		} `json:"response"`
	}
	var want header
	if err := json.Unmarshal(published(t, "ex-messageheader-create-response.json"), &want); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Type  string `json:"type"`
		Entry []struct {
			FullURL  string `json:"fullUrl"`
			Resource header `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(body, &got); err != nil || got.Type != "message" || len(got.Entry) != 1 || got.Entry[0].FullURL == "" {
		t.Fatalf("answer %s (%v)", body, err)
	}
	if got.Entry[0].Resource != want {
		t.Fatalf("answered %+v, the guide's response is %+v", got.Entry[0].Resource, want)
	}
}
