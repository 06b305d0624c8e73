package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// The [pmir] table (docs/bindings.md, "Identity feed"): the identity feed. The gateway
// holds an IHE PMIR ITI-94 Subscription at a Patient Identity Registry, checks it on
// an interval, deletes it in drain step 4, and receives the ITI-93 feed messages the
// registry posts to the subscription's channel endpoint. Absent, the report has
// neither identity_registry nor identity_registry_fault.

// Defaults and limits of [pmir].
const (
	DefaultPMIRCheckIntervalMS = 60000
	// MinPMIRCheckIntervalMS and MaxPMIRCheckIntervalMS bound pmir.check_interval_ms:
	// faster than 100 ms is a load on the registry, slower than a day leaves a lost
	// subscription unnoticed for too long.
	MinPMIRCheckIntervalMS = 100
	MaxPMIRCheckIntervalMS = 86400000
	DefaultPMIRTimeoutMS   = 5000
	MaxPMIRTimeoutMS       = 60000
	// DefaultPMIRCriteria is pmir.criteria's default: every Patient.
	DefaultPMIRCriteria = "Patient"
	// PMIRFeedPath is the path, under server.base_path, of the ITI-93 feed route:
	// pmir.endpoint ends with it.
	PMIRFeedPath = "/pmir/$process-message"
	// MaxPMIRCriteriaBytes bounds pmir.criteria.
	MaxPMIRCriteriaBytes = 1024
	// MaxFeedScopeBytes bounds pmir.feed_scope.
	MaxFeedScopeBytes = 256
)

// PMIR is the [pmir] table.
type PMIR struct {
	// URL is the Patient Identity Registry's FHIR base: the Subscription is created at
	// POST {url}/Subscription.
	URL string `toml:"url"`
	// Endpoint is the subscription's channel.endpoint: the gateway's own feed route as
	// the registry reaches it, an absolute http(s) URL ending in /pmir/$process-message.
	Endpoint string `toml:"endpoint"`
	// Criteria is the subscription's criteria: Patient (the default), or one of
	// Patient?_id=X, Patient?organization=X, Patient?identifier=X (ITI-94).
	Criteria string `toml:"criteria"`
	// CheckIntervalMS is how often the subscription is read back; default 60000, from
	// 100 to 86400000.
	CheckIntervalMS *int64 `toml:"check_interval_ms"`
	// TimeoutMS bounds one exchange with the registry (create, read, search, delete);
	// default 5000, from 1 to 60000.
	TimeoutMS *int64 `toml:"timeout_ms"`
	// FeedScope is the scope a bearer token must carry (issued by one of
	// [[auth.issuers]]) for the registry to post to the feed route; required.
	FeedScope string `toml:"feed_scope"`
	// Credentials the gateway presents to the registry.
	Credentials
}

// CheckInterval is pmir.check_interval_ms resolved.
func (p *PMIR) CheckInterval() time.Duration {
	if p == nil || p.CheckIntervalMS == nil {
		return ms(DefaultPMIRCheckIntervalMS)
	}
	return ms(*p.CheckIntervalMS)
}

// Timeout is pmir.timeout_ms resolved.
func (p *PMIR) Timeout() time.Duration {
	if p == nil || p.TimeoutMS == nil {
		return ms(DefaultPMIRTimeoutMS)
	}
	return ms(*p.TimeoutMS)
}

// applyDefaults fills pmir.criteria.
func (p *PMIR) applyDefaults() {
	if p != nil && p.Criteria == "" {
		p.Criteria = DefaultPMIRCriteria
	}
}

// pmirProblems returns the problems of [pmir], each naming its key.
func (c *Config) pmirProblems(opts Options) []Problem {
	p := c.PMIR
	if p == nil {
		return nil
	}
	var ps []Problem
	add := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: "pmir." + key, Message: fmt.Sprintf(format, args...)})
	}
	if msg := bindingURLProblem(p.URL); msg != "" {
		add("url", "%s", msg)
	}
	if msg := pmirEndpointProblem(p.Endpoint); msg != "" {
		add("endpoint", "%s", msg)
	}
	if msg := pmirCriteriaProblem(p.Criteria); msg != "" {
		add("criteria", "%s", msg)
	}
	for key, v := range map[string]*int64{"check_interval_ms": p.CheckIntervalMS, "timeout_ms": p.TimeoutMS} {
		if v != nil {
			if msg := msProblem("pmir."+key, *v); msg != "" {
				add(key, "%s", msg)
			}
		}
	}
	if msg := tokenProblem(p.FeedScope, MaxFeedScopeBytes); msg != "" {
		add("feed_scope", "%s: the registry's bearer token must carry this scope to post to %s", msg, PMIRFeedPath)
	} else if len(c.Auth.Issuers) == 0 {
		add("feed_scope", "needs [[auth.issuers]]: the bearer tokens of the feed are verified against them, and without one every feed message would be refused")
	}
	ps = append(ps, p.credentialProblems("pmir.", opts)...)
	sortProblems(ps)
	return ps
}

// pmirEndpointProblem is what is wrong with pmir.endpoint, or "".
func pmirEndpointProblem(raw string) string {
	if raw == "" {
		return "is required: the URL the registry posts the feed to (the gateway's " + PMIRFeedPath + " as the registry reaches it)"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Sprintf("%q must be an absolute http or https URL", raw)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return "must not carry credentials, a query or a fragment"
	case !strings.HasSuffix(u.Path, PMIRFeedPath):
		return fmt.Sprintf("%q must end with %s, the feed route under server.base_path", raw, PMIRFeedPath)
	}
	return ""
}

// pmirCriteriaProblem is what is wrong with pmir.criteria, or "": ITI-94 §3.94.4.1.2.1.1
// lets a Registry support Patient, Patient?_id=X, Patient?organization=X and
// Patient?identifier=X only.
func pmirCriteriaProblem(s string) string {
	if msg := tokenProblem(s, MaxPMIRCriteriaBytes); msg != "" {
		return msg
	}
	if s == "Patient" {
		return ""
	}
	q, ok := strings.CutPrefix(s, "Patient?")
	name, value, _ := strings.Cut(q, "=")
	if !ok || strings.Contains(q, "&") || value == "" {
		return fmt.Sprintf("%q is not Patient, Patient?_id=X, Patient?organization=X or Patient?identifier=X (ITI-94)", s)
	}
	switch name {
	case "_id", "organization", "identifier":
		return ""
	}
	return fmt.Sprintf("%q searches by %q: ITI-94 criteria are Patient, or Patient? with one of _id, organization, identifier", s, name)
}
