package config

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

var idPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Validate returns every problem of a defaulted configuration, sorted by key.
func (c *Config) Validate(opts Options) []Problem {
	ps, _ := c.validate(opts)
	return ps
}

// validate returns the problems and the warnings, each sorted by key.
func (c *Config) validate(opts Options) (ps, warnings []Problem) {
	add := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
	}

	if _, port, err := net.SplitHostPort(c.Server.Listen); err != nil {
		add("server.listen", "%q is not host:port: %v", c.Server.Listen, err)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		add("server.listen", "port %q is not a number from 0 to 65535", port)
	}
	if msg := basePathProblem(c.Server.BasePath); msg != "" {
		add("server.base_path", "%q %s", c.Server.BasePath, msg)
	}
	msProblems, budgetsOK := c.msBoundsProblems()
	ps = append(ps, msProblems...)
	if budgetsOK {
		for _, p := range c.Budgets().Validate(lifecycle.TOMLFields) {
			add(p.Field, "%s", p.Message)
		}
	}
	if msg := terminationMessagePathProblem(c.Server.TerminationMessagePath); msg != "" {
		add("server.termination_message_path", "%s", msg)
	}
	tlsProblems, tlsWarnings := c.Server.TLS.validate(opts)
	ps = append(ps, tlsProblems...)
	warnings = append(warnings, tlsWarnings...)

	if c.Health.MemberReadyCheck && !c.Registry.Configured() {
		add("health.member_ready_check", "is on but no [[registry.members]] or [registry.mcsd] is configured")
	}
	if msg := metricsPathProblem(c.Metrics.Path); msg != "" {
		add("metrics.path", "%q %s", c.Metrics.Path, msg)
	}
	if c.Metrics.PushURL != "" {
		if u, err := url.Parse(c.Metrics.PushURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("metrics.push_url", "must be an absolute http or https URL")
		} else if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			// The push appends /metrics/job/... to the URL, and the URL is logged.
			add("metrics.push_url", "must not carry credentials, a query or a fragment")
		}
	}
	if strings.TrimSpace(c.Metrics.PushJob) == "" {
		add("metrics.push_job", "must not be empty")
	}

	ps = append(ps, c.Registry.validate()...)
	if c.Registry.MaxMemberBodyBytes <= 0 {
		add("registry.max_member_body_bytes", "must be greater than zero")
	}
	// The member budgets are compared as integers: the request timeout may be out of
	// its range here, and converting it would wrap.
	rt := lifecycle.DefaultRequestTimeout.Milliseconds()
	if c.Server.RequestTimeoutMS != nil {
		rt = *c.Server.RequestTimeoutMS
	}
	for i, m := range c.Registry.Members {
		if key := fmt.Sprintf("registry.members[%d].timeout_ms", i); m.TimeoutMS >= 0 && m.TimeoutMS > rt && m.TimeoutMS <= MaxBudgetMS {
			add(key, "%d is longer than server.request_timeout_ms (%d): the request budget bounds every member", m.TimeoutMS, rt)
		}
	}
	for i, is := range c.Auth.Issuers {
		ps = append(ps, is.validate(fmt.Sprintf("auth.issuers[%d]", i), opts)...)
	}
	authPs, authWarnings := c.Auth.dataPlaneProblems()
	ps = append(ps, authPs...)
	warnings = append(warnings, authWarnings...)
	ps = append(ps, c.Federation.validate(opts)...)
	ps = append(ps, c.validBounds()...)
	ps = append(ps, c.tableProblems(opts)...)
	clearPs, clearWarnings := c.clearTextProblems()
	ps = append(ps, clearPs...)
	warnings = append(warnings, clearWarnings...)
	sortProblems(ps)
	sortProblems(warnings)
	return ps, warnings
}

// tableProblems are the problems of the tables a configuration may leave out: the
// audit trail, the patient-scoped bindings, the directory, the identity feed, the
// stored queries and the traces.
func (c *Config) tableProblems(opts Options) []Problem {
	return slices.Concat(c.Audit.validate(opts), c.patientProblems(opts), c.directoryProblems(opts),
		c.pmirProblems(opts), c.StoredQueries.validate(opts), c.tracingProblems(opts))
}

func basePathProblem(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return "must start with /"
	case len(p) > 1 && strings.HasSuffix(p, "/"):
		return "must not end with /"
	case strings.Contains(p, "//"):
		return "must not contain //"
	case strings.ContainsAny(p, "?#%*:; \t\\"):
		return "must be a plain path (no ?, #, %, *, :, ;, \\ or spaces)"
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		if seg == "." || seg == ".." {
			return fmt.Sprintf("must not contain a %q segment: write the path it stands for", seg)
		}
	}
	return ""
}

// reservedPaths are the routes under server.base_path that metrics.path must stay off:
// the probes (never gated), the operator surface (its own auth) and the data plane
// (behind the readiness gate). Metrics served on one would shadow a route, or be
// served past the gate or the token check.
var reservedPaths = []string{"/health", "/operator", "/fhir", "/nodes"}

// metricsPathProblem is what is wrong with a metrics.path, or "".
func metricsPathProblem(p string) string {
	if msg := basePathProblem(p); msg != "" {
		return msg
	}
	if p == "/" {
		return "must name a path, not the root"
	}
	for _, r := range reservedPaths {
		if p == r || strings.HasPrefix(p, r+"/") {
			return fmt.Sprintf("is on the gateway's own route %s (%s): choose a path outside /health, /operator, /fhir and /nodes", r, reservedRouteWhat[r])
		}
	}
	return ""
}

var reservedRouteWhat = map[string]string{
	"/health":   "the liveness and readiness probes",
	"/operator": "the operator surface",
	"/fhir":     "the data plane, behind the readiness gate",
	"/nodes":    "the data plane, behind the readiness gate",
}

// terminationMessagePathProblem is what is wrong with a server.termination_message_path
// ("" turns it off and is fine).
func terminationMessagePathProblem(p string) string {
	switch {
	case p == "":
		return ""
	case len(p) > MaxTerminationMessagePathBytes:
		return fmt.Sprintf("is %d bytes long, more than %d", len(p), MaxTerminationMessagePathBytes)
	case strings.ContainsRune(p, 0):
		return "must not contain a NUL byte"
	case !filepath.IsAbs(p):
		return fmt.Sprintf("%q must be an absolute path (or empty, to write no termination message)", p)
	}
	return ""
}

// CertificateExpiryWarning is how long before its NotAfter a TLS certificate is warned
// about, by `config check` and in serve's log.
const CertificateExpiryWarning = 7 * 24 * time.Hour

func (t TLS) validate(opts Options) (ps, warnings []Problem) {
	add := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: "server.tls." + key, Message: fmt.Sprintf(format, args...)})
	}
	if (t.CertificateFile == "") != (t.KeyFile == "") {
		if t.CertificateFile == "" {
			add("certificate_file", "is required when server.tls.key_file is set")
		} else {
			add("key_file", "is required when server.tls.certificate_file is set")
		}
		return ps, nil
	}
	if !t.Enabled() {
		if t.ClientCAFile != "" {
			add("client_ca_file", "needs server.tls.certificate_file and server.tls.key_file")
		}
		if t.HealthcheckIdentityFile != "" {
			add("healthcheck_identity_file", "needs server.tls.certificate_file and server.tls.key_file")
		}
		if t.HealthcheckIdentityKeyFile != "" {
			add("healthcheck_identity_key_file", "needs server.tls.certificate_file and server.tls.key_file")
		}
		return ps, nil
	}
	if t.HealthcheckIdentityFile != "" && t.ClientCAFile == "" {
		add("healthcheck_identity_file", "is only presented when server.tls.client_ca_file requires client certificates")
	}
	if t.HealthcheckIdentityKeyFile != "" && t.HealthcheckIdentityFile == "" {
		add("healthcheck_identity_key_file", "is the key of server.tls.healthcheck_identity_file, which is not set")
	}
	if opts.SkipFiles {
		return ps, nil
	}
	if pair, err := ReadKeyPair("server.tls.certificate_file", t.CertificateFile, "server.tls.key_file", t.KeyFile); err != nil {
		ps = append(ps, fileProblem("server.tls.certificate_file", err))
	} else if w := expiryWarning(pair.Leaf, opts.now()); w != "" {
		// An expired certificate is a warning, not a refusal. Refusing it would not stop
		// it being served: the pods already running keep serving it, while the new ones
		// (a rollout, a rescheduled pod) and every SIGHUP reload of an unrelated key would
		// be refused, turning a certificate problem into lost capacity. The rotated pair
		// is picked up from the files without a restart, the expiry is exported as
		// ferrofed_tls_certificate_expiry_seconds, and `ferrofed healthcheck` reports an
		// expired certificate unready: that is the signal, not a refusal to start.
		warnings = append(warnings, Problem{Key: "server.tls.certificate_file", Message: w})
	}
	if t.ClientCAFile != "" {
		if _, err := ReadCertPool("server.tls.client_ca_file", t.ClientCAFile); err != nil {
			ps = append(ps, fileProblem("server.tls.client_ca_file", err))
		}
	}
	if t.HealthcheckIdentityFile != "" {
		certFile, keyFile := t.HealthcheckIdentity()
		keyKey := "server.tls.healthcheck_identity_key_file"
		if t.HealthcheckIdentityKeyFile == "" {
			keyKey = "server.tls.healthcheck_identity_file"
		}
		if _, err := ReadKeyPair("server.tls.healthcheck_identity_file", certFile, keyKey, keyFile); err != nil {
			p := fileProblem("server.tls.healthcheck_identity_file", err)
			if t.HealthcheckIdentityKeyFile == "" && p.Key == "server.tls.healthcheck_identity_file" {
				p.Message = "must hold a PEM certificate and its key (or set server.tls.healthcheck_identity_key_file): " + p.Message
			}
			ps = append(ps, p)
		}
	}
	return ps, warnings
}

// expiryWarning says when leaf has expired or expires within CertificateExpiryWarning
// of now; it is empty otherwise.
func expiryWarning(leaf *x509.Certificate, now time.Time) string {
	if leaf == nil {
		return ""
	}
	notAfter := leaf.NotAfter.UTC().Format(time.RFC3339)
	switch left := leaf.NotAfter.Sub(now); {
	case left <= 0:
		return fmt.Sprintf("the certificate expired at %s (NotAfter), %s ago", notAfter, roundDuration(-left))
	case left < CertificateExpiryWarning:
		return fmt.Sprintf("the certificate expires at %s (NotAfter), in %s: rotate it", notAfter, roundDuration(left))
	}
	return ""
}

func roundDuration(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= day {
		return fmt.Sprintf("%d days %d hours", d/day, (d%day)/time.Hour)
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}

func (r Registry) validate() []Problem {
	var ps []Problem
	ids := map[string]int{}
	endpoints := map[string]int{}
	for i, m := range r.Members {
		key := fmt.Sprintf("registry.members[%d]", i)
		add := func(field, format string, args ...any) {
			ps = append(ps, Problem{Key: key + "." + field, Message: fmt.Sprintf(format, args...)})
		}
		idOK := true
		switch {
		case m.ID == "":
			add("id", "is required")
			idOK = false
		case !idPattern.MatchString(m.ID):
			add("id", "%q must be lower-case letters, digits and '-', at most 63 characters", m.ID)
			idOK = false
		default:
			if j, dup := ids[m.ID]; dup {
				add("id", "%q is already the id of registry.members[%d]", m.ID, j)
				idOK = false
			}
			ids[m.ID] = i
		}
		if m.QueryEndpoint == "" {
			add("query_endpoint", "is required")
		} else if u, err := url.Parse(m.QueryEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("query_endpoint", "must be an absolute http or https URL")
		} else if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			add("query_endpoint", "must not carry credentials, a query or a fragment")
		}
		if m.EndpointID != "" && (idOK || !m.endpointIDDerived) {
			if !idPattern.MatchString(m.EndpointID) {
				add("endpoint_id", "%q must be lower-case letters, digits and '-', at most 63 characters", m.EndpointID)
			} else if j, dup := endpoints[m.EndpointID]; dup {
				add("endpoint_id", "%q is already the endpoint id of registry.members[%d]", m.EndpointID, j)
			}
			endpoints[m.EndpointID] = i
		}
	}
	return ps
}

// dataPlaneProblems checks auth.data_plane: a required data plane needs an issuer to
// verify its tokens, and an open one is said out loud at every start and reload.
func (a Auth) dataPlaneProblems() (ps, warnings []Problem) {
	switch a.DataPlane {
	case DataPlaneRequired:
		if !slices.ContainsFunc(a.Issuers, func(is Issuer) bool { return !is.ReadOnly }) {
			ps = append(ps, Problem{Key: "auth.data_plane", Message: `is "required" (the default) but no [[auth.issuers]] is configured ` +
				`that is not read_only: add an issuer under auth.issuers to verify the clients' tokens, or write data_plane = "open"`})
		}
	case DataPlaneOpen:
		warnings = append(warnings, Problem{Key: "auth.data_plane", Message: `is "open": anyone who can reach the gateway ` +
			`can search every member for every patient, with no token`})
	default:
		ps = append(ps, Problem{Key: "auth.data_plane", Message: fmt.Sprintf(`%q must be "required" or "open"`, a.DataPlane)})
	}
	return ps, warnings
}

func (is Issuer) validate(key string, opts Options) []Problem {
	var ps []Problem
	add := func(field, format string, args ...any) {
		ps = append(ps, Problem{Key: key + "." + field, Message: fmt.Sprintf(format, args...)})
	}
	if is.Issuer == "" {
		add("issuer", "is required")
	}
	if is.Audience == "" {
		add("audience", "is required")
	}
	if is.OperatorScope == "" {
		add("operator_scope", "is required")
	} else if strings.ContainsAny(is.OperatorScope, " \t") {
		add("operator_scope", "%q must be one scope, without spaces", is.OperatorScope)
	}
	switch {
	case is.JWKSFile == "" && is.JWKSURL == "":
		add("jwks_file", "one of jwks_file or jwks_url is required")
	case is.JWKSFile != "" && is.JWKSURL != "":
		add("jwks_url", "set only one of jwks_file and jwks_url")
	case is.JWKSURL != "":
		if u, err := url.Parse(is.JWKSURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("jwks_url", "must be an absolute http or https URL")
		}
	case !opts.SkipFiles:
		// Read and parsed as serve reads it: a file that exists is not yet a key set.
		if _, err := ReadJWKSFile(key+".jwks_file", is.JWKSFile); err != nil {
			ps = append(ps, fileProblem(key+".jwks_file", err))
		}
	}
	if is.CAFile != "" {
		// A CA that verifies nothing would be ignored in silence.
		if u, err := url.Parse(is.JWKSURL); is.JWKSURL == "" || err != nil || u.Scheme != "https" {
			add("ca_file", "verifies an https jwks_url only: this issuer has none")
		} else if !opts.SkipFiles {
			if _, err := ReadCertPool(key+".ca_file", is.CAFile); err != nil {
				ps = append(ps, fileProblem(key+".ca_file", err))
			}
		}
	}
	for _, a := range is.Algorithms {
		if !slices.Contains(SupportedAlgorithms, a) {
			add("algorithms", "%q is not one of %s", a, strings.Join(SupportedAlgorithms, ", "))
		}
	}
	return append(ps, is.endpointProblems(key)...)
}

// endpointProblems checks the endpoints discovery publishes: absolute https URLs, an
// authorization endpoint and grant types only beside a token endpoint, and grant
// types SMART names (the authorization code only with an authorization endpoint).
func (is Issuer) endpointProblems(key string) []Problem {
	var ps []Problem
	add := func(field, format string, args ...any) {
		ps = append(ps, Problem{Key: key + "." + field, Message: fmt.Sprintf(format, args...)})
	}
	for _, e := range [][2]string{{"token_endpoint", is.TokenEndpoint}, {"authorization_endpoint", is.AuthorizationEndpoint}} {
		if u, err := url.Parse(e[1]); e[1] != "" && (err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "") {
			add(e[0], "must be an absolute https URL, without credentials or a fragment")
		}
	}
	if is.TokenEndpoint == "" && is.AuthorizationEndpoint != "" {
		add("authorization_endpoint", "is published with the issuer's token_endpoint only: set token_endpoint too")
	}
	if is.TokenEndpoint == "" && len(is.GrantTypesSupported) > 0 {
		add("grant_types_supported", "are the grant types of the token_endpoint: set token_endpoint too")
	}
	for _, g := range is.GrantTypesSupported {
		switch {
		case !slices.Contains(GrantTypes, g):
			add("grant_types_supported", "%q is not one of %s", g, strings.Join(GrantTypes, ", "))
		case g == "authorization_code" && is.AuthorizationEndpoint == "":
			add("grant_types_supported", "authorization_code needs the issuer's authorization_endpoint")
		}
	}
	return ps
}
