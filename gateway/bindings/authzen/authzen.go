// Package authzen is the consent pre-filter of the gateway ([consent], report key
// "consent", docs/bindings.md#consent): one OpenID AuthZEN Authorization API 1.0 Access
// Evaluations call per patient-scoped search, `POST [url]/access/v1/evaluations`, with
// the requester as subject, the query and consent.purpose_of_use as action, the
// patient and the searched type as context, and one evaluation per candidate member
// (resource type "member", id the member's). A member whose decision is missing (a
// short array) is denied; the pre-1.0 key "decisions" is read too.
//
// Each exchange records its BALP AuditEvent (PatientQuery, no IHE subtype) and sets
// the state:
//
//	200 with decisions, any 4xx, a 200 malformed or past the cap     up
//	5xx                                                             failing
//	refused, reset, past the budget                                 down
//	the exchange's audit record not stored                          failing (answer not used)
//	the budget spent before the request left                        unchanged
//
// Every failure fails closed: no member is asked, 503.
package authzen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
)

// Key is the consent pre-filter's report key.
const Key = "consent"

// EvaluationsPath is the Access Evaluations API under the PDP's url.
const EvaluationsPath = "/access/v1/evaluations"

// Options build a Client.
type Options struct {
	Service config.BindingService
	// PurposeOfUse is consent.purpose_of_use.
	PurposeOfUse string
	Recorder     bindings.Recorder
	Metrics      *bindings.Metrics
	// CacheTTL, when positive, keeps each set of decisions that long per caller,
	// patient, type and members (consent.cache_ttl_ms).
	CacheTTL time.Duration
	// Tracker is the dependency report the binding's state goes into, "unknown"
	// until its first exchange; required.
	Tracker *dependencies.Tracker
}

// Client asks one PDP.
type Client struct {
	url     string
	purpose string
	client  *bindings.Client
	rec     bindings.Recorder
	timeout time.Duration
	cache   *bindings.Cache[map[string]bool]
	tracker *dependencies.Tracker
}

// New builds the client; the credential files are read now.
func New(o Options) (*Client, error) {
	timeout := o.Service.Timeout()
	c, err := bindings.NewClient(bindings.ClientOptions{Name: Key, Table: "consent", Timeout: timeout,
		MaxResponseBytes: o.Service.BodyCap(), Credentials: o.Service.Credentials, Metrics: o.Metrics})
	if err != nil {
		return nil, err
	}
	o.Tracker.SetService(Key, dependencies.Unknown, "")
	return &Client{url: strings.TrimSuffix(o.Service.URL, "/") + EvaluationsPath, purpose: o.PurposeOfUse, client: c, rec: o.Recorder, timeout: timeout,
		cache: bindings.NewCache[map[string]bool](o.CacheTTL, nil), tracker: o.Tracker}, nil
}

// Invalidate drops every cached set of decisions (a PMIR merge or update).
func (c *Client) Invalidate() { c.cache.Clear() }

// Request is one consent question: may the requester's query about the patient reach
// each of the members?
type Request struct {
	// Issuer and Subject are the requester (the verified token's), Subject
	// "anonymous" without one.
	Issuer, Subject string
	// PatientSystem and PatientValue identify the patient.
	PatientSystem, PatientValue string
	// ResourceType is the searched type.
	ResourceType string
	// Members are the candidate members' ids, one evaluation each.
	Members []string
}

type entity struct {
	Type       string         `json:"type"`
	ID         string         `json:"id"`
	Properties map[string]any `json:"properties,omitempty"`
}

type action struct {
	Name       string         `json:"name"`
	Properties map[string]any `json:"properties,omitempty"`
}

type evaluation struct {
	Resource entity `json:"resource"`
}

type body struct {
	Subject     entity         `json:"subject"`
	Action      action         `json:"action"`
	Context     map[string]any `json:"context"`
	Evaluations []evaluation   `json:"evaluations"`
	Options     map[string]any `json:"options"`
}

// Body is the evaluations request of r, as sent.
func (c *Client) Body(r Request) ([]byte, error) {
	subject := entity{Type: "client", ID: r.Subject}
	if subject.ID == "" {
		subject.ID = "anonymous"
	}
	if r.Issuer != "" {
		subject.Properties = map[string]any{"iss": r.Issuer}
	}
	b := body{
		Subject: subject,
		Action:  action{Name: "query", Properties: map[string]any{"purposeOfUse": c.purpose}},
		Context: map[string]any{"patient": map[string]string{"system": r.PatientSystem, "value": r.PatientValue}, "resourceType": r.ResourceType},
		Options: map[string]any{"evaluations_semantic": "execute_all"},
	}
	for _, m := range r.Members {
		b.Evaluations = append(b.Evaluations, evaluation{Resource: entity{Type: "member", ID: m}})
	}
	return json.Marshal(b)
}

// Evaluate asks the PDP; permitted holds the members whose decision is true (shared
// with the cache: read it only). The error is a *bindings.Failure (503: every consent
// failure fails closed).
func (c *Client) Evaluate(ctx context.Context, r Request) (permitted map[string]bool, err error) {
	key := bindings.CacheKey(append([]string{r.Issuer, r.Subject, r.PatientSystem, r.PatientValue, r.ResourceType}, r.Members...)...)
	if p, ok := c.cache.Get(key); ok {
		return p, nil
	}
	payload, err := c.Body(r)
	if err != nil {
		return nil, closed("the consent question could not be built")
	}
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(payload))
	if err != nil {
		return nil, closed("the consent question could not be built")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	start := time.Now()
	ex := c.client.Do(ctx, req)
	decisions, why := parse(ex)
	ev := bindings.QueryEvent{Key: Key, Time: start, Query: payload, PatientSystem: r.PatientSystem, PatientValue: r.PatientValue}
	stored := bindings.Finish(ctx, ex, ev, c.rec, c.timeout, c.tracker)
	switch {
	case !stored:
		return nil, bindings.AuditFailure(Key)
	case why != "":
		f := ex.FailureOf("consent pre-filter", why)
		f.Status = http.StatusServiceUnavailable
		return nil, f
	}
	permitted = map[string]bool{}
	for i, m := range r.Members {
		// A missing decision is a denial.
		if i < len(decisions) && decisions[i] {
			permitted[m] = true
		}
	}
	c.cache.Put(key, permitted)
	return permitted, nil
}

func closed(why string) *bindings.Failure {
	return &bindings.Failure{Status: http.StatusServiceUnavailable, Code: "transient", Diagnostics: why}
}

func parse(ex bindings.Exchange) ([]bool, string) {
	switch {
	case !ex.Answered || ex.TooLarge:
		return nil, "gave no usable answer"
	case ex.Status != http.StatusOK:
		return nil, fmt.Sprintf("answered %d", ex.Status)
	}
	d, err := Decisions(ex.Body)
	if err != nil {
		return nil, "answered with " + err.Error()
	}
	return d, ""
}

// Decisions reads an evaluations answer: each item's decision, in order, under
// "evaluations" (1.0) or "decisions" (an earlier draft). A decision that is not a
// boolean is an error: the answer is malformed.
func Decisions(b []byte) ([]bool, error) {
	var a struct {
		Evaluations []struct {
			Decision *bool `json:"decision"`
		} `json:"evaluations"`
		Decisions []struct {
			Decision *bool `json:"decision"`
		} `json:"decisions"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, errors.New("a body that is not an evaluations answer")
	}
	items := a.Evaluations
	if items == nil {
		items = a.Decisions
	}
	if items == nil {
		return nil, errors.New("an answer without evaluations")
	}
	out := make([]bool, len(items))
	for i, it := range items {
		if it.Decision == nil {
			return nil, fmt.Errorf("evaluation %d without a decision", i)
		}
		out[i] = *it.Decision
	}
	return out, nil
}
