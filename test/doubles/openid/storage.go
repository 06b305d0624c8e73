package openid

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// storage is what the provider (zitadel/oidc's op package) asks about clients, keys
// and tokens: confidential clients of the client_credentials grant, RS256 signing keys
// and JWT access tokens. Every other grant is refused.
type storage struct {
	audience string
	lifetime time.Duration
	served   *atomic.Int64 // key sets answered

	mu      sync.RWMutex
	clients map[string]Client
	keys    []*signingKey // the last one signs; all are published
}

// errUnsupported answers what the double does not do (the authorization code flow,
// refresh tokens, sessions): its clients have the client_credentials grant only.
var errUnsupported = errors.New("openid double: only the client_credentials grant is supported")

var (
	_ op.Storage                        = (*storage)(nil)
	_ op.ClientCredentialsStorage       = (*storage)(nil)
	_ op.CanGetPrivateClaimsFromRequest = (*storage)(nil)
)

// signingKey is an RSA key the provider signs access tokens with (op.SigningKey), and
// publishes the public half of (op.Key, through publicKey).
type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func newSigningKey() (*signingKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	return &signingKey{id: randomID(), key: key}, nil
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ *signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return k.key.Public() }

// randomID is 16 random bytes in hex: a key id, a token id.
func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// client is a Client as the provider sees it (op.Client): confidential, secret sent
// with HTTP Basic, the client_credentials grant only, JWT access tokens.
type client struct{ Client }

func (c client) GetID() string                       { return c.ID }
func (c client) RedirectURIs() []string              { return nil }
func (c client) PostLogoutRedirectURIs() []string    { return nil }
func (c client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c client) ResponseTypes() []oidc.ResponseType  { return nil }
func (c client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (c client) LoginURL(string) string               { return "" }
func (c client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c client) IDTokenLifetime() time.Duration       { return 0 }
func (c client) DevMode() bool                        { return false }
func (c client) IsScopeAllowed(scope string) bool     { return slices.Contains(c.Scopes, scope) }
func (c client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c client) ClockSkew() time.Duration             { return 0 }
func (c client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// tokenRequest is one granted client_credentials request: the client is the subject.
type tokenRequest struct {
	subject  string
	audience []string
	scopes   []string
}

func (r *tokenRequest) GetSubject() string    { return r.subject }
func (r *tokenRequest) GetAudience() []string { return r.audience }
func (r *tokenRequest) GetScopes() []string   { return r.scopes }

// ClientCredentials authenticates a client by its secret.
func (s *storage) ClientCredentials(_ context.Context, clientID, clientSecret string) (op.Client, error) {
	s.mu.RLock()
	c, ok := s.clients[clientID]
	s.mu.RUnlock()
	if !ok || subtle.ConstantTimeCompare([]byte(c.Secret), []byte(clientSecret)) != 1 {
		return nil, errors.New("unknown client or wrong secret")
	}
	return client{c}, nil
}

// ClientCredentialsTokenRequest grants the scopes asked for, each of which the client
// must be allowed (invalid_scope otherwise), or, when none is asked for, every scope
// the client is allowed.
func (s *storage) ClientCredentialsTokenRequest(_ context.Context, clientID string, scopes []string) (op.TokenRequest, error) {
	s.mu.RLock()
	c, ok := s.clients[clientID]
	s.mu.RUnlock()
	if !ok {
		return nil, oidc.ErrInvalidClient()
	}
	if len(scopes) == 0 {
		scopes = c.Scopes
	}
	for _, sc := range scopes {
		if !slices.Contains(c.Scopes, sc) {
			return nil, oidc.ErrInvalidScope().WithDescription("the client may not be granted %q", sc)
		}
	}
	aud := c.Audience
	if aud == "" {
		aud = s.audience
	}
	return &tokenRequest{subject: clientID, audience: []string{aud}, scopes: slices.Clone(scopes)}, nil
}

// CreateAccessToken gives a granted request its token id and expiry; the provider
// signs the JWT.
func (s *storage) CreateAccessToken(context.Context, op.TokenRequest) (string, time.Time, error) {
	return randomID(), time.Now().Add(s.lifetime), nil
}

// GetPrivateClaimsFromRequest puts the granted scopes in the token's scope claim,
// space-separated, as SMART's backend services read them.
func (s *storage) GetPrivateClaimsFromRequest(_ context.Context, r op.TokenRequest, _ []string) (map[string]any, error) {
	return map[string]any{"scope": strings.Join(r.GetScopes(), " ")}, nil
}

// GetPrivateClaimsFromScopes is GetPrivateClaimsFromRequest for the provider's other
// paths, which the double does not take.
func (s *storage) GetPrivateClaimsFromScopes(_ context.Context, _, _ string, scopes []string) (map[string]any, error) {
	return map[string]any{"scope": strings.Join(scopes, " ")}, nil
}

// SigningKey is the newest key.
func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.keys[len(s.keys)-1], nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

// KeySet is every key's public half, what the jwks_uri serves: a rotated-out key
// still verifies the tokens it signed.
func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	s.served.Add(1)
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]op.Key, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, publicKey{k})
	}
	return out, nil
}

// rotate makes a new key the signing one and returns its id.
func (s *storage) rotate() (string, error) {
	k, err := newSigningKey()
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.keys = append(s.keys, k)
	s.mu.Unlock()
	return k.id, nil
}

func (s *storage) GetClientByClientID(_ context.Context, clientID string) (op.Client, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.clients[clientID]
	if !ok {
		return nil, fmt.Errorf("no client %q", clientID)
	}
	return client{c}, nil
}

func (s *storage) AuthorizeClientIDSecret(ctx context.Context, clientID, clientSecret string) error {
	_, err := s.ClientCredentials(ctx, clientID, clientSecret)
	return err
}

func (s *storage) Health(context.Context) error { return nil }

// What the client_credentials grant never asks for.

func (s *storage) CreateAuthRequest(context.Context, *oidc.AuthRequest, string) (op.AuthRequest, error) {
	return nil, errUnsupported
}
func (s *storage) AuthRequestByID(context.Context, string) (op.AuthRequest, error) {
	return nil, errUnsupported
}
func (s *storage) AuthRequestByCode(context.Context, string) (op.AuthRequest, error) {
	return nil, errUnsupported
}
func (s *storage) SaveAuthCode(context.Context, string, string) error { return errUnsupported }
func (s *storage) DeleteAuthRequest(context.Context, string) error    { return errUnsupported }
func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errUnsupported
}
func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, errUnsupported
}
func (s *storage) TerminateSession(context.Context, string, string) error { return errUnsupported }
func (s *storage) RevokeToken(context.Context, string, string, string) *oidc.Error {
	return oidc.ErrUnsupportedGrantType().WithDescription("revocation is not supported")
}
func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}
func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}
func (s *storage) SetUserinfoFromToken(context.Context, *oidc.UserInfo, string, string, string) error {
	return errUnsupported
}
func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errUnsupported
}
func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errUnsupported
}
func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errUnsupported
}
