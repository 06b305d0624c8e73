package controllers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"

	"time"

	"github.com/go-jose/go-jose/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferrofed/ferrofed/internal/gatewayspec"
)

// The operator's issuer (docs/operator.md, "The operator reads its pods"): an ECDSA
// P-256 key in a Secret of the operator's namespace, made once and never rewritten;
// its public half is rendered into every Gateway as a read-only [[auth.issuers]]
// entry, and the operator signs short-lived tokens with it to read its pods'
// dependency reports.
const (
	// DefaultIssuerSecret is the Secret that holds the key (--issuer-secret).
	DefaultIssuerSecret = "ferrofed-operator-issuer"
	// issuerSecretKey is the Secret's key: the private key, PKCS#8 PEM.
	issuerSecretKey = "key.pem"
	// operatorTokenLifetime is how long a token the operator signs is valid: each
	// poll signs its own (a poll lasts seconds; the rest is room for the clocks of the
	// operator and the pod to differ).
	operatorTokenLifetime = 2 * time.Minute
)

// OperatorIssuer signs the operator's tokens.
type OperatorIssuer struct {
	key    *ecdsa.PrivateKey
	kid    string
	jwks   string
	signer jose.Signer
}

// LoadIssuer reads the issuer's Secret namespace/name, creating it with a new key when
// it does not exist (two replicas racing: the second reads the first's). An existing
// Secret is never rewritten: one that holds no usable key is an error naming it.
func LoadIssuer(ctx context.Context, c client.Client, namespace, name string) (*OperatorIssuer, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	s := &corev1.Secret{}
	err := c.Get(ctx, key, s)
	if apierrors.IsNotFound(err) {
		s, err = createIssuerSecret(ctx, c, key)
	}
	if err != nil {
		return nil, fmt.Errorf("the operator's issuer Secret %s: %w", key, err)
	}
	block, _ := pem.Decode(s.Data[issuerSecretKey])
	if block == nil {
		return nil, fmt.Errorf("the operator's issuer Secret %s: key %q holds no PEM block (delete the Secret to have a new key made)", key, issuerSecretKey)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	ec, ok := parsed.(*ecdsa.PrivateKey)
	if err != nil || !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("the operator's issuer Secret %s: key %q is not a PKCS#8 P-256 key (delete the Secret to have a new key made)", key, issuerSecretKey)
	}
	return newIssuer(ec)
}

func createIssuerSecret(ctx context.Context, c client.Client, key types.NamespacedName) (*corev1.Secret, error) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(ec)
	if err != nil {
		return nil, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{LabelManagedBy: FieldOwner}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{issuerSecretKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})},
	}
	err = c.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) {
		s = &corev1.Secret{}
		err = c.Get(ctx, key, s)
	}
	return s, err
}

// NewIssuerForTest is an issuer with a new key held in memory only.
func NewIssuerForTest() (*OperatorIssuer, error) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return newIssuer(ec)
}

func newIssuer(ec *ecdsa.PrivateKey) (*OperatorIssuer, error) {
	der, err := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	kid := base64.RawURLEncoding.EncodeToString(sum[:12])
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &ec.PublicKey, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"}}})
	if err != nil {
		return nil, err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: ec, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	return &OperatorIssuer{key: ec, kid: kid, jwks: string(set), signer: signer}, nil
}

// KeyID is the key's id (a digest of its public half).
func (i *OperatorIssuer) KeyID() string { return i.kid }

// JWKS is the public key set the Gateways' ConfigMaps carry.
func (i *OperatorIssuer) JWKS() string { return i.jwks }

// Token is a new token for audience (gatewayspec.OperatorAudience of one Gateway)
// with the operator's scope, valid operatorTokenLifetime. Tokens are not kept: one per
// Gateway would be about a kilobyte each of the operator's memory for all its life,
// and signing one costs tens of microseconds a poll.
func (i *OperatorIssuer) Token(audience string, now time.Time) (string, error) {
	// The claims are encoded once and signed as they are (the jwt package's builder
	// encodes, decodes and encodes them again: half a poll's garbage).
	payload, err := json.Marshal(operatorClaims{Issuer: gatewayspec.OperatorIssuerID, Subject: FieldOwner, Audience: audience,
		Expiry: now.Add(operatorTokenLifetime).Unix(), NotBefore: now.Add(-30 * time.Second).Unix(), IssuedAt: now.Unix(),
		Scope: gatewayspec.OperatorIssuerScope})
	if err != nil {
		return "", fmt.Errorf("sign the operator's token: %w", err)
	}
	signed, err := i.signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("sign the operator's token: %w", err)
	}
	value, err := signed.CompactSerialize()
	if err != nil {
		return "", fmt.Errorf("sign the operator's token: %w", err)
	}
	return value, nil
}

// operatorClaims are the claims of the operator's tokens (RFC 7519; aud one string).
type operatorClaims struct {
	Issuer    string `json:"iss"`
	Subject   string `json:"sub"`
	Audience  string `json:"aud"`
	Expiry    int64  `json:"exp"`
	NotBefore int64  `json:"nbf"`
	IssuedAt  int64  `json:"iat"`
	Scope     string `json:"scope"`
}
