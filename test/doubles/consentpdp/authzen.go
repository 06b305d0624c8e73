// Package authzen is an OpenID AuthZEN Authorization API 1.0 policy decision point for
// tests: a real HTTP server on loopback that answers the Access Evaluation API
// (`POST /access/v1/evaluation`: one Decision) and the Access Evaluations API
// (`POST /access/v1/evaluations`: top-level subject, action, resource and context as
// the defaults of each item of `evaluations`, one Decision per item in order, under
// the three `options.evaluations_semantic` values), and publishes its metadata at
// `/.well-known/authzen-configuration`.
//
// Its policy is a table of rules, first match wins, each on any of the subject, the
// action, the resource (for ferrofed a member), the patient (`context.patient`,
// system|value) and the purpose of use (`action.properties.purposeOfUse`); no rule is a
// denial. Beyond the knobs of test/double it can leave decisions out of the answer
// (a PEP must deny what is missing), answer under the pre-1.0 key `decisions`, and
// require a bearer token (401 without it). Errors are a text body carrying the marker,
// as the spec's error table says ("an error message string").
package consentpdp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/ferrofed/ferrofed/test/double"
)

// The API's paths.
const (
	EvaluationPath  = "/access/v1/evaluation"
	EvaluationsPath = "/access/v1/evaluations"
	MetadataPath    = "/.well-known/authzen-configuration"
)

// Rule is one line of the policy; an empty field matches anything.
type Rule struct {
	Subject  string // subject.id
	Action   string // action.name
	Resource string // resource.id (a member id)
	// Patient is context.patient as system|value.
	Patient string
	// Purpose is action.properties.purposeOfUse.
	Purpose string
	// Permit is the decision.
	Permit bool
	// Context is the decision's context (e.g. {"reason": "..."}), none when nil.
	Context map[string]any
}

// Options shape one PDP.
type Options struct {
	// Listen is the address; default "127.0.0.1:0".
	Listen string
	// Rules are the policy, first match wins; no match is a denial.
	Rules []Rule
	// Omit leaves the last Omit decisions out of every evaluations answer.
	Omit int
	// LegacyKey answers evaluations under "decisions" (an earlier draft's key).
	LegacyKey bool
	// Token, when set, is the bearer token every request must carry (else 401).
	Token string
	// Marker is put in every error and malformed body; default "AUTHZEN-BODY".
	Marker string
	// Knobs are the faults the PDP starts with (test/double).
	Knobs double.Knobs
}

// Server is one running PDP.
type Server struct {
	*double.Server
	// URL is the PDP's root (its policy_decision_point), e.g. "http://127.0.0.1:40123".
	URL string

	opts Options
	// rules are opts.Rules, replaced by SetRules.
	mu    sync.Mutex
	rules []Rule
}

// SetRules replaces the policy: a consent directive changed while a client pages.
func (s *Server) SetRules(rules []Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = rules
}

// Start starts a PDP for a test and stops it when the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := New(opts)
	if err != nil {
		tb.Fatalf("start authzen pdp: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// New starts a PDP; Close stops it.
func New(opts Options) (*Server, error) {
	if opts.Marker == "" {
		opts.Marker = "AUTHZEN-BODY"
	}
	if opts.Omit < 0 {
		return nil, fmt.Errorf("authzen: omit %d is negative", opts.Omit)
	}
	s := &Server{opts: opts, rules: opts.Rules}
	ds, err := double.New(double.Options{Listen: opts.Listen, Name: "authzen pdp", Marker: opts.Marker, MaxBodyBytes: 256 << 10, Knobs: opts.Knobs}, s)
	if err != nil {
		return nil, err
	}
	s.Server = ds
	s.URL = ds.URL()
	return s, nil
}

// Entity is a subject or a resource.
type Entity struct {
	Type       string         `json:"type"`
	ID         string         `json:"id"`
	Properties map[string]any `json:"properties,omitempty"`
}

// Action is what the subject would do.
type Action struct {
	Name       string         `json:"name"`
	Properties map[string]any `json:"properties,omitempty"`
}

// Evaluation is one access request, or the defaults of the items of evaluations.
type Evaluation struct {
	Subject  *Entity        `json:"subject,omitempty"`
	Action   *Action        `json:"action,omitempty"`
	Resource *Entity        `json:"resource,omitempty"`
	Context  map[string]any `json:"context,omitempty"`
}

// Decision is the answer to one Evaluation.
type Decision struct {
	Decision bool           `json:"decision"`
	Context  map[string]any `json:"context,omitempty"`
}

type request struct {
	Evaluation
	Evaluations []Evaluation   `json:"evaluations"`
	Options     map[string]any `json:"options"`
}

// Answer answers one request.
func (s *Server) Answer(r double.Request) double.Answer {
	a := s.answer(r)
	if id := r.Header.Get("X-Request-ID"); id != "" {
		if a.Header == nil {
			a.Header = http.Header{}
		}
		a.Header.Set("X-Request-ID", id)
	}
	return a
}

func (s *Server) answer(r double.Request) double.Answer {
	if s.opts.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.opts.Token {
		return s.Error(http.StatusUnauthorized, "no valid bearer token")
	}
	switch r.Path {
	case MetadataPath:
		if r.Method != http.MethodGet {
			return s.Error(http.StatusMethodNotAllowed, "metadata is a GET")
		}
		return s.json(map[string]any{
			"policy_decision_point":       s.URL,
			"access_evaluation_endpoint":  s.URL + EvaluationPath,
			"access_evaluations_endpoint": s.URL + EvaluationsPath,
		})
	case EvaluationPath, EvaluationsPath:
	default:
		return s.Error(http.StatusNotFound, "no API at "+r.Path)
	}
	if r.Method != http.MethodPost {
		return s.Error(http.StatusMethodNotAllowed, "the access evaluation APIs are a POST")
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return s.Error(http.StatusBadRequest, "Content-Type must be application/json")
	}
	var req request
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	if err := dec.Decode(&req); err != nil {
		return s.Error(http.StatusBadRequest, "the body is not a JSON request: "+err.Error())
	}
	if r.Path == EvaluationPath || len(req.Evaluations) == 0 {
		if err := complete(req.Evaluation, "request"); err != nil {
			return s.Error(http.StatusBadRequest, err.Error())
		}
		return s.json(s.Decide(req.Evaluation))
	}
	ds, err := s.Evaluate(req.Evaluation, req.Evaluations, req.Options)
	if err != nil {
		return s.Error(http.StatusBadRequest, err.Error())
	}
	ds = ds[:max(0, len(ds)-s.opts.Omit)]
	key := "evaluations"
	if s.opts.LegacyKey {
		key = "decisions"
	}
	return s.json(map[string]any{key: ds})
}

// Evaluate is the Access Evaluations API: each item with the defaults applied, in
// order, under the request's evaluation semantic.
func (s *Server) Evaluate(defaults Evaluation, items []Evaluation, options map[string]any) ([]Decision, error) {
	semantic := "execute_all"
	if v, ok := options["evaluations_semantic"]; ok {
		semantic, _ = v.(string)
	}
	switch semantic {
	case "execute_all", "deny_on_first_deny", "permit_on_first_permit":
	default:
		return nil, fmt.Errorf("options.evaluations_semantic %v is not execute_all, deny_on_first_deny or permit_on_first_permit", options["evaluations_semantic"])
	}
	out := make([]Decision, 0, len(items))
	for i, it := range items {
		e := withDefaults(defaults, it)
		if err := complete(e, fmt.Sprintf("evaluations[%d]", i)); err != nil {
			return nil, err
		}
		d := s.Decide(e)
		if !d.Decision && semantic == "deny_on_first_deny" && d.Context == nil {
			// The spec's example of this semantic names it as the reason.
			d.Context = map[string]any{"code": "200", "reason": "deny_on_first_deny"}
		}
		out = append(out, d)
		if (!d.Decision && semantic == "deny_on_first_deny") || (d.Decision && semantic == "permit_on_first_permit") {
			break
		}
	}
	return out, nil
}

// withDefaults is an item whose missing keys are the top-level ones: a key of the
// item replaces the default whole.
func withDefaults(d, it Evaluation) Evaluation {
	if it.Subject == nil {
		it.Subject = d.Subject
	}
	if it.Action == nil {
		it.Action = d.Action
	}
	if it.Resource == nil {
		it.Resource = d.Resource
	}
	if it.Context == nil {
		it.Context = d.Context
	}
	return it
}

// complete names the first required field an evaluation lacks.
func complete(e Evaluation, at string) error {
	switch {
	case e.Subject == nil:
		return fmt.Errorf("%s.subject is required", at)
	case e.Subject.Type == "" || e.Subject.ID == "":
		return fmt.Errorf("%s.subject needs a type and an id", at)
	case e.Action == nil:
		return fmt.Errorf("%s.action is required", at)
	case e.Action.Name == "":
		return fmt.Errorf("%s.action needs a name", at)
	case e.Resource == nil:
		return fmt.Errorf("%s.resource is required", at)
	case e.Resource.Type == "" || e.Resource.ID == "":
		return fmt.Errorf("%s.resource needs a type and an id", at)
	}
	return nil
}

// Decide is the policy's decision on one complete evaluation.
func (s *Server) Decide(e Evaluation) Decision {
	patient := ""
	if p, ok := e.Context["patient"].(map[string]any); ok {
		sys, _ := p["system"].(string)
		val, _ := p["value"].(string)
		patient = sys + "|" + val
	}
	purpose, _ := e.Action.Properties["purposeOfUse"].(string)
	s.mu.Lock()
	rules := s.rules
	s.mu.Unlock()
	for _, r := range rules {
		if match(r.Subject, e.Subject.ID) && match(r.Action, e.Action.Name) && match(r.Resource, e.Resource.ID) &&
			match(r.Patient, patient) && match(r.Purpose, purpose) {
			return Decision{Decision: r.Permit, Context: r.Context}
		}
	}
	return Decision{Decision: false}
}

func match(rule, v string) bool { return rule == "" || rule == v }

// Error is the PDP's error answer: a text message carrying the marker.
func (s *Server) Error(status int, text string) double.Answer {
	return double.Answer{Status: status, ContentType: "text/plain; charset=utf-8", Body: []byte(strings.TrimSpace(text) + " " + s.opts.Marker)}
}

// Malformed is a 200 whose body is an evaluations answer cut in the middle.
func (s *Server) Malformed() double.Answer {
	b, _ := json.Marshal(map[string]any{"evaluations": []Decision{{Decision: true}, {Decision: false}}})
	return double.Answer{Status: http.StatusOK, ContentType: "application/json", Body: double.Truncated(b, s.opts.Marker)}
}

func (s *Server) json(v any) double.Answer {
	b, err := json.Marshal(v)
	if err != nil {
		return s.Error(http.StatusInternalServerError, err.Error())
	}
	return double.Answer{Status: http.StatusOK, ContentType: "application/json", Body: b}
}
