package rollout

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Issuer signs tokens (ES256), the operator's and the data plane's clients', and serves
// its key set, so that the gateway pods can verify them through jwks_url.
type Issuer struct {
	Name, Audience, Scope string
	JWKSURL               string
	key                   *ecdsa.PrivateKey
	srv                   *http.Server
}

const issuerKid = "e2e"

// StartIssuer serves the key set on host:0, an address of this machine the pods reach
// (the node's InternalIP on the local cluster).
func StartIssuer(host string) (*Issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	iss := &Issuer{Name: "https://e2e.ferrofed.local", Audience: "ferrofed", Scope: "ferrofed.operator", key: key}
	jwks, err := json.Marshal(map[string]any{"keys": []any{map[string]string{
		"kty": "EC", "crv": "P-256", "kid": issuerKid, "alg": "ES256", "use": "sig",
		"x": b64(key.X.FillBytes(make([]byte, 32))), "y": b64(key.Y.FillBytes(make([]byte, 32))),
	}}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("listen for the key set on %s: %w", host, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/jwks.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	})
	iss.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = iss.srv.Serve(ln) }()
	iss.JWKSURL = "http://" + ln.Addr().String() + "/jwks.json"
	return iss, nil
}

// Close stops serving the key set.
func (i *Issuer) Close() { _ = i.srv.Close() }

// ClientScope is the scope of ClientToken's tokens: SMART's system-level read and
// search of every resource type, what the load and the tests' data-plane requests need.
const ClientScope = "system/*.rs"

// ClientToken is a token of the data plane's client (sub "e2e-app", ClientScope),
// valid for validity: what every request under /fhir and /nodes carries when the
// gateway's auth.data_plane is "required", the default.
func (i *Issuer) ClientToken(validity time.Duration) string {
	return i.sign("e2e-app", ClientScope, validity)
}

// Token is a signed JWT of sub "e2e" with the given scope, valid for validity.
func (i *Issuer) Token(scope string, validity time.Duration) string {
	return i.sign("e2e", scope, validity)
}

func (i *Issuer) sign(sub, scope string, validity time.Duration) string {
	now := time.Now()
	header, _ := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT", "kid": issuerKid})
	claims, _ := json.Marshal(map[string]any{
		"iss": i.Name, "aud": i.Audience, "sub": sub, "scope": scope,
		"iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(validity).Unix(),
	})
	signing := b64(header) + "." + b64(claims)
	sum := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, i.key, sum[:])
	if err != nil {
		panic(err)
	}
	sig := append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	return signing + "." + b64(sig)
}

// TOMLIssuer is the [[auth.issuers]] table of the gateway configuration.
func (i *Issuer) TOMLIssuer() string {
	return fmt.Sprintf("[[auth.issuers]]\nissuer = %q\naudience = %q\njwks_url = %q\noperator_scope = %q\nalgorithms = [\"ES256\"]\n",
		i.Name, i.Audience, i.JWKSURL, i.Scope)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
