package identityregistry_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/identityregistry"
)

func example(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ihe", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func do(t *testing.T, method, u string, body []byte) (int, http.Header, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/fhir+json")
	res, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var v map[string]any
	_ = json.Unmarshal(raw, &v)
	return res.StatusCode, res.Header, v
}

// The guide's own Subscription request is created, turns active after the delay, is
// read, found by its endpoint, and deleted; a deleted one is gone (410).
func TestTheRegistryHoldsThePublishedSubscription(t *testing.T) {
	reg := identityregistry.Start(t, identityregistry.Options{ActivateAfter: 200 * time.Millisecond})
	code, h, sub := do(t, http.MethodPost, reg.URL+"/Subscription", example(t, "ex-subscription-request.json"))
	if code != http.StatusCreated || sub["status"] != "requested" {
		t.Fatalf("create: %d %v", code, sub)
	}
	loc := h.Get("Location")
	if !strings.HasPrefix(loc, reg.URL+"/Subscription/") || !strings.HasSuffix(loc, "/_history/1") {
		t.Fatalf("Location %q", loc)
	}
	id := sub["id"].(string)
	if code, _, sub := do(t, http.MethodGet, reg.URL+"/Subscription/"+id, nil); code != http.StatusOK || sub["status"] != "requested" {
		t.Fatalf("read before activation: %d %v", code, sub)
	}
	time.Sleep(250 * time.Millisecond)
	if code, _, sub := do(t, http.MethodGet, reg.URL+"/Subscription/"+id, nil); code != http.StatusOK || sub["status"] != "active" {
		t.Fatalf("read after activation: %d %v", code, sub)
	}
	// The active example reads like what the registry holds now.
	var published map[string]any
	_ = json.Unmarshal(example(t, "ex-subscription.json"), &published)
	_, _, held := do(t, http.MethodGet, reg.URL+"/Subscription/"+id, nil)
	for _, k := range []string{"status", "criteria", "reason"} {
		if held[k] != published[k] {
			t.Errorf("%s: held %v, published %v", k, held[k], published[k])
		}
	}
	code, _, bundle := do(t, http.MethodGet, reg.URL+"/Subscription?url=http%3A%2F%2Fexample.org%2Fpmir-message&criteria=Patient", nil)
	if code != http.StatusOK || bundle["total"] != float64(1) {
		t.Fatalf("search by url: %d %v", code, bundle)
	}
	if _, _, b := do(t, http.MethodGet, reg.URL+"/Subscription?url=http%3A%2F%2Fother", nil); b["total"] != float64(0) {
		t.Fatalf("search by another url: %v", b)
	}
	if code, _, _ := do(t, http.MethodDelete, reg.URL+"/Subscription/"+id, nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	if code, _, _ := do(t, http.MethodGet, reg.URL+"/Subscription/"+id, nil); code != http.StatusGone {
		t.Fatalf("read after delete: %d", code)
	}
	if code, _, _ := do(t, http.MethodDelete, reg.URL+"/Subscription/99", nil); code != http.StatusNotFound {
		t.Fatalf("delete of an unknown id: %d", code)
	}
	if n := reg.Count(http.MethodDelete, "/Subscription"); n != 2 {
		t.Fatalf("%d deletes counted", n)
	}
}

// A create that breaks IHE.PMIR.Subscription.Request is refused 422, naming what.
func TestTheRegistryRefusesARequestOffProfile(t *testing.T) {
	reg := identityregistry.Start(t, identityregistry.Options{})
	base := string(example(t, "ex-subscription-request.json"))
	for name, body := range map[string]string{
		"status active":           strings.Replace(base, `"requested"`, `"active"`, 1),
		"criteria of Observation": strings.Replace(base, `"criteria":"Patient"`, `"criteria":"Observation"`, 1),
		"criteria by name":        strings.Replace(base, `"criteria":"Patient"`, `"criteria":"Patient?name=x"`, 1),
		"a rest-hook channel":     strings.Replace(base, `"type":"message"`, `"type":"rest-hook"`, 1),
		"no contact":              strings.Replace(base, `"contact":[{"system":"phone","value":"+1-555-555-1212"}],`, ``, 1),
	} {
		t.Run(name, func(t *testing.T) {
			if body == base {
				t.Fatal("the case changed nothing")
			}
			code, _, oo := do(t, http.MethodPost, reg.URL+"/Subscription", []byte(body))
			if code != http.StatusUnprocessableEntity || oo["resourceType"] != "OperationOutcome" {
				t.Fatalf("%d %v", code, oo)
			}
		})
	}
	if len(reg.Subscriptions()) != 0 {
		t.Fatal("a refused create was stored")
	}
}

// The script's knobs: a refused create, one without Location, a forced status, a
// delete that hangs.
func TestTheRegistryScripts(t *testing.T) {
	reg := identityregistry.Start(t, identityregistry.Options{})
	body := example(t, "ex-subscription-request.json")
	reg.Set(t, double.Knobs{Route: identityregistry.CreateRoute, Status: http.StatusInternalServerError})
	if code, _, oo := do(t, http.MethodPost, reg.URL+"/Subscription", body); code != 500 || !strings.Contains(oo["issue"].([]any)[0].(map[string]any)["diagnostics"].(string), "PMIR-BODY") {
		t.Fatalf("refused create: %d %v", code, oo)
	}
	reg.Set(t, double.Knobs{})
	reg.SetScript(identityregistry.Script{CreateWithoutLocation: true})
	if code, h, sub := do(t, http.MethodPost, reg.URL+"/Subscription", body); code != 201 || h.Get("Location") != "" || sub["id"] != nil {
		t.Fatalf("create without Location: %d %v %v", code, h, sub)
	}
	reg.SetScript(identityregistry.Script{ForceStatus: "error"})
	if code, _, sub := do(t, http.MethodGet, reg.URL+"/Subscription/1", nil); code != 200 || sub["status"] != "error" {
		t.Fatalf("forced status: %d %v", code, sub)
	}
	reg.SetScript(identityregistry.Script{})
	reg.Set(t, double.Knobs{Route: identityregistry.DeleteRoute, Fault: double.FaultHang})
	c := &http.Client{Timeout: 300 * time.Millisecond}
	req, _ := http.NewRequest(http.MethodDelete, reg.URL+"/Subscription/1", nil)
	if res, err := c.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("a hanging delete answered %d", res.StatusCode)
	}
	if len(reg.Subscriptions()) != 1 {
		t.Fatal("a hanging delete deleted")
	}
}

// The registry sends the guide's merge message to the endpoint of every active
// subscription, with the token.
func TestTheRegistrySendsTheFeed(t *testing.T) {
	got := make(chan string, 1)
	consumer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r.Header.Get("Authorization") + " " + string(b)
		w.WriteHeader(http.StatusOK)
	}))
	defer consumer.Close()
	reg := identityregistry.Start(t, identityregistry.Options{})
	body := strings.Replace(string(example(t, "ex-subscription-request.json")), "http://example.org/pmir-message", consumer.URL+"/pmir/$process-message", 1)
	if code, _, _ := do(t, http.MethodPost, reg.URL+"/Subscription", []byte(body)); code != 201 {
		t.Fatal(code)
	}
	statuses, err := reg.SendToSubscribers("tok", example(t, "ex-PMIRBundleMerge.json"))
	if err != nil || len(statuses) != 1 || statuses[0] != 200 {
		t.Fatalf("%v %v", statuses, err)
	}
	if s := <-got; !strings.HasPrefix(s, "Bearer tok ") || !strings.Contains(s, "replaced-by") {
		t.Fatalf("the consumer got %q", s)
	}
}
