package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// keyPairPEM is a self-signed server certificate for 127.0.0.1 and its key, as PEM.
type keyPairPEM struct {
	cert, key []byte
	serial    *big.Int
	notAfter  time.Time
}

func newKeyPairPEM(t *testing.T, serial int64, notAfter time.Time) keyPairPEM {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return selfSigned(t, serial, notAfter, key, &key.PublicKey)
}

func selfSigned(t *testing.T, serial int64, notAfter time.Time, key any, pub any) keyPairPEM {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "ferrofed test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter.Truncate(time.Second),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return keyPairPEM{
		cert:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:    pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		serial: big.NewInt(serial), notAfter: tmpl.NotAfter,
	}
}

// secretVolume lays files out as the kubelet does for a Secret volume: each version in
// a directory of its own, a `..data` symlink to the current one swapped atomically
// (rename of a new symlink over it), and tls.crt and tls.key symlinks through ..data.
type secretVolume struct {
	dir      string
	versions int
}

func newSecretVolume(t *testing.T, p keyPairPEM) *secretVolume {
	t.Helper()
	v := &secretVolume{dir: t.TempDir()}
	v.publish(t, p.cert, p.key)
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

func (v *secretVolume) certFile() string { return filepath.Join(v.dir, "tls.crt") }
func (v *secretVolume) keyFile() string  { return filepath.Join(v.dir, "tls.key") }

// publish writes a new version and swaps ..data to it.
func (v *secretVolume) publish(t *testing.T, certPEM, keyPEM []byte) {
	t.Helper()
	v.versions++
	version := fmt.Sprintf("..v%d", v.versions)
	if err := os.Mkdir(filepath.Join(v.dir, version), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(v.dir, version, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// startTLS runs a server with TLS from v on a loopback port; poll is how often it reads
// the files again (0: the default).
func startTLS(t *testing.T, v *secretVolume, extra string, log logr.Logger, poll time.Duration) *Server {
	t.Helper()
	cfg := parse(t, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:0\"\n[server.tls]\ncertificate_file = %q\nkey_file = %q\n%s",
		v.certFile(), v.keyFile(), extra))
	s, err := New(cfg, log, WithBootPoll(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	s.run.certPoll = poll
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return")
		}
	})
	return s
}

// handshake connects with c (InsecureSkipVerify is set: the tests read what is served)
// and returns the served certificate's serial, or the handshake's error.
func handshake(addr string, c *tls.Config) (*big.Int, error) {
	c = c.Clone()
	c.InsecureSkipVerify = true
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr, c)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// waitServed waits until a new handshake sees serial; it returns how long that took.
func waitServed(t *testing.T, addr string, serial *big.Int, within time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	var got *big.Int
	var err error
	for time.Since(begin) < within {
		if got, err = handshake(addr, &tls.Config{}); err == nil && got.Cmp(serial) == 0 {
			return time.Since(begin)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("after %s the listener serves serial %v (%v), want %v", within, got, err, serial)
	return 0
}

func expiryMetric(t *testing.T, s *Server) float64 {
	t.Helper()
	mfs, err := s.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "ferrofed_tls_certificate_expiry_seconds" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no ferrofed_tls_certificate_expiry_seconds")
	return 0
}

func TestTheListenerServesARotatedCertificateWithoutARestart(t *testing.T) {
	first := newKeyPairPEM(t, 101, time.Now().Add(48*time.Hour))
	v := newSecretVolume(t, first)
	logs := &logSink{}
	s := startTLS(t, v, "", logs.logger(), 0) // the default poll, a second
	addr := s.Addr().String()
	if got, err := handshake(addr, &tls.Config{}); err != nil || got.Cmp(first.serial) != 0 {
		t.Fatalf("before the rotation: serial %v, %v", got, err)
	}
	if got := expiryMetric(t, s); got != float64(first.notAfter.Unix()) {
		t.Fatalf("expiry metric %v, want %d", got, first.notAfter.Unix())
	}

	// A keep-alive connection opened before the swap keeps working across it.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	if resp, err := client.Get(s.URL() + "/health"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}

	second := newKeyPairPEM(t, 102, time.Now().Add(90*24*time.Hour))
	v.publish(t, second.cert, second.key)
	took := waitServed(t, addr, second.serial, 10*time.Second)
	t.Logf("new handshakes saw the rotated certificate %s after the swap", took)
	if got := expiryMetric(t, s); got != float64(second.notAfter.Unix()) {
		t.Fatalf("expiry metric %v after the rotation, want %d", got, second.notAfter.Unix())
	}
	if resp, err := client.Get(s.URL() + "/health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the connection opened before the rotation: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if logs.find("Reloaded the TLS key pair", `"serial"="66"`, "files changed") == "" {
		t.Fatalf("the reload is not logged with the new serial: %v", logs.lines)
	}
	if got := testutil.ToFloat64(s.run.keys.reloads.WithLabelValues(ReloadLoaded)); got != 1 {
		t.Fatalf("reloads_total{loaded} = %v, want 1", got)
	}
}

func TestAFailedReloadKeepsServingTheLastGoodPair(t *testing.T) {
	good := newKeyPairPEM(t, 201, time.Now().Add(48*time.Hour))
	v := newSecretVolume(t, good)
	logs := &logSink{}
	s := startTLS(t, v, "", logs.logger(), 20*time.Millisecond)
	addr := s.Addr().String()
	other := newKeyPairPEM(t, 202, time.Now().Add(48*time.Hour))

	for _, tt := range []struct {
		name      string
		cert, key []byte
		why       string
	}{
		{"a key that does not match its certificate", other.cert, good.key, "private key does not match public key"},
		{"a half-written certificate", other.cert[:len(other.cert)/2], other.key, "failed to find any PEM data in certificate input"},
		{"an empty key", other.cert, nil, "failed to find any PEM data in key input"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			failedBefore := testutil.ToFloat64(s.run.keys.reloads.WithLabelValues(ReloadFailed))
			v.publish(t, tt.cert, tt.key)
			// The failure is counted, then logged: wait for both (the log line came a
			// moment after the count once, under a loaded machine).
			logged := func() bool {
				return logs.find("Reloading the TLS key pair failed", tt.why, "the last good pair keeps serving", `"servedSerial"="c9"`) != ""
			}
			deadline := time.Now().Add(10 * time.Second)
			for (testutil.ToFloat64(s.run.keys.reloads.WithLabelValues(ReloadFailed)) == failedBefore || !logged()) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if !logged() {
				t.Fatalf("the failure is not logged with its reason: %v", logs.lines)
			}
			time.Sleep(100 * time.Millisecond) // five more polls of the same broken files
			if got, err := handshake(addr, &tls.Config{}); err != nil || got.Cmp(good.serial) != 0 {
				t.Fatalf("after a failed reload: serial %v, %v; want the last good %v", got, err, good.serial)
			}
			if got := testutil.ToFloat64(s.run.keys.reloads.WithLabelValues(ReloadFailed)); got != failedBefore+1 {
				t.Fatalf("the same broken files were tried %v times, want once", got-failedBefore)
			}
			if got := expiryMetric(t, s); got != float64(good.notAfter.Unix()) {
				t.Fatalf("expiry metric %v, want the served %d", got, good.notAfter.Unix())
			}
		})
	}

	// Completing the pair serves it.
	v.publish(t, other.cert, other.key)
	waitServed(t, addr, other.serial, 10*time.Second)
}

func TestSIGHUPReloadsTheKeyPair(t *testing.T) {
	first := newKeyPairPEM(t, 301, time.Now().Add(48*time.Hour))
	v := newSecretVolume(t, first)
	logs := &logSink{}
	s := startTLS(t, v, "", logs.logger(), time.Hour) // no poll within the test: only the reload
	addr := s.Addr().String()
	path := filepath.Join(t.TempDir(), "ferrofed.toml")
	if err := os.WriteFile(path, fmt.Appendf(nil, "[server]\nlisten = \"127.0.0.1:0\"\ntermination_message_path = \"\"\n[server.tls]\ncertificate_file = %q\nkey_file = %q\n[auth]\ndata_plane = \"open\"\n",
		v.certFile(), v.keyFile()), 0o600); err != nil {
		t.Fatal(err)
	}

	second := newKeyPairPEM(t, 302, time.Now().Add(48*time.Hour))
	v.publish(t, second.cert, second.key)
	if got, _ := handshake(addr, &tls.Config{}); got.Cmp(first.serial) != 0 {
		t.Fatalf("served %v before the reload", got)
	}
	if err := s.ReloadFile(path); err != nil {
		t.Fatal(err)
	}
	if got, err := handshake(addr, &tls.Config{}); err != nil || got.Cmp(second.serial) != 0 {
		t.Fatalf("after the reload: serial %v, %v; want %v", got, err, second.serial)
	}
	if logs.find("Reloaded the TLS key pair", "SIGHUP") == "" {
		t.Fatalf("not logged: %v", logs.lines)
	}
	// The same files again: nothing to swap, and said so.
	if err := s.ReloadFile(path); err != nil {
		t.Fatal(err)
	}
	if logs.find("TLS key pair unchanged", "SIGHUP") == "" {
		t.Fatalf("not logged: %v", logs.lines)
	}
	// A configuration that changes the paths needs a restart, and the log says so; the
	// files of the old paths keep serving.
	moved := newSecretVolume(t, first)
	if err := os.WriteFile(path, fmt.Appendf(nil, "[server]\nlisten = \"127.0.0.1:0\"\ntermination_message_path = \"\"\n[server.tls]\ncertificate_file = %q\nkey_file = %q\n[auth]\ndata_plane = \"open\"\n",
		moved.certFile(), moved.keyFile()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadFile(path); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"server.tls.certificate_file", "server.tls.key_file"} {
		if logs.find("Configuration changed but needs a restart: "+key) == "" {
			t.Fatalf("no restart log for %s: %v", key, logs.lines)
		}
	}
	if got, _ := handshake(addr, &tls.Config{}); got.Cmp(second.serial) != 0 {
		t.Fatalf("served %v after a reload that moved the files", got)
	}
}

func TestTLS12IsLimitedToAEADSuites(t *testing.T) {
	ecdsaKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, kt := range []struct {
		name              string
		pair              keyPairPEM
		refused, accepted []uint16
	}{
		{"ECDSA", selfSigned(t, 401, time.Now().Add(time.Hour), ecdsaKey, &ecdsaKey.PublicKey),
			[]uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256},
			[]uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}},
		{"RSA", selfSigned(t, 402, time.Now().Add(time.Hour), rsaKey, &rsaKey.PublicKey),
			[]uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, tls.TLS_RSA_WITH_AES_128_CBC_SHA,
				tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA},
			[]uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}},
	} {
		t.Run(kt.name, func(t *testing.T) {
			s := startTLS(t, newSecretVolume(t, kt.pair), "", logr.Discard(), 0)
			addr := s.Addr().String()
			for _, suite := range kt.refused {
				if _, err := handshake(addr, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite}}); err == nil {
					t.Errorf("TLS 1.2 with %s: accepted", tls.CipherSuiteName(suite))
				}
			}
			for _, suite := range kt.accepted {
				if _, err := handshake(addr, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite}}); err != nil {
					t.Errorf("TLS 1.2 with %s: %v", tls.CipherSuiteName(suite), err)
				}
			}
			// TLS 1.3 is unchanged, and TLS 1.1 is still refused.
			if _, err := handshake(addr, &tls.Config{MinVersion: tls.VersionTLS13}); err != nil {
				t.Errorf("TLS 1.3: %v", err)
			}
			if _, err := handshake(addr, &tls.Config{MaxVersion: tls.VersionTLS11}); err == nil {
				t.Error("TLS 1.1: accepted")
			}
			// HTTP/2 still negotiates (it needs one of the AES-128-GCM suites).
			conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}, MaxVersion: tls.VersionTLS12})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
				t.Errorf("ALPN over TLS 1.2 negotiated %q, want h2", p)
			}
		})
	}
}

func TestExpiryMetricIsAbsentWithoutTLS(t *testing.T) {
	s, err := New(parse(t, "[server]\nlisten = \"127.0.0.1:0\"\n"), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	defer s.run.listener.Close()
	mfs, _ := s.Metrics().Registry.Gather()
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "ferrofed_tls_") {
			t.Fatalf("%s without TLS: a 0 would read as an expired certificate", mf.GetName())
		}
	}
}

func TestListenRefusesAPairThatDoesNotLoad(t *testing.T) {
	a := newKeyPairPEM(t, 501, time.Now().Add(time.Hour))
	b := newKeyPairPEM(t, 502, time.Now().Add(time.Hour))
	v := newSecretVolume(t, a)
	s, err := New(parse(t, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:0\"\n[server.tls]\ncertificate_file = %q\nkey_file = %q\n",
		v.certFile(), v.keyFile())), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	v.publish(t, a.cert, b.key) // broken after config check passed
	if err := s.Listen(); err == nil || !strings.Contains(err.Error(), "server.tls.certificate_file") {
		t.Fatalf("Listen: %v", err)
	}
	if s.Addr() != nil {
		t.Fatal("listening on a pair that does not load")
	}
}

func TestTLSConfig(t *testing.T) {
	if c, err := TLSConfig(config.TLS{}, nil); c != nil || err != nil {
		t.Fatalf("TLS off: %v %v", c, err)
	}
	if _, err := LoadKeyPair("/nonexistent", "/nonexistent", logr.Discard()); err == nil ||
		!strings.Contains(err.Error(), "server.tls.certificate_file") {
		t.Fatalf("missing files: %v", err)
	}
	if _, err := TLSConfig(config.TLS{CertificateFile: "c", KeyFile: "k"}, nil); err == nil {
		t.Fatal("TLS on without a key pair")
	}
}

// A named pipe swapped in for the certificate is refused at once, naming its key: the
// reload neither blocks on it (holding the reload lock, which a SIGHUP waits for) nor
// drops the pair being served.
func TestANamedPipeAsTheCertificateIsARefusedReloadNotAHang(t *testing.T) {
	p := newKeyPairPEM(t, 1, time.Now().Add(30*24*time.Hour))
	v := newSecretVolume(t, p)
	k, err := LoadKeyPair(v.certFile(), v.keyFile(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	v.publish(t, []byte("x"), p.key)
	fifo := filepath.Join(v.dir, fmt.Sprintf("..v%d", v.versions), "tls.crt")
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := k.Reload("test", true); done <- err }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the reload blocked on the named pipe")
	}
	if err == nil || !strings.Contains(err.Error(), "server.tls.certificate_file: ") || !strings.Contains(err.Error(), "is a named pipe (FIFO), not a regular file") {
		t.Fatalf("reload: %v, want server.tls.certificate_file refused as a named pipe", err)
	}
	if k.Leaf().SerialNumber.Cmp(p.serial) != 0 {
		t.Fatal("the pair served changed")
	}
	if _, err := LoadKeyPair(v.certFile(), v.keyFile(), logr.Discard()); err == nil || strings.Count(err.Error(), "server.tls.") != 1 {
		t.Fatalf("load: %v, want one key named", err)
	}
}
