package auth

import (
	"context"
	"crypto/rsa"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// cachingVerifier is a verifier of one RSA key on a fake clock, and its key.
func cachingVerifier(t *testing.T) (*Verifier, *fakeClock, *rsa.PrivateKey) {
	t.Helper()
	rk, _ := testKeys(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: now}
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, jwks(t, jose.JSONWebKey{Key: rk, KeyID: "rsa-1", Use: "sig"}), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := New([]config.Issuer{{Issuer: testIssuer, Audience: testAudience, JWKSFile: file, OperatorScope: testScope}}, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return v, clock, rk
}

// A verified token is served from the cache until the earlier of its expiry and
// MaxCachedFor: after its expiry (and the leeway) it is refused again, and a key
// removed from the key set stops it within MaxCachedFor. A refusal is never cached.
func TestTheCacheNeverOutlivesTheTokenOrItsKey(t *testing.T) {
	v, clock, rk := cachingVerifier(t)
	now := clock.Now()
	claims := goodClaims(now)
	claims["exp"] = now.Add(2 * MaxCachedFor).Unix()
	tok := "Bearer " + sign(t, jose.RS256, rk, "rsa-1", claims)
	first, e := v.VerifyClient(context.Background(), tok)
	if e != nil {
		t.Fatal(e)
	}
	if again, e := v.VerifyClient(context.Background(), tok); e != nil || again != first {
		t.Fatalf("the second verification was not the cached one: %v", e)
	}
	// The key leaves the issuer's set: the cache keeps the token no longer than
	// MaxCachedFor.
	v.byIssuer[testIssuer][0].keys = &keySource{}
	clock.Advance(MaxCachedFor - time.Second)
	if _, e := v.VerifyClient(context.Background(), tok); e != nil {
		t.Fatalf("refused within MaxCachedFor: %v", e)
	}
	clock.Advance(2 * time.Second)
	if _, e := v.VerifyClient(context.Background(), tok); e == nil {
		t.Fatal("a token whose key is gone still verified past MaxCachedFor")
	}
	if n := len(v.cache.m); n != 0 {
		t.Fatalf("%d entries cached after a refusal", n)
	}
}

// A token that expires before MaxCachedFor is cached until it expires, not longer.
func TestACachedTokenExpiresWithItsToken(t *testing.T) {
	v, clock, rk := cachingVerifier(t)
	now := clock.Now()
	claims := goodClaims(now)
	claims["exp"] = now.Add(10 * time.Second).Unix()
	tok := "Bearer " + sign(t, jose.RS256, rk, "rsa-1", claims)
	if _, e := v.VerifyClient(context.Background(), tok); e != nil {
		t.Fatal(e)
	}
	clock.Advance(10*time.Second + DefaultLeeway + time.Second)
	if _, e := v.VerifyClient(context.Background(), tok); e != ErrExpired {
		t.Fatalf("got %v, want the expired token refused", e)
	}
}

// The cache holds at most MaxCachedTokens verifications.
func TestTheCacheIsBounded(t *testing.T) {
	var c tokenCache
	now := time.Now()
	for i := range MaxCachedTokens + 100 {
		c.put(cacheKey{token: string(rune(i)) + "x"}, &Principal{}, now.Add(time.Hour), now)
	}
	if n := len(c.m); n != MaxCachedTokens {
		t.Fatalf("%d entries, want %d", n, MaxCachedTokens)
	}
}
