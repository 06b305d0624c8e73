// Package patient is the flow of a patient-scoped search
// (docs/bindings.md#the-patient-scoped-flow): for a search that names a patient
// (patient=, subject=, patient.identifier=, or Patient?identifier=), the configured
// bindings run before the fan-out, in the order demographics → resolver → consent →
// localizer, each within its own budget and all within the request's, and the result
// is a plan: which members are asked, each with its own local patient reference, and
// which are excluded, by which step. A member a step drops is never contacted.
//
// # Caches
//
// resolver.cache_ttl_ms and consent.cache_ttl_ms (both 0, off, by default) keep a
// mapping, and a set of decisions, for that long. A cached answer is keyed by the
// caller (the verified token's issuer and subject, or anonymous) and the patient, and
// the decisions by the searched type and the members asked about as well, so that no
// answer is ever reused for another patient or another caller. Failures are never
// kept. A search answered from a cache makes no exchange: it records no exchange
// event and changes no state.
//
// The federation calls Plan for the first page of every search when a flow is
// configured (Options.Patient); next pages carry each member's own query in their
// token and ask no binding again.
//
// # Steps built so far
//
//	demographics  [pdqm], PDQm ITI-78 (gateway/bindings/pdqm): the patient looked up
//	          by the client's identifier or id; no match or an ambiguous one asks no
//	          member (every member excluded_by: demographics, and the Bundle carries an
//	          OperationOutcome entry not-found / multiple-matches). A patient named by
//	          id is resolved with the match's first identifier. Fails closed.
//	resolver  [resolver], PIXm ITI-83 (gateway/bindings/pixm): the patient's
//	          identifier in every member's registry.members[].identifier_system; a
//	          member without one is excluded (excluded_by: resolver), a mapped member is
//	          asked with Patient/<its value>. Fails closed: no answer, a bad answer
//	          or an audit record not stored asks no member (502, 504, 503).
//	consent   [consent], AuthZEN 1.0 evaluations (gateway/bindings/authzen): one
//	          evaluation per member still a candidate, the requester as subject,
//	          consent.purpose_of_use, the patient's identifier; a denied (or missing)
//	          decision excludes the member (excluded_by: consent). Fails closed, 503.
//	localizer [localizer], XCPD ITI-55 (gateway/bindings/xcpd) or PIXm: which of the
//	          permitted members hold the patient (home_community_id among the answer's
//	          custodians, or identifier_system among its identifiers); the others are
//	          excluded (excluded_by: localizer). Fails open: on any failure every
//	          permitted member is asked. It gets at most half of what is left of the
//	          request's budget, so that the fan-out keeps the other half.
package patient

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/bindings/authzen"
	"github.com/ferrofed/ferrofed/gateway/bindings/pdqm"
	"github.com/ferrofed/ferrofed/gateway/bindings/pixm"
	"github.com/ferrofed/ferrofed/gateway/bindings/xcpd"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/scrub"
	"github.com/ferrofed/ferrofed/gateway/tracing"
)

// The steps, as excluded_by names them.
const (
	ByDemographics = "demographics"
	ByResolver     = "resolver"
	ByConsent      = "consent"
	ByLocalizer    = "localizer"
)

// Options build a Flow.
type Options struct {
	// Recorder stores the AuditEvent of every binding exchange (the audit trail).
	Recorder bindings.Recorder
	// Metrics counts every binding exchange.
	Metrics *bindings.Metrics
	// Tracker is the dependency report every configured binding's state goes into,
	// "unknown" until its first exchange; required.
	Tracker *dependencies.Tracker
	// Logger says why the localizer failed open (never its body); discarded when unset.
	Logger logr.Logger
}

// Flow runs the configured patient-scoped bindings.
type Flow struct {
	demographics *pdqm.Consumer
	resolver     *pixm.Consumer
	consent      *authzen.Client
	// localizer is one of xcpdLocalizer and pixmLocalizer, nil without [localizer].
	xcpdLocalizer *xcpd.Client
	pixmLocalizer *pixm.Consumer
	// keys are the members' identifier_system and home_community_id: read at start
	// from [[registry.members]], swapped by UseMembers for a directory's registry.
	keys atomic.Pointer[memberKeys]
	log  logr.Logger
	// consentTTL is consent.cache_ttl_ms: how long a decision may be relied on.
	consentTTL time.Duration
}

// memberKeys are each member's identifier_system (domain) and home_community_id
// (community), by member id.
type memberKeys struct {
	domain, community map[string]string
	domains           []string
	// known are the members' ids.
	known map[string]bool
}

func keysOf(members []config.Member) *memberKeys {
	k := &memberKeys{domain: map[string]string{}, community: map[string]string{}, known: map[string]bool{}}
	for _, m := range members {
		k.known[m.ID] = true
		if m.IdentifierSystem != "" {
			k.domain[m.ID] = m.IdentifierSystem
			k.domains = append(k.domains, m.IdentifierSystem)
		}
		if m.HomeCommunityID != "" {
			k.community[m.ID] = m.HomeCommunityID
		}
	}
	return k
}

// UseMembers makes members' identifier_system and home_community_id the ones the
// flow maps and localizes by from now on: the registry read from a directory
// ([registry.mcsd]), each accepted registry in turn. The resolver and a PIXm
// localizer then ask for these domains, and a mapping cached for the domains before
// is not used again.
func (f *Flow) UseMembers(members []config.Member) {
	k := keysOf(members)
	if f.resolver != nil {
		f.resolver.UseDomains(k.domains)
	}
	if f.pixmLocalizer != nil {
		f.pixmLocalizer.UseDomains(k.domains)
	}
	f.keys.Store(k)
}

// New builds the flow of cfg; nil (and no error) when no patient-scoped binding is
// configured. The credential files are read now.
func New(cfg *config.Config, o Options) (*Flow, error) {
	if cfg.Resolver == nil && cfg.PDQm == nil && cfg.Consent == nil && cfg.Localizer == nil {
		return nil, nil
	}
	f := &Flow{log: o.Logger}
	if f.log.GetSink() == nil {
		f.log = logr.Discard()
	}
	keys := keysOf(cfg.Registry.Members)
	f.keys.Store(keys)
	domains := keys.domains
	if cfg.PDQm != nil {
		d, err := pdqm.New(pdqm.Options{Service: cfg.PDQm.BindingService, Recorder: o.Recorder, Metrics: o.Metrics, Tracker: o.Tracker})
		if err != nil {
			return nil, err
		}
		f.demographics = d
	}
	if cfg.Consent != nil {
		c, err := authzen.New(authzen.Options{Service: cfg.Consent.BindingService, PurposeOfUse: cfg.Consent.PurposeOfUse,
			Recorder: o.Recorder, Metrics: o.Metrics, Tracker: o.Tracker, CacheTTL: cfg.Consent.CacheTTL()})
		if err != nil {
			return nil, err
		}
		f.consent = c
		f.consentTTL = cfg.Consent.CacheTTL()
	}
	if l := cfg.Localizer; l != nil {
		var err error
		if l.Protocol == config.LocalizerPIXm {
			f.pixmLocalizer, err = pixm.New(pixm.Options{Key: ByLocalizer, Service: l.BindingService,
				Domains: domains, Recorder: o.Recorder, Metrics: o.Metrics, Tracker: o.Tracker})
		} else {
			f.xcpdLocalizer, err = xcpd.New(xcpd.Options{Service: l.BindingService, Recorder: o.Recorder, Metrics: o.Metrics, Tracker: o.Tracker})
		}
		if err != nil {
			return nil, err
		}
	}
	if cfg.Resolver == nil {
		return f, nil
	}
	r, err := pixm.New(pixm.Options{Key: ByResolver, Service: cfg.Resolver.BindingService,
		Domains: domains, Recorder: o.Recorder, Metrics: o.Metrics, Tracker: o.Tracker, CacheTTL: cfg.Resolver.CacheTTL()})
	if err != nil {
		return nil, err
	}
	f.resolver = r
	return f, nil
}

// InvalidateCaches drops every cached resolver mapping and consent decision: the PMIR
// identity feed calls it for each message that merges, updates or deletes a patient.
func (f *Flow) InvalidateCaches() {
	if f.resolver != nil {
		f.resolver.Invalidate()
	}
	if f.consent != nil {
		f.consent.Invalidate()
	}
}

// Query is a search's first page as the federation holds it.
type Query struct {
	ResourceType string
	// Params are the search's parameters, each "name=value" escaped.
	Params []string
	// Members are the ids of the members the search would ask, in registry order.
	Members []string
	// Issuer and Subject are the requester: the operator token's, when the request
	// carries one that verifies; empty for anyone else (anonymous).
	Issuer, Subject string
}

// Plan is what the flow decided of one patient-scoped search.
type Plan struct {
	// Scope is the patient the search names; Scope.Index is the parameter each asked
	// member gets its own in place of.
	Scope Scope
	// Asks are the members to ask, in the query's order, each with its parameter.
	Asks []Ask
	// Excluded are the members a step dropped, in the query's order.
	Excluded []Excluded
	// NoMatch, when set, is why no member is asked although the search is sound
	// (demographics found no patient, or more than one): the answer is a Bundle with
	// this outcome entry.
	NoMatch *NoMatch
	// Fail, when set, is the step that failed closed: the answer is its status and an
	// OperationOutcome, and no member is asked.
	Fail *bindings.Failure
	// Consent, when set, is the question consent answered for the members asked, and
	// until when the answer may be relied on (consent.cache_ttl_ms; now without a
	// cache): a next page past that asks again (Reconsent).
	Consent *Consented
}

// Ask is one member to ask and the parameter ("patient=Patient/123", escaped) it is
// asked with in place of the client's.
type Ask struct {
	Member, Param string
}

// Excluded is one member a step dropped.
type Excluded struct {
	Member, By string
}

// NoMatch is a search no member is asked for: code is the OperationOutcome issue code
// (not-found, multiple-matches).
type NoMatch struct {
	Code, Diagnostics string
}

// Plan runs the flow for q within ctx (the request's budget). scoped is false when q
// names no patient (the search goes on as it came); err is a *Refusal when it names
// one in a way the flow cannot ask about.
func (f *Flow) Plan(ctx context.Context, q Query) (plan Plan, scoped bool, err error) {
	s, scoped, err := Find(q.ResourceType, q.Params)
	if err != nil || !scoped {
		return Plan{}, scoped, err
	}
	// The identity step on the request's span: an event, the bindings' exchanges its
	// client spans beside it; never the patient (docs/tracing.md).
	tracing.Event(ctx, tracing.EventIdentity)
	plan.Scope = s
	// One registry's keys for the whole plan, even when a directory's registry is
	// swapped in meanwhile.
	keys := f.keys.Load()
	candidates := q.Members
	asks := make(map[string]string, len(candidates))
	for _, id := range candidates {
		asks[id] = q.Params[s.Index]
	}
	system, value := s.System, s.Value
	if (f.resolver != nil || f.consent != nil) && !s.Identified() && f.demographics == nil {
		return Plan{}, true, &Refusal{Param: s.Name, Diagnostics: "the resolver and the consent pre-filter know the patient by identifier: name it as patient.identifier=system|value"}
	}
	if f.demographics != nil {
		var done *Plan
		if system, value, done = f.identify(ctx, s, candidates); done != nil {
			return *done, true, nil
		}
	}
	if f.resolver != nil {
		mapping, err := f.resolver.Resolve(ctx, bindings.CacheKey(q.Issuer, q.Subject), system, value)
		if err != nil {
			return f.failed(ByResolver, s, err), true, nil
		}
		candidates = plan.keep(candidates, ByResolver, func(id string) bool {
			domain, ok := keys.domain[id]
			local, mapped := mapping[domain]
			if ok && domain == system {
				// The patient is named in this member's own domain, which a manager
				// never echoes.
				local, mapped = value, true
			}
			if !ok || !mapped || !fhir.ValidID(local) {
				return false
			}
			asks[id] = s.memberParam(local)
			return true
		})
	}
	if f.consent != nil && len(candidates) > 0 {
		permitted, err := f.consent.Evaluate(ctx, authzen.Request{Issuer: q.Issuer, Subject: q.Subject, PatientSystem: system, PatientValue: value,
			ResourceType: q.ResourceType, Members: candidates})
		if err != nil {
			return f.failed(ByConsent, s, err), true, nil
		}
		candidates = plan.keep(candidates, ByConsent, func(id string) bool { return permitted[id] })
		plan.Consent = &Consented{ResourceType: q.ResourceType, System: system, Value: value, Until: time.Now().Add(f.consentTTL)}
	}
	if holds := f.localize(ctx, keys, system, value, len(candidates) > 0); holds != nil {
		candidates = plan.keep(candidates, ByLocalizer, holds)
	}
	for _, id := range candidates {
		plan.Asks = append(plan.Asks, Ask{Member: id, Param: asks[id]})
	}
	return plan, true, nil
}

// identify is the demographics step: the patient's identifier the later steps ask
// by (the scope's own when it names one), or, in done, the plan when the step
// decides the search (no match, more than one, a failure).
func (f *Flow) identify(ctx context.Context, s Scope, candidates []string) (system, value string, done *Plan) {
	system, value = s.System, s.Value
	res, err := f.demographics.Lookup(ctx, pdqm.Criteria{System: s.System, Value: s.Value, ID: s.ID})
	if err != nil {
		p := f.failed(ByDemographics, s, err)
		return "", "", &p
	}
	switch res.Kind {
	case pdqm.NoMatch:
		p := excludeAll(s, candidates, ByDemographics, &NoMatch{Code: "not-found",
			Diagnostics: "no patient matches the search's " + s.Name + " at the demographics supplier: no member was asked"})
		return "", "", &p
	case pdqm.Ambiguous:
		p := excludeAll(s, candidates, ByDemographics, &NoMatch{Code: "multiple-matches",
			Diagnostics: "more than one patient matches the search's " + s.Name + " at the demographics supplier: no member was asked; name the patient by an identifier that is unique"})
		return "", "", &p
	}
	if !s.Identified() {
		if len(res.Identifiers) == 0 && (f.resolver != nil || f.consent != nil) {
			p := f.failed(ByDemographics, s, &bindings.Failure{Status: http.StatusBadGateway, Code: "transient",
				Diagnostics: "the demographics match carries no identifier the resolver or the consent pre-filter could be asked with"})
			return "", "", &p
		}
		if len(res.Identifiers) > 0 {
			system, value = res.Identifiers[0].System, res.Identifiers[0].Value
		}
	}
	return system, value, nil
}

// keep is the candidates ok keeps, in order; each one it drops is excluded by step.
func (p *Plan) keep(candidates []string, step string, ok func(id string) bool) []string {
	var kept []string
	for _, id := range candidates {
		if !ok(id) {
			p.Excluded = append(p.Excluded, Excluded{Member: id, By: step})
			continue
		}
		kept = append(kept, id)
	}
	return kept
}

// localize asks the localizer which members hold the patient; nil when it is not
// configured, is not asked (no candidate left, no identifier to ask by) or failed:
// the localizer fails open.
func (f *Flow) localize(ctx context.Context, keys *memberKeys, system, value string, candidates bool) (holds func(member string) bool) {
	if (f.xcpdLocalizer == nil && f.pixmLocalizer == nil) || !candidates || value == "" {
		return nil
	}
	// The localizer gets at most half of what is left: failing open is only worth
	// something while the fan-out still has a budget.
	if dl, ok := ctx.Deadline(); ok {
		lctx, cancel := context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
		defer cancel()
		ctx = lctx
	}
	if f.xcpdLocalizer != nil {
		a, err := f.xcpdLocalizer.Locate(ctx, system, value)
		if err != nil {
			f.failedOpen(err)
			return nil
		}
		return func(member string) bool { return a.Holds(keys.community[member]) }
	}
	m, err := f.pixmLocalizer.Resolve(ctx, "", system, value)
	if err != nil {
		f.failedOpen(err)
		return nil
	}
	return func(member string) bool {
		domain, ok := keys.domain[member]
		_, held := m[domain]
		return ok && (held || domain == system)
	}
}

// failedOpen logs why the localizer gave no answer the flow could use: every permitted
// member is then asked. The error names the failure (a SOAP fault, a DOCTYPE, no answer
// in time), never the service's body or URL.
func (f *Flow) failedOpen(err error) {
	if errors.Is(err, xcpd.ErrNotAsked) {
		// Every search for a patient of that system: said once per search at V(1).
		f.log.V(1).Info("Localizer not asked: every permitted member is asked", "binding", ByLocalizer, "reason", err.Error())
		return
	}
	f.log.Info("Localizer failed open: every permitted member is asked", "binding", ByLocalizer, "reason", err.Error())
}

// excludeAll is the plan that asks no member: every candidate excluded by step.
func excludeAll(s Scope, candidates []string, step string, nm *NoMatch) Plan {
	p := Plan{Scope: s, NoMatch: nm}
	for _, id := range candidates {
		p.Excluded = append(p.Excluded, Excluded{Member: id, By: step})
	}
	return p
}

// failed is the plan of a step that failed closed; it logs why (the failure's
// diagnostics name the step and the class of the failure, never a body or a URL).
func (f *Flow) failed(step string, s Scope, err error) Plan {
	var fail *bindings.Failure
	if !errors.As(err, &fail) {
		// An error of the transport names the service's URL: the rule of gateway/scrub
		// keeps it out of the answer and the log line.
		fail = &bindings.Failure{Status: http.StatusBadGateway, Code: "transient", Diagnostics: scrub.Text(err.Error())}
	}
	f.log.Info("Patient-scoped step failed closed: no member is asked", "binding", step, "status", fail.Status, "reason", fail.Diagnostics)
	return Plan{Scope: s, Fail: fail}
}
