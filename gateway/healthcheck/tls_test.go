package healthcheck

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/certpool"
)

// ca issues certificates for the tests.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T) ca {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return ca{c, key}
}

// issue writes a server certificate for names/ips, valid from an hour ago for two
// hours, and its key; it returns their paths and the tls.Certificate.
func (c ca) issue(t *testing.T, dir, name string, dns []string, ips []net.IP) (string, string, tls.Certificate) {
	t.Helper()
	return c.issueFor(t, dir, name, dns, ips, x509.ExtKeyUsageServerAuth, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// issueFor is issue with the usage and the validity period given.
func (c ca) issueFor(t *testing.T, dir, name string, dns []string, ips []net.IP, usage x509.ExtKeyUsage, notBefore, notAfter time.Time) (string, string, tls.Certificate) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: dns, IPAddresses: ips}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	cp, kp := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	for path, data := range map[string][]byte{cp: certPEM, kp: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cp, kp, pair
}

// tlsServer serves 200 on readiness over TLS with cert, on 127.0.0.1.
func tlsServer(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"ready"}`))
	}))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	_, port, _ := net.SplitHostPort(ts.Listener.Addr().String())
	return port
}

func TestHealthcheckOverTLS(t *testing.T) {
	dir := t.TempDir()
	authority := newCA(t)
	cfgFor := func(port, certFile, keyFile string) string {
		return fmt.Sprintf("[server]\nlisten = \"0.0.0.0:%s\"\n[server.tls]\ncertificate_file = %q\nkey_file = %q\n", port, certFile, keyFile)
	}

	t.Run("a certificate for 127.0.0.1 is ready", func(t *testing.T) {
		cp, kp, pair := authority.issue(t, dir, "ip", nil, []net.IP{net.IPv4(127, 0, 0, 1)})
		port := tlsServer(t, pair)
		if res := Run(context.Background(), parse(t, cfgFor(port, cp, kp))); !res.Ready {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("a certificate for localhost only is ready", func(t *testing.T) {
		cp, kp, pair := authority.issue(t, dir, "localhost", []string{"localhost"}, nil)
		port := tlsServer(t, pair)
		if res := Run(context.Background(), parse(t, cfgFor(port, cp, kp))); !res.Ready {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("another certificate of the same CA is refused", func(t *testing.T) {
		cp, kp, _ := authority.issue(t, dir, "configured", nil, []net.IP{net.IPv4(127, 0, 0, 1)})
		_, _, other := authority.issue(t, dir, "other", nil, []net.IP{net.IPv4(127, 0, 0, 1)})
		port := tlsServer(t, other)
		// Trusting the CA would accept it; the healthcheck trusts certificate_file only.
		res := Run(context.Background(), parse(t, cfgFor(port, cp, kp)))
		if res.Ready || strings.Contains(res.Line, "\n") {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("a certificate naming only the public DNS name is ready", func(t *testing.T) {
		// The healthcheck asks 127.0.0.1, which the certificate does not name: the pin
		// is the check, not the name.
		cp, kp, pair := authority.issue(t, dir, "public", []string{"gateway.example.org"}, nil)
		port := tlsServer(t, pair)
		if res := Run(context.Background(), parse(t, cfgFor(port, cp, kp))); !res.Ready {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("another certificate with the same name is refused", func(t *testing.T) {
		cp, kp, _ := authority.issue(t, dir, "pinned", []string{"gateway.example.org"}, nil)
		_, _, impostor := authority.issue(t, dir, "impostor", []string{"gateway.example.org"}, nil)
		port := tlsServer(t, impostor)
		res := Run(context.Background(), parse(t, cfgFor(port, cp, kp)))
		if res.Ready || !strings.Contains(res.Line, "not server.tls.certificate_file") {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("an expired pinned certificate is unready", func(t *testing.T) {
		cp, kp, pair := authority.issueFor(t, dir, "expired", []string{"gateway.example.org"}, nil, x509.ExtKeyUsageServerAuth,
			time.Now().Add(-48*time.Hour), time.Now().Add(-time.Minute))
		port := tlsServer(t, pair)
		res := Run(context.Background(), parse(t, cfgFor(port, cp, kp)))
		if res.Ready || !strings.Contains(res.Line, "expired at") || strings.Contains(res.Line, "\n") {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("a pinned certificate not valid yet is unready", func(t *testing.T) {
		cp, kp, pair := authority.issueFor(t, dir, "early", nil, []net.IP{net.IPv4(127, 0, 0, 1)}, x509.ExtKeyUsageServerAuth,
			time.Now().Add(time.Hour), time.Now().Add(48*time.Hour))
		port := tlsServer(t, pair)
		res := Run(context.Background(), parse(t, cfgFor(port, cp, kp)))
		if res.Ready || !strings.Contains(res.Line, "not valid before") {
			t.Fatalf("%+v", res)
		}
	})
}

func TestHealthcheckPresentsItsIdentity(t *testing.T) {
	dir := t.TempDir()
	authority := newCA(t)
	cp, kp, pair := authority.issue(t, dir, "server", []string{"gateway.example.org"}, nil)
	idCert, idKey, _ := authority.issueFor(t, dir, "healthcheck", nil, nil, x509.ExtKeyUsageClientAuth, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	identity := filepath.Join(dir, "identity.pem")
	certPEM, _ := os.ReadFile(idCert)
	keyPEM, _ := os.ReadFile(idKey)
	if err := os.WriteFile(identity, append(certPEM, keyPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: authority.cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := certpool.Of(authority.cert)

	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"ready"}`)) // a client gone is the test's failure to see
	}))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	ts.StartTLS()
	defer ts.Close()
	_, port, _ := net.SplitHostPort(ts.Listener.Addr().String())
	base := fmt.Sprintf("[server]\nlisten = \"0.0.0.0:%s\"\n[server.tls]\ncertificate_file = %q\nkey_file = %q\nclient_ca_file = %q\n", port, cp, kp, caFile)

	if res := Run(context.Background(), parse(t, base+fmt.Sprintf("healthcheck_identity_file = %q\n", identity))); !res.Ready {
		t.Fatalf("with its identity: %+v", res)
	}
	if res := Run(context.Background(), parse(t, base)); res.Ready {
		t.Fatalf("without an identity: %+v", res)
	}
	// A kubernetes.io/tls Secret's pair: the certificate and its key in two files.
	pair2 := base + fmt.Sprintf("healthcheck_identity_file = %q\nhealthcheck_identity_key_file = %q\n", idCert, idKey)
	if res := Check(context.Background(), parse(t, pair2), Options{Liveness: true}); !res.Ready {
		t.Fatalf("with its identity in two files: %+v", res)
	}
}
