// Package healthcheck is the client side of `ferrofed healthcheck`: it asks the gateway
// running on this host for its readiness (or, with Options.Liveness, its liveness), for
// a container runtime that cannot send the request itself: the image's HEALTHCHECK (see
// the README), and the exec probes the operator renders when the listener requires
// client certificates, which the kubelet's HTTPS probes cannot present. It reads the
// configuration the way serve does and answers with one line and a verdict: ready only
// for a 200 within the timeout.
package healthcheck

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/health"
)

// Timeout is the default budget of one healthcheck: connect, TLS, request and answer.
const Timeout = 3 * time.Second

// MaxTimeout bounds Options.Timeout: the longest probe timeout Kubernetes allows here
// (a Gateway's timeoutSeconds is at most 60).
const MaxTimeout = time.Minute

// Options say what one healthcheck asks and how long it may take.
type Options struct {
	// Liveness asks {base}/health (the process answers) instead of
	// {base}/health/readiness (it serves).
	Liveness bool
	// Timeout is the whole budget; 0 is Timeout. From 1ms to MaxTimeout.
	Timeout time.Duration
}

// Validate refuses a timeout out of its bounds, naming the flag.
func (o Options) Validate() error {
	if o.Timeout < 0 || o.Timeout > MaxTimeout || (o.Timeout > 0 && o.Timeout < time.Millisecond) {
		return fmt.Errorf("--timeout %s: must be from 1ms to %s", o.Timeout, MaxTimeout)
	}
	return nil
}

func (o Options) timeout() time.Duration {
	if o.Timeout == 0 {
		return Timeout
	}
	return o.Timeout
}

// Target is where the healthcheck asks, derived from the configuration alone.
type Target struct {
	// URL is the readiness URL, e.g. "https://127.0.0.1:8443/x/health/readiness".
	URL string
	// Host is the host it connects to (without brackets).
	Host string
}

// TargetFor derives the readiness URL from server.listen, server.base_path and
// server.tls: the port of server.listen, on 127.0.0.1 when its host is a wildcard
// (empty, "0.0.0.0", "[::]" or any other unspecified address), else on that host.
//
// 127.0.0.1 answers for every wildcard spelling: Go's net.Listen makes each of them one
// socket, dual-stack where the kernel has IPv6 and IPv4 alone where it has not ("[::]"
// resolves to 0.0.0.0 first), so [::1] would be refused on a kernel without IPv6.
func TargetFor(cfg *config.Config) (Target, error) { return targetFor(cfg, health.ReadinessPath) }

// LivenessTargetFor is TargetFor asking {base}/health.
func LivenessTargetFor(cfg *config.Config) (Target, error) {
	return targetFor(cfg, health.LivenessPath)
}

func targetFor(cfg *config.Config, route string) (Target, error) {
	host, port, err := net.SplitHostPort(cfg.Server.Listen)
	if err != nil {
		return Target{}, fmt.Errorf("server.listen %q: %w", cfg.Server.Listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	scheme := "http"
	if cfg.Server.TLS.Enabled() {
		scheme = "https"
	}
	base := strings.TrimSuffix(cfg.Server.BasePath, "/")
	return Target{
		URL:  scheme + "://" + net.JoinHostPort(host, port) + base + route,
		Host: host,
	}, nil
}

// Result is the verdict and the one line to print.
type Result struct {
	// Ready is the verdict: a 200 within the timeout (ready, or live with Liveness).
	Ready bool
	Line  string
}

// Run asks the readiness of the gateway that cfg configures, within Timeout.
func Run(ctx context.Context, cfg *config.Config) Result { return Check(ctx, cfg, Options{}) }

// Check asks what opts say of the gateway that cfg configures. It never returns an
// error: every failure (invalid opts too) is a failing Result whose line says why. The
// line starts with "ready:" or "unready:" for readiness, "live:" or "not live:" for
// liveness.
func Check(ctx context.Context, cfg *config.Config, opts Options) Result {
	pass, fail := "ready: ", "unready: "
	if opts.Liveness {
		pass, fail = "live: ", "not live: "
	}
	if err := opts.Validate(); err != nil {
		return Result{Line: fail + err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	t, err := TargetFor(cfg)
	if opts.Liveness {
		t, err = LivenessTargetFor(cfg)
	}
	if err != nil {
		return Result{Line: fail + err.Error()}
	}
	transport := &http.Transport{
		Proxy:             nil, // a proxy from the environment must not stand between us and localhost
		DisableKeepAlives: true,
		// The gateway's cap on every answer head it reads.
		MaxResponseHeaderBytes: 64 << 10,
	}
	if cfg.Server.TLS.Enabled() {
		tc, err := ClientTLS(cfg.Server.TLS)
		if err != nil {
			return Result{Line: fail + err.Error()}
		}
		transport.TLSClientConfig = tc
		transport.ForceAttemptHTTP2 = false
	}
	client := &http.Client{Transport: transport, Timeout: opts.timeout(),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL, nil)
	if err != nil {
		return Result{Line: fail + err.Error()}
	}
	resp, err := client.Do(req)
	if err != nil {
		return Result{Line: fmt.Sprintf("%s%s: %v", fail, t.URL, briefError(err))}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	line := fmt.Sprintf("%s: %d %s", t.URL, resp.StatusCode, oneLine(body))
	if resp.StatusCode != http.StatusOK {
		return Result{Line: fail + line}
	}
	return Result{Ready: true, Line: pass + line}
}

// ClientTLS trusts exactly the certificate server.tls.certificate_file holds (its first
// certificate, byte for byte) while it is within its validity period, and presents
// healthcheck_identity_file (with healthcheck_identity_key_file, when set) when the
// listener requires client certificates. No host
// name is checked: the healthcheck connects to a loopback address the certificate need
// not name (it names the gateway's public DNS name), and pinning the exact certificate
// is a stronger check than a name. An expired pinned certificate is refused: clients
// refuse it too, so the gateway is not ready.
func ClientTLS(t config.TLS) (*tls.Config, error) {
	data, err := config.ReadFile("server.tls.certificate_file", t.CertificateFile, config.MaxPEMFileBytes)
	if err != nil {
		return nil, err // a *config.FileError, naming the key
	}
	leaf, err := firstCertificate(data)
	if err != nil {
		return nil, fmt.Errorf("server.tls.certificate_file: %w", err)
	}
	c := &tls.Config{
		// The standard verification checks a chain and a host name; VerifyConnection
		// below does this verification instead: the exact bytes, then the validity.
		InsecureSkipVerify: true, //nolint:gosec // replaced by VerifyConnection's pinning
		MinVersion:         tls.VersionTLS12,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, leaf.Raw) {
				return errors.New("the server's certificate is not server.tls.certificate_file")
			}
			switch now := time.Now(); {
			case now.After(leaf.NotAfter):
				return fmt.Errorf("the server's certificate (server.tls.certificate_file) expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
			case now.Before(leaf.NotBefore):
				return fmt.Errorf("the server's certificate (server.tls.certificate_file) is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
			}
			return nil
		},
	}
	if t.ClientCAFile != "" && t.HealthcheckIdentityFile != "" {
		certFile, keyFile := t.HealthcheckIdentity()
		keyKey := "server.tls.healthcheck_identity_key_file"
		if t.HealthcheckIdentityKeyFile == "" {
			keyKey = "server.tls.healthcheck_identity_file"
		}
		id, err := config.ReadKeyPair("server.tls.healthcheck_identity_file", certFile, keyKey, keyFile)
		if err != nil {
			return nil, err // a *config.FileError, naming the key
		}
		c.Certificates = []tls.Certificate{id}
	}
	return c, nil
}

func firstCertificate(data []byte) (*x509.Certificate, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("holds no PEM certificate")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

func briefError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the URL is already on the line
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return "no answer in time"
	}
	return err.Error()
}

func oneLine(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
