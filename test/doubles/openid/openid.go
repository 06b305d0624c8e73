// Package openid is a real OpenID provider for tests: zitadel/oidc's OpenID Provider
// (its op package) on https://127.0.0.1, behind a certificate of a CA made for the
// test, with confidential clients that obtain JWT access tokens carrying SMART scopes
// by the client_credentials grant, as a backend service does before it calls the data
// plane (docs/security.md, "Scopes on the data plane"). Its discovery document
// advertises the token endpoint and the jwks_uri an [[auth.issuers]] table names.
//
// Unlike test/doubles/issuer, nothing here is signed by the test: a token is what the
// provider answers a real token request, and its keys are what its jwks_uri serves.
package openid

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/ferrofed/ferrofed/test/certpool"
)

const (
	// DefaultAudience is the aud of the tokens when Options.Audience is empty.
	DefaultAudience = "ferrofed"
	// OperatorScope is the operator_scope of Table.
	OperatorScope = "ferrofed.operator"
)

// Client is a confidential client of the provider.
type Client struct {
	ID, Secret string
	// Scopes are the scopes it may be granted: a request for another is refused
	// (invalid_scope), and a request for none is granted all of them.
	Scopes []string
	// Audience is the aud of its tokens; default Options.Audience.
	Audience string
}

// Options shape a provider.
type Options struct {
	Clients []Client
	// Audience is the aud of the tokens; default DefaultAudience.
	Audience string
	// TokenLifetime is how long a token is valid; default 5 minutes.
	TokenLifetime time.Duration
}

// Provider is a running OpenID provider.
type Provider struct {
	// Issuer is its iss, https://127.0.0.1:<port>.
	Issuer string
	// JWKSURL and TokenURL are the jwks_uri and token_endpoint of its discovery
	// document.
	JWKSURL, TokenURL string
	// CAFile is the PEM file of the CA its certificate is signed by: the
	// [[auth.issuers]] ca_file that trusts it. CAPool holds the same CA.
	CAFile string
	CAPool *x509.CertPool
	// HTTP is a client that trusts CAPool.
	HTTP *http.Client

	audience string
	storage  *storage
	served   atomic.Int64
}

// Start starts a provider for opts on a free loopback port, until t ends, and reads
// its discovery document.
func Start(t testing.TB, opts Options) *Provider {
	t.Helper()
	if opts.Audience == "" {
		opts.Audience = DefaultAudience
	}
	if opts.TokenLifetime == 0 {
		opts.TokenLifetime = 5 * time.Minute
	}
	st := &storage{audience: opts.Audience, lifetime: opts.TokenLifetime, clients: map[string]Client{}}
	for _, c := range opts.Clients {
		st.clients[c.ID] = c
	}
	if _, err := st.rotate(); err != nil {
		t.Fatal(err)
	}
	p := &Provider{audience: opts.Audience, storage: st}
	st.served = &p.served
	caPEM, leaf, err := newPKI()
	if err != nil {
		t.Fatal(err)
	}
	if p.CAPool, err = certpool.FromPEM(caPEM); err != nil {
		t.Fatal(err)
	}
	p.CAFile = filepath.Join(t.TempDir(), "openid-ca.pem")
	if err := os.WriteFile(p.CAFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	p.HTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: p.CAPool, MinVersion: tls.VersionTLS12}}}

	var handler atomic.Pointer[http.Handler]
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*handler.Load()).ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p.Issuer = srv.URL

	cfg := &op.Config{}
	if _, err := rand.Read(cfg.CryptoKey[:]); err != nil {
		t.Fatal(err)
	}
	provider, err := op.NewProvider(cfg, st, op.StaticIssuer(p.Issuer))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Handler(provider)
	handler.Store(&h)
	if err := p.discover(); err != nil {
		t.Fatal(err)
	}
	return p
}

// discover reads the discovery document: the endpoints, and that the client_credentials
// grant with a client secret sent by HTTP Basic is offered.
func (p *Provider) discover() error {
	res, err := p.HTTP.Get(p.Issuer + oidc.DiscoveryEndpoint)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var d oidc.DiscoveryConfiguration
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&d); err != nil {
		return fmt.Errorf("openid: the discovery document: %w", err)
	}
	switch {
	case d.Issuer != p.Issuer:
		return fmt.Errorf("openid: the discovery document names issuer %q, not %q", d.Issuer, p.Issuer)
	case !slices.Contains(d.GrantTypesSupported, oidc.GrantTypeClientCredentials):
		return fmt.Errorf("openid: the client_credentials grant is not offered: %v", d.GrantTypesSupported)
	case !slices.Contains(d.TokenEndpointAuthMethodsSupported, oidc.AuthMethodBasic):
		return fmt.Errorf("openid: client_secret_basic is not offered: %v", d.TokenEndpointAuthMethodsSupported)
	case !strings.HasPrefix(d.JwksURI, p.Issuer+"/") || !strings.HasPrefix(d.TokenEndpoint, p.Issuer+"/"):
		return fmt.Errorf("openid: the endpoints %q and %q are not the issuer's", d.JwksURI, d.TokenEndpoint)
	}
	p.JWKSURL, p.TokenURL = d.JwksURI, d.TokenEndpoint
	return nil
}

// Table is an [[auth.issuers]] table that trusts the provider: its issuer, audience
// (Options.Audience), jwks_url and ca_file, OperatorScope as its operator scope.
func (p *Provider) Table() string {
	return fmt.Sprintf("[[auth.issuers]]\nissuer = %q\naudience = %q\njwks_url = %q\nca_file = %q\noperator_scope = %q\n",
		p.Issuer, p.audience, p.JWKSURL, p.CAFile, OperatorScope)
}

// TokenError is a token request the provider refused.
type TokenError struct {
	Status      int
	Code        string // the OAuth error code: invalid_client, invalid_scope...
	Description string
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("openid: token request refused: %d %s: %s", e.Status, e.Code, e.Description)
}

// Token asks the token endpoint for an access token by the client_credentials grant,
// the client authenticated by HTTP Basic, for scopes (none: every scope the client may
// have). A refusal is a *TokenError.
func (p *Provider) Token(clientID, secret string, scopes ...string) (string, error) {
	form := url.Values{"grant_type": {string(oidc.GrantTypeClientCredentials)}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	req, err := http.NewRequest(http.MethodPost, p.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	// The client id and secret are form-encoded before they are joined.
	req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	res, err := p.HTTP.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 64<<10)).Decode(&body); err != nil {
		return "", fmt.Errorf("openid: the token answer (%d): %w", res.StatusCode, err)
	}
	if res.StatusCode != http.StatusOK {
		return "", &TokenError{Status: res.StatusCode, Code: body.Error, Description: body.Description}
	}
	if !strings.EqualFold(body.TokenType, oidc.BearerToken) || body.AccessToken == "" {
		return "", fmt.Errorf("openid: the token answer has token_type %q and no access token", body.TokenType)
	}
	return body.AccessToken, nil
}

// ClientToken is Token, failing t on a refusal.
func (p *Provider) ClientToken(t testing.TB, clientID, secret string, scopes ...string) string {
	t.Helper()
	tok, err := p.Token(clientID, secret, scopes...)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// RotateKey makes a new key the one tokens are signed with, and returns its id. The
// old keys stay in the key set, as a provider keeps a retired key published while
// tokens it signed are valid.
func (p *Provider) RotateKey(t testing.TB) string {
	t.Helper()
	kid, err := p.storage.rotate()
	if err != nil {
		t.Fatal(err)
	}
	return kid
}

// KeySetsServed is how many times the jwks_uri was answered.
func (p *Provider) KeySetsServed() int64 { return p.served.Load() }

// newPKI is a CA's certificate (PEM) and a key pair it signed for 127.0.0.1, ::1 and
// localhost.
func newPKI() ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "openid double CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "openid double"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leaf := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), leaf, nil
}
