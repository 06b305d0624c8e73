package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// DefaultCertificatePoll is how often the served key pair's files are read again.
const DefaultCertificatePoll = time.Second

// TLS12CipherSuites are the TLS 1.2 suites the listener accepts: Mozilla's
// "intermediate" profile, ECDHE with AES-GCM or ChaCha20-Poly1305 (AEAD only; no CBC,
// no SHA-1 MAC, no RSA key exchange). Mozilla's DHE suites are not implemented by Go.
// TLS 1.3 suites are not configurable in crypto/tls and are all AEAD.
var TLS12CipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// TLSConfig is the listener's TLS configuration for server.tls, or nil when TLS is off.
// The certificate is served through GetCertificate from keys, which reloads it when its
// files change; a client_ca_file makes client certificates required and verified
// against that pool (read once: a change of it needs a restart).
func TLSConfig(t config.TLS, keys *KeyPair) (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	if keys == nil {
		return nil, errors.New("server.tls: no key pair")
	}
	c := &tls.Config{
		GetCertificate: keys.GetCertificate,
		MinVersion:     tls.VersionTLS12,
		CipherSuites:   TLS12CipherSuites,
	}
	if t.ClientCAFile != "" {
		pool, err := config.ReadCertPool("server.tls.client_ca_file", t.ClientCAFile)
		if err != nil {
			return nil, err // a *config.FileError, naming the key
		}
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// KeyPair is the key pair the listener serves, read from server.tls.certificate_file
// and key_file. Reload reads the files again and swaps the pair in when their contents
// changed and load; Watch does so every poll. A pair that does not load (half written,
// a key that does not match its certificate) is logged and the last good pair keeps
// serving. Kubernetes updates a Secret volume by swapping a `..data` symlink: the files
// are read through their paths every time, so the swap is seen like any rewrite.
type KeyPair struct {
	certFile, keyFile string
	log               logr.Logger
	now               func() time.Time

	current atomic.Pointer[tls.Certificate]

	mu sync.Mutex // serialises reloads
	// loaded and tried are the files' contents last loaded and last tried: a content
	// that failed is not tried (and logged) again until it changes.
	loadedCert, loadedKey []byte
	triedCert, triedKey   []byte
	readFailed            bool // the last read of the files failed

	expiry  prometheus.Gauge
	reloads *prometheus.CounterVec
}

// Outcomes of a key pair reload in ferrofed_tls_certificate_reloads_total.
const (
	ReloadLoaded = "loaded"
	ReloadFailed = "failed"
)

// LoadKeyPair loads the pair once; an error means it does not load (serve refuses to
// start then).
func LoadKeyPair(certFile, keyFile string, log logr.Logger) (*KeyPair, error) {
	k := &KeyPair{
		certFile: certFile, keyFile: keyFile, log: log, now: time.Now,
		expiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ferrofed_tls_certificate_expiry_seconds",
			Help: "NotAfter of the TLS certificate the listener serves, in Unix seconds; updated on every reload.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ferrofed_tls_certificate_reloads_total",
			Help: "Reloads of the TLS key pair after its files changed or on SIGHUP, by outcome: loaded, or failed (the last good pair kept serving).",
		}, []string{"outcome"}),
	}
	k.reloads.WithLabelValues(ReloadLoaded)
	k.reloads.WithLabelValues(ReloadFailed)
	certPEM, keyPEM, err := k.read()
	if err == nil {
		err = k.swap(certPEM, keyPEM)
	}
	var fe *config.FileError
	switch {
	case errors.As(err, &fe):
		return nil, err // it names its key
	case err != nil:
		return nil, fmt.Errorf("server.tls.certificate_file: %w", err)
	}
	k.logLoaded("Loaded the TLS key pair", "")
	return k, nil
}

// Collectors are the key pair's metrics, for the server's registry.
func (k *KeyPair) Collectors() []prometheus.Collector {
	return []prometheus.Collector{k.expiry, k.reloads}
}

// GetCertificate is tls.Config.GetCertificate: the last good pair.
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.current.Load(), nil
}

// Leaf is the certificate served now.
func (k *KeyPair) Leaf() *x509.Certificate { return k.current.Load().Leaf }

// Reload reads the files again and serves them when their contents changed and load;
// reason ("files changed", "SIGHUP") is logged. With force it retries contents that
// failed before (a SIGHUP asks for that). It reports whether a new pair is served; an
// error means the files did not load and the last good pair keeps serving.
func (k *KeyPair) Reload(reason string, force bool) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	certPEM, keyPEM, err := k.read()
	if err != nil {
		if k.readFailed && !force {
			return false, err // the same failure as the last poll: logged then
		}
		k.readFailed = true
		k.triedCert, k.triedKey = nil, nil
	} else {
		k.readFailed = false
		if bytes.Equal(certPEM, k.loadedCert) && bytes.Equal(keyPEM, k.loadedKey) {
			k.triedCert, k.triedKey = certPEM, keyPEM
			return false, nil
		}
		if !force && bytes.Equal(certPEM, k.triedCert) && bytes.Equal(keyPEM, k.triedKey) {
			return false, errors.New("unchanged since the last failed reload")
		}
		k.triedCert, k.triedKey = certPEM, keyPEM
		err = k.swap(certPEM, keyPEM)
	}
	if err != nil {
		k.reloads.WithLabelValues(ReloadFailed).Inc()
		k.log.Error(err, "Reloading the TLS key pair failed; the last good pair keeps serving",
			"reason", reason, "certificateFile", k.certFile, "keyFile", k.keyFile,
			"servedSerial", serial(k.current.Load().Leaf.SerialNumber), "servedNotAfter", k.current.Load().Leaf.NotAfter.UTC().Format(time.RFC3339))
		return false, err
	}
	k.reloads.WithLabelValues(ReloadLoaded).Inc()
	k.logLoaded("Reloaded the TLS key pair", reason)
	return true, nil
}

// Watch reloads the pair every poll until ctx ends.
func (k *KeyPair) Watch(ctx context.Context, poll time.Duration) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = k.Reload("files changed", false) // a failure is logged
		}
	}
}

// read reads both files through their paths (following symlinks, as a Secret volume's
// ..data swap needs). The certificate is read again after the key: when it changed in
// between, the files were being replaced and the pair is read again, so that a swap
// between the two reads is not taken for a broken pair.
func (k *KeyPair) read() (certPEM, keyPEM []byte, err error) {
	for range 3 {
		if certPEM, err = config.ReadFile("server.tls.certificate_file", k.certFile, config.MaxPEMFileBytes); err != nil {
			return nil, nil, err
		}
		if keyPEM, err = config.ReadFile("server.tls.key_file", k.keyFile, config.MaxPEMFileBytes); err != nil {
			return nil, nil, err
		}
		again, err := config.ReadFile("server.tls.certificate_file", k.certFile, config.MaxPEMFileBytes)
		if err != nil {
			return nil, nil, err
		}
		if bytes.Equal(certPEM, again) {
			break
		}
	}
	return certPEM, keyPEM, nil
}

// swap serves the pair when it loads.
func (k *KeyPair) swap(certPEM, keyPEM []byte) error {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return err
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return err
		}
	}
	k.current.Store(&pair)
	k.loadedCert, k.loadedKey = certPEM, keyPEM
	k.triedCert, k.triedKey = certPEM, keyPEM
	k.expiry.Set(float64(pair.Leaf.NotAfter.Unix()))
	return nil
}

func (k *KeyPair) logLoaded(msg, reason string) {
	leaf := k.current.Load().Leaf
	kv := []any{"certificateFile", k.certFile, "serial", serial(leaf.SerialNumber),
		"notBefore", leaf.NotBefore.UTC().Format(time.RFC3339), "notAfter", leaf.NotAfter.UTC().Format(time.RFC3339)}
	if reason != "" {
		kv = append(kv, "reason", reason)
	}
	k.log.Info(msg, kv...)
	now := k.now()
	switch left := leaf.NotAfter.Sub(now); {
	case left <= 0:
		k.log.Info("Warning: the TLS certificate served has expired", "certificateFile", k.certFile,
			"notAfter", leaf.NotAfter.UTC().Format(time.RFC3339))
	case left < config.CertificateExpiryWarning:
		k.log.Info("Warning: the TLS certificate served expires soon", "certificateFile", k.certFile,
			"notAfter", leaf.NotAfter.UTC().Format(time.RFC3339), "in", left.Round(time.Minute).String())
	}
}

func serial(n *big.Int) string {
	if n == nil {
		return ""
	}
	return n.Text(16)
}

// ReloadKeyPair reads the served key pair's files again now, retrying contents that
// failed before (SIGHUP does this besides reloading the configuration; the files are
// also polled every second). It returns nil when TLS is off or the files are unchanged;
// an error is logged, and the last good pair keeps serving.
func (s *Server) ReloadKeyPair(reason string) error {
	s.run.mu.Lock()
	keys := s.run.keys
	s.run.mu.Unlock()
	if keys == nil {
		return nil
	}
	changed, err := keys.Reload(reason, true)
	if err == nil && !changed {
		s.log.WithName("tls").Info("TLS key pair unchanged", "reason", reason, "certificateFile", keys.certFile,
			"serial", serial(keys.Leaf().SerialNumber))
	}
	return err
}
