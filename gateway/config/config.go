// Package config is the gateway's configuration: the TOML schema of ferrofed.toml, the
// default of every key, and the validation that `config check`, `serve`, a SIGHUP reload
// and the operator's webhook all share. Every problem it reports names its key.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// Defaults of the keys that are not lifecycle budgets (those live in gateway/lifecycle).
const (
	// DefaultListen is the dual-stack wildcard: every interface, IPv4 and IPv6 where
	// the kernel has IPv6, IPv4 alone where it has not (see Server.Listen).
	DefaultListen              = ":8080"
	DefaultBasePath            = "/"
	DefaultReadHeaderTimeoutMS = 5000
	DefaultCheckTimeoutMS      = 100
	DefaultCacheTTLMS          = 1000
	DefaultMetricsPath         = "/metrics"
	DefaultMetricsPushJob      = "ferrofed"
	// DefaultTerminationMessagePath is Kubernetes' default terminationMessagePath: the
	// kubelet mounts a file there in every container and copies what it holds into the
	// pod's status when the container terminates.
	DefaultTerminationMessagePath = "/dev/termination-log"
)

// MaxTerminationMessagePathBytes is the longest server.termination_message_path (Linux's PATH_MAX).
const MaxTerminationMessagePathBytes = 4096

// Config is a loaded, defaulted ferrofed.toml. Durations are integers in milliseconds.
type Config struct {
	Server   Server   `toml:"server"`
	Health   Health   `toml:"health"`
	Metrics  Metrics  `toml:"metrics"`
	Auth     Auth     `toml:"auth"`
	Registry Registry `toml:"registry"`
	// Federation is the [federation] table (federation.go).
	Federation Federation `toml:"federation"`
	// Limits is the [limits] table (limits.go).
	Limits Limits `toml:"limits"`
	// Forwarding is the [forwarding] table (limits.go).
	Forwarding Forwarding `toml:"forwarding"`
	// Audit is the [audit] table (audit.go); nil when absent: nothing is audited.
	Audit *Audit `toml:"audit"`
	// PDQm, Resolver, Consent and Localizer are the patient-scoped bindings' tables
	// (patient.go); each nil when absent, and the binding off.
	PDQm      *PDQm      `toml:"pdqm"`
	Resolver  *Resolver  `toml:"resolver"`
	Consent   *Consent   `toml:"consent"`
	Localizer *Localizer `toml:"localizer"`
	// PMIR is the [pmir] table, the identity feed (pmir.go); nil when absent.
	PMIR *PMIR `toml:"pmir"`
	// StoredQueries is the [stored_queries] table (storedqueries.go); nil when absent:
	// no store, no _query.
	StoredQueries *StoredQueries `toml:"stored_queries"`
	// Tracing is the [tracing] table (tracing.go); nil when absent: no spans.
	Tracing *Tracing `toml:"tracing"`

	// warnings are Parse's, for Warnings.
	warnings []Problem
}

// Server is the [server] table.
type Server struct {
	// Listen is host:port of the listener (Go's net.Listen("tcp", Listen)). A wildcard
	// host listens on every interface, as one socket: dual-stack (IPv4 and IPv6,
	// IPV6_V6ONLY off whatever net.ipv6.bindv6only says) where the kernel has IPv6, IPv4
	// alone where it has not. The documented spelling is the empty host:
	//
	//	":8080"          the default, and what the operator renders: every interface,
	//	                 any address family, on a kernel with or without IPv6.
	//	"0.0.0.0:8080"   the same to Go (net.Listen treats an unspecified address as all
	//	"[::]:8080"      of them, and resolves "[::]" to 0.0.0.0 first), accepted; they
	//	                 read as one family only, so examples use ":8080".
	//
	// An address (127.0.0.1, [::1], 10.1.2.3) listens on that address alone. `ferrofed
	// healthcheck` asks 127.0.0.1 for every wildcard spelling.
	Listen string `toml:"listen"`
	// BasePath prefixes every route; any other path answers 404.
	BasePath string `toml:"base_path"`
	// RequestTimeoutMS is the longest a client request may run.
	RequestTimeoutMS *int64 `toml:"request_timeout_ms"`
	// DrainDelayMS is step 1 of the drain.
	DrainDelayMS *int64 `toml:"drain_delay_ms"`
	// ShutdownTimeoutMS is step 3 of the drain; it defaults to RequestTimeoutMS.
	ShutdownTimeoutMS *int64 `toml:"shutdown_timeout_ms"`
	// BindingsDrainTimeoutMS is step 4 of the drain.
	BindingsDrainTimeoutMS *int64 `toml:"bindings_drain_timeout_ms"`
	// TerminationGracePeriodSeconds is, when set, the grace period of the runtime this
	// gateway runs under (Kubernetes' terminationGracePeriodSeconds, compose's
	// stop_grace_period). The operator renders it; config check then refuses a drain
	// that does not fit within it.
	TerminationGracePeriodSeconds *int64 `toml:"termination_grace_period_seconds"`
	// ReadHeaderTimeoutMS cuts off clients that dribble their headers.
	ReadHeaderTimeoutMS int64 `toml:"read_header_timeout_ms"`
	// TerminationMessagePath is the file the drain writes its outcome to, one line
	// (lifecycle.TerminationMessage), after its last step and before the metrics push:
	// the container's termination message file, which the kubelet copies into the pod's
	// status. Default DefaultTerminationMessagePath; empty turns it off; where its
	// directory does not exist (no such file system) or the write fails, the drain logs
	// it and goes on. A reload applies it.
	TerminationMessagePath string `toml:"termination_message_path"`
	// TLS turns the listener to https when CertificateFile is set.
	TLS TLS `toml:"tls"`
}

// TLS is the [server.tls] table.
type TLS struct {
	CertificateFile string `toml:"certificate_file"`
	KeyFile         string `toml:"key_file"`
	// ClientCAFile makes client certificates required, verified against this CA.
	ClientCAFile string `toml:"client_ca_file"`
	// HealthcheckIdentityFile is a PEM file with the certificate (and, without
	// HealthcheckIdentityKeyFile, its key too) that `ferrofed healthcheck` presents when
	// client certificates are required. The gateway itself never reads it.
	HealthcheckIdentityFile string `toml:"healthcheck_identity_file"`
	// HealthcheckIdentityKeyFile is, when set, the PEM file of the key of
	// HealthcheckIdentityFile's certificate: a kubernetes.io/tls Secret mounted as
	// tls.crt and tls.key (what the operator renders). Empty: the key is in
	// HealthcheckIdentityFile. It needs HealthcheckIdentityFile.
	HealthcheckIdentityKeyFile string `toml:"healthcheck_identity_key_file"`
}

// HealthcheckIdentity is the pair of files `ferrofed healthcheck` loads its client
// certificate from: the certificate file, and the key file (the same file when
// healthcheck_identity_key_file is unset).
func (t TLS) HealthcheckIdentity() (certFile, keyFile string) {
	if t.HealthcheckIdentityKeyFile != "" {
		return t.HealthcheckIdentityFile, t.HealthcheckIdentityKeyFile
	}
	return t.HealthcheckIdentityFile, t.HealthcheckIdentityFile
}

// Enabled reports whether the listener serves https.
func (t TLS) Enabled() bool { return t.CertificateFile != "" }

// Health is the [health] table.
type Health struct {
	// CheckTimeoutMS is the budget of each readiness check; expiry fails closed.
	CheckTimeoutMS int64 `toml:"check_timeout_ms"`
	// CacheTTLMS is how long a check result is reused; 0 evaluates every probe.
	CacheTTLMS int64 `toml:"cache_ttl_ms"`
	// MemberReadyCheck makes readiness also need one member up. Off by default: one
	// member's outage must not make the whole gateway unready.
	MemberReadyCheck bool `toml:"member_ready_check"`
	// Minimal makes readiness answer status and phase only, as ?verbose=0 does.
	Minimal bool `toml:"minimal"`
}

// Metrics is the [metrics] table.
type Metrics struct {
	// Disabled turns the Prometheus endpoint off.
	Disabled bool `toml:"disabled"`
	// Path is where Prometheus metrics are served, under server.base_path.
	Path string `toml:"path"`
	// PushURL is, when set, the absolute http(s) URL of a Prometheus
	// Pushgateway-compatible endpoint that the whole registry is pushed to once at the
	// end of the drain (the timeline in gateway/lifecycle/doc.go): a draining process closes its listener before
	// ferrofed_drain_total moves, so no scrape can see the outcome. The push is grouped
	// by job (PushJob) and instance (the hostname: the pod name on Kubernetes). It works
	// with Disabled too. Empty (the default): nothing is pushed.
	PushURL string `toml:"push_url"`
	// PushJob is the job the push is grouped under; default DefaultMetricsPushJob.
	PushJob string `toml:"push_job"`
}

// Auth is the [auth] table.
type Auth struct {
	Issuers []Issuer `toml:"issuers"`
	// DataPlane is who may use the data plane ({base}/fhir and {base}/nodes):
	// DataPlaneRequired (the default) asks every request for a bearer token one of
	// Issuers signed; DataPlaneOpen, which must be written out, asks nobody
	// (docs/security.md).
	DataPlane string `toml:"data_plane"`
}

// The values of auth.data_plane.
const (
	DataPlaneRequired = "required"
	DataPlaneOpen     = "open"
)

// DataPlaneRequired reports whether the data plane asks for a bearer token.
func (a Auth) DataPlaneRequired() bool { return a.DataPlane != DataPlaneOpen }

// Issuer is one [[auth.issuers]] entry: who may sign operator tokens.
type Issuer struct {
	Issuer        string   `toml:"issuer"`
	Audience      string   `toml:"audience"`
	JWKSFile      string   `toml:"jwks_file"`
	JWKSURL       string   `toml:"jwks_url"`
	OperatorScope string   `toml:"operator_scope"`
	Algorithms    []string `toml:"algorithms"`
	// JWKSRefreshMS is how often a jwks_url is fetched again.
	JWKSRefreshMS int64 `toml:"jwks_refresh_ms"`
	// ReadOnly (read_only) limits the issuer's tokens to reading the operator surface:
	// GET and HEAD there, never the data plane or the PMIR feed, and it does not count
	// as the data plane's issuer. The operator's own issuer is rendered read-only
	// (docs/security.md, "Read-only issuers").
	ReadOnly bool `toml:"read_only"`
	// CAFile is a PEM bundle an https jwks_url's certificate is verified against
	// instead of the system's roots: an issuer behind a private CA.
	CAFile string `toml:"ca_file"`
	// TokenEndpoint and AuthorizationEndpoint (token_endpoint, authorization_endpoint)
	// are the issuer's OAuth 2.0 endpoints, absolute https URLs, which SMART discovery
	// ({base}/fhir/.well-known/smart-configuration) and the CapabilityStatement publish
	// for the first issuer that has a token endpoint (docs/security.md, "Discovery").
	// Unset, the gateway publishes none of this issuer's.
	TokenEndpoint         string `toml:"token_endpoint"`
	AuthorizationEndpoint string `toml:"authorization_endpoint"`
	// GrantTypesSupported (grant_types_supported) are the grant types its token
	// endpoint takes, of GrantTypes; unset, authorization_code with an authorization
	// endpoint, client_credentials without one.
	GrantTypesSupported []string `toml:"grant_types_supported"`
}

// GrantTypes are the grant types SMART App Launch 2.x names: the authorization code
// of an app launch, and the client credentials of a backend service.
var GrantTypes = []string{"authorization_code", "client_credentials"}

// GrantTypes are the grant types is publishes: grant_types_supported, else its default.
func (is Issuer) GrantTypes() []string {
	switch {
	case len(is.GrantTypesSupported) > 0:
		return is.GrantTypesSupported
	case is.AuthorizationEndpoint != "":
		return []string{"authorization_code"}
	}
	return []string{"client_credentials"}
}

// DefaultAlgorithms are the signature algorithms an issuer accepts when none are listed.
var DefaultAlgorithms = []string{"RS256", "ES256"}

// SupportedAlgorithms are the algorithms an issuer may list. "none" and HMAC are not
// among them: operator tokens are verified with the issuer's public keys only.
var SupportedAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// DefaultJWKSRefreshMS is how often a jwks_url is refreshed when nothing is set.
const DefaultJWKSRefreshMS = 300000

// DefaultMaxMemberBodyBytes caps what the gateway reads of one member's answer to a
// federated search or probe when registry.max_member_body_bytes is not set.
const DefaultMaxMemberBodyBytes = 16 << 20

// Registry is the [registry] table.
type Registry struct {
	Members []Member `toml:"members"`
	// MaxMemberBodyBytes caps what the gateway reads of one member's answer to a
	// federated search or the ask-all probe (routed requests are streamed, not capped);
	// a larger answer is that member's node-error. Default DefaultMaxMemberBodyBytes.
	MaxMemberBodyBytes int64 `toml:"max_member_body_bytes"`
	// MCSD is the [registry.mcsd] table (directory.go): the members read from an mCSD
	// directory instead of Members; nil when absent.
	MCSD *MCSD `toml:"mcsd"`
}

// Member is one [[registry.members]] entry.
type Member struct {
	ID string `toml:"id"`
	// QueryEndpoint is the base URL of the member's FHIR API.
	QueryEndpoint string `toml:"query_endpoint"`
	// EndpointID names the query endpoint in the dependency report; default "<id>-query".
	EndpointID string `toml:"endpoint_id"`
	// TimeoutMS, when set, is this member's budget within a federated request, shorter
	// than server.request_timeout_ms: a member known to be slow then cannot hold every
	// query for the whole request timeout. Unset (0), the member gets the request's budget.
	TimeoutMS int64 `toml:"timeout_ms"`
	// IdentifierSystem is the identifier domain of the member's own Patient ids, used
	// by [resolver] (and localizer.protocol = "pixm"): a patient mapped to value v in
	// it is asked of this member as Patient/v.
	IdentifierSystem string `toml:"identifier_system"`
	// HomeCommunityID is the member's XCPD homeCommunityId (urn:oid:…), used by
	// localizer.protocol = "xcpd".
	HomeCommunityID string `toml:"home_community_id"`

	// endpointIDDerived is true when EndpointID is the default: a problem of the id is
	// then reported once, on the id, not again on the endpoint id derived from it.
	endpointIDDerived bool
}

// Configured reports whether a registry is configured, as a document or from a
// directory (it gates readiness then).
func (r Registry) Configured() bool { return len(r.Members) > 0 || r.MCSD != nil }

// Problem is one thing wrong with a configuration, named by its key.
type Problem struct {
	// Key is the dotted TOML key, e.g. "server.shutdown_timeout_ms".
	Key string
	// Line is the 1-based line of the key in the file, or 0 when not known.
	Line    int
	Message string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s (line %d): %s", p.Key, p.Line, p.Message)
	}
	return p.Key + ": " + p.Message
}

// Problems is every problem found in one configuration. It is the error Load and Parse
// return; its text lists each problem on its own line.
type Problems struct {
	Source string
	List   []Problem
}

func (p *Problems) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problem(s)", p.Source, len(p.List))
	for _, q := range p.List {
		b.WriteString("\n  ")
		b.WriteString(q.String())
	}
	return b.String()
}

// Load reads and parses the file at path. The error, when the file loaded but is wrong,
// is a *Problems listing every problem.
func Load(path string) (*Config, error) {
	data, err := ReadFile("configuration", path, MaxConfigFileBytes)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", errors.Unwrap(err))
	}
	return Parse(data, path, Options{})
}

// Options tune Parse.
type Options struct {
	// SkipFiles leaves out the checks that read referenced files (TLS certificates,
	// JWKS files): the operator's webhook validates a configuration for another machine.
	SkipFiles bool
	// Now is the time certificates are checked against (their expiry is a warning);
	// zero is time.Now(). Tests set it so that Parse stays pure of the clock.
	Now time.Time
}

func (o Options) now() time.Time {
	if o.Now.IsZero() {
		return time.Now()
	}
	return o.Now
}

// Parse decodes data strictly (an unknown key is a problem naming the key and its line),
// applies defaults and validates. source names the data in the error.
func Parse(data []byte, source string, opts Options) (*Config, error) {
	// Unknown keys are found by a walk of the document (walkKeys), not by go-toml's
	// DisallowUnknownFields, whose cost is the document's size for each of them; the
	// document decoded, the report lists the other problems too. A document with more
	// than MaxUnknownKeys of them is not decoded at all.
	walk := walkKeys(data, reflect.TypeFor[Config]())
	if walk.stray > MaxUnknownKeys {
		return nil, walk.tooMany(source)
	}
	// Decoding over the defaults keeps a key the file sets to zero at zero (and
	// validated as such) instead of silently replacing it with its default.
	c := defaults()
	if err := toml.NewDecoder(bytes.NewReader(data)).Decode(&c); err != nil {
		return nil, &Problems{Source: source, List: decodeProblems(data, err)}
	}
	ps := walk.out
	c.applyDefaults()
	found, warnings := c.validate(opts)
	if len(found)+len(warnings) > 0 { // the line index only for a document with something to say
		lines := keyLines(data)
		for i := range found {
			found[i].Line = lines.find(found[i].Key)
		}
		for i := range warnings {
			warnings[i].Line = lines.find(warnings[i].Key)
		}
	}
	ps = append(ps, found...)
	if len(ps) > 0 {
		return nil, &Problems{Source: source, List: ps}
	}
	c.warnings = warnings
	return &c, nil
}

// Warnings are what Parse (or Load) found worth saying about a valid configuration
// without refusing it: a TLS certificate that has expired or expires within
// CertificateExpiryWarning. `config check` prints them.
func (c *Config) Warnings() []Problem { return c.warnings }

func decodeProblems(data []byte, err error) []Problem {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		return []Problem{decodeErrorProblem(data, de)}
	}
	return []Problem{{Key: "(document)", Message: err.Error()}}
}

// dottedKey spells a TOML key path as a user would write it: a part that is empty or is
// not a bare key (letters, digits, '_' and '-') is quoted, so that a problem never names
// an empty or ambiguous key.
func dottedKey(parts []string) string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = p
		if p == "" || strings.IndexFunc(p, func(r rune) bool {
			return r != '_' && r != '-' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9')
		}) >= 0 {
			out[i] = strconv.Quote(p)
		}
	}
	return strings.Join(out, ".")
}

// defaults is a configuration with every scalar default; the file is decoded over it.
func defaults() Config {
	return Config{
		Server: Server{Listen: DefaultListen, BasePath: DefaultBasePath, ReadHeaderTimeoutMS: DefaultReadHeaderTimeoutMS,
			TerminationMessagePath: DefaultTerminationMessagePath},
		Health:     Health{CheckTimeoutMS: DefaultCheckTimeoutMS, CacheTTLMS: DefaultCacheTTLMS},
		Metrics:    Metrics{Path: DefaultMetricsPath, PushJob: DefaultMetricsPushJob},
		Registry:   Registry{MaxMemberBodyBytes: DefaultMaxMemberBodyBytes},
		Federation: defaultFederation(),
		Limits:     defaultLimits(),
		Auth:       Auth{DataPlane: DataPlaneRequired},
	}
}

// applyDefaults fills the defaults of array entries, which decoding cannot start from.
func (c *Config) applyDefaults() {
	c.Audit.applyDefaults()
	c.applyPatientDefaults()
	c.PMIR.applyDefaults()
	c.StoredQueries.applyDefaults()
	c.Tracing.applyDefaults()
	for i := range c.Registry.Members {
		if c.Registry.Members[i].EndpointID == "" && c.Registry.Members[i].ID != "" {
			c.Registry.Members[i].EndpointID = c.Registry.Members[i].ID + "-query"
			c.Registry.Members[i].endpointIDDerived = true
		}
	}
	for i := range c.Auth.Issuers {
		if len(c.Auth.Issuers[i].Algorithms) == 0 {
			c.Auth.Issuers[i].Algorithms = append([]string(nil), DefaultAlgorithms...)
		}
		if c.Auth.Issuers[i].JWKSRefreshMS == 0 {
			c.Auth.Issuers[i].JWKSRefreshMS = DefaultJWKSRefreshMS
		}
	}
}

// Budgets are the drain budgets this configuration sets, for gateway/lifecycle.
func (c *Config) Budgets() lifecycle.Budgets {
	return lifecycle.Budgets{
		RequestTimeout:       msPtr(c.Server.RequestTimeoutMS),
		DrainDelay:           msPtr(c.Server.DrainDelayMS),
		ShutdownTimeout:      msPtr(c.Server.ShutdownTimeoutMS),
		BindingsDrainTimeout: msPtr(c.Server.BindingsDrainTimeoutMS),
		// The headroom is the runtime's business, not the process's: the grace period,
		// when known, is checked against the drain alone.
		TerminationGracePeriodSeconds: c.Server.TerminationGracePeriodSeconds,
		// A process knows of no balancer polling its readiness: an unset drain delay is
		// 0, the listener closing at once. The operator always sets the key, to the
		// Gateway's readiness poll when its drainDelay is unset.
		ReadinessPoll: 0,
	}
}

// Lifecycle is the plan of the drain budgets, every default applied.
func (c *Config) Lifecycle() lifecycle.Plan { return c.Budgets().Plan() }

// ReadHeaderTimeout is server.read_header_timeout_ms as a duration.
func (s Server) ReadHeaderTimeout() time.Duration { return ms(s.ReadHeaderTimeoutMS) }

// CheckTimeout is health.check_timeout_ms as a duration.
func (h Health) CheckTimeout() time.Duration { return ms(h.CheckTimeoutMS) }

// CacheTTL is health.cache_ttl_ms as a duration.
func (h Health) CacheTTL() time.Duration { return ms(h.CacheTTLMS) }

// JWKSRefresh is auth.issuers[].jwks_refresh_ms as a duration, the default when unset.
func (is Issuer) JWKSRefresh() time.Duration {
	if is.JWKSRefreshMS <= 0 {
		return ms(DefaultJWKSRefreshMS)
	}
	return ms(is.JWKSRefreshMS)
}

// Timeout is registry.members[].timeout_ms as a duration; 0 (unset) leaves the member
// the request's budget.
func (m Member) Timeout() time.Duration { return ms(m.TimeoutMS) }

func msPtr(v *int64) *time.Duration {
	if v == nil {
		return nil
	}
	d := ms(*v)
	return &d
}

// lineIndex maps dotted keys to the line they are set on, for problems found after decoding.
type lineIndex map[string]int

func keyLines(data []byte) lineIndex {
	idx := lineIndex{}
	table := ""
	entries := map[string]int{} // entries seen of each array of tables
	for i, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSpace(raw)
		switch {
		case strings.HasPrefix(line, "[["):
			name := strings.TrimSpace(strings.Trim(line, "[] "))
			if _, ok := idx[name]; !ok {
				idx[name] = i + 1
			}
			// Keys of the n-th entry are indexed as "name[n].key", the way problems name them.
			table = fmt.Sprintf("%s[%d]", name, entries[name])
			entries[name]++
			idx[table] = i + 1
		case strings.HasPrefix(line, "["):
			table = strings.TrimSpace(strings.Trim(line, "[] "))
			idx[table] = i + 1
		default:
			if k, _, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
				full := strings.TrimSpace(k)
				if table != "" {
					full = table + "." + full
				}
				if _, seen := idx[full]; !seen {
					idx[full] = i + 1
				}
			}
		}
	}
	return idx
}

// find returns the line of key, or of its nearest enclosing table; entries of arrays of
// tables ("registry.members[1].id") are looked up with their index first, then without.
func (l lineIndex) find(key string) int {
	if n := l.walk(key); n > 0 {
		return n
	}
	return l.walk(stripIndexes(key))
}

func (l lineIndex) walk(k string) int {
	for k != "" {
		if n, ok := l[k]; ok {
			return n
		}
		i := strings.LastIndex(k, ".")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}

func stripIndexes(key string) string {
	if !strings.ContainsRune(key, '[') {
		return key
	}
	var b strings.Builder
	depth := 0
	for _, r := range key {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// sortProblems orders problems by key so that reports are stable.
func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Key < ps[j].Key })
}
