// Package auth verifies the bearer tokens of the gateway's operator surface
// ({base}/operator/*): JWTs signed by one of the configured [[auth.issuers]], checked
// against that issuer's published keys, algorithms, audience and validity window, and
// carrying the issuer's operator_scope.
//
// Verification is ordered so that hostile input costs little: the header's size is
// checked before anything is parsed, the token's shape before it is decoded, its
// algorithm against the allow-list before any key is looked at, and only then is a
// signature verified. Error descriptions are short and fixed: they tell a caller what
// to fix without echoing the token or naming a key source.
package auth

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/ferrofed/ferrofed/gateway/config"
)

const (
	// MaxAuthorizationBytes is the longest Authorization header the gateway reads. A
	// real operator token is 1-2 KiB; Go's server accepts 1 MiB of headers, and
	// nothing of such a header is parsed.
	MaxAuthorizationBytes = 8 << 10
	// DefaultLeeway is the clock skew allowed on exp, nbf and iat.
	DefaultLeeway = 30 * time.Second
	// DefaultMinRefetchInterval is the least time between two fetches of one issuer's
	// jwks_url, whatever triggers them (refresh, unknown kid).
	DefaultMinRefetchInterval = 10 * time.Second
)

// Options tune a Verifier. The zero value is production's.
type Options struct {
	// HTTPClient fetches jwks_url key sets; default a client with a 5 s timeout.
	HTTPClient *http.Client
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Leeway is the allowed clock skew; default DefaultLeeway.
	Leeway time.Duration
	// MinRefetchInterval rate-limits fetches per issuer; default DefaultMinRefetchInterval.
	MinRefetchInterval time.Duration
}

// Verifier checks operator tokens against the configured issuers. It is safe for
// concurrent use. A Verifier with no issuer refuses every token.
type Verifier struct {
	cache    tokenCache
	byIssuer map[string][]*issuer
	algs     []jose.SignatureAlgorithm // every algorithm any issuer allows
	now      func() time.Time
	leeway   time.Duration
}

type issuer struct {
	cfg  config.Issuer
	algs []string
	keys *keySource
}

// New builds a Verifier for issuers. A jwks_file is read now (an unreadable or empty
// one is an error naming its key); a jwks_url is fetched on first use, so that an
// issuer that is down at start does not stop the gateway from starting.
func New(issuers []config.Issuer, opts Options) (*Verifier, error) {
	if opts.HTTPClient == nil {
		// The issuer's answer head is bounded as its body is (Go's default is 10 MiB).
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxResponseHeaderBytes = MaxResponseHeaderBytes
		opts.HTTPClient = &http.Client{Timeout: fetchTimeout, Transport: tr}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Leeway == 0 {
		opts.Leeway = DefaultLeeway
	}
	if opts.MinRefetchInterval == 0 {
		opts.MinRefetchInterval = DefaultMinRefetchInterval
	}
	v := &Verifier{byIssuer: map[string][]*issuer{}, now: opts.Now, leeway: opts.Leeway}
	for i, ic := range issuers {
		key := fmt.Sprintf("auth.issuers[%d]", i)
		algs := ic.Algorithms
		if len(algs) == 0 {
			algs = config.DefaultAlgorithms
		}
		for _, a := range algs {
			if !slices.Contains(config.SupportedAlgorithms, a) {
				return nil, fmt.Errorf("%s.algorithms: %q is not allowed", key, a)
			}
			if !slices.Contains(v.algs, jose.SignatureAlgorithm(a)) {
				v.algs = append(v.algs, jose.SignatureAlgorithm(a))
			}
		}
		if ic.Issuer == "" || ic.Audience == "" || ic.OperatorScope == "" {
			return nil, fmt.Errorf("%s: issuer, audience and operator_scope are required", key)
		}
		ks, err := keysOf(key, ic, opts)
		if err != nil {
			return nil, err
		}
		v.byIssuer[ic.Issuer] = append(v.byIssuer[ic.Issuer], &issuer{cfg: ic, algs: algs, keys: ks})
	}
	return v, nil
}

// Configured reports whether any issuer is configured; without one the operator
// surface is closed.
func (v *Verifier) Configured() bool { return v != nil && len(v.byIssuer) > 0 }

// Principal is who a verified token speaks for.
type Principal struct {
	Issuer  string
	Subject string
	Scopes  []string
	// Patient is the token's SMART launch context (its patient claim), "" for none;
	// FHIRUser its fhirUser claim; ClientID its client_id claim, or azp.
	Patient  string
	FHIRUser string
	ClientID string
	// Operator is true when Scopes hold the operator_scope of the issuer that verified
	// the token: on the data plane, such a caller is told why a member was left out
	// (docs/security.md, "What a caller is told of the members").
	Operator bool
	// ReadOnly is true when a read_only issuer verified the token: Middleware lets it
	// GET and HEAD only.
	ReadOnly bool
}

// Error is a refused token: the status to answer (401 or 403), the RFC 6750 error
// code ("" when no credentials were sent at all), and a short public description.
type Error struct {
	Status      int
	Code        string
	Description string
	// Scope is the scope a 403 lacked, for the challenge.
	Scope string
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Description) }

// Challenge is the WWW-Authenticate value for the refusal (RFC 6750 §3).
func (e *Error) Challenge() string {
	var b strings.Builder
	b.WriteString(`Bearer realm="ferrofed"`)
	if e.Code != "" {
		fmt.Fprintf(&b, `, error=%q`, e.Code)
	}
	if e.Description != "" {
		fmt.Fprintf(&b, `, error_description=%q`, e.Description)
	}
	if e.Scope != "" {
		fmt.Fprintf(&b, `, scope=%q`, e.Scope)
	}
	return b.String()
}

// The refusals. Descriptions are fixed strings: they never echo the token.
var (
	ErrNoIssuer     = &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "no token issuer is configured ([[auth.issuers]]): the operator surface accepts no token"}
	ErrMissing      = &Error{Status: http.StatusUnauthorized, Description: "a bearer token is required"}
	ErrTooLarge     = &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "the authorization header is too large"}
	ErrNotBearer    = &Error{Status: http.StatusUnauthorized, Code: "invalid_request", Description: "the authorization scheme must be Bearer"}
	ErrMalformed    = &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "the token is not a signed JWT"}
	ErrAlgorithm    = &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "the token's algorithm is not allowed"}
	ErrIssuer       = &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "the token's issuer is not trusted"}
	ErrUnknownKey   = &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "the token's signing key is not known"}
	ErrSignature    = &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "the token's signature does not verify"}
	ErrAudience     = &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "the token is not for this audience"}
	ErrExpired      = &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "the token has expired"}
	ErrNoExpiry     = &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "the token has no expiry"}
	ErrNotYetValid  = &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "the token is not valid yet"}
	ErrClaims       = &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "the token's claims are invalid"}
	errInsufficient = "the token lacks the operator scope"
	// ErrReadOnly refuses a write by a read_only issuer's token.
	ErrReadOnly = &Error{Status: http.StatusForbidden, Code: "insufficient_scope", Description: "the token's issuer is read-only: it may only read"}
)

// tokenClaims are the claims the gateway reads.
type tokenClaims struct {
	jwt.Claims
	Scope json.RawMessage `json:"scope,omitempty"`
	Scp   json.RawMessage `json:"scp,omitempty"`
	// The SMART launch context and the client (SMART App Launch; RFC 8693 client_id,
	// OpenID Connect azp).
	Patient         string `json:"patient,omitempty"`
	FHIRUser        string `json:"fhirUser,omitempty"`
	ClientID        string `json:"client_id,omitempty"`
	AuthorizedParty string `json:"azp,omitempty"`
}

// Verify checks the value of an Authorization header. ctx bounds a key fetch the
// token may trigger.
func (v *Verifier) Verify(ctx context.Context, authorization string) (*Principal, *Error) {
	return v.verify(ctx, authorization, "")
}

// VerifyScope is Verify for another surface than the operator's: the token must carry
// scope (the PMIR feed's pmir.feed_scope) instead of its issuer's operator_scope.
func (v *Verifier) VerifyScope(ctx context.Context, authorization, scope string) (*Principal, *Error) {
	if scope == "" {
		return nil, ErrNoIssuer
	}
	return v.verify(ctx, authorization, scope)
}

// VerifyClient is Verify for the data plane: the token must verify, but no scope is
// asked for here; what its scopes allow is decided per request (gateway/access).
func (v *Verifier) VerifyClient(ctx context.Context, authorization string) (*Principal, *Error) {
	return v.verify(ctx, authorization, anyScope)
}

// anyScope, as verify's scope, asks for no scope at all. It is no scope a token could
// carry: scopes are split on spaces and never hold a NUL.
const anyScope = "\x00"

// verify checks authorization for scope, for the issuer's operator_scope when scope
// is empty, or for none when it is anyScope.
func (v *Verifier) verify(ctx context.Context, authorization, scope string) (*Principal, *Error) {
	if !v.Configured() {
		return nil, ErrNoIssuer
	}
	if authorization == "" {
		return nil, ErrMissing
	}
	if len(authorization) > MaxAuthorizationBytes {
		return nil, ErrTooLarge
	}
	scheme, token, _ := strings.Cut(authorization, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return nil, ErrNotBearer
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, ErrMissing
	}
	key := cacheKey{token: token, scope: scope}
	if p, ok := v.cache.get(key, v.now()); ok {
		return p, nil
	}
	// A compact JWS is three base64url parts; anything else is refused before the
	// library decodes a byte of it.
	if strings.Count(token, ".") != 2 {
		return nil, ErrMalformed
	}
	tok, err := jwt.ParseSigned(token, v.algs)
	if err != nil {
		var alg *jose.ErrUnexpectedSignatureAlgorithm
		if errors.As(err, &alg) {
			return nil, ErrAlgorithm
		}
		return nil, ErrMalformed
	}
	if len(tok.Headers) != 1 {
		return nil, ErrMalformed
	}
	hdr := tok.Headers[0]
	var unverified tokenClaims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, ErrMalformed
	}
	// The issuer named by the unverified token only picks whose keys to try; every
	// claim is checked again once the signature has verified.
	candidates := v.byIssuer[unverified.Issuer]
	if scope != "" {
		// Read-only issuers sign for the operator surface alone (docs/security.md).
		candidates = slices.DeleteFunc(slices.Clone(candidates), func(is *issuer) bool { return is.cfg.ReadOnly })
	}
	if len(candidates) == 0 {
		return nil, ErrIssuer
	}
	refusal := ErrAlgorithm
	for _, is := range candidates {
		p, e := v.verifyWith(ctx, is, tok, hdr, scope)
		if e == nil {
			v.cache.put(key, p, unverified.Expiry.Time(), v.now())
			return p, nil
		}
		// A 403 from an issuer that verified the token is the most precise answer
		// there is; otherwise keep the last refusal.
		if e.Status == http.StatusForbidden {
			return nil, e
		}
		refusal = e
	}
	return nil, refusal
}

func (v *Verifier) verifyWith(ctx context.Context, is *issuer, tok *jwt.JSONWebToken, hdr jose.Header, scope string) (*Principal, *Error) {
	if !slices.Contains(is.algs, hdr.Algorithm) {
		return nil, ErrAlgorithm
	}
	keys := is.keys.lookup(ctx, hdr.KeyID, hdr.Algorithm)
	if len(keys) == 0 {
		return nil, ErrUnknownKey
	}
	var claims tokenClaims
	verified := false
	for _, k := range keys {
		if tok.Claims(k.Key, &claims) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, ErrSignature
	}
	if claims.Expiry == nil {
		return nil, ErrNoExpiry
	}
	err := claims.ValidateWithLeeway(jwt.Expected{
		Issuer:      is.cfg.Issuer,
		AnyAudience: jwt.Audience{is.cfg.Audience},
		Time:        v.now(),
	}, v.leeway)
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrInvalidAudience):
		return nil, ErrAudience
	case errors.Is(err, jwt.ErrExpired):
		return nil, ErrExpired
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, ErrNotYetValid
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return nil, ErrIssuer
	default:
		return nil, ErrClaims
	}
	scopes := Scopes(claims.Scope, claims.Scp)
	p := &Principal{Issuer: claims.Issuer, Subject: claims.Subject, Scopes: scopes, Patient: claims.Patient,
		FHIRUser: claims.FHIRUser, ClientID: cmp.Or(claims.ClientID, claims.AuthorizedParty), Operator: HasScope(scopes, is.cfg.OperatorScope),
		ReadOnly: is.cfg.ReadOnly}
	if scope == anyScope {
		return p, nil
	}
	if scope == "" {
		scope = is.cfg.OperatorScope
	}
	if !HasScope(scopes, scope) {
		desc := errInsufficient
		if scope != is.cfg.OperatorScope {
			desc = "the token lacks the scope this route requires"
		}
		return nil, &Error{Status: http.StatusForbidden, Code: "insufficient_scope", Description: desc, Scope: scope}
	}
	return p, nil
}
