//go:build e2e

package e2e

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

// issuer signs operator tokens (ES256) and serves its key set, so that the gateway
// pods can verify them through jwks_url.
type issuer struct {
	name, audience, scope string
	key                   *ecdsa.PrivateKey
	jwksURL               string
	srv                   *http.Server
}

const issuerKid = "e2e"

// startIssuer serves the key set on host:0, an address of this machine the pods reach
// (the node's InternalIP on the local cluster).
func startIssuer(host string) (*issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	iss := &issuer{name: "https://e2e.ferrofed.local", audience: "ferrofed", scope: "ferrofed.operator", key: key}
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
	iss.jwksURL = "http://" + ln.Addr().String() + "/jwks.json"
	return iss, nil
}

func (i *issuer) close() { _ = i.srv.Close() }

// token is a signed JWT with the given scope.
func (i *issuer) token(scope string) string {
	now := time.Now()
	header, _ := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT", "kid": issuerKid})
	claims, _ := json.Marshal(map[string]any{
		"iss": i.name, "aud": i.audience, "sub": "e2e", "scope": scope,
		"iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix(),
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

// tomlIssuer is the [[auth.issuers]] table of the gateway configuration.
func (i *issuer) tomlIssuer() string {
	return fmt.Sprintf("[[auth.issuers]]\nissuer = %q\naudience = %q\njwks_url = %q\noperator_scope = %q\nalgorithms = [\"ES256\"]\n",
		i.name, i.audience, i.jwksURL, i.scope)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
