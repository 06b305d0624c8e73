package pmir

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/fhir"
)

// Subscription is what the gateway reads of an R4 Subscription.
type Subscription struct {
	ResourceType string `json:"resourceType"`
	ID           string `json:"id,omitempty"`
	Status       string `json:"status"`
	Contact      []struct {
		System string `json:"system,omitempty"`
		Value  string `json:"value,omitempty"`
	} `json:"contact,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Criteria string `json:"criteria"`
	Error    string `json:"error,omitempty"`
	Channel  struct {
		Type     string `json:"type"`
		Endpoint string `json:"endpoint,omitempty"`
		Payload  string `json:"payload,omitempty"`
	} `json:"channel"`
}

// Payload is the channel's payload: the feed's messages as FHIR JSON.
const Payload = "application/fhir+json"

// request is the ITI-94 create body (IHE.PMIR.Subscription.Request).
func (f *Feed) request() []byte {
	b, _ := json.Marshal(map[string]any{
		"resourceType": "Subscription",
		"status":       "requested",
		// IHE.PMIR.Subscription requires a contact: the endpoint is where the gateway
		// answers.
		"contact":  []map[string]string{{"system": "url", "value": f.cfg.Endpoint}},
		"reason":   "ferrofed gateway: invalidate its resolver and consent caches on patient merges and updates",
		"criteria": f.cfg.Criteria,
		"channel":  map[string]string{"type": "message", "endpoint": f.cfg.Endpoint, "payload": Payload},
	})
	return b
}

// ours reports whether s is a subscription of this gateway: the same criteria and
// channel, compared exactly (R4's criteria search matches by prefix).
func (f *Feed) ours(s Subscription) bool {
	return s.ResourceType == "Subscription" && s.Criteria == f.cfg.Criteria &&
		s.Channel.Type == "message" && s.Channel.Endpoint == f.cfg.Endpoint
}

// statusState is the state a subscription's status gives: requested and active are
// up, error and off refused, anything else breaks ITI-94.
func statusState(status string) (dependencies.State, string) {
	switch status {
	case "requested", "active":
		return dependencies.Up, ""
	case "error", "off":
		return dependencies.Failing, FaultRefused
	}
	return dependencies.Failing, FaultMalformed
}

// answerState is the state of an exchange that did not give a usable 2xx: no answer
// is down, 4xx and 5xx refused, anything else (3xx, past the cap) malformed. ok is
// true for a 2xx within the cap: its body decides.
func answerState(ex bindings.Exchange) (s dependencies.State, fault string, ok bool) {
	switch {
	case !ex.Answered:
		return dependencies.Down, FaultUnreachable, false
	case ex.Status >= 400:
		return dependencies.Failing, FaultRefused, false
	case ex.Status/100 != 2 || ex.TooLarge:
		return dependencies.Failing, FaultMalformed, false
	}
	return "", "", true
}

// validID reports whether id is a FHIR id the gateway puts in a URL: "." and ".."
// match FHIR's pattern but would name another path.
func validID(id string) bool { return fhir.ValidID(id) && strings.Trim(id, ".") != "" }

// adopt searches for subscriptions of this gateway a previous instance left: the
// first in requested or active is held, every other is deleted. It returns false
// when the check cannot go on (no answer, a 5xx, the audit record not stored); a 4xx
// means the registry does not support the search, and the gateway creates.
func (f *Feed) adopt(ctx context.Context) bool {
	q := url.Values{"url": {f.cfg.Endpoint}, "criteria": {f.cfg.Criteria}}
	ex, stored := f.exchange(ctx, http.MethodGet, f.base+"/Subscription?"+q.Encode(), nil, interactionSearch, "Subscription")
	switch {
	case !ex.Sent:
		return false
	case !stored:
		f.set(dependencies.Failing, FaultAuditFailed)
		return false
	case !ex.Answered:
		f.set(dependencies.Down, FaultUnreachable)
		return false
	case ex.Status >= 500:
		f.set(dependencies.Failing, FaultRefused)
		return false
	}
	f.mu.Lock()
	f.searched = true
	f.mu.Unlock()
	if ex.Status != http.StatusOK || ex.TooLarge {
		f.log.V(1).Info("The PMIR registry answered no search for subscriptions: the gateway creates its own", "status", ex.Status)
		return true
	}
	var b struct {
		ResourceType string `json:"resourceType"`
		Entry        []struct {
			Resource json.RawMessage `json:"resource"`
		} `json:"entry"`
	}
	if json.Unmarshal(ex.Body, &b) != nil || b.ResourceType != "Bundle" {
		return true
	}
	keep := ""
	for _, e := range b.Entry {
		var s Subscription
		if json.Unmarshal(e.Resource, &s) != nil || !f.ours(s) || !validID(s.ID) {
			continue
		}
		u := f.base + "/Subscription/" + s.ID
		if st, _ := statusState(s.Status); st == dependencies.Up && keep == "" && f.current() == "" {
			keep = s.ID
			f.hold(u, s.ID)
			f.log.Info("Found a PMIR subscription a previous instance left: reused it", "subscription", s.ID, "status", s.Status)
			continue
		}
		if u == f.current() {
			continue
		}
		dx, _ := f.exchange(ctx, http.MethodDelete, u, nil, interactionDelete, "Subscription/"+s.ID)
		f.log.Info("Found a PMIR subscription a previous instance left: deleted it", "subscription", s.ID, "status", s.Status, "deleteStatus", dx.Status)
	}
	return true
}

// create asks the registry for a subscription and holds it when the answer names one.
func (f *Feed) create(ctx context.Context) {
	ex, stored := f.exchange(ctx, http.MethodPost, f.base+"/Subscription", f.request(), interactionCreate, "Subscription")
	if !ex.Sent {
		return
	}
	held, id, state, fault := f.created(ex)
	if held != "" {
		f.hold(held, id)
		f.log.Info("Created the PMIR subscription", "subscription", id)
	}
	if held == "" && ex.Answered && ex.Status/100 == 2 {
		// A create answered 2xx that names nothing the gateway can read or delete: it
		// may have created one all the same, so it is not repeated (each would leave
		// one more behind); later checks search for it.
		f.mu.Lock()
		f.unmanageable, f.searched = true, false
		f.mu.Unlock()
		f.log.Error(nil, "Warning: the PMIR registry answered a create with no subscription the gateway can read or delete (no Location and no id, a Location on another origin, or a body that is not the Subscription); it is not created again, later checks search for it",
			"fault", fault)
	}
	if !stored {
		state, fault = dependencies.Failing, FaultAuditFailed
	}
	f.set(state, fault)
}

// created reads a create's answer: the subscription's URL and id when it names one
// the gateway can manage, and the state.
func (f *Feed) created(ex bindings.Exchange) (held, id string, s dependencies.State, fault string) {
	if s, fault, ok := answerState(ex); !ok {
		return "", "", s, fault
	}
	var sub Subscription
	body := bytes.TrimSpace(ex.Body)
	hasBody := len(body) > 0
	if hasBody && json.Unmarshal(body, &sub) != nil {
		sub = Subscription{ResourceType: "not JSON"}
	}
	if loc := ex.Header.Get("Location"); loc != "" {
		held, id = f.locate(loc)
	} else if sub.ResourceType == "Subscription" && validID(sub.ID) {
		held, id = f.base+"/Subscription/"+sub.ID, sub.ID
	}
	switch {
	case hasBody && (!f.ours(sub) || id != "" && sub.ID != "" && sub.ID != id):
		// Not our Subscription: whatever the Location says, the answer breaks ITI-94.
		return held, id, dependencies.Failing, FaultMalformed
	case held == "":
		return "", "", dependencies.Failing, FaultUnmanageable
	case !hasBody:
		// Prefer: return=minimal, or a registry that sends none: the Location names it,
		// the next check reads it.
		return held, id, dependencies.Up, ""
	}
	s, fault = statusState(sub.Status)
	return held, id, s, fault
}

// locate reads a create's Location: the subscription's URL (its _history part cut)
// and id, or "" when it is on another origin or names no Subscription.
func (f *Feed) locate(loc string) (held, id string) {
	ref, err := url.Parse(loc)
	if err != nil {
		return "", ""
	}
	created, err := url.Parse(f.base + "/Subscription")
	if err != nil {
		return "", ""
	}
	u := created.ResolveReference(ref)
	if u.Scheme != f.origin.Scheme || u.Host != f.origin.Host || u.User != nil {
		return "", ""
	}
	path, _, _ := strings.Cut(u.Path, "/_history/")
	rest, ok := strings.CutPrefix(path, created.Path+"/")
	if !ok || !validID(rest) {
		return "", ""
	}
	return f.base + "/Subscription/" + rest, rest
}

// check reads the subscription held; vanished is true when it is gone (404, 410):
// the caller creates a new one, whose state is then the check's.
func (f *Feed) check(ctx context.Context, held string) (vanished bool) {
	id := held[strings.LastIndex(held, "/")+1:]
	ex, stored := f.exchange(ctx, http.MethodGet, held, nil, interactionRead, "Subscription/"+id)
	if !ex.Sent {
		return false
	}
	if ex.Answered && (ex.Status == http.StatusNotFound || ex.Status == http.StatusGone) && stored {
		f.log.Info("The PMIR subscription vanished at the registry: creating it again", "subscription", id, "status", ex.Status)
		f.hold("", "")
		return true
	}
	s, fault, ok := answerState(ex)
	if ok {
		var sub Subscription
		if json.Unmarshal(ex.Body, &sub) != nil || !f.ours(sub) || sub.ID != "" && sub.ID != id {
			s, fault = dependencies.Failing, FaultMalformed
		} else {
			s, fault = statusState(sub.Status)
		}
	}
	if !stored {
		s, fault = dependencies.Failing, FaultAuditFailed
	}
	f.set(s, fault)
	return false
}

// exchange sends one request to the registry within ctx and records its AuditEvent;
// stored is false when the record could not be stored (the exchange is then failing
// and its answer not used). An exchange that never left records nothing.
func (f *Feed) exchange(ctx context.Context, method, u string, body []byte, interaction, what string) (bindings.Exchange, bool) {
	var rd *bytes.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	var req *http.Request
	var err error
	if rd != nil {
		req, err = http.NewRequest(method, u, rd)
	} else {
		req, err = http.NewRequest(method, u, nil)
	}
	if err != nil {
		return bindings.Exchange{Err: err}, true
	}
	req.Header.Set("Accept", "application/fhir+json")
	if body != nil {
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	start := time.Now()
	ex := f.client.Do(ctx, req)
	if !ex.Sent {
		return ex, true
	}
	ev := restEvent(interaction, TransactionSubscribe, start, what)
	ev.Outcome = ex.AuditOutcome()
	if interaction == interactionSearch {
		_, query, _ := strings.Cut(u, "?")
		ev.Query = []byte(query)
	}
	return ex, f.record(ctx, ev)
}

// record stores one AuditEvent within pmir.timeout_ms, whatever ctx says.
func (f *Feed) record(ctx context.Context, e bindings.RESTEvent) bool {
	if f.rec == nil {
		return true
	}
	ev, err := e.Event()
	if err != nil {
		return false
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.Timeout())
	defer cancel()
	if err := f.rec.Record(rctx, ev); err != nil {
		f.log.Error(err, "The audit record of a PMIR exchange could not be stored", "interaction", e.Interaction)
		return false
	}
	return true
}
