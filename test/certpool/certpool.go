// Package certpool makes the certificate pools of tests and of the commands under
// test/ and hack/: the one place outside the gateway that turns certificates into an
// x509.CertPool, as gateway/config's ReadCertPool is the gateway's one reader of a
// CA file (test/layout/certpool_test.go keeps both so).
package certpool

import (
	"crypto/x509"
	"errors"
)

// Of is a pool of certs.
func Of(certs ...*x509.Certificate) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool
}

// FromPEM is a pool of the certificates of a PEM bundle; a bundle without one is an
// error, as it is to the gateway.
func FromPEM(bundle []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return nil, errors.New("certpool: the bundle holds no PEM certificate")
	}
	return pool, nil
}
