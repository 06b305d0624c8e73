// Package pdqm is the PDQm Patient Demographics Consumer of the gateway
// (docs/bindings.md, "Demographics"), the demographics step ([pdqm], report key
// "demographics"): one IHE ITI-78 query, `GET [url]/Patient?<the patient's
// criteria>&_count=5`, classified after the merged records are dropped as no match,
// one match, or an ambiguous match. Five entries are enough to tell one from several
// after merges; no next link is followed.
//
// Each exchange records its BALP AuditEvent (IHE.PDQm.Query.Audit.Consumer:
// PatientQuery, subtype ITI-78) and sets the state:
//
//	200 (no match and an ambiguous match included), 404 (Case 4), any other 4xx,
//	a 200 that is no searchset or past the cap                        up
//	5xx                                                             failing
//	refused, reset, past the budget                                 down
//	the exchange's audit record not stored                          failing (answer not used)
//	the budget spent before the request left                        unchanged
package pdqm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
)

// Key is the report key of the demographics step.
const Key = "demographics"

// The exchange's IHE transaction, and the page it asks for.
const (
	Transaction        = "ITI-78"
	TransactionDisplay = "Mobile Patient Demographics Query"
	Count              = 5
)

// Options build a Consumer.
type Options struct {
	Service  config.BindingService
	Recorder bindings.Recorder
	Metrics  *bindings.Metrics
	// Tracker is the dependency report the binding's state goes into, "unknown"
	// until its first exchange; required.
	Tracker *dependencies.Tracker
}

// Consumer asks one PDQm Supplier.
type Consumer struct {
	base    string
	client  *bindings.Client
	rec     bindings.Recorder
	timeout time.Duration
	tracker *dependencies.Tracker
}

// New builds the consumer; the credential files are read now.
func New(o Options) (*Consumer, error) {
	timeout := o.Service.Timeout()
	c, err := bindings.NewClient(bindings.ClientOptions{Name: Key, Table: "pdqm", Timeout: timeout,
		MaxResponseBytes: o.Service.BodyCap(), Credentials: o.Service.Credentials, Metrics: o.Metrics})
	if err != nil {
		return nil, err
	}
	o.Tracker.SetService(Key, dependencies.Unknown, "")
	return &Consumer{base: strings.TrimSuffix(o.Service.URL, "/"), client: c, rec: o.Recorder, timeout: timeout, tracker: o.Tracker}, nil
}

// Criteria are what the patient is looked up by: an identifier, or the supplier's own
// logical id.
type Criteria struct {
	System, Value string
	ID            string
}

// Kind is what a lookup came to.
type Kind int

// The kinds of a lookup's result.
const (
	NoMatch Kind = iota
	OneMatch
	Ambiguous
)

// Identifier is one identifier of the matched patient.
type Identifier struct {
	System string `json:"system"`
	Value  string `json:"value"`
}

// Result is a lookup's classification; Identifiers are the match's (OneMatch only).
type Result struct {
	Kind        Kind
	Identifiers []Identifier
}

// Lookup asks the supplier for the patient. The error is a *bindings.Failure.
func (c *Consumer) Lookup(ctx context.Context, cr Criteria) (Result, error) {
	q := url.Values{"_count": {fmt.Sprint(Count)}}
	if cr.ID != "" {
		q.Set("_id", cr.ID)
	} else {
		q.Set("identifier", cr.System+"|"+cr.Value)
	}
	query := q.Encode()
	req, err := http.NewRequest(http.MethodGet, c.base+"/Patient?"+query, nil)
	if err != nil {
		return Result{}, &bindings.Failure{Status: http.StatusBadGateway, Code: "transient", Diagnostics: "the demographics query could not be built"}
	}
	req.Header.Set("Accept", "application/fhir+json")
	start := time.Now()
	ex := c.client.Do(ctx, req)
	res, why := parse(ex)
	ev := bindings.QueryEvent{Key: Key, Transaction: Transaction, TransactionDisplay: TransactionDisplay, Time: start,
		Query: []byte(query), PatientSystem: cr.System, PatientValue: cr.Value}
	if cr.ID != "" {
		ev.PatientValue = "Patient/" + cr.ID
	}
	stored := bindings.Finish(ctx, ex, ev, c.rec, c.timeout, c.tracker)
	switch {
	case !stored:
		return Result{}, bindings.AuditFailure(Key)
	case why != "":
		return Result{}, ex.FailureOf(Key, why)
	}
	return res, nil
}

func parse(ex bindings.Exchange) (Result, string) {
	switch {
	case !ex.Answered || ex.TooLarge:
		return Result{}, "gave no usable answer"
	case ex.Status == http.StatusNotFound:
		// Case 4: the supplier is no authority for the domain; no match.
		return Result{Kind: NoMatch}, ""
	case ex.Status != http.StatusOK:
		return Result{}, fmt.Sprintf("answered %d", ex.Status)
	}
	r, err := Classify(ex.Body)
	if err != nil {
		return Result{}, "answered with " + err.Error()
	}
	return r, ""
}

// Classify reads an ITI-78 searchset: the Patient entries of search.mode match (or
// none), less each record merged into another of the set (active false and a
// replaced-by link to a Patient in the set); then 0 is no match, 1 one match, 2 or
// more ambiguous.
func Classify(body []byte) (Result, error) {
	var b struct {
		ResourceType string `json:"resourceType"`
		Type         string `json:"type"`
		Entry        []struct {
			Resource struct {
				ResourceType string       `json:"resourceType"`
				ID           string       `json:"id"`
				Active       *bool        `json:"active"`
				Identifier   []Identifier `json:"identifier"`
				Link         []struct {
					Other struct {
						Reference string `json:"reference"`
					} `json:"other"`
					Type string `json:"type"`
				} `json:"link"`
			} `json:"resource"`
			Search struct {
				Mode string `json:"mode"`
			} `json:"search"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return Result{}, errors.New("a body that is not JSON")
	}
	if b.ResourceType != "Bundle" || b.Type != "searchset" {
		return Result{}, errors.New("a body that is not a searchset Bundle")
	}
	ids := map[string]bool{}
	for _, e := range b.Entry {
		if e.Resource.ResourceType == "Patient" && (e.Search.Mode == "" || e.Search.Mode == "match") {
			ids[e.Resource.ID] = true
		}
	}
	var kept []Identifier
	n := 0
	for _, e := range b.Entry {
		r := e.Resource
		if r.ResourceType != "Patient" || (e.Search.Mode != "" && e.Search.Mode != "match") {
			continue
		}
		merged := false
		if r.Active != nil && !*r.Active {
			for _, l := range r.Link {
				if l.Type == "replaced-by" && ids[strings.TrimPrefix(l.Other.Reference, "Patient/")] {
					merged = true
				}
			}
		}
		if merged {
			continue
		}
		n++
		kept = r.Identifier
	}
	switch n {
	case 0:
		return Result{Kind: NoMatch}, nil
	case 1:
		var out []Identifier
		for _, id := range kept {
			if id.System != "" && id.Value != "" {
				out = append(out, id)
			}
		}
		return Result{Kind: OneMatch, Identifiers: out}, nil
	}
	return Result{Kind: Ambiguous}, nil
}
