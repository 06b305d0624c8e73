package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
)

// Defaults and ranges of the [limits] table. Every limit bounds what one hostile or
// broken party (a client, a member) can make the gateway hold or do; the README's
// "Limits" section lists them with their keys.
const (
	// DefaultMaxInFlightRequests bounds the data-plane requests served at once; past
	// it a request is answered 503 with Retry-After before any member is asked.
	DefaultMaxInFlightRequests = 256
	MaxInFlightRequestsLimit   = 100000
	// DefaultMaxMemberCalls bounds the member calls in flight at once, all members
	// and all requests together: a fan-out waits for a free call, within its budget.
	DefaultMaxMemberCalls = 256
	MaxMemberCallsLimit   = 100000
	// DefaultMaxQueuedMemberCalls bounds the member calls the requests being served
	// have yet to make, running or waiting: a request whose fan-out would take it
	// past is answered 503 with Retry-After before any member is asked. It sheds a
	// flood of searches over a large federation that the in-flight limit alone
	// admits (256 searches of 2,000 members are 512,000 calls).
	DefaultMaxQueuedMemberCalls = 16 * DefaultMaxMemberCalls
	MaxQueuedMemberCallsLimit   = 10000000
	// DefaultMaxMemberCallsPerMember bounds the calls in flight to one member.
	DefaultMaxMemberCallsPerMember = 32
	// DefaultMaxMemberEntries bounds the entries the gateway reads of one member's
	// searchset page: a page with more is that member's failure. It is at least
	// federation.max_count (a full page of matches), plus room for includes.
	DefaultMaxMemberEntries = 5000
	MaxMemberEntriesLimit   = 1000000
	// DefaultMaxAnswerEntries bounds the match, include and member outcome entries
	// of one federated page (the gateway's own outcome entry per failed member comes
	// on top: at most one per member).
	DefaultMaxAnswerEntries = 10000
	MaxAnswerEntriesLimit   = 1000000
	// DefaultMaxSearchBytes bounds the member answer bytes one page of a federated
	// search (or one ask-all probe) reads, all its members and rounds together: four
	// members at the default registry.max_member_body_bytes.
	DefaultMaxSearchBytes = 4 * DefaultMaxMemberBodyBytes
	MaxSearchBytesLimit   = 64 << 30
	// DefaultMaxQueryBytes bounds a data-plane request's query string (414 past it),
	// and a POST _search form body with the query joined to it (413 / 400).
	DefaultMaxQueryBytes = 16384
	// MinQueryBytes leaves room for a next link's query: a page token is at most
	// 8192 bytes (gateway/federation MaxPageTokenBytes).
	MinQueryBytes = 8192 + 1024
	// MaxQueryBytesLimit keeps the query within what net/http reads of a request's
	// head (1 MiB).
	MaxQueryBytesLimit = 512 << 10
	// DefaultMaxRegistryMembers bounds [[registry.members]]: every first page of a
	// search asks every member.
	DefaultMaxRegistryMembers = 1000
	MaxRegistryMembersLimit   = 100000
	// DefaultMaxRoutedBodyBufferBytes bounds what the gateway reads of a routed
	// request's body before the call takes its slots: a body that fits is read whole
	// first, so that a client that sends its body slowly (or never) holds no slot of
	// the member; a longer one takes them once this much of it has arrived, and the
	// rest is streamed.
	DefaultMaxRoutedBodyBufferBytes = 64 << 10
	MaxRoutedBodyBufferBytesLimit   = 16 << 20
	// DefaultMemberCallWaitMS bounds how long a routed call waits for its slots
	// (max_member_calls, max_member_calls_per_member); past it the client is answered
	// 503 with Retry-After and the member's state is unchanged.
	DefaultMemberCallWaitMS = 2000
	MaxMemberCallWaitMS     = 3600000
	// DefaultMinMemberCallMS is the least of a call's budget worth sending it with:
	// a call left with less than this (or half its own budget, when that is less)
	// once it has its slots is never sent.
	DefaultMinMemberCallMS = 100
	MaxMinMemberCallMS     = 60000
)

// Limits is the [limits] table.
type Limits struct {
	// MaxInFlightRequests (max_in_flight_requests) is how many data-plane requests
	// (/fhir/*, /nodes/*) are served at once; one more is answered 503 with
	// Retry-After: 1 and an OperationOutcome, before any member is asked. Health,
	// operator and metrics routes are neither counted nor refused. Default 256.
	MaxInFlightRequests int `toml:"max_in_flight_requests"`
	// MaxMemberCalls (max_member_calls) is how many member calls are in flight at
	// once, in total. Default 256.
	MaxMemberCalls int `toml:"max_member_calls"`
	// MaxQueuedMemberCalls (max_queued_member_calls) is how many member calls the
	// requests being served may have yet to make, running or waiting for a call; a
	// request whose fan-out (every member of a first page, the members of a next
	// link, one for a routed request) would pass it is answered 503 with Retry-After:
	// 1 before any member is asked. At least max_member_calls and
	// max_registry_members. Default 4096.
	MaxQueuedMemberCalls int `toml:"max_queued_member_calls"`
	// MaxMemberCallsPerMember (max_member_calls_per_member) is how many calls are in
	// flight to one member at once; at most max_member_calls. Default 32.
	MaxMemberCallsPerMember int `toml:"max_member_calls_per_member"`
	// MaxMemberEntries (max_member_entries) is how many entries the gateway reads of
	// one member's searchset page; at least federation.max_count. Default 5000.
	MaxMemberEntries int `toml:"max_member_entries"`
	// MaxAnswerEntries (max_answer_entries) is how many match, include and member
	// outcome entries one federated page holds; at least federation.max_count.
	// Default 10000.
	MaxAnswerEntries int `toml:"max_answer_entries"`
	// MaxSearchBytes (max_search_bytes) is how many bytes of member answers one page
	// of a federated search, or one probe, reads in total; at least
	// registry.max_member_body_bytes. Default 64 MiB.
	MaxSearchBytes int64 `toml:"max_search_bytes"`
	// MaxQueryBytes (max_query_bytes) is the longest query string of a data-plane
	// request (414 past it); from 9216 (room for a next link) to 524288. Default 16384.
	MaxQueryBytes int `toml:"max_query_bytes"`
	// MaxRegistryMembers (max_registry_members) is how many [[registry.members]] a
	// configuration may list. Default 1000.
	MaxRegistryMembers int `toml:"max_registry_members"`
	// MaxRoutedBodyBufferBytes (max_routed_body_buffer_bytes) is what the gateway
	// reads of a routed request's body before its call takes a slot: a body that fits
	// is read whole before the member is asked (408 when it has not arrived within
	// server.request_timeout_ms, the member never asked); a longer one takes its
	// slots once this much has arrived. 1 to 16 MiB; default 64 KiB.
	MaxRoutedBodyBufferBytes int64 `toml:"max_routed_body_buffer_bytes"`
	// MemberCallWaitMS (member_call_wait_ms) is the longest a routed call waits for
	// its slots; past it (or when the wait would leave less than min_member_call_ms)
	// the client is answered 503 with Retry-After: 1 and the member's state is
	// unchanged. 1 to 3600000; default 2000.
	MemberCallWaitMS int64 `toml:"member_call_wait_ms"`
	// MinMemberCallMS (min_member_call_ms) is the least budget a member call is sent
	// with: once it has its slots, a call with less left than this, or than half its
	// own budget when that is less, is never sent. 1 to 60000; default 100.
	MinMemberCallMS int64 `toml:"min_member_call_ms"`
}

func defaultLimits() Limits {
	return Limits{
		MaxInFlightRequests:      DefaultMaxInFlightRequests,
		MaxMemberCalls:           DefaultMaxMemberCalls,
		MaxQueuedMemberCalls:     DefaultMaxQueuedMemberCalls,
		MaxMemberCallsPerMember:  DefaultMaxMemberCallsPerMember,
		MaxMemberEntries:         DefaultMaxMemberEntries,
		MaxAnswerEntries:         DefaultMaxAnswerEntries,
		MaxSearchBytes:           DefaultMaxSearchBytes,
		MaxQueryBytes:            DefaultMaxQueryBytes,
		MaxRegistryMembers:       DefaultMaxRegistryMembers,
		MaxRoutedBodyBufferBytes: DefaultMaxRoutedBodyBufferBytes,
		MemberCallWaitMS:         DefaultMemberCallWaitMS,
		MinMemberCallMS:          DefaultMinMemberCallMS,
	}
}

// MemberCallWait is limits.member_call_wait_ms as a duration, the default when unset.
func (l Limits) MemberCallWait() time.Duration { return ms(l.Resolved().MemberCallWaitMS) }

// MinMemberCall is limits.min_member_call_ms as a duration, the default when unset.
func (l Limits) MinMemberCall() time.Duration { return ms(l.Resolved().MinMemberCallMS) }

// Resolved is l with every unset (zero) limit at its default: a Config assembled in
// code (tests, the operator) never had its defaults applied.
func (l Limits) Resolved() Limits {
	d := defaultLimits()
	if l.MaxInFlightRequests <= 0 {
		l.MaxInFlightRequests = d.MaxInFlightRequests
	}
	if l.MaxMemberCalls <= 0 {
		l.MaxMemberCalls = d.MaxMemberCalls
	}
	if l.MaxQueuedMemberCalls <= 0 {
		l.MaxQueuedMemberCalls = max(d.MaxQueuedMemberCalls, l.MaxMemberCalls, l.MaxRegistryMembers, d.MaxRegistryMembers)
	}
	if l.MaxMemberCallsPerMember <= 0 {
		l.MaxMemberCallsPerMember = min(d.MaxMemberCallsPerMember, l.MaxMemberCalls)
	}
	if l.MaxMemberEntries <= 0 {
		l.MaxMemberEntries = d.MaxMemberEntries
	}
	if l.MaxAnswerEntries <= 0 {
		l.MaxAnswerEntries = d.MaxAnswerEntries
	}
	if l.MaxSearchBytes <= 0 {
		l.MaxSearchBytes = d.MaxSearchBytes
	}
	if l.MaxQueryBytes <= 0 {
		l.MaxQueryBytes = d.MaxQueryBytes
	}
	if l.MaxRegistryMembers <= 0 {
		l.MaxRegistryMembers = d.MaxRegistryMembers
	}
	if l.MaxRoutedBodyBufferBytes <= 0 {
		l.MaxRoutedBodyBufferBytes = d.MaxRoutedBodyBufferBytes
	}
	if l.MemberCallWaitMS <= 0 {
		l.MemberCallWaitMS = d.MemberCallWaitMS
	}
	if l.MinMemberCallMS <= 0 {
		l.MinMemberCallMS = d.MinMemberCallMS
	}
	return l
}

// Forwarding is the [forwarding] table: what the gateway tells members about the
// client and about itself.
type Forwarding struct {
	// TrustedProxies (trusted_proxies) are CIDRs ("10.0.0.0/8", "::1/128") of the
	// proxies in front of the gateway. A routed request from a peer inside one keeps
	// its X-Forwarded-For and Forwarded, the peer appended; from any other peer they
	// are dropped and the gateway writes its own. Default none: no client-sent copy
	// reaches a member.
	TrustedProxies []string `toml:"trusted_proxies"`
	// ViaID (via_id) is the name the gateway gives itself in the Via header of every
	// member request (received-by, RFC 9110 §7.6.3), and refuses (508) on a request
	// that already carries it. Give every replica of one gateway the same id so that
	// a loop through any of them stops at once. Default: "ferrofed-" and 12 random hex
	// digits, made per process.
	ViaID string `toml:"via_id"`
}

// MaxTrustedProxies bounds forwarding.trusted_proxies.
const MaxTrustedProxies = 256

// TrustedPrefixes parses forwarding.trusted_proxies (already validated).
func (f Forwarding) TrustedPrefixes() ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(f.TrustedProxies))
	for i, s := range f.TrustedProxies {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("forwarding.trusted_proxies[%d]: %q is not a CIDR (10.0.0.0/8, fd00::/8)", i, s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// validBounds returns the problems of [limits] and [forwarding], and of what they
// bound elsewhere: the number of members, and a member that is the gateway itself.
func (c *Config) validBounds() []Problem {
	var ps []Problem
	add := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
	}
	l := c.Limits
	inRange := func(key string, v, lo, hi int64) bool {
		if v < lo || v > hi {
			add("limits."+key, "%d is not from %d to %d", v, lo, hi)
			return false
		}
		return true
	}
	inRange("max_in_flight_requests", int64(l.MaxInFlightRequests), 1, MaxInFlightRequestsLimit)
	if inRange("max_member_calls", int64(l.MaxMemberCalls), 1, MaxMemberCallsLimit) {
		inRange("max_member_calls_per_member", int64(l.MaxMemberCallsPerMember), 1, int64(l.MaxMemberCalls))
	}
	inRange("max_queued_member_calls", int64(l.MaxQueuedMemberCalls), int64(max(l.MaxMemberCalls, l.MaxRegistryMembers, 1)), MaxQueuedMemberCallsLimit)
	inRange("max_member_entries", int64(l.MaxMemberEntries), int64(max(c.Federation.MaxCount, 1)), MaxMemberEntriesLimit)
	inRange("max_answer_entries", int64(l.MaxAnswerEntries), int64(max(c.Federation.MaxCount, 1)), MaxAnswerEntriesLimit)
	inRange("max_search_bytes", l.MaxSearchBytes, max(c.Registry.MaxMemberBodyBytes, 1), MaxSearchBytesLimit)
	inRange("max_query_bytes", int64(l.MaxQueryBytes), MinQueryBytes, MaxQueryBytesLimit)
	inRange("max_routed_body_buffer_bytes", l.MaxRoutedBodyBufferBytes, 1, MaxRoutedBodyBufferBytesLimit)
	// member_call_wait_ms and min_member_call_ms are checked with the other
	// millisecond keys (millis.go), before anything converts them.
	if inRange("max_registry_members", int64(l.MaxRegistryMembers), 1, MaxRegistryMembersLimit) && len(c.Registry.Members) > l.MaxRegistryMembers {
		add("registry.members", "lists %d members, more than limits.max_registry_members (%d)", len(c.Registry.Members), l.MaxRegistryMembers)
	}

	if len(c.Forwarding.TrustedProxies) > MaxTrustedProxies {
		add("forwarding.trusted_proxies", "lists %d CIDRs, more than %d", len(c.Forwarding.TrustedProxies), MaxTrustedProxies)
	} else {
		for i, s := range c.Forwarding.TrustedProxies {
			if _, err := netip.ParsePrefix(strings.TrimSpace(s)); err != nil {
				add("forwarding.trusted_proxies", "entry %d, %q, is not a CIDR (10.0.0.0/8, fd00::/8)", i, s)
			}
		}
	}
	if id := c.Forwarding.ViaID; id != "" && !viaToken(id) {
		add("forwarding.via_id", "%q must be 1 to 64 letters, digits or -._~ (a Via pseudonym)", id)
	}
	for i, m := range c.Registry.Members {
		if c.isSelf(m.QueryEndpoint) {
			add(fmt.Sprintf("registry.members[%d].query_endpoint", i),
				"%q is this gateway's own listener (server.listen %q) under its server.base_path %q: every search would ask itself",
				m.QueryEndpoint, c.Server.Listen, c.Server.BasePath)
		}
	}
	return ps
}

// viaToken reports whether id can stand as a Via received-by pseudonym: a token,
// kept to characters that need no quoting anywhere.
func viaToken(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		b := id[i]
		if (b < 'a' || b > 'z') && (b < 'A' || b > 'Z') && (b < '0' || b > '9') && !strings.ContainsRune("-._~", rune(b)) {
			return false
		}
	}
	return true
}

// isSelf reports whether a member URL is, as far as the configuration can tell, the
// gateway's own listener under its own base path: a loopback (or the listener's own)
// host, the listener's port, a path under server.base_path. A name other than
// localhost, or a listener on port 0, cannot be told; the Via check (508) stops the
// loop at run time then.
func (c *Config) isSelf(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return false
	}
	lhost, lport, err := net.SplitHostPort(c.Server.Listen)
	if err != nil || lport == "0" {
		return false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if n, err := strconv.Atoi(port); err != nil || strconv.Itoa(n) != lport {
		return false
	}
	host := u.Hostname()
	own := strings.EqualFold(host, "localhost")
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		own = ip.IsLoopback()
		if l, err := netip.ParseAddr(lhost); err == nil && !l.IsUnspecified() {
			// A listener on one address: that address, or loopback only if it is one.
			own = l.Unmap() == ip || (l.IsLoopback() && ip.IsLoopback())
		} else if err == nil && l.IsUnspecified() {
			own = own || ip.IsUnspecified()
		}
	} else if lhost != "" && strings.EqualFold(host, lhost) {
		own = true
	}
	if !own {
		return false
	}
	base := strings.TrimSuffix(c.Server.BasePath, "/")
	p := path.Clean("/" + u.Path)
	return base == "" || p == base || strings.HasPrefix(p, base+"/")
}
