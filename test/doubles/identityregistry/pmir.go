// Package pmir is an IHE PMIR Patient Identity Registry for tests (docs/bindings.md): a
// real HTTP server on loopback that holds Subscriptions as ITI-94 says and can send
// an ITI-93 Mobile Patient Identity Feed message to a subscription's endpoint.
//
//   - POST [base]/Subscription validates the IHE.PMIR.Subscription.Request profile
//     (status requested, criteria Patient or Patient?_id|organization|identifier=X,
//     channel.type message, channel.endpoint and payload, contact system and value),
//     assigns an id and answers 201 with `Location: [base]/Subscription/<id>/_history/1`
//     and the stored Subscription; a profile violation is a 422 OperationOutcome.
//     The subscription turns active after Options.ActivateAfter (requested until then).
//   - GET, PUT and DELETE [base]/Subscription/<id> read, replace (status off or
//     requested) and delete it (204; 404 for an unknown id, 410 for a deleted one).
//   - GET [base]/Subscription?url=&criteria=&status= searches (url: the channel
//     endpoint, exactly; criteria and status: exactly), a searchset Bundle.
//
// It runs on test/double, whose knobs make it fail: on every request, or on one
// interaction with a route (CreateRoute, DeleteRoute: a create answered 422 or 500, a
// delete that hangs or answers 500). The Script shapes what no knob says, the
// registry's answers themselves: a create answered without Location (and without id),
// with a Location on another origin, or with a body that is no Subscription; a status
// forced on every subscription (error, off). Every error and malformed body carries
// the marker.
package identityregistry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
)

// Routes of the interactions, for test/double's Knobs.Route: a create's or a delete's
// knobs (double.Knobs{Route: CreateRoute, Status: 500}: every create answers 500 and
// stores nothing).
const (
	CreateRoute = "POST /fhir/Subscription"
	DeleteRoute = "DELETE /fhir/Subscription/{id}"
)

// Script shapes the registry's answers, per interaction.
type Script struct {
	// CreateWithoutLocation answers a create 201 without Location and without id in
	// the body (stored all the same: the caller cannot manage it).
	CreateWithoutLocation bool
	// CreateForeignLocation answers a create with a Location on another origin.
	CreateForeignLocation bool
	// CreateNoSubscription answers a create 201 with a Location and a body that is
	// well-formed FHIR but no Subscription (an OperationOutcome).
	CreateNoSubscription bool
	// ForceStatus, when set, is the status every stored subscription reads with
	// (error, off), and its error text carries the marker.
	ForceStatus string
}

// Options shape one registry.
type Options struct {
	// Listen is the address; default "127.0.0.1:0".
	Listen string
	// ActivateAfter is how long a created subscription stays requested before it is
	// active; 0 activates it at once.
	ActivateAfter time.Duration
	// Marker is put in every error and malformed body; default "PMIR-BODY".
	Marker string
	// Knobs are test/double's faults the registry starts with.
	Knobs double.Knobs
	// Script shapes the answers.
	Script Script
}

// Server is one running registry.
type Server struct {
	*double.Server
	// URL is the FHIR base, e.g. "http://127.0.0.1:40123/fhir".
	URL string

	opts   Options
	mu     sync.Mutex
	script Script
	subs   map[string]*stored
	next   int
}

type stored struct {
	sub     map[string]any
	created time.Time
	deleted bool
}

// Start starts a registry for a test and stops it when the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// New starts a registry; Close stops it.
func New(opts Options) (*Server, error) {
	if opts.Marker == "" {
		opts.Marker = "PMIR-BODY"
	}
	s := &Server{opts: opts, script: opts.Script, subs: map[string]*stored{}}
	d, err := double.New(double.Options{Listen: opts.Listen, Name: "pmir registry", Marker: opts.Marker, Knobs: opts.Knobs}, s)
	if err != nil {
		return nil, err
	}
	s.Server = d
	s.URL = d.URL() + "/fhir"
	return s, nil
}

// SetScript changes the script of the next requests.
func (s *Server) SetScript(sc Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = sc
}

// Subscription is one subscription the registry holds, as a test reads it.
type Subscription struct {
	ID, Status, Criteria, Endpoint string
}

// Subscriptions are those held (not deleted), by id order.
func (s *Server) Subscriptions() []Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Subscription
	for i := 1; i <= s.next; i++ {
		st, ok := s.subs[strconv.Itoa(i)]
		if !ok || st.deleted {
			continue
		}
		sub := s.view(st)
		ch, _ := sub["channel"].(map[string]any)
		ep, _ := ch["endpoint"].(string)
		out = append(out, Subscription{ID: sub["id"].(string), Status: sub["status"].(string), Criteria: fmt.Sprint(sub["criteria"]), Endpoint: ep})
	}
	return out
}

// Remove deletes a subscription behind the gateway's back (it vanished).
func (s *Server) Remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs, id)
}

// Count is how many requests of method the registry received on a path that
// starts with prefix (below the base: "/Subscription", "/Subscription/1").
func (s *Server) Count(method, prefix string) int {
	n := 0
	for _, r := range s.Log() {
		if r.Method == method && strings.HasPrefix(strings.TrimPrefix(r.Path, "/fhir"), prefix) {
			n++
		}
	}
	return n
}

// view is st's subscription as it reads now (status after activation, forced
// status); the caller holds mu.
func (s *Server) view(st *stored) map[string]any {
	out := map[string]any{}
	for k, v := range st.sub {
		out[k] = v
	}
	if out["status"] == "requested" && time.Since(st.created) >= s.opts.ActivateAfter {
		out["status"] = "active"
	}
	if s.script.ForceStatus != "" {
		out["status"] = s.script.ForceStatus
		if s.script.ForceStatus == "error" {
			out["error"] = "the registry could not deliver " + s.opts.Marker
		}
	}
	return out
}

// Answer answers one request (double.Handler).
func (s *Server) Answer(r double.Request) double.Answer {
	path, ok := strings.CutPrefix(r.Path, "/fhir/Subscription")
	if !ok {
		return s.Error(http.StatusNotFound, "no route "+r.Method+" "+r.Path)
	}
	id := strings.TrimPrefix(path, "/")
	switch {
	case path == "" && r.Method == http.MethodPost:
		return s.create(r)
	case path == "" && r.Method == http.MethodGet:
		return s.search(r)
	case id != "" && !strings.Contains(id, "/") && r.Method == http.MethodGet:
		return s.read(id)
	case id != "" && !strings.Contains(id, "/") && r.Method == http.MethodPut:
		return s.update(id, r)
	case id != "" && !strings.Contains(id, "/") && r.Method == http.MethodDelete:
		return s.remove(id)
	}
	return s.Error(http.StatusMethodNotAllowed, "no interaction "+r.Method+" "+r.Path)
}

// Error is a FHIR OperationOutcome of status (double.Handler).
func (s *Server) Error(status int, text string) double.Answer {
	code := "processing"
	switch status {
	case http.StatusNotFound, http.StatusGone:
		code = "not-found"
	case http.StatusUnprocessableEntity, http.StatusBadRequest:
		code = "invalid"
	}
	return double.OperationOutcome(status, "error", code, text, s.opts.Marker)
}

// Malformed is a 200 whose body is no FHIR JSON (double.Handler).
func (s *Server) Malformed() double.Answer {
	return double.Answer{Status: http.StatusOK, ContentType: "application/fhir+json", Body: []byte(`{"resourceType":"Subscription","status":` + s.opts.Marker)}
}

// Profile checks a create's body against IHE.PMIR.Subscription.Request; "" when it
// conforms.
func Profile(sub map[string]any) string {
	if sub["resourceType"] != "Subscription" {
		return "the body is not a Subscription"
	}
	if sub["status"] != "requested" {
		return "status must be requested"
	}
	criteria, _ := sub["criteria"].(string)
	if !criteriaOK(criteria) {
		return "criteria must be Patient, Patient?_id=X, Patient?organization=X or Patient?identifier=X"
	}
	ch, _ := sub["channel"].(map[string]any)
	if ch == nil || ch["type"] != "message" {
		return "channel.type must be message"
	}
	if ep, _ := ch["endpoint"].(string); !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
		return "channel.endpoint must be an http(s) URL"
	}
	if p, _ := ch["payload"].(string); p == "" {
		return "channel.payload is required"
	}
	contacts, _ := sub["contact"].([]any)
	if len(contacts) == 0 {
		return "contact is required"
	}
	c, _ := contacts[0].(map[string]any)
	if c["system"] == nil || c["value"] == nil {
		return "contact.system and contact.value are required"
	}
	return ""
}

func criteriaOK(c string) bool {
	if c == "Patient" {
		return true
	}
	q, ok := strings.CutPrefix(c, "Patient?")
	name, value, _ := strings.Cut(q, "=")
	return ok && value != "" && !strings.Contains(q, "&") && (name == "_id" || name == "organization" || name == "identifier")
}

func (s *Server) create(r double.Request) double.Answer {
	s.mu.Lock()
	sc := s.script
	s.mu.Unlock()
	var sub map[string]any
	if err := json.Unmarshal(r.Body, &sub); err != nil {
		return s.Error(http.StatusBadRequest, "the body is not JSON")
	}
	if why := Profile(sub); why != "" {
		return s.Error(http.StatusUnprocessableEntity, why)
	}
	s.mu.Lock()
	s.next++
	id := strconv.Itoa(s.next)
	sub["id"] = id
	sub["meta"] = map[string]any{"versionId": "1"}
	st := &stored{sub: sub, created: time.Now()}
	s.subs[id] = st
	view := s.view(st)
	s.mu.Unlock()
	a := double.FHIRJSON(http.StatusCreated, view)
	a.Header = http.Header{"Location": {s.URL + "/Subscription/" + id + "/_history/1"}}
	switch {
	case sc.CreateWithoutLocation:
		delete(view, "id")
		a = double.FHIRJSON(http.StatusCreated, view)
	case sc.CreateForeignLocation:
		a.Header.Set("Location", "http://registry.elsewhere.example/fhir/Subscription/"+id+"/_history/1")
	case sc.CreateNoSubscription:
		a.Body = []byte(`{"resourceType":"OperationOutcome","issue":[{"diagnostics":"` + s.opts.Marker + `"}]}`)
	}
	return a
}

func (s *Server) read(id string) double.Answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.subs[id]
	switch {
	case !ok:
		return s.Error(http.StatusNotFound, "no Subscription "+id)
	case st.deleted:
		return s.Error(http.StatusGone, "Subscription "+id+" was deleted")
	}
	return double.FHIRJSON(http.StatusOK, s.view(st))
}

func (s *Server) update(id string, r double.Request) double.Answer {
	var sub map[string]any
	if err := json.Unmarshal(r.Body, &sub); err != nil || sub["resourceType"] != "Subscription" {
		return s.Error(http.StatusBadRequest, "the body is not a Subscription")
	}
	if st := sub["status"]; st != "off" && st != "requested" {
		return s.Error(http.StatusUnprocessableEntity, "status must be off or requested")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.subs[id]
	if !ok || st.deleted {
		return s.Error(http.StatusNotFound, "no Subscription "+id)
	}
	sub["id"] = id
	st.sub, st.created = sub, time.Now()
	return double.FHIRJSON(http.StatusOK, s.view(st))
}

func (s *Server) remove(id string) double.Answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.subs[id]
	switch {
	case !ok:
		return s.Error(http.StatusNotFound, "no Subscription "+id)
	case st.deleted:
		return s.Error(http.StatusGone, "Subscription "+id+" was deleted")
	}
	st.deleted = true
	return double.Answer{Status: http.StatusNoContent}
}

func (s *Server) search(r double.Request) double.Answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	var entries []any
	for i := 1; i <= s.next; i++ {
		st, ok := s.subs[strconv.Itoa(i)]
		if !ok || st.deleted {
			continue
		}
		v := s.view(st)
		ch, _ := v["channel"].(map[string]any)
		if u := r.Query.Get("url"); u != "" && ch["endpoint"] != u {
			continue
		}
		if c := r.Query.Get("criteria"); c != "" && v["criteria"] != c {
			continue
		}
		if st := r.Query.Get("status"); st != "" && v["status"] != st {
			continue
		}
		entries = append(entries, map[string]any{"fullUrl": s.URL + "/Subscription/" + v["id"].(string), "resource": v, "search": map[string]string{"mode": "match"}})
	}
	return double.FHIRJSON(http.StatusOK, map[string]any{"resourceType": "Bundle", "type": "searchset", "total": len(entries), "entry": entries})
}

// Send posts an ITI-93 message (a Bundle, FHIR JSON) to endpoint with a bearer token
// (none when empty), as the registry's feed does, and returns the answer's status and
// body.
func Send(endpoint, token string, message []byte) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(message))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/fhir+json")
	req.Header.Set("Accept", "application/fhir+json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(res.Body)
	return res.StatusCode, b.Bytes(), err
}

// SendToSubscribers sends message to the endpoint of every active subscription.
func (s *Server) SendToSubscribers(token string, message []byte) (statuses []int, err error) {
	for _, sub := range s.Subscriptions() {
		if sub.Status != "active" {
			continue
		}
		st, _, err := Send(sub.Endpoint, token, message)
		if err != nil {
			return statuses, err
		}
		statuses = append(statuses, st)
	}
	return statuses, nil
}
