package auditrepo_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

// answer is what came back from one POST.
type answer struct {
	StatusCode int
	Header     http.Header
}

func post(t *testing.T, url string, body []byte) (answer, []byte) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Post(url, "application/fhir+json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return answer{resp.StatusCode, resp.Header}, b.Bytes()
}

type example struct {
	name string
	body []byte
	desc []string // entity.description of the query entities
}

func examples(t *testing.T) []example {
	t.Helper()
	files, err := filepath.Glob("testdata/balp/*.json")
	if err != nil || len(files) < 4 {
		t.Fatalf("examples: %v %v", files, err)
	}
	var out []example
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ae struct {
			Entity []struct {
				Description string  `json:"description"`
				Query       *string `json:"query"`
			} `json:"entity"`
		}
		if err := json.Unmarshal(b, &ae); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		ex := example{name: filepath.Base(f), body: b}
		for _, e := range ae.Entity {
			if e.Query != nil {
				ex.desc = append(ex.desc, e.Description)
			}
		}
		out = append(out, ex)
	}
	return out
}

func TestThePublishedBALPExamplesAreValidR4(t *testing.T) {
	for _, ex := range examples(t) {
		t.Run(ex.name, func(t *testing.T) {
			if err := fhirschema.Validate(ex.body); err != nil {
				t.Errorf("not valid R4: %v", err)
			}
		})
	}
}

func TestTheRepositoryStoresThePublishedExamplesAndDecodesTheirQuery(t *testing.T) {
	arr := auditrepo.Start(t, auditrepo.Options{})
	exs := examples(t)
	for _, ex := range exs {
		resp, body := post(t, arr.URL+"/AuditEvent", ex.body)
		if resp.StatusCode != http.StatusCreated || !strings.HasPrefix(resp.Header.Get("Location"), "AuditEvent/") {
			t.Fatalf("%s: %d %s (Location %q), want 201 with a Location", ex.name, resp.StatusCode, body, resp.Header.Get("Location"))
		}
	}
	got := arr.Received()
	if len(got) != len(exs) {
		t.Fatalf("stored %d, want %d", len(got), len(exs))
	}
	queries := 0
	for i, ex := range exs {
		if len(got[i].Queries) != len(ex.desc) {
			t.Fatalf("%s: %d decoded queries, want %d", ex.name, len(got[i].Queries), len(ex.desc))
		}
		for j, q := range got[i].Queries {
			queries++
			// BALP: entity.query is the raw request, base64; the description the
			// cleaned one. In these examples they say the same.
			if strings.TrimSpace(q) != strings.TrimSpace(ex.desc[j]) {
				t.Errorf("%s: decoded query %q, want the description %q", ex.name, q, ex.desc[j])
			}
		}
	}
	if queries < 3 {
		t.Errorf("decoded %d queries, want one in each of the 3 query examples", queries)
	}
}

func TestABatchOfThePublishedExamplesIsAnsweredPerEntry(t *testing.T) {
	arr := auditrepo.Start(t, auditrepo.Options{PoisonMarker: "MeasureReport"})
	exs := examples(t)
	var entries []string
	for _, ex := range exs {
		entries = append(entries, `{"resource":`+string(ex.body)+`,"request":{"method":"POST","url":"AuditEvent"}}`)
	}
	bundle := `{"resourceType":"Bundle","type":"batch","entry":[` + strings.Join(entries, ",") + `]}`
	if err := fhirschema.Validate([]byte(bundle)); err != nil {
		t.Fatalf("the batch is not valid R4: %v", err)
	}
	resp, body := post(t, arr.URL+"/", []byte(bundle))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("batch: %d %s", resp.StatusCode, body)
	}
	if err := fhirschema.Validate(body); err != nil {
		t.Errorf("the batch-response is not valid R4: %v", err)
	}
	var br struct {
		Type  string `json:"type"`
		Entry []struct {
			Response struct {
				Status string `json:"status"`
			} `json:"response"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(body, &br); err != nil || br.Type != "batch-response" || len(br.Entry) != len(exs) {
		t.Fatalf("batch-response = %s", body)
	}
	poisoned := 0
	for i, e := range br.Entry {
		want := "201 Created"
		if bytes.Contains(exs[i].body, []byte("MeasureReport")) {
			want = "422 Unprocessable Entity"
			poisoned++
		}
		if e.Response.Status != want {
			t.Errorf("entry %d (%s): %q, want %q", i, exs[i].name, e.Response.Status, want)
		}
	}
	if poisoned != 1 || len(arr.Received()) != len(exs)-1 {
		t.Errorf("poisoned %d, stored %d; want 1 and the rest", poisoned, len(arr.Received()))
	}
	for _, ev := range arr.Received() {
		if !ev.Batch {
			t.Errorf("event %s not marked as from a batch", ev.ID)
		}
	}
}

func TestTheRepositoryRefusesWhatIsNoAuditEvent(t *testing.T) {
	arr := auditrepo.Start(t, auditrepo.Options{PoisonMarker: "POISON-7"})
	for _, c := range []struct {
		name, path, body string
		want             int
	}{
		{"no JSON", "/AuditEvent", `{`, 400},
		{"a Patient", "/AuditEvent", `{"resourceType":"Patient"}`, 422},
		{"a query that is no base64", "/AuditEvent", `{"resourceType":"AuditEvent","entity":[{"query":"%%%"}]}`, 400},
		{"a poison marker", "/AuditEvent", `{"resourceType":"AuditEvent","entity":[{"description":"POISON-7"}]}`, 422},
		{"a transaction Bundle", "/", `{"resourceType":"Bundle","type":"transaction","entry":[]}`, 422},
		{"an AuditEvent at the batch path", "/", `{"resourceType":"AuditEvent"}`, 422},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := post(t, arr.URL+c.path, []byte(c.body))
			if resp.StatusCode != c.want || !bytes.Contains(body, []byte(`"OperationOutcome"`)) {
				t.Errorf("%d %s, want %d with an OperationOutcome", resp.StatusCode, body, c.want)
			}
		})
	}
	if n := len(arr.Received()); n != 0 {
		t.Errorf("stored %d, want none", n)
	}
}

const event = `{"resourceType":"AuditEvent","meta":{"tag":[{"system":"https://ferrofed.io/fhir/audit-event-id","code":"e-1"}]}}`

func TestTheKnobs(t *testing.T) {
	t.Run("a status script, then normal answers, with Retry-After", func(t *testing.T) {
		arr := auditrepo.Start(t, auditrepo.Options{})
		arr.Script(t, double.Knobs{Status: 503, RetryAfter: "2"}, double.Knobs{Status: 503, RetryAfter: "2"}, double.Knobs{Status: 429, RetryAfter: "2"})
		var got []int
		for range 4 {
			resp, _ := post(t, arr.URL+"/AuditEvent", []byte(event))
			got = append(got, resp.StatusCode)
			if resp.StatusCode != 201 && resp.Header.Get("Retry-After") != "2" {
				t.Errorf("%d without Retry-After", resp.StatusCode)
			}
		}
		if want := []int{503, 503, 429, 201}; !slices.Equal(got, want) {
			t.Errorf("statuses %v, want %v", got, want)
		}
		if ids := arr.ByEventID(); ids["e-1"] != 1 {
			t.Errorf("event ids %v, want e-1 once", ids)
		}
	})
	t.Run("401 while unauthorized", func(t *testing.T) {
		arr := auditrepo.Start(t, auditrepo.Options{})
		arr.Set(t, double.Knobs{Status: http.StatusUnauthorized})
		if resp, _ := post(t, arr.URL+"/AuditEvent", []byte(event)); resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%d, want 401 with WWW-Authenticate", resp.StatusCode)
		}
	})
	t.Run("413 for batches", func(t *testing.T) {
		arr := auditrepo.Start(t, auditrepo.Options{})
		arr.Set(t, double.Knobs{Route: auditrepo.BatchRoute, Status: http.StatusRequestEntityTooLarge})
		if resp, _ := post(t, arr.URL+"/", []byte(`{"resourceType":"Bundle","type":"batch"}`)); resp.StatusCode != 413 {
			t.Errorf("%d, want 413", resp.StatusCode)
		}
		if resp, _ := post(t, arr.URL+"/AuditEvent", []byte(event)); resp.StatusCode != 201 {
			t.Errorf("single: %d, want 201", resp.StatusCode)
		}
	})
	t.Run("hold after read", func(t *testing.T) {
		arr := auditrepo.Start(t, auditrepo.Options{})
		arr.Set(t, double.Knobs{Fault: double.FaultHold})
		c := &http.Client{Timeout: 200 * time.Millisecond}
		resp, err := c.Post(arr.URL+"/AuditEvent", "application/fhir+json", strings.NewReader(event))
		if err == nil {
			resp.Body.Close()
			t.Fatal("a held request was answered")
		}
		if arr.Held() != 1 || len(arr.Received()) != 0 {
			t.Errorf("held %d, stored %d; want 1 and 0", arr.Held(), len(arr.Received()))
		}
		done := make(chan int, 1)
		go func() {
			resp, err := http.Post(arr.URL+"/AuditEvent", "application/fhir+json", strings.NewReader(event))
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		for arr.Held() < 2 {
			time.Sleep(5 * time.Millisecond)
		}
		arr.Set(t, double.Knobs{})
		if st := <-done; st != 201 {
			t.Errorf("released: %d, want 201", st)
		}
	})
	t.Run("refused", func(t *testing.T) {
		arr := auditrepo.Start(t, auditrepo.Options{Knobs: double.Knobs{Fault: double.FaultRefused}})
		resp, err := http.Post(arr.URL+"/AuditEvent", "application/fhir+json", strings.NewReader(event))
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("err = %v, want connection refused", err)
		}
	})
}

func TestPreferReturnMinimalEchoesNoResource(t *testing.T) {
	arr := auditrepo.Start(t, auditrepo.Options{})
	ev := `{"resourceType":"AuditEvent","meta":{"tag":[{"system":"` + auditrepo.EventIDSystem + `","code":"e1"}]}}`
	for _, c := range []struct {
		path, body string
	}{
		{"/AuditEvent", ev},
		{"/", `{"resourceType":"Bundle","type":"batch","entry":[{"resource":` + ev + `,"request":{"method":"POST","url":"AuditEvent"}}]}`},
	} {
		for _, prefer := range []string{"", "return=minimal"} {
			req, _ := http.NewRequest(http.MethodPost, arr.URL+c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/fhir+json")
			if prefer != "" {
				req.Header.Set("Prefer", prefer)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode/100 != 2 {
				t.Fatalf("%s %q: %d %s", c.path, prefer, res.StatusCode, body)
			}
			if echoed := strings.Contains(string(body), `"resourceType":"AuditEvent"`); echoed == (prefer != "") {
				t.Errorf("%s with Prefer %q: the resource echoed = %v: %s", c.path, prefer, echoed, body)
			}
		}
	}
	if n := arr.Stored(); n != 4 {
		t.Errorf("stored %d, want 4", n)
	}
}
