// Package pixm is the PIXm Patient Identifier Cross-reference Consumer of the gateway
// (docs/bindings.md, "Resolver"): one IHE ITI-83 query, `GET [url]/Patient/$ihe-pix?
// sourceIdentifier=<system>|<value>&targetSystem=<domain>…`, with every member domain
// as a targetSystem in the one call, answered as each domain's identifier of the
// patient. It is the [resolver] (report key "resolver") and, with localizer.protocol
// = "pixm", the [localizer] ("localizer").
//
// A 404 and a 200 with no identifier are alike: the patient is not mapped (OpenCR
// answers the second where ITI-83 says the first). Each exchange records its BALP
// AuditEvent (IHE.PIXm.Query.Audit.Consumer: PatientQuery, subtype ITI-83) and sets
// the binding's state:
//
//	200 Parameters, any 4xx, a 200 not a Parameters or past the cap   up
//	5xx                                                             failing
//	refused, reset, past the budget                                 down
//	the exchange's audit record not stored                          failing (answer not used)
//	the budget spent before the request left                        unchanged
package pixm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
)

// Transaction is the IHE transaction of the exchange.
const (
	Transaction        = "ITI-83"
	TransactionDisplay = "Mobile Patient Identifier Cross-reference Query"
)

// Options build a Consumer.
type Options struct {
	// Key is the report key and the metrics' binding label: "resolver" or "localizer".
	Key string
	// Service is the table's url, budget, cap and credentials, its table's defaults
	// applied where it sets none.
	Service config.BindingService
	// Domains are the targetSystems of every query: each member's identifier_system.
	Domains []string
	// Recorder stores each exchange's AuditEvent; nil stores nothing.
	Recorder bindings.Recorder
	// Metrics counts the exchanges; nil counts nothing.
	Metrics *bindings.Metrics
	// Transport, when set, is the client's base transport (tests).
	Transport *http.Transport
	// CacheTTL, when positive, keeps each mapping that long per caller and patient
	// (resolver.cache_ttl_ms).
	CacheTTL time.Duration
	// Tracker is the dependency report the binding's state goes into, "unknown"
	// until its first exchange; required.
	Tracker *dependencies.Tracker
}

// Consumer asks one PIXm manager.
type Consumer struct {
	key  string
	base string
	// domains are the targetSystems, swapped whole by UseDomains.
	domains atomic.Pointer[domainSet]
	client  *bindings.Client
	rec     bindings.Recorder
	timeout time.Duration
	cache   *bindings.Cache[Mapping]
	tracker *dependencies.Tracker
}

// New builds the consumer; the credential files are read now.
func New(o Options) (*Consumer, error) {
	c, err := bindings.NewClient(bindings.ClientOptions{
		Name:             o.Key,
		Table:            o.Key, // "resolver" or "localizer", its table's name too
		Timeout:          o.Service.Timeout(),
		MaxResponseBytes: o.Service.BodyCap(),
		Credentials:      o.Service.Credentials,
		Metrics:          o.Metrics,
		Transport:        o.Transport,
	})
	if err != nil {
		return nil, err
	}
	cons := &Consumer{key: o.Key, base: strings.TrimSuffix(o.Service.URL, "/"), client: c, rec: o.Recorder,
		timeout: o.Service.Timeout(), cache: bindings.NewCache[Mapping](o.CacheTTL, nil), tracker: o.Tracker}
	cons.domains.Store(&domainSet{list: o.Domains})
	o.Tracker.SetService(o.Key, dependencies.Unknown, "")
	return cons, nil
}

// domainSet is one set of targetSystems; gen tells a mapping cached for one set from
// one cached for another.
type domainSet struct {
	list []string
	gen  uint64
}

// UseDomains makes domains the targetSystems of the queries from now on (the
// members of a registry read from a directory). A mapping cached for the domains
// before is not used again: it lacks the new ones.
func (c *Consumer) UseDomains(domains []string) {
	prev := c.domains.Load()
	c.domains.Store(&domainSet{list: slices.Clone(domains), gen: prev.gen + 1})
}

// Key is the consumer's report key.
func (c *Consumer) Key() string { return c.key }

// Invalidate drops every cached mapping (a PMIR merge or update).
func (c *Consumer) Invalidate() { c.cache.Clear() }

// Mapping is what a resolution found: each requested domain's identifier value of the
// patient (the first one, when the manager gives several in one domain). A domain
// absent from it holds no identifier of the patient.
type Mapping map[string]string

// Resolve asks the manager for system|value in every domain, in one call, for caller
// (who asks: a mapping cached for one caller is never another's). The error is a
// *bindings.Failure: no answer, an answer that is neither a Parameters nor a 404, or the
// exchange's audit record not stored. The mapping is shared with the cache: read it
// only.
func (c *Consumer) Resolve(ctx context.Context, caller, system, value string) (Mapping, error) {
	ds := c.domains.Load()
	key := bindings.CacheKey(caller, system, value, strconv.FormatUint(ds.gen, 10))
	if m, ok := c.cache.Get(key); ok {
		return m, nil
	}
	q := url.Values{"sourceIdentifier": {system + "|" + value}, "targetSystem": ds.list}
	query := q.Encode()
	req, err := http.NewRequest(http.MethodGet, c.base+"/Patient/$ihe-pix?"+query, nil)
	if err != nil {
		return nil, &bindings.Failure{Status: http.StatusBadGateway, Code: "transient", Diagnostics: "the " + c.key + " query could not be built"}
	}
	req.Header.Set("Accept", "application/fhir+json")
	start := time.Now()
	ex := c.client.Do(ctx, req)
	mapping, why := parse(ex)
	ev := bindings.QueryEvent{Key: c.key, Transaction: Transaction, TransactionDisplay: TransactionDisplay, Time: start,
		Query: []byte(query), PatientSystem: system, PatientValue: value}
	stored := bindings.Finish(ctx, ex, ev, c.rec, c.timeout, c.tracker)
	switch {
	case !stored:
		return nil, bindings.AuditFailure(c.key)
	case why != "":
		return nil, ex.FailureOf(c.key, why)
	}
	c.cache.Put(key, mapping)
	return mapping, nil
}

// parse reads a resolution's answer: the mapping, or why it is not one.
func parse(ex bindings.Exchange) (Mapping, string) {
	switch {
	case !ex.Answered || ex.TooLarge:
		return nil, "gave no usable answer"
	case ex.Status == http.StatusNotFound:
		return Mapping{}, ""
	case ex.Status == http.StatusBadRequest:
		// ITI-83: the sourceIdentifier's assigning authority is not recognized.
		return nil, "answered 400: it does not know the sourceIdentifier's domain"
	case ex.Status == http.StatusForbidden:
		// ITI-83: a targetSystem is not recognized; one member's domain breaks the
		// resolution of every search.
		return nil, "answered 403: it does not know one of the targetSystems (registry.members[].identifier_system)"
	case ex.Status != http.StatusOK:
		return nil, fmt.Sprintf("answered %d", ex.Status)
	}
	m, err := Parse(ex.Body)
	if err != nil {
		return nil, "answered with " + err.Error()
	}
	return m, ""
}

// Parse reads an ITI-83 Parameters: each targetIdentifier's system and value. A
// targetId alone (a reference at the manager, not a member's) maps nothing.
func Parse(body []byte) (Mapping, error) {
	var p struct {
		ResourceType string `json:"resourceType"`
		Parameter    []struct {
			Name            string `json:"name"`
			ValueIdentifier *struct {
				System string `json:"system"`
				Value  string `json:"value"`
			} `json:"valueIdentifier"`
		} `json:"parameter"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, errors.New("a body that is not JSON")
	}
	if p.ResourceType != "Parameters" {
		return nil, errors.New("a body that is not a Parameters")
	}
	m := Mapping{}
	for _, pa := range p.Parameter {
		if pa.Name != "targetIdentifier" || pa.ValueIdentifier == nil || pa.ValueIdentifier.System == "" || pa.ValueIdentifier.Value == "" {
			continue
		}
		if _, seen := m[pa.ValueIdentifier.System]; !seen {
			m[pa.ValueIdentifier.System] = pa.ValueIdentifier.Value
		}
	}
	return m, nil
}
