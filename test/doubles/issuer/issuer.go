// Package issuer is an OAuth 2.0 token issuer for tests: a P-256 key, its JSON Web Key
// Set written to a file (an [[auth.issuers]] jwks_file), and the access tokens it signs,
// as the gateway's operators and feeds present them (docs/security.md, "Operator tokens").
package issuer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const (
	// URL is the issuer's iss.
	URL = "https://issuer.test"
	// Audience is the tokens' aud.
	Audience = "ferrofed"
	// OperatorScope is the scope of the operator routes in Table.
	OperatorScope = "ferrofed.operator"
	// ClientScope is the scope of Client's tokens: a system-level SMART grant of every
	// interaction on every resource type.
	ClientScope = "system/*.cruds"
)

// Issuer signs tokens with one key, whose key set is at JWKS.
type Issuer struct {
	key *ecdsa.PrivateKey
	// JWKS is the key set's file.
	JWKS string
}

// New makes an issuer with a new key, its key set in a temporary directory of t.
func New(t testing.TB) *Issuer {
	t.Helper()
	i, err := NewIn(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// NewIn makes an issuer with a new key, its key set written into dir: for a TestMain,
// which has no testing.TB.
func NewIn(dir string) (*Issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Use: "sig"}}})
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(file, set, 0o600); err != nil {
		return nil, err
	}
	return &Issuer{key: key, JWKS: file}, nil
}

// Table is the [[auth.issuers]] table that trusts this issuer, with OperatorScope as
// the operator scope.
func (i *Issuer) Table() string {
	return fmt.Sprintf("[[auth.issuers]]\nissuer = %q\naudience = %q\njwks_file = %q\noperator_scope = %q\n",
		URL, Audience, i.JWKS, OperatorScope)
}

// Sign is a token for sub with scope, valid for an hour.
func (i *Issuer) Sign(t testing.TB, sub, scope string) string {
	t.Helper()
	tok, err := i.Token(map[string]any{"sub": sub, "scope": scope})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Token signs claims over the defaults (iss, aud, an hour's exp, iat): a claim given
// replaces its default.
func (i *Issuer) Token(claims map[string]any) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: i.key, KeyID: "k1"}}, nil)
	if err != nil {
		return "", err
	}
	now := time.Now()
	all := map[string]any{"iss": URL, "aud": Audience, "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	maps.Copy(all, claims)
	return jwt.Signed(signer).Claims(all).Serialize()
}

// Operator is a token of sub "alice" with OperatorScope.
func (i *Issuer) Operator(t testing.TB) string {
	t.Helper()
	return i.Sign(t, "alice", OperatorScope)
}

// Client is a data-plane token of sub "app" with ClientScope: what a backend service
// that may do anything on the data plane presents.
func (i *Issuer) Client(t testing.TB) string {
	t.Helper()
	return i.Sign(t, "app", ClientScope)
}
