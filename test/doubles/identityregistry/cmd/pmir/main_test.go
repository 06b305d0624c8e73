package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/doubles/identityregistry"
)

// The control API reads the held subscriptions and makes a DELETE hang, as test/e2e
// does through the double's Service.
func TestControlAPI(t *testing.T) {
	reg := identityregistry.Start(t, identityregistry.Options{})
	ctl := httptest.NewServer(handler(reg))
	defer ctl.Close()
	state := func() State {
		t.Helper()
		res, err := http.Get(ctl.URL + "/_double/state")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var s State
		if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	hang := func(on string) int {
		t.Helper()
		res, err := http.Post(ctl.URL+"/_double/delete-hang?on="+on, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	const sub = `{"resourceType":"Subscription","status":"requested","reason":"e2e","criteria":"Patient",` +
		`"contact":[{"system":"email","value":"ops@example.org"}],` +
		`"channel":{"type":"message","endpoint":"http://gw.example/pmir/$process-message","payload":"application/fhir+json"}}`
	res, err := http.Post(reg.URL+"/Subscription", "application/fhir+json", strings.NewReader(sub))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("create: %s", res.Status)
	}
	s := state()
	if len(s.Subscriptions) != 1 || s.Creates != 1 || s.Subscriptions[0].Endpoint != "http://gw.example/pmir/$process-message" {
		t.Fatalf("state %+v, want the one subscription created", s)
	}
	id := s.Subscriptions[0].ID

	if got := hang("maybe"); got != http.StatusBadRequest {
		t.Fatalf("delete-hang?on=maybe: %d, want 400", got)
	}
	if got := hang("true"); got != http.StatusNoContent {
		t.Fatalf("delete-hang on: %d", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, reg.URL+"/Subscription/"+id, nil)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("a DELETE with delete-hang on answered %s", res.Status)
	}
	if got := hang("false"); got != http.StatusNoContent {
		t.Fatalf("delete-hang off: %d", got)
	}
	req, _ = http.NewRequest(http.MethodDelete, reg.URL+"/Subscription/"+id, nil)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("a DELETE with delete-hang off: %s, want 204", res.Status)
	}
	if s := state(); len(s.Subscriptions) != 0 || s.Deletes != 2 {
		t.Fatalf("state %+v, want no subscription and 2 deletes", s)
	}
}
