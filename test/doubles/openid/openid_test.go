package openid_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/ferrofed/ferrofed/test/doubles/openid"
)

// claims are the claims of an access token the gateway reads.
type claims struct {
	jwt.Claims
	ClientID string `json:"client_id"`
	Scope    string `json:"scope"`
}

// keySet is the provider's key set, fetched from its jwks_uri.
func keySet(t *testing.T, p *openid.Provider) jose.JSONWebKeySet {
	t.Helper()
	res, err := p.HTTP.Get(p.JWKSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(res.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	return set
}

// verify checks tok's signature against the provider's published keys and returns its
// claims and key id.
func verify(t *testing.T, p *openid.Provider, tok string) (claims, string) {
	t.Helper()
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	kid := parsed.Headers[0].KeyID
	set := keySet(t, p)
	keys := set.Key(kid)
	if len(keys) != 1 {
		t.Fatalf("the key set holds %d keys of id %q, want 1", len(keys), kid)
	}
	var c claims
	if err := parsed.Claims(keys[0].Key, &c); err != nil {
		t.Fatalf("the token does not verify with its published key: %v", err)
	}
	return c, kid
}

func TestTheProviderIssuesSMARTTokensByClientCredentials(t *testing.T) {
	p := openid.Start(t, openid.Options{Clients: []openid.Client{
		{ID: "reader", Secret: "s3cret:/+", Scopes: []string{"system/Patient.rs", "system/Observation.rs"}},
		{ID: "elsewhere", Secret: "x", Scopes: []string{"system/*.read"}, Audience: "another-api"},
	}})
	if !strings.HasPrefix(p.Issuer, "https://127.0.0.1:") || !strings.HasPrefix(p.JWKSURL, p.Issuer+"/") || !strings.HasPrefix(p.TokenURL, p.Issuer+"/") {
		t.Fatalf("issuer %q, jwks_uri %q, token endpoint %q", p.Issuer, p.JWKSURL, p.TokenURL)
	}
	// Only the provider's CA makes its certificate trusted.
	if res, err := http.Get(p.JWKSURL); err == nil {
		res.Body.Close()
		t.Fatal("the system's roots trusted the provider's certificate")
	}

	before := time.Now().Add(-time.Second)
	c, kid := verify(t, p, p.ClientToken(t, "reader", "s3cret:/+", "system/Patient.rs"))
	if c.Issuer != p.Issuer || !slices.Equal([]string(c.Audience), []string{openid.DefaultAudience}) || c.Subject != "reader" ||
		c.ClientID != "reader" || c.Scope != "system/Patient.rs" || c.Expiry == nil ||
		c.Expiry.Time().Before(before.Add(5*time.Minute)) || c.Expiry.Time().After(time.Now().Add(5*time.Minute+time.Second)) {
		t.Fatalf("claims %+v", c)
	}
	if c, _ := verify(t, p, p.ClientToken(t, "reader", "s3cret:/+")); c.Scope != "system/Patient.rs system/Observation.rs" {
		t.Fatalf("a request for no scope was granted %q, want every scope of the client", c.Scope)
	}
	if c, _ := verify(t, p, p.ClientToken(t, "elsewhere", "x")); !slices.Equal([]string(c.Audience), []string{"another-api"}) {
		t.Fatalf("the client's own audience: aud %v", c.Audience)
	}

	refusals := []struct {
		name, id, secret string
		scopes           []string
		status           int
		code             string
	}{
		{"a scope the client may not have", "reader", "s3cret:/+", []string{"system/Patient.rs", "system/*.cruds"}, 400, "invalid_scope"},
		{"a wrong secret", "reader", "wrong", nil, 401, "invalid_client"},
		{"an unknown client", "nobody", "s3cret:/+", nil, 401, "invalid_client"},
	}
	for _, r := range refusals {
		_, err := p.Token(r.id, r.secret, r.scopes...)
		var te *openid.TokenError
		if !errors.As(err, &te) || te.Status != r.status || te.Code != r.code {
			t.Errorf("%s: %v, want %d %s", r.name, err, r.status, r.code)
		}
	}

	old := p.ClientToken(t, "reader", "s3cret:/+", "system/Patient.rs")
	served := p.KeySetsServed()
	next := p.RotateKey(t)
	if _, got := verify(t, p, p.ClientToken(t, "reader", "s3cret:/+")); got != next || got == kid {
		t.Fatalf("after the rotation a token is signed by %q, want the new key %q (the old one was %q)", got, next, kid)
	}
	if _, got := verify(t, p, old); got != kid {
		t.Fatalf("a token of the retired key names %q", got)
	}
	if p.KeySetsServed() <= served {
		t.Fatal("the key sets served are not counted")
	}
}
