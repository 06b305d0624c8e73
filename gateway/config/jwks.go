package config

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-jose/go-jose/v4"
)

// MaxJWKSBytes caps a key set read from a jwks_file or fetched from a jwks_url: a key
// set is a few KiB, and an issuer that answers megabytes must not cost the gateway its
// memory.
const MaxJWKSBytes = 1 << 20

// ReadJWKSFile reads an issuer's jwks_file (key names it: auth.issuers[0].jwks_file)
// through ReadFile, as the gateway uses it (ParseJWKS). It is here, with the schema, so
// that `config check`, serve and a reload refuse the same files: a directory, a named
// pipe, an empty file, garbage, a set without a public signing key. The error is a
// *FileError naming key.
func ReadJWKSFile(key, path string) ([]jose.JSONWebKey, error) {
	data, err := ReadFile(key, path, MaxJWKSBytes)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, &FileError{Key: key, Err: fmt.Errorf("%s is empty", path)}
	}
	keys, err := ParseJWKS(data)
	if err != nil {
		return nil, &FileError{Key: key, Err: fmt.Errorf("%s: %w", path, err)}
	}
	return keys, nil
}

// ParseJWKS reads a JWKS and keeps the keys that can verify an operator token: public
// RSA, EC and Ed25519 keys meant for signatures. Private material is dropped (an issuer
// that publishes it has a problem, but the gateway needs only the public half), and
// symmetric ("oct") keys are dropped outright: an HMAC key next to an RSA one is how
// algorithm-confusion attacks start. A set left with no key is an error.
func ParseJWKS(data []byte) ([]jose.JSONWebKey, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("not a JWKS: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, r := range raw.Keys {
		var k jose.JSONWebKey
		// One key the library cannot read (a new key type) must not hide the others.
		if err := k.UnmarshalJSON(r); err != nil {
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pub := k.Public()
		switch pub.Key.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
			keys = append(keys, pub)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("the JWKS holds no public signing key")
	}
	return keys, nil
}
