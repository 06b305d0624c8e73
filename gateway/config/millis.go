package config

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// Maxima of the millisecond keys. Each is checked on the integer the file holds, before
// it becomes a time.Duration: a Duration counts nanoseconds in an int64, so a count of
// milliseconds past math.MaxInt64/1e6 (about 292 years) would wrap, and
// 18446744083710 ms would read as 10 s. The bounds are far below that; they are what
// a value can sensibly mean, and anything longer is a typo (seconds written as
// milliseconds, a stray digit) more often than intent.
const (
	// MaxBudgetMS bounds the drain budgets and the request timeout
	// (server.request_timeout_ms, drain_delay_ms, shutdown_timeout_ms,
	// bindings_drain_timeout_ms): lifecycle.MaxBudget, one hour.
	MaxBudgetMS = int64(lifecycle.MaxBudget / time.Millisecond)
	// MaxReadHeaderTimeoutMS bounds server.read_header_timeout_ms (5 minutes): a client
	// that needs longer to send its headers is holding a connection, not sending a request.
	MaxReadHeaderTimeoutMS = 300000
	// MaxCheckTimeoutMS bounds health.check_timeout_ms (1 minute): a readiness check
	// slower than that outlasts every probe that asks for it.
	MaxCheckTimeoutMS = 60000
	// MaxCacheTTLMS bounds health.cache_ttl_ms (1 hour).
	MaxCacheTTLMS = 3600000
	// MaxJWKSRefreshMS bounds auth.issuers[].jwks_refresh_ms (1 day): an issuer's
	// rotated keys must reach the gateway within a day.
	MaxJWKSRefreshMS = 86400000
)

// MillisecondKey is one *_ms key of ferrofed.toml with its range, for the README's
// table of limits and for validation.
type MillisecondKey struct {
	// Key is the dotted key; "[]" stands for every entry of an array of tables.
	Key string
	// Default is the value an unset key takes, in words where it is not a number.
	Default string
	// Min and Max bound the value (inclusive). MaxNote, when set, says what else
	// bounds it (a member's timeout is bounded by the request timeout).
	Min, Max int64
	MaxNote  string
	// Bounds says what the key bounds.
	Bounds string
}

// MillisecondKeys are every *_ms key with its default and range.
var MillisecondKeys = []MillisecondKey{
	{Key: "server.request_timeout_ms", Default: fmt.Sprint(lifecycle.DefaultRequestTimeout.Milliseconds()), Min: 1, Max: MaxBudgetMS,
		Bounds: "the longest a client request may run"},
	{Key: "server.drain_delay_ms", Default: "0 (the operator renders the readiness poll)", Min: 0, Max: MaxBudgetMS,
		Bounds: "drain step 1: how long the listener keeps serving after readiness turned 503"},
	{Key: "server.shutdown_timeout_ms", Default: "server.request_timeout_ms", Min: 0, Max: MaxBudgetMS,
		Bounds: "drain step 3: how long in-flight requests get to finish"},
	{Key: "server.bindings_drain_timeout_ms", Default: fmt.Sprint(lifecycle.DefaultBindingsDrainTimeout.Milliseconds()), Min: 0, Max: MaxBudgetMS,
		Bounds: "drain step 4: how long the bindings get to stop"},
	{Key: "server.read_header_timeout_ms", Default: fmt.Sprint(DefaultReadHeaderTimeoutMS), Min: 1, Max: MaxReadHeaderTimeoutMS,
		Bounds: "how long a client may take to send its request headers"},
	{Key: "health.check_timeout_ms", Default: fmt.Sprint(DefaultCheckTimeoutMS), Min: 1, Max: MaxCheckTimeoutMS,
		Bounds: "the budget of each readiness check (expiry fails closed)"},
	{Key: "health.cache_ttl_ms", Default: fmt.Sprint(DefaultCacheTTLMS), Min: 0, Max: MaxCacheTTLMS,
		Bounds: "how long a readiness result is reused (0: every probe evaluates)"},
	{Key: "audit.timeout_ms", Default: fmt.Sprint(DefaultAuditTimeoutMS), Min: 1, Max: MaxAuditTimeoutMS,
		Bounds: "one exchange of audit delivery with the repository or the feed"},
	{Key: "pdqm.timeout_ms", Default: fmt.Sprint(DefaultPDQmTimeoutMS), Min: 1, Max: MaxBindingTimeoutMS, MaxNote: "and at most server.request_timeout_ms",
		Bounds: "one demographics query (PDQm ITI-78) of a patient-scoped search"},
	{Key: "resolver.timeout_ms", Default: fmt.Sprint(DefaultResolverTimeoutMS), Min: 1, Max: MaxBindingTimeoutMS, MaxNote: "and at most server.request_timeout_ms",
		Bounds: "one resolution (PIXm ITI-83) of a patient-scoped search"},
	{Key: "consent.timeout_ms", Default: fmt.Sprint(DefaultConsentTimeoutMS), Min: 1, Max: MaxBindingTimeoutMS, MaxNote: "and at most server.request_timeout_ms",
		Bounds: "one consent decision (AuthZEN evaluations) of a patient-scoped search"},
	{Key: "localizer.timeout_ms", Default: fmt.Sprint(DefaultLocalizerTimeoutMS), Min: 1, Max: MaxBindingTimeoutMS, MaxNote: "and at most server.request_timeout_ms",
		Bounds: "one localization (XCPD ITI-55 or PIXm) of a patient-scoped search"},
	{Key: "resolver.cache_ttl_ms", Default: "0 (off)", Min: 0, Max: MaxResolverCacheTTLMS,
		Bounds: "how long a resolver mapping is reused, per caller and patient (0: every search asks)"},
	{Key: "consent.cache_ttl_ms", Default: "0 (off)", Min: 0, Max: MaxConsentCacheTTLMS,
		Bounds: "how long consent decisions are reused, per caller, patient, type and members (0: every search asks)"},
	{Key: "pmir.check_interval_ms", Default: fmt.Sprint(DefaultPMIRCheckIntervalMS), Min: MinPMIRCheckIntervalMS, Max: MaxPMIRCheckIntervalMS,
		Bounds: "how often the PMIR subscription is read back at the registry (ITI-94)"},
	{Key: "pmir.timeout_ms", Default: fmt.Sprint(DefaultPMIRTimeoutMS), Min: 1, Max: MaxPMIRTimeoutMS,
		Bounds: "one exchange with the PMIR registry: create, read, search or delete of the subscription"},
	{Key: "tracing.timeout_ms", Default: fmt.Sprint(DefaultTracingTimeoutMS), Min: 1, Max: MaxTracingTimeoutMS,
		Bounds: "one export of spans to the OTLP/HTTP receiver (a POST to `{endpoint}/v1/traces`)"},
	{Key: "auth.issuers[].jwks_refresh_ms", Default: fmt.Sprint(DefaultJWKSRefreshMS), Min: 0, Max: MaxJWKSRefreshMS,
		Bounds: "how often an issuer's jwks_url is fetched again (0: the default)"},
	{Key: "registry.members[].timeout_ms", Default: "0 (the request's budget)", Min: 0, Max: MaxBudgetMS, MaxNote: "and at most server.request_timeout_ms",
		Bounds: "one member's budget within a federated request"},
	{Key: "registry.mcsd.refresh_interval_ms", Default: fmt.Sprint(DefaultDirectoryRefreshIntervalMS), Min: MinDirectoryRefreshIntervalMS, Max: MaxDirectoryRefreshIntervalMS,
		Bounds: "the time between two refreshes (ITI-91) of the registry from the mCSD directory"},
	{Key: "registry.mcsd.timeout_ms", Default: fmt.Sprint(DefaultDirectoryTimeoutMS), Min: 1, Max: MaxDirectoryTimeoutMS, MaxNote: "and at most `registry.mcsd.refresh_interval_ms`",
		Bounds: "one whole refresh of the registry from the mCSD directory, every page included"},
	{Key: "federation.capability_ttl_ms", Default: fmt.Sprint(DefaultCapabilityTTLMS), Min: 0, Max: MaxCapabilityTTLMS,
		Bounds: "how long the gateway's CapabilityStatement is reused (0: the members are asked every time)"},
	{Key: "federation.page_token_ttl_ms", Default: fmt.Sprint(DefaultPageTokenTTLMS), Min: MinPageTokenTTLMS, Max: MaxPageTokenTTLMS,
		Bounds: "how long a federated search's next link is accepted after the page that gave it"},
	{Key: "limits.member_call_wait_ms", Default: fmt.Sprint(DefaultMemberCallWaitMS), Min: 1, Max: MaxMemberCallWaitMS,
		Bounds: "how long a routed call waits for its slots (`limits.max_member_calls`, `_per_member`)"},
	{Key: "limits.min_member_call_ms", Default: fmt.Sprint(DefaultMinMemberCallMS), Min: 1, Max: MaxMinMemberCallMS,
		Bounds: "the least budget a member call is sent with"},
	{Key: "stored_queries.drift_interval_ms", Default: fmt.Sprint(DefaultDriftIntervalMS), Min: MinDriftIntervalMS, Max: MaxDriftIntervalMS,
		Bounds: "how often every supporting member's copy of every stored query is checked for drift"},
}

// millisecondKey returns the range of key ("auth.issuers[2].jwks_refresh_ms" is looked
// up as "auth.issuers[].jwks_refresh_ms").
func millisecondKey(key string) MillisecondKey {
	if m, ok := millisecondKeysByName()[stripIndexes(key)]; ok {
		return m
	}
	panic("config: no millisecond key " + key)
}

// millisecondKeysByName is MillisecondKeys by their keys without indexes: every
// configuration check looks up each of its *_ms keys (the webhook checks each Gateway).
var millisecondKeysByName = sync.OnceValue(func() map[string]MillisecondKey {
	m := make(map[string]MillisecondKey, len(MillisecondKeys))
	for _, k := range MillisecondKeys {
		if _, dup := m[stripIndexes(k.Key)]; !dup {
			m[stripIndexes(k.Key)] = k
		}
	}
	return m
})

// msProblem is what is wrong with v as the value of the millisecond key key, or "".
func msProblem(key string, v int64) string {
	m := millisecondKey(key)
	if v >= m.Min && v <= m.Max {
		return ""
	}
	limit := fmt.Sprintf("%d (%s)", m.Max, time.Duration(m.Max)*time.Millisecond)
	switch {
	case v < 0 && m.Min == 0:
		return fmt.Sprintf("must not be negative: it is from 0 to %s", limit)
	case v < m.Min && m.Min > 1:
		return fmt.Sprintf("%d is less than the minimum, %d: it is from %d to %s", v, m.Min, m.Min, limit)
	case v < m.Min:
		return fmt.Sprintf("must be greater than zero: it is from %d to %s", m.Min, limit)
	}
	return fmt.Sprintf("%d is more than the maximum, %s", v, limit)
}

// msBoundsProblems checks every millisecond key the configuration sets against its
// range, on the integer, before anything converts it. ok is false when a drain budget
// is out of range: the budgets' own rules (gateway/lifecycle) are then not asked,
// since they would read a wrapped duration.
func (c *Config) msBoundsProblems() (ps []Problem, budgetsOK bool) {
	budgetsOK = true
	check := func(key string, v int64) bool {
		if msg := msProblem(key, v); msg != "" {
			ps = append(ps, Problem{Key: key, Message: msg})
			return false
		}
		return true
	}
	for _, b := range []struct {
		key string
		v   *int64
	}{
		{"server.request_timeout_ms", c.Server.RequestTimeoutMS},
		{"server.drain_delay_ms", c.Server.DrainDelayMS},
		{"server.shutdown_timeout_ms", c.Server.ShutdownTimeoutMS},
		{"server.bindings_drain_timeout_ms", c.Server.BindingsDrainTimeoutMS},
	} {
		if b.v != nil && !check(b.key, *b.v) {
			budgetsOK = false
		}
	}
	check("server.read_header_timeout_ms", c.Server.ReadHeaderTimeoutMS)
	check("health.check_timeout_ms", c.Health.CheckTimeoutMS)
	check("health.cache_ttl_ms", c.Health.CacheTTLMS)
	for i, is := range c.Auth.Issuers {
		check(fmt.Sprintf("auth.issuers[%d].jwks_refresh_ms", i), is.JWKSRefreshMS)
	}
	for i, m := range c.Registry.Members {
		// 0 (unset) is always in range: a registry of thousands read from a
		// directory is checked at every refresh, without a key built per member.
		if m.TimeoutMS != 0 {
			check(fmt.Sprintf("registry.members[%d].timeout_ms", i), m.TimeoutMS)
		}
	}
	check("federation.capability_ttl_ms", c.Federation.CapabilityTTLMS)
	check("federation.page_token_ttl_ms", c.Federation.PageTokenTTLMS)
	check("limits.member_call_wait_ms", c.Limits.MemberCallWaitMS)
	check("limits.min_member_call_ms", c.Limits.MinMemberCallMS)
	return ps, budgetsOK
}

// ms is v milliseconds as a duration. Validation bounds every key far below where the
// conversion would wrap; a Config assembled in code is saturated instead of wrapped.
func ms(v int64) time.Duration {
	const limit = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case v > limit:
		return time.Duration(math.MaxInt64)
	case v < -limit:
		return time.Duration(math.MinInt64)
	}
	return time.Duration(v) * time.Millisecond
}
