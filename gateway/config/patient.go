package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// The tables of the patient-scoped bindings (docs/bindings.md): [pdqm]
// (demographics), [resolver], [consent] and [localizer]. Each is off when absent, and
// its key in the dependency report is then absent too.

// The values of consent.protocol and localizer.protocol.
const (
	// ConsentAuthZEN is OpenID AuthZEN 1.0's batch evaluations, the only protocol of
	// the consent pre-filter.
	ConsentAuthZEN = "authzen"
	// LocalizerXCPD is IHE XCPD ITI-55 (SOAP 1.2): a member holds the patient when its
	// registry.members[].home_community_id is among the answer's communities.
	LocalizerXCPD = "xcpd"
	// LocalizerPIXm is IHE PIXm ITI-83: a member holds the patient when its
	// registry.members[].identifier_system is among the answer's identifiers.
	LocalizerPIXm = "pixm"
)

// DefaultPurposeOfUse is consent.purpose_of_use's default: treatment, in HL7's
// ActReason code system, as system|code.
const DefaultPurposeOfUse = "http://terminology.hl7.org/CodeSystem/v3-ActReason|TREAT"

// Defaults and limits of the binding tables (the README's Limits table lists them).
const (
	DefaultPDQmTimeoutMS         = 2000
	DefaultResolverTimeoutMS     = 2000
	DefaultConsentTimeoutMS      = 500
	DefaultLocalizerTimeoutMS    = 5000
	MaxBindingTimeoutMS          = 60000
	DefaultPDQmMaxBodyBytes      = 256 << 10
	DefaultResolverMaxBodyBytes  = 64 << 10
	DefaultConsentMaxBodyBytes   = 64 << 10
	DefaultLocalizerMaxBodyBytes = 1 << 20
	// MaxBindingBodyBytes bounds every binding's max_body_bytes (the binding client's
	// own ceiling, 64 MiB).
	MaxBindingBodyBytes = 64 << 20
	// MaxMemberDomainBytes bounds registry.members[].identifier_system and
	// home_community_id: each is sent in every resolution or localization.
	MaxMemberDomainBytes = 256
	// MaxResolverCacheTTLMS and MaxConsentCacheTTLMS bound the caches' lifetimes: a
	// mapping changes with a merge, a consent with the patient's choice.
	MaxResolverCacheTTLMS = 60000
	MaxConsentCacheTTLMS  = 30000
	// MaxPurposeOfUseBytes bounds consent.purpose_of_use.
	MaxPurposeOfUseBytes = 512
)

// BindingService is what every patient-scoped binding table holds: the service's URL,
// the budget of one exchange, the cap on its answer and the credential files.
type BindingService struct {
	// URL is the service's base: a FHIR base for [pdqm] and [resolver] (and [localizer]
	// with protocol = "pixm"), the PDP's base for [consent], the responding gateway's
	// endpoint for [localizer] with protocol = "xcpd".
	URL string `toml:"url"`
	// TimeoutMS bounds one exchange, the answer's body included; at most 60000 and at
	// most server.request_timeout_ms.
	TimeoutMS *int64 `toml:"timeout_ms"`
	// MaxBodyBytes caps what is read of an answer; past it the exchange fails (closed,
	// or open for the localizer).
	MaxBodyBytes *int64 `toml:"max_body_bytes"`
	// Credentials of the service.
	Credentials

	// defaultTimeoutMS and defaultBodyBytes are the table's defaults, filled in when
	// the file is read (applyPatientDefaults): each binding table has its own.
	defaultTimeoutMS, defaultBodyBytes int64
}

// PDQm is the [pdqm] table: the PDQm Supplier asked first (ITI-78) to find the patient.
type PDQm struct {
	BindingService
}

// Resolver is the [resolver] table: the PIXm Patient Identifier Cross-reference
// Manager (ITI-83) that maps the patient to each member's identifier domain
// (registry.members[].identifier_system).
type Resolver struct {
	BindingService
	// CacheTTLMS, when set, keeps each mapping this long, per caller and patient; 0
	// (the default) asks the manager for every search. At most 60000.
	CacheTTLMS int64 `toml:"cache_ttl_ms"`
}

// Consent is the [consent] table: the policy decision point that tells which members
// the patient's consent lets the query reach.
type Consent struct {
	BindingService
	// Protocol is "authzen" (the default and only value).
	Protocol string `toml:"protocol"`
	// PurposeOfUse is the purpose of use sent with every evaluation, system|code;
	// default DefaultPurposeOfUse.
	PurposeOfUse string `toml:"purpose_of_use"`
	// CacheTTLMS, when set, keeps each set of decisions this long, per caller,
	// patient, searched type and members; 0 (the default) asks the PDP for every
	// search. At most 30000.
	CacheTTLMS int64 `toml:"cache_ttl_ms"`
}

// Localizer is the [localizer] table: the service that says which members hold the
// patient (XCPD ITI-55, or PIXm ITI-83).
type Localizer struct {
	BindingService
	// Protocol is "xcpd" or "pixm"; required.
	Protocol string `toml:"protocol"`
}

// Timeout is the service's timeout_ms, its table's default when unset. A service
// not read from a file (a test's) that sets none gets the longest allowed.
func (b *BindingService) Timeout() time.Duration {
	switch {
	case b == nil:
		return ms(MaxBindingTimeoutMS)
	case b.TimeoutMS != nil:
		return ms(*b.TimeoutMS)
	case b.defaultTimeoutMS > 0:
		return ms(b.defaultTimeoutMS)
	}
	return ms(MaxBindingTimeoutMS)
}

// CacheTTL is resolver.cache_ttl_ms as a duration (0: every search asks).
func (r *Resolver) CacheTTL() time.Duration {
	if r == nil {
		return 0
	}
	return ms(r.CacheTTLMS)
}

// CacheTTL is consent.cache_ttl_ms as a duration (0: every search asks).
func (c *Consent) CacheTTL() time.Duration {
	if c == nil {
		return 0
	}
	return ms(c.CacheTTLMS)
}

// BodyCap is the service's max_body_bytes, its table's default when unset; a service
// not read from a file that sets none gets the largest allowed.
func (b *BindingService) BodyCap() int64 {
	switch {
	case b == nil:
		return MaxBindingBodyBytes
	case b.MaxBodyBytes != nil:
		return *b.MaxBodyBytes
	case b.defaultBodyBytes > 0:
		return b.defaultBodyBytes
	}
	return MaxBindingBodyBytes
}

// applyDefaults fills the defaults of the binding tables.
func (c *Config) applyPatientDefaults() {
	if c.PDQm != nil {
		c.PDQm.setDefaults(DefaultPDQmTimeoutMS, DefaultPDQmMaxBodyBytes)
	}
	if c.Resolver != nil {
		c.Resolver.setDefaults(DefaultResolverTimeoutMS, DefaultResolverMaxBodyBytes)
	}
	if c.Consent != nil {
		c.Consent.setDefaults(DefaultConsentTimeoutMS, DefaultConsentMaxBodyBytes)
	}
	if c.Localizer != nil {
		c.Localizer.setDefaults(DefaultLocalizerTimeoutMS, DefaultLocalizerMaxBodyBytes)
	}
	if c.Consent != nil {
		if c.Consent.Protocol == "" {
			c.Consent.Protocol = ConsentAuthZEN
		}
		if c.Consent.PurposeOfUse == "" {
			c.Consent.PurposeOfUse = DefaultPurposeOfUse
		}
	}
}

// patientProblems checks the four binding tables and the member keys they use.
func (c *Config) patientProblems(opts Options) []Problem {
	var ps []Problem
	add := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
	}
	rt := lifecycle.DefaultRequestTimeout.Milliseconds()
	if c.Server.RequestTimeoutMS != nil {
		rt = *c.Server.RequestTimeoutMS
	}
	service := func(table string, b *BindingService) {
		if msg := bindingURLProblem(b.URL); msg != "" {
			add(table+".url", "%s", msg)
		}
		if b.TimeoutMS != nil {
			key := table + ".timeout_ms"
			if msg := msProblem(key, *b.TimeoutMS); msg != "" {
				add(key, "%s", msg)
			} else if *b.TimeoutMS > rt {
				add(key, "%d is longer than server.request_timeout_ms (%d): the request budget bounds every binding", *b.TimeoutMS, rt)
			}
		}
		if b.MaxBodyBytes != nil && (*b.MaxBodyBytes < 1 || *b.MaxBodyBytes > MaxBindingBodyBytes) {
			add(table+".max_body_bytes", "%d is not from 1 to %d (64 MiB)", *b.MaxBodyBytes, MaxBindingBodyBytes)
		}
		ps = append(ps, b.credentialProblems(table+".", opts)...)
	}
	if c.PDQm != nil {
		service("pdqm", &c.PDQm.BindingService)
	}
	if c.Resolver != nil {
		service("resolver", &c.Resolver.BindingService)
		if msg := msProblem("resolver.cache_ttl_ms", c.Resolver.CacheTTLMS); msg != "" {
			add("resolver.cache_ttl_ms", "%s", msg)
		}
	}
	if k := c.Consent; k != nil {
		service("consent", &k.BindingService)
		if k.Protocol != ConsentAuthZEN {
			add("consent.protocol", "%q is not %q, the only protocol of the consent pre-filter", k.Protocol, ConsentAuthZEN)
		}
		if msg := tokenProblem(k.PurposeOfUse, MaxPurposeOfUseBytes); msg != "" {
			add("consent.purpose_of_use", "%s", msg)
		}
		if msg := msProblem("consent.cache_ttl_ms", k.CacheTTLMS); msg != "" {
			add("consent.cache_ttl_ms", "%s", msg)
		}
	}
	if l := c.Localizer; l != nil {
		service("localizer", &l.BindingService)
		switch l.Protocol {
		case LocalizerXCPD, LocalizerPIXm:
		case "":
			add("localizer.protocol", "is required: %q or %q", LocalizerXCPD, LocalizerPIXm)
		default:
			add("localizer.protocol", "%q is neither %q nor %q", l.Protocol, LocalizerXCPD, LocalizerPIXm)
		}
	}
	ps = append(ps, c.memberDomainProblems()...)
	return ps
}

// usesIdentifierSystem names what reads registry.members[].identifier_system, or ""
// when nothing does.
func (c *Config) usesIdentifierSystem() string {
	switch {
	case c.Resolver != nil:
		return "[resolver]"
	case c.Localizer != nil && c.Localizer.Protocol == LocalizerPIXm:
		return "localizer.protocol = \"" + LocalizerPIXm + "\""
	}
	return ""
}

// memberDomainProblems checks identifier_system and home_community_id of every member:
// required by the table that uses them, refused where nothing does (it would be
// ignored), unique across members, and of their syntax. Each problem names the member's
// key and the other key involved.
func (c *Config) memberDomainProblems() []Problem {
	var ps []Problem
	add := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
	}
	systemUser := c.usesIdentifierSystem()
	hcidUser := c.Localizer != nil && c.Localizer.Protocol == LocalizerXCPD
	systems, hcids := map[string]int{}, map[string]int{}
	for i, m := range c.Registry.Members {
		key := fmt.Sprintf("registry.members[%d]", i)
		switch {
		case m.IdentifierSystem == "" && systemUser != "":
			add(key+".identifier_system", "is required with %s: the member's patients are mapped to this identifier domain", systemUser)
		case m.IdentifierSystem != "" && systemUser == "" && c.Consent == nil:
			// [consent] reads it too, optionally: a routed request that names a patient by
			// the member's own id is asked about by this system (docs/bindings.md).
			add(key+".identifier_system", "is set but neither [resolver], [consent] nor localizer.protocol = %q is configured: nothing would read it", LocalizerPIXm)
		case m.IdentifierSystem != "":
			if msg := domainProblem(m.IdentifierSystem); msg != "" {
				add(key+".identifier_system", "%s", msg)
			} else if j, dup := systems[m.IdentifierSystem]; dup {
				add(key+".identifier_system", "%q is already registry.members[%d].identifier_system: one domain cannot map to two members", m.IdentifierSystem, j)
			} else {
				systems[m.IdentifierSystem] = i
			}
		}
		switch {
		case m.HomeCommunityID == "" && hcidUser:
			add(key+".home_community_id", "is required with localizer.protocol = %q: XCPD names the communities that hold the patient by it", LocalizerXCPD)
		case m.HomeCommunityID != "" && !hcidUser:
			add(key+".home_community_id", "is set but localizer.protocol is not %q: nothing would read it", LocalizerXCPD)
		case m.HomeCommunityID != "":
			if msg := homeCommunityProblem(m.HomeCommunityID); msg != "" {
				add(key+".home_community_id", "%s", msg)
			} else if j, dup := hcids[m.HomeCommunityID]; dup {
				add(key+".home_community_id", "%q is already registry.members[%d].home_community_id: one community cannot be two members", m.HomeCommunityID, j)
			} else {
				hcids[m.HomeCommunityID] = i
			}
		}
	}
	return ps
}

// domainProblem is what is wrong with an identifier domain (an absolute URI, as
// FHIR's Identifier.system: urn:oid:…, urn:uuid:…, http(s)://…), or "".
func domainProblem(s string) string {
	if msg := tokenProblem(s, MaxMemberDomainBytes); msg != "" {
		return msg
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || strings.ContainsAny(s, "|,") {
		return fmt.Sprintf("%q must be an absolute URI (urn:oid:…, https://…) without | or ,", s)
	}
	return ""
}

// homeCommunityProblem is what is wrong with an XCPD homeCommunityId ("urn:oid:" and
// an OID), or "".
func homeCommunityProblem(s string) string {
	if msg := tokenProblem(s, MaxMemberDomainBytes); msg != "" {
		return msg
	}
	oid, ok := strings.CutPrefix(s, "urn:oid:")
	if !ok || !validOID(oid) {
		return fmt.Sprintf("%q must be urn:oid: followed by an OID (digits separated by dots)", s)
	}
	return ""
}

func validOID(s string) bool {
	if s == "" {
		return false
	}
	for part := range strings.SplitSeq(s, ".") {
		if part == "" || strings.Trim(part, "0123456789") != "" {
			return false
		}
	}
	return true
}

// tokenProblem refuses an empty value, one longer than limit, or one with characters a
// query or header could not carry as they are.
func tokenProblem(s string, limit int) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > limit:
		return fmt.Sprintf("is longer than %d bytes", limit)
	case strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0:
		return "must be visible ASCII without spaces"
	}
	return ""
}

// setDefaults records the table's defaults, which Timeout and BodyCap apply.
func (b *BindingService) setDefaults(timeoutMS, bodyBytes int64) {
	b.defaultTimeoutMS, b.defaultBodyBytes = timeoutMS, bodyBytes
}
