package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
)

// The control API drives the double and reads what it stored, as test/e2e does
// through the double's Service.
func TestControlAPI(t *testing.T) {
	repo, err := auditrepo.NewHandler(auditrepo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	srv := httptest.NewServer(handler(repo))
	defer srv.Close()
	post := func(path, body string) int {
		t.Helper()
		res, err := http.Post(srv.URL+path, "application/fhir+json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	received := func() Received {
		t.Helper()
		res, err := http.Get(srv.URL + "/_double/received")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var r Received
		if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	const event = `{"resourceType":"AuditEvent","meta":{"tag":[{"system":"` + auditrepo.EventIDSystem + `","code":"ev-1"}]},"entity":[{"query":"bmFtZT1NQVJL"}]}`

	if got := post("/_double/script?status=503&count=1", ""); got != http.StatusNoContent {
		t.Fatalf("script: %d", got)
	}
	if got := post("/AuditEvent", event); got != http.StatusServiceUnavailable {
		t.Fatalf("scripted answer %d, want 503", got)
	}
	if got := post("/AuditEvent", event); got != http.StatusCreated {
		t.Fatalf("after the script: %d, want 201", got)
	}
	if got := post("/_double/script?status=503&count=-1", ""); got != http.StatusBadRequest {
		t.Fatalf("a negative count: %d, want 400", got)
	}

	if got := post("/_double/hold?on=true", ""); got != http.StatusNoContent {
		t.Fatalf("hold: %d", got)
	}
	done := make(chan int, 1)
	go func() { done <- post("/AuditEvent", event) }()
	for deadline := time.Now().Add(5 * time.Second); received().Held == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the request was never held")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := post("/_double/hold?on=false", ""); got != http.StatusNoContent {
		t.Fatalf("release: %d", got)
	}
	if got := <-done; got != http.StatusCreated {
		t.Fatalf("the held request answered %d, want 201 once released", got)
	}

	r := received()
	if r.Requests != 3 || r.Held != 1 || len(r.Events) != 2 {
		t.Fatalf("received %+v, want 3 requests, 1 held, 2 events", r)
	}
	if e := r.Events[0]; e.EventID != "ev-1" || len(e.Queries) != 1 || e.Queries[0] != "name=MARK" {
		t.Fatalf("event %+v, want event id ev-1 and query name=MARK", e)
	}
	if got := post("/_double/received", ""); got != http.StatusNotFound {
		t.Fatalf("POST /_double/received: %d, want the repository's 404", got)
	}
}
