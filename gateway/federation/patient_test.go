package federation_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/consentpdp"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// A patient-scoped search is admitted by the member-call queue
// (limits.max_queued_member_calls) before its flow spends a binding call: a search
// the queue sheds asks no binding and no member and changes no state; a search it
// admits gives back, once planned, the calls of the members the flow dropped, and the
// rest once answered.
func TestAPatientScopedSearchIsAdmittedBeforeAnyBindingIsAsked(t *testing.T) {
	pdp := consentpdp.Start(t, consentpdp.Options{Rules: []consentpdp.Rule{{Resource: "node-a", Permit: true}}})
	h := newHarness(t, harnessOptions{tables: fmt.Sprintf("[consent]\nurl = %q\n", pdp.URL)},
		node{id: "node-a", opts: members.Options{Knobs: double.Knobs{Delay: 300 * time.Millisecond}}}, node{id: "node-b"}, node{id: "node-c"})
	lim := h.Assembled.Federation().Limiter()
	const search = "/fhir/Observation?patient.identifier=urn:oid:1.2|MRN-1"

	// The queue is full: other requests' calls are still to be made.
	release, _ := lim.Admit(int(lim.MaxQueued()))
	res, body := h.get(search)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != federation.ShedRetryAfter ||
		!strings.Contains(string(body), "limits.max_queued_member_calls") {
		t.Fatalf("a search past the queue answered %d: %s", res.StatusCode, body)
	}
	if n := pdp.Requests(); n != 0 {
		t.Fatalf("a shed search asked the consent pre-filter %d times", n)
	}
	for id, m := range h.members {
		if m.Requests() != 0 {
			t.Fatalf("a shed search asked member %s", id)
		}
	}
	_, raw := h.report()
	var report map[string]any
	if err := json.Unmarshal(raw, &report); err != nil || report["consent"] != "unknown" {
		t.Fatalf("a shed search changed a state: %s", raw)
	}

	// An empty queue admits it; consent permits node-a alone, and while node-a is
	// asked the search holds one call of the queue, not three.
	release()
	during := make(chan int64, 1)
	go func() {
		deadline := time.Now().Add(5 * time.Second)
		for h.members["node-a"].Requests() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		during <- lim.Queued()
	}()
	res, body = h.get(search)
	if q := <-during; q != 1 {
		t.Fatalf("the search held %d calls of the queue while its one member was asked, want 1", q)
	}
	if res.StatusCode != http.StatusOK || pdp.Requests() != 1 || h.members["node-a"].Requests() != 1 ||
		h.members["node-b"].Requests() != 0 || h.members["node-c"].Requests() != 0 {
		t.Fatalf("answered %d, the PDP asked %d times: %s", res.StatusCode, pdp.Requests(), body)
	}
	if q := lim.Queued(); q != 0 {
		t.Fatalf("%d member calls still queued after the search was answered", q)
	}
	// The failing PDP answers 503 without a member call: every slot is given back too.
	if err := pdp.SetKnobs(double.Knobs{Status: 500}); err != nil {
		t.Fatal(err)
	}
	if res, body := h.get(search); res.StatusCode != http.StatusServiceUnavailable || strings.Contains(string(body), "max_queued") {
		t.Fatalf("a failing PDP answered %d: %s", res.StatusCode, body)
	}
	if q := lim.Queued(); q != 0 {
		t.Fatalf("%d member calls still queued after a search the flow answered", q)
	}
}
