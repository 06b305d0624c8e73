package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/test/double"
)

const (
	testIssuer   = "https://issuer.test"
	testAudience = "ferrofed-gateway"
	testScope    = "ferrofed.operator"
)

var (
	keysOnce sync.Once
	rsaKey   *rsa.PrivateKey
	ecKey    *ecdsa.PrivateKey
)

// testKeys are generated once per test binary: RSA generation is the slow part.
func testKeys(t testing.TB) (*rsa.PrivateKey, *ecdsa.PrivateKey) {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if ecKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
	})
	return rsaKey, ecKey
}

func jwks(t testing.TB, keys ...jose.JSONWebKey) []byte {
	t.Helper()
	var pub []jose.JSONWebKey
	for _, k := range keys {
		pub = append(pub, k.Public())
	}
	data, err := json.Marshal(jose.JSONWebKeySet{Keys: pub})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func sign(t testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func b64(v any) string {
	data, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(data)
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func goodClaims(now time.Time) map[string]any {
	return map[string]any{
		"iss":   testIssuer,
		"aud":   testAudience,
		"sub":   "monitoring",
		"exp":   now.Add(5 * time.Minute).Unix(),
		"nbf":   now.Add(-time.Minute).Unix(),
		"iat":   now.Add(-time.Minute).Unix(),
		"scope": "openid " + testScope,
	}
}

func with(c map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for key, val := range c {
		out[key] = val
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

// guarded is a gin engine whose one route needs an operator token.
func guarded(v *Verifier) *gin.Engine {
	gin.SetMode(gin.TestMode)
	e := gin.New()
	e.GET("/operator/x", v.Middleware(), func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	return e
}

func call(e http.Handler, authorization string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/operator/x", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	return rec
}

func TestTheTokenMatrix(t *testing.T) {
	rk, ek := testKeys(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: now}
	dir := t.TempDir()
	file := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(file, jwks(t, jose.JSONWebKey{Key: rk, KeyID: "rsa-1", Use: "sig"}, jose.JSONWebKey{Key: ek, KeyID: "ec-1", Use: "sig"}), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := New([]config.Issuer{{Issuer: testIssuer, Audience: testAudience, JWKSFile: file, OperatorScope: testScope}}, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e := guarded(v)

	good := goodClaims(now)
	rs := func(c map[string]any) string { return "Bearer " + sign(t, jose.RS256, rk, "rsa-1", c) }

	// alg none: a header and claims, no signature.
	none := "Bearer " + b64(map[string]any{"alg": "none", "typ": "JWT"}) + "." + b64(good) + "."
	// HS256 keyed with the RSA public key's bytes: the classic algorithm confusion.
	pubDER, _ := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	input := b64(map[string]any{"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}) + "." + b64(good)
	mac := hmac.New(sha256.New, pubPEM)
	mac.Write([]byte(input))
	hs256 := "Bearer " + input + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	// A good token whose signature is altered.
	parts := strings.Split(sign(t, jose.RS256, rk, "rsa-1", good), ".")
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sig[10] ^= 0xff
	badSig := "Bearer " + parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)

	errScope := &Error{Status: 403, Code: "insufficient_scope", Description: errInsufficient, Scope: testScope}
	cases := []struct {
		name   string
		header string
		status int
		want   *Error // the exact refusal; nil for a 200
	}{
		{"no token is a 401 without an error code", "", 401, ErrMissing},
		{"garbage is a 401", "Bearer garbage", 401, ErrMalformed},
		{"three parts of garbage are a 401", "Bearer a.b.c", 401, ErrMalformed},
		{"another scheme is a 401", "Basic dXNlcjpwYXNz", 401, ErrNotBearer},
		{"alg none is a 401", none, 401, ErrAlgorithm},
		{"HS256 keyed with the RSA public key is a 401", hs256, 401, ErrAlgorithm},
		{"a bad signature is a 401", badSig, 401, ErrSignature},
		{"an unknown kid is a 401", "Bearer " + sign(t, jose.RS256, rk, "rsa-9", good), 401, ErrUnknownKey},
		{"a wrong issuer is a 401", rs(with(good, "iss", "https://evil.test")), 401, ErrIssuer},
		{"a wrong audience is a 401", rs(with(good, "aud", "someone-else")), 401, ErrAudience},
		{"an audience array without ours is a 401", rs(with(good, "aud", []string{"a", "b"})), 401, ErrAudience},
		{"an audience array with ours is a 200", rs(with(good, "aud", []string{"a", testAudience})), 200, nil},
		{"expired beyond the leeway is a 401", rs(with(good, "exp", now.Add(-time.Minute).Unix())), 401, ErrExpired},
		{"expired within the leeway is a 200", rs(with(good, "exp", now.Add(-10*time.Second).Unix())), 200, nil},
		{"no expiry is a 401", rs(with(good, "exp", nil)), 401, ErrNoExpiry},
		{"nbf in the future is a 401", rs(with(good, "nbf", now.Add(2*time.Minute).Unix())), 401, ErrNotYetValid},
		{"a missing scope is a 403", rs(with(good, "scope", nil)), 403, errScope},
		{"a prefix of the operator scope is a 403", rs(with(good, "scope", "openid ferrofed.oper")), 403, errScope},
		{"the operator scope with a suffix is a 403", rs(with(good, "scope", "ferrofed.operator.read")), 403, errScope},
		{"the scope in an scp array is a 200", rs(with(with(good, "scope", nil), "scp", []string{"read", testScope})), 200, nil},
		{"a good RS256 token is a 200", rs(good), 200, nil},
		{"a good ES256 token is a 200", "Bearer " + sign(t, jose.ES256, ek, "ec-1", good), 200, nil},
		{"an RS256 token under the EC key's kid is a 401", "Bearer " + sign(t, jose.RS256, rk, "ec-1", good), 401, ErrSignature},
		{"an algorithm the issuer does not allow is a 401", "Bearer " + sign(t, jose.PS256, rk, "rsa-1", good), 401, ErrAlgorithm},
		{"a header of 1 MiB of dots is a 401", "Bearer " + strings.Repeat(".", 1<<20), 401, ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := call(e, c.header)
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d; body %s", rec.Code, c.status, rec.Body)
			}
			challenge := rec.Header().Get("WWW-Authenticate")
			if c.want == nil {
				if challenge != "" {
					t.Fatalf("a 200 with a challenge %q", challenge)
				}
				return
			}
			if challenge != c.want.Challenge() {
				t.Fatalf("challenge %q\nwant      %q", challenge, c.want.Challenge())
			}
			var body struct {
				Error            string `json:"error"`
				ErrorDescription string `json:"error_description"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.ErrorDescription != c.want.Description {
				t.Fatalf("body %s, want the description %q", rec.Body, c.want.Description)
			}
			if strings.Contains(rec.Body.String(), "eyJ") || strings.Contains(challenge, "eyJ") {
				t.Fatalf("the answer echoes the token: %s", rec.Body)
			}
		})
	}
}

func TestAHugeHeaderIsRefusedCheaply(t *testing.T) {
	rk, _ := testKeys(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "jwks.json")
	writeFile(t, file, jwks(t, jose.JSONWebKey{Key: rk, KeyID: "rsa-1"}))
	v, err := New([]config.Issuer{{Issuer: testIssuer, Audience: testAudience, JWKSFile: file, OperatorScope: testScope}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := guarded(v)
	// Go's server would refuse a header this large itself (1 MiB limit); the handler
	// must not depend on that, so the request is built in memory.
	dots := "Bearer " + strings.Repeat(".", 1<<20)
	justUnder := "Bearer " + strings.Repeat(".", MaxAuthorizationBytes-len("Bearer "))
	for _, h := range []string{dots, justUnder} {
		start := time.Now()
		const n = 100
		for i := 0; i < n; i++ {
			if rec := call(e, h); rec.Code != 401 {
				t.Fatalf("status %d", rec.Code)
			}
		}
		// Measured far below 1 ms per request; the bound leaves room for a loaded CI.
		if per := time.Since(start) / n; per > 5*time.Millisecond {
			t.Fatalf("a %d-byte header costs %v per request", len(h), per)
		}
	}
	allocs := testing.AllocsPerRun(20, func() { _, _ = v.Verify(context.Background(), dots) })
	if allocs > 2 {
		t.Fatalf("a 1 MiB header allocates %v times", allocs)
	}
}

func TestNoIssuerClosesTheOperatorSurface(t *testing.T) {
	v, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := call(guarded(v), "Bearer a.b.c")
	if rec.Code != 401 || !strings.Contains(rec.Body.String(), "no token issuer is configured") {
		t.Fatalf("status %d body %s", rec.Code, rec.Body)
	}
	var nilVerifier *Verifier
	if rec := call(guarded(nilVerifier), ""); rec.Code != 401 {
		t.Fatalf("a nil verifier answers %d", rec.Code)
	}
}

func TestTwoAuthorizationHeadersAreRefused(t *testing.T) {
	rk, _ := testKeys(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "jwks.json")
	writeFile(t, file, jwks(t, jose.JSONWebKey{Key: rk, KeyID: "rsa-1"}))
	v, _ := New([]config.Issuer{{Issuer: testIssuer, Audience: testAudience, JWKSFile: file, OperatorScope: testScope}}, Options{})
	tok := "Bearer " + sign(t, jose.RS256, rk, "rsa-1", goodClaims(time.Now()))
	req := httptest.NewRequest(http.MethodGet, "/operator/x", nil)
	req.Header.Add("Authorization", tok)
	req.Header.Add("Authorization", tok)
	rec := httptest.NewRecorder()
	guarded(v).ServeHTTP(rec, req)
	if rec.Code != 401 {
		t.Fatalf("status %d", rec.Code)
	}
}

func TestJWKSURLIsFetchedOnUseAndRefetchedForAnUnknownKidAtMostEveryInterval(t *testing.T) {
	rk, ek := testKeys(t)
	var served atomic.Pointer[[]byte]
	first := jwks(t, jose.JSONWebKey{Key: rk, KeyID: "rsa-1"})
	served.Store(&first)
	var fetches atomic.Int64
	issuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*served.Load())
	}))
	defer issuer.Close()

	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: start}
	v, err := New([]config.Issuer{{
		Issuer: testIssuer, Audience: testAudience, JWKSURL: issuer.URL, OperatorScope: testScope,
		Algorithms: []string{"RS256", "ES256"}, JWKSRefreshMS: int64(time.Hour / time.Millisecond),
	}}, Options{Now: clock.Now, MinRefetchInterval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if fetches.Load() != 0 {
		t.Fatal("the key set was fetched before any token needed it")
	}
	e := guarded(v)
	rsaTok := func() string { return "Bearer " + sign(t, jose.RS256, rk, "rsa-1", goodClaims(clock.Now())) }
	ecTok := func(kid string) string { return "Bearer " + sign(t, jose.ES256, ek, kid, goodClaims(clock.Now())) }

	step := func(name, header string, status int, wantFetches int64) {
		t.Helper()
		if rec := call(e, header); rec.Code != status {
			t.Fatalf("%s: status %d, want %d (%s)", name, rec.Code, status, rec.Body)
		}
		if got := fetches.Load(); got != wantFetches {
			t.Fatalf("%s: %d fetches, want %d", name, got, wantFetches)
		}
	}
	step("the first token fetches the key set", rsaTok(), 200, 1)
	step("a known kid fetches nothing", rsaTok(), 200, 1)

	// The issuer rotates in a new key.
	rotated := jwks(t, jose.JSONWebKey{Key: rk, KeyID: "rsa-1"}, jose.JSONWebKey{Key: ek, KeyID: "ec-2"})
	served.Store(&rotated)
	clock.Advance(time.Second)
	step("an unknown kid within the interval fetches nothing", ecTok("ec-2"), 401, 1)
	clock.Advance(10 * time.Second)
	step("an unknown kid after the interval refetches", ecTok("ec-2"), 200, 2)
	for i := 0; i < 20; i++ {
		clock.Advance(100 * time.Millisecond)
		step("a flood of made-up kids fetches nothing", ecTok("made-up"), 401, 2)
	}
	clock.Advance(10 * time.Second)
	step("a made-up kid after the interval fetches once more", ecTok("made-up"), 401, 3)
}

func TestJWKSURLIsRefreshedWhenStaleWithoutHoldingTheRequest(t *testing.T) {
	rk, _ := testKeys(t)
	set := jwks(t, jose.JSONWebKey{Key: rk, KeyID: "rsa-1"})
	var fetches atomic.Int64
	issuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		_, _ = w.Write(set)
	}))
	defer issuer.Close()
	clock := &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	v, _ := New([]config.Issuer{{Issuer: testIssuer, Audience: testAudience, JWKSURL: issuer.URL, OperatorScope: testScope, JWKSRefreshMS: 60000}},
		Options{Now: clock.Now})
	e := guarded(v)
	tok := func() string { return "Bearer " + sign(t, jose.RS256, rk, "rsa-1", goodClaims(clock.Now())) }
	if rec := call(e, tok()); rec.Code != 200 || fetches.Load() != 1 {
		t.Fatalf("status %d, %d fetches", rec.Code, fetches.Load())
	}
	clock.Advance(61 * time.Second)
	if rec := call(e, tok()); rec.Code != 200 {
		t.Fatalf("a stale set refused a token it holds: %d", rec.Code)
	}
	double.Eventually(t, "a stale key set is refreshed", func() bool { return fetches.Load() == 2 },
		func() string { return fmt.Sprintf("%d fetches", fetches.Load()) })
}

func TestAnIssuerThatIsDownRefusesTokensAndIsNotHammered(t *testing.T) {
	rk, _ := testKeys(t)
	var fetches atomic.Int64
	issuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer issuer.Close()
	v, _ := New([]config.Issuer{{Issuer: testIssuer, Audience: testAudience, JWKSURL: issuer.URL, OperatorScope: testScope}}, Options{})
	e := guarded(v)
	for i := 0; i < 10; i++ {
		if rec := call(e, "Bearer "+sign(t, jose.RS256, rk, "rsa-1", goodClaims(time.Now()))); rec.Code != 401 {
			t.Fatalf("status %d", rec.Code)
		}
	}
	if fetches.Load() != 1 {
		t.Fatalf("%d fetches of a failing issuer, want 1", fetches.Load())
	}
}

// An issuer behind a private CA: its jwks_url is fetched over TLS verified against
// the issuer's ca_file, and without it the system's roots refuse the issuer's
// certificate and no token verifies (docs/security.md, "Operator tokens").
func TestAJWKSURLBehindAPrivateCAIsTrustedThroughItsCAFile(t *testing.T) {
	rk, _ := testKeys(t)
	set := jwks(t, jose.JSONWebKey{Key: rk, KeyID: "rsa-1"})
	var fetches atomic.Int64
	issuer := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		_, _ = w.Write(set)
	}))
	issuer.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	issuer.StartTLS()
	defer issuer.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	writeFile(t, ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: issuer.Certificate().Raw}))
	tok := "Bearer " + sign(t, jose.RS256, rk, "rsa-1", goodClaims(time.Now()))
	is := config.Issuer{Issuer: testIssuer, Audience: testAudience, JWKSURL: issuer.URL + "/keys", OperatorScope: testScope}

	v, err := New([]config.Issuer{is}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rec := call(guarded(v), tok); rec.Code != 401 || fetches.Load() != 0 {
		t.Fatalf("without its ca_file: status %d after %d fetches, want 401 and the certificate refused", rec.Code, fetches.Load())
	}
	is.CAFile = ca
	if v, err = New([]config.Issuer{is}, Options{}); err != nil {
		t.Fatal(err)
	}
	if rec := call(guarded(v), tok); rec.Code != 200 || fetches.Load() != 1 {
		t.Fatalf("with its ca_file: status %d after %d fetches, want 200 after 1 (%s)", rec.Code, fetches.Load(), rec.Body)
	}
	writeFile(t, filepath.Join(dir, "empty.pem"), []byte("no certificate\n"))
	for name, file := range map[string]string{"missing": filepath.Join(dir, "nope.pem"), "without a certificate": filepath.Join(dir, "empty.pem")} {
		is.CAFile = file
		if _, err := New([]config.Issuer{is}, Options{}); err == nil || !strings.Contains(err.Error(), "auth.issuers[0].ca_file") {
			t.Errorf("a ca_file %s: err = %v, want one naming auth.issuers[0].ca_file", name, err)
		}
	}
}

func TestAJWKSFileWithOnlyASymmetricKeyIsRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "jwks.json")
	writeFile(t, file, []byte(`{"keys":[{"kty":"oct","kid":"h","k":"c2VjcmV0"}]}`))
	if _, err := New([]config.Issuer{{Issuer: testIssuer, Audience: testAudience, JWKSFile: file, OperatorScope: testScope}}, Options{}); err == nil ||
		!strings.Contains(err.Error(), "auth.issuers[0].jwks_file") {
		t.Fatalf("err = %v", err)
	}
}

func TestScopes(t *testing.T) {
	cases := []struct {
		name       string
		scope, scp string
		want       bool
	}{
		{"the scope among others", `"openid ferrofed.operator profile"`, ``, true},
		{"the scope alone", `"ferrofed.operator"`, ``, true},
		{"a prefix of it", `"ferrofed.oper"`, ``, false},
		{"it with a suffix", `"ferrofed.operator.read"`, ``, false},
		{"it inside another word", `"xferrofed.operator"`, ``, false},
		{"no scope at all", ``, ``, false},
		{"an scp array with it", ``, `["a","ferrofed.operator"]`, true},
		{"an scp string with it", ``, `"a ferrofed.operator"`, true},
		{"a scope array with it", `["ferrofed.operator"]`, ``, true},
		{"a number", `42`, `{"a":1}`, false},
		{"an empty string", `""`, ``, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := HasScope(Scopes(json.RawMessage(c.scope), json.RawMessage(c.scp)), "ferrofed.operator")
			if got != c.want {
				t.Fatalf("HasScope = %v, want %v", got, c.want)
			}
		})
	}
	if HasScope([]string{""}, "") {
		t.Fatal("an empty operator scope matched")
	}
}

// writeFile writes a test fixture, failing the test when it cannot.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A route of its own scope (the PMIR feed's) takes a token with that scope, whether or
// not it carries the operator scope, and refuses the operator's token without it.
func TestVerifyScopeAsksForTheRoutesScope(t *testing.T) {
	_, ek := testKeys(t)
	now := time.Now()
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, jwks(t, jose.JSONWebKey{Key: ek, KeyID: "ec-1", Use: "sig"}), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := New([]config.Issuer{{Issuer: testIssuer, Audience: testAudience, JWKSFile: file, OperatorScope: testScope}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok := func(scope string) string {
		return "Bearer " + sign(t, jose.ES256, ek, "ec-1", with(goodClaims(now), "scope", scope))
	}
	ctx := context.Background()
	if _, e := v.VerifyScope(ctx, tok("pmir.feed"), "pmir.feed"); e != nil {
		t.Fatalf("a token with the feed scope was refused: %v", e)
	}
	if _, e := v.VerifyScope(ctx, tok(testScope), "pmir.feed"); e == nil || e.Status != http.StatusForbidden || e.Scope != "pmir.feed" {
		t.Fatalf("the operator's token without the feed scope: %v", e)
	}
	if _, e := v.Verify(ctx, tok("pmir.feed")); e == nil || e.Status != http.StatusForbidden {
		t.Fatalf("the feed's token on the operator surface: %v", e)
	}
	if _, e := v.VerifyScope(ctx, tok("pmir.feed"), ""); e == nil {
		t.Fatal("an empty scope verified a token")
	}
}

// A data-plane token is an operator's when it holds the operator_scope of the issuer
// that verified it, not another issuer's.
func TestAPrincipalIsAnOperatorByItsOwnIssuersScope(t *testing.T) {
	rk, _ := testKeys(t)
	now := time.Now()
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, jwks(t, jose.JSONWebKey{Key: rk, KeyID: "rsa-1", Use: "sig"}), 0o600); err != nil {
		t.Fatal(err)
	}
	const other = "https://other.test"
	v, err := New([]config.Issuer{
		{Issuer: testIssuer, Audience: testAudience, JWKSFile: file, OperatorScope: testScope},
		{Issuer: other, Audience: testAudience, JWKSFile: file, OperatorScope: "other.operator"},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, iss, scope string
		operator         bool
	}{
		{"its issuer's operator scope", testIssuer, "system/*.rs " + testScope, true},
		{"no operator scope", testIssuer, "system/*.rs", false},
		{"another issuer's operator scope", other, "system/*.rs " + testScope, false},
		{"that other issuer's own", other, "other.operator", true},
		{"a scope that starts with it", testIssuer, testScope + ".read", false},
	} {
		claims := goodClaims(now)
		claims["iss"], claims["scope"] = tc.iss, tc.scope
		p, e := v.VerifyClient(context.Background(), "Bearer "+sign(t, jose.RS256, rk, "rsa-1", claims))
		if e != nil {
			t.Fatalf("%s: %v", tc.name, e)
		}
		if p.Operator != tc.operator {
			t.Errorf("%s: Operator = %v, want %v", tc.name, p.Operator, tc.operator)
		}
	}
}

// A read_only issuer's token reads the operator surface and nothing else: GET and HEAD
// there, never a write, the data plane or another route's scope; beside it, the same
// key under an issuer that is not read-only is untouched.
func TestAReadOnlyIssuersTokenOnlyReads(t *testing.T) {
	_, ek := testKeys(t)
	now := time.Now()
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, jwks(t, jose.JSONWebKey{Key: ek, KeyID: "ec-1", Use: "sig"}), 0o600); err != nil {
		t.Fatal(err)
	}
	const full = "https://full.test"
	v, err := New([]config.Issuer{
		{Issuer: testIssuer, Audience: testAudience, JWKSFile: file, OperatorScope: testScope, ReadOnly: true},
		{Issuer: full, Audience: testAudience, JWKSFile: file, OperatorScope: testScope},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok := func(iss, scope string) string {
		return "Bearer " + sign(t, jose.ES256, ek, "ec-1", with(with(goodClaims(now), "iss", iss), "scope", scope))
	}
	ctx := context.Background()
	readOnly := tok(testIssuer, testScope+" system/*.rs pmir.feed")
	if p, e := v.Verify(ctx, readOnly); e != nil || !p.ReadOnly {
		t.Fatalf("the read-only token on the operator surface: %+v %v", p, e)
	}
	if _, e := v.VerifyClient(ctx, readOnly); e != ErrIssuer {
		t.Fatalf("the read-only token on the data plane: %v, want %v", e, ErrIssuer)
	}
	if _, e := v.VerifyScope(ctx, readOnly, "pmir.feed"); e != ErrIssuer {
		t.Fatalf("the read-only token on the feed: %v, want %v", e, ErrIssuer)
	}
	if p, e := v.VerifyClient(ctx, tok(full, "system/*.rs")); e != nil || p.ReadOnly {
		t.Fatalf("the other issuer's token on the data plane: %+v %v", p, e)
	}

	gin.SetMode(gin.TestMode)
	e := gin.New()
	e.Any("/operator/x", v.Middleware(), func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	for _, tc := range []struct {
		method, token string
		want          int
	}{
		{http.MethodGet, readOnly, http.StatusOK},
		{http.MethodHead, readOnly, http.StatusOK},
		{http.MethodPost, readOnly, http.StatusForbidden},
		{http.MethodPut, readOnly, http.StatusForbidden},
		{http.MethodDelete, readOnly, http.StatusForbidden},
		{http.MethodDelete, tok(full, testScope), http.StatusOK},
	} {
		req := httptest.NewRequest(tc.method, "/operator/x", nil)
		req.Header.Set("Authorization", tc.token)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s with %s: %d, want %d (%s)", tc.method, tc.token[:20], rec.Code, tc.want, rec.Body)
		}
		if tc.want == http.StatusForbidden && !strings.Contains(rec.Body.String(), "read-only") {
			t.Errorf("%s refusal does not say why: %s", tc.method, rec.Body)
		}
	}
}
