// Package process tests the built ferrofed binary as a container runtime runs it:
// `serve` in the background, `healthcheck` as the runtime's probe, signals to stop and
// reload it.
package process

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
	"github.com/ferrofed/ferrofed/test/certpool"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/proctest"
)

var binary string

// clients is the issuer the configurations of these tests trust (writeFile gives one
// that names no issuer its table: the data plane asks for a token by default), and
// clientToken one of its data-plane tokens (issuer.ClientScope), which clientGet and
// authorized send.
var (
	clients     *issuer.Issuer
	clientToken string
)

// beforeTests, when set (by a platform's file), runs first in TestMain: it may turn the
// test binary into a launcher of another process and never return.
var beforeTests func()

func TestMain(m *testing.M) {
	if beforeTests != nil {
		beforeTests()
	}
	dir, err := os.MkdirTemp("", "ferrofed-process-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "ferrofed")
	if clients, err = issuer.NewIn(dir); err == nil {
		clientToken, err = clients.Token(map[string]any{"sub": "app", "scope": issuer.ClientScope, "exp": time.Now().Add(24 * time.Hour).Unix()})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	if err := proctest.BuildFerrofed(binary); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// writeFile writes text to path. A configuration (*.toml) that names no issuer and
// says nothing of auth.data_plane gets the table of clients: the tests of other
// tables run the data plane as it ships, asking for a token.
func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if strings.HasSuffix(path, ".toml") && !strings.Contains(text, "auth.issuers") && !strings.Contains(text, "data_plane") &&
		!strings.Contains(text, "[auth]") {
		text += "\n" + clients.Table()
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// clientGet is http.Get with clientToken.
func clientGet(url string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+clientToken)
	return http.DefaultClient.Do(req)
}

// authorized sends clientToken on every request of rt (nil: the default transport)
// that carries no Authorization of its own.
func authorized(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return bearer{rt}
}

type bearer struct{ rt http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+clientToken)
	}
	return b.rt.RoundTrip(r)
}

// CloseIdleConnections passes http.Client.CloseIdleConnections on.
func (b bearer) CloseIdleConnections() {
	if c, ok := b.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// gateway is a running `ferrofed serve`.
type gateway struct {
	cmd    *exec.Cmd
	stderr *proctest.SyncBuffer
	exited chan struct{}
	err    error // Wait's result, once exited
}

// serve starts `ferrofed serve --config path` and waits until it printed its address.
func serve(t testing.TB, path string) *gateway {
	t.Helper()
	return serveCommand(t, exec.Command(binary, "serve", "--config", path))
}

// serveCommand starts cmd, a `ferrofed serve`, and waits until it printed its address.
func serveCommand(t testing.TB, cmd *exec.Cmd) *gateway {
	t.Helper()
	g := &gateway{cmd: cmd, stderr: &proctest.SyncBuffer{}, exited: make(chan struct{})}
	g.cmd.Stderr = g.stderr
	stdout, err := g.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on") {
				listening <- sc.Text()
			}
		}
	}()
	go func() { g.err = g.cmd.Wait(); close(g.exited) }()
	t.Cleanup(func() {
		select {
		case <-g.exited:
		default:
			_ = g.cmd.Process.Kill()
			<-g.exited
		}
		if t.Failed() {
			t.Logf("serve's log:\n%s", g.stderr.String())
		}
	})
	select {
	case <-listening:
	case <-g.exited:
		t.Fatalf("serve exited at start: %v\n%s", g.err, g.stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("serve did not print its address\n%s", g.stderr.String())
	}
	return g
}

// stop sends SIGTERM and waits for a clean exit.
func (g *gateway) stop(t *testing.T) {
	t.Helper()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.exited:
		if g.err != nil {
			t.Fatalf("serve exited with %v after SIGTERM", g.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
}

// waitLog waits until serve's log holds every substring.
func (g *gateway) waitLog(t *testing.T, substrings ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		log := g.stderr.String()
		all := true
		for _, s := range substrings {
			all = all && strings.Contains(log, s)
		}
		if all {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("serve's log never held %q:\n%s", substrings, g.stderr.String())
}

// healthcheck runs `ferrofed healthcheck --config path [flags]` and returns its exit
// code and output.
func healthcheck(t *testing.T, path string, flags ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"healthcheck", "--config", path}, flags...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	begin := time.Now()
	err := cmd.Run()
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("healthcheck took %s, over its 3 s budget", took)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

func oneLine(t *testing.T, out string) {
	t.Helper()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("healthcheck printed %q, want one line", out)
	}
}

func TestServeThenHealthcheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ferrofed.toml")
	terminationLog := filepath.Join(dir, "termination-log")
	writeFile(t, path, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:%d\"\nbase_path = \"/gw\"\ntermination_message_path = %q\n", freePort(t), terminationLog))
	g := serve(t, path)

	code, out := healthcheck(t, path)
	if code != 0 {
		t.Fatalf("healthcheck of a serving gateway exited %d: %s", code, out)
	}
	oneLine(t, out)

	g.stop(t)
	g.waitLog(t, "BindingsStopped", `"msg":"Stopped"`)
	// The drain's outcome, as the kubelet would copy it into the pod's status.
	data, err := os.ReadFile(terminationLog)
	if err != nil {
		t.Fatalf("no termination message after SIGTERM: %v", err)
	}
	if m, err := lifecycle.ParseTerminationMessage(data); err != nil || m.Outcome != lifecycle.DrainCompleted ||
		m.CutConnections != 0 || len(m.Abandoned) != 0 || m.Drain > 5*time.Second {
		t.Fatalf("termination message %q: %+v, %v; want an idle drain, completed", data, m, err)
	}
	if code, out := healthcheck(t, path); code != 1 {
		t.Fatalf("healthcheck of a stopped gateway exited %d: %s", code, out)
	} else {
		oneLine(t, out)
	}
}

func TestServeRefusesAnInvalidConfiguration(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ferrofed.toml")
	port := freePort(t)
	writeFile(t, path, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:%d\"\nrequest_timeout_ms = 2000\nshutdown_timeout_ms = 1000\n", port))

	cmd := exec.Command(binary, "serve", "--config", path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Fatalf("serve exited with %v, want a non-zero exit", err)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("serve started on an invalid configuration")
	}
	for _, key := range []string{"server.shutdown_timeout_ms", "server.request_timeout_ms"} {
		if !strings.Contains(out.String(), key) {
			t.Errorf("the refusal does not name %s:\n%s", key, out.String())
		}
	}
	if strings.Contains(out.String(), "listening on") {
		t.Error("serve printed an address")
	}
	if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
		conn.Close()
		t.Fatal("something listens on the port of the refused configuration")
	}
	if code, out := healthcheck(t, path); code != 1 {
		t.Fatalf("healthcheck of a bad configuration exited %d: %s", code, out)
	}
}

func TestSIGHUPWithAnInvalidFileKeepsTheOldConfiguration(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ferrofed.toml")
	good := fmt.Sprintf("[server]\nlisten = \"127.0.0.1:%d\"\ntermination_message_path = \"\"\n", freePort(t))
	writeFile(t, path, good)
	// The healthcheck reads a copy: the file serve reloads is about to be broken.
	probe := filepath.Join(dir, "probe.toml")
	writeFile(t, probe, good)
	g := serve(t, path)
	if code, out := healthcheck(t, probe); code != 0 {
		t.Fatalf("before the reload: %d %s", code, out)
	}

	writeFile(t, path, good+"request_timeout_ms = 2000\nshutdown_timeout_ms = 1000\nmystery = 1\n")
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(t, "Refused reloaded configuration", "server.shutdown_timeout_ms", "server.request_timeout_ms", "server.mystery")

	select {
	case <-g.exited:
		t.Fatalf("serve exited on a bad reload: %v", g.err)
	default:
	}
	if code, out := healthcheck(t, probe); code != 0 {
		t.Fatalf("after a refused reload the old configuration stopped serving: %d %s", code, out)
	}

	// A valid reload applies, and a key that needs a restart is said so.
	writeFile(t, path, good+"[health]\nminimal = true\n[metrics]\npath = \"/m\"\n")
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(t, "Reloaded configuration", "changed but needs a restart: metrics")
	code, out := healthcheck(t, probe)
	if code != 0 || strings.Contains(out, "checks") {
		t.Fatalf("after a valid reload (minimal): %d %s", code, out)
	}
	g.stop(t)
}

func TestTLSWithARequiredClientCertificate(t *testing.T) {
	dir := t.TempDir()
	pki := newPKI(t, dir)
	path := filepath.Join(dir, "ferrofed.toml")
	port := freePort(t)
	writeFile(t, path, fmt.Sprintf(`[server]
listen = "127.0.0.1:%d"
termination_message_path = ""

[server.tls]
certificate_file = %q
key_file = %q
client_ca_file = %q
healthcheck_identity_file = %q
`, port, pki.serverCert, pki.serverKey, pki.caCert, pki.identity))
	g := serve(t, path)

	code, out := healthcheck(t, path)
	if code != 0 || !strings.HasPrefix(out, "ready: https://127.0.0.1:") {
		t.Fatalf("healthcheck over TLS exited %d: %s", code, out)
	}
	oneLine(t, out)

	// The listener really requires the certificate: without one the request fails.
	pool, err := certpool.FromPEM(pki.caPEM)
	if err != nil {
		t.Fatal(err)
	}
	anonymous := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if resp, err := anonymous.Get(fmt.Sprintf("https://127.0.0.1:%d/health", port)); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate got %d", resp.StatusCode)
	}
	// And the healthcheck without its identity is refused too.
	noID := filepath.Join(dir, "noid.toml")
	writeFile(t, noID, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:%d\"\n[server.tls]\ncertificate_file = %q\nkey_file = %q\nclient_ca_file = %q\n",
		port, pki.serverCert, pki.serverKey, pki.caCert))
	if code, out := healthcheck(t, noID); code != 1 {
		t.Fatalf("healthcheck without an identity exited %d: %s", code, out)
	}

	g.stop(t)
	if code, out := healthcheck(t, path); code != 1 {
		t.Fatalf("healthcheck of a stopped TLS gateway exited %d: %s", code, out)
	}
}

// TestLivenessHealthcheckWithARequiredClientCertificate runs the exec probes the
// operator renders for a Gateway with spec.tls.clientCASecret: the identity is a
// kubernetes.io/tls Secret's pair of files (healthcheck_identity_key_file), liveness
// asks {base}/health, and each probe has its own --timeout. The gateway is unready (its
// one member is down and health.member_ready_check needs it), so liveness and readiness
// must part: live, and not ready.
func TestLivenessHealthcheckWithARequiredClientCertificate(t *testing.T) {
	dir := t.TempDir()
	pki := newPKI(t, dir)
	path := filepath.Join(dir, "ferrofed.toml")
	port := freePort(t)
	writeFile(t, path, fmt.Sprintf(`[server]
listen = ":%d"
base_path = "/gw"
termination_message_path = ""

[server.tls]
certificate_file = %q
key_file = %q
client_ca_file = %q
healthcheck_identity_file = %q
healthcheck_identity_key_file = %q

[health]
member_ready_check = true

[[registry.members]]
id = "down"
query_endpoint = "http://127.0.0.1:%d/fhir"
`, port, pki.serverCert, pki.serverKey, pki.caCert, pki.identityCert, pki.identityKey, freePort(t)))
	g := serve(t, path)
	defer g.stop(t)

	code, out := healthcheck(t, path, "--liveness", "--timeout", "800ms")
	if want := fmt.Sprintf("live: https://127.0.0.1:%d/gw/health: 200", port); code != 0 || !strings.HasPrefix(out, want) {
		t.Fatalf("healthcheck --liveness exited %d: %s, want 0 and a line starting %q", code, out, want)
	}
	oneLine(t, out)
	code, out = healthcheck(t, path, "--timeout", "800ms")
	if want := fmt.Sprintf("unready: https://127.0.0.1:%d/gw/health/readiness: 503", port); code != 1 || !strings.HasPrefix(out, want) {
		t.Fatalf("healthcheck (readiness) of a gateway whose member is down exited %d: %s, want 1 and a line starting %q", code, out, want)
	}
	oneLine(t, out)

	// Without the identity the listener refuses the liveness probe as well.
	noID := filepath.Join(dir, "noid.toml")
	writeFile(t, noID, fmt.Sprintf("[server]\nlisten = \":%d\"\nbase_path = \"/gw\"\n[server.tls]\ncertificate_file = %q\nkey_file = %q\nclient_ca_file = %q\n",
		port, pki.serverCert, pki.serverKey, pki.caCert))
	if code, out := healthcheck(t, noID, "--liveness"); code != 1 || !strings.HasPrefix(out, "not live: ") {
		t.Fatalf("healthcheck --liveness without an identity exited %d: %s, want 1 and \"not live: ...\"", code, out)
	}
	// A timeout out of its bounds is refused, naming the flag, before anything is asked.
	if code, out := healthcheck(t, path, "--liveness", "--timeout", "2m"); code != 1 || !strings.Contains(out, "--timeout") {
		t.Fatalf("healthcheck --timeout 2m exited %d: %s, want 1 and the flag named", code, out)
	}
}

// pki is a CA, a server certificate for 127.0.0.1 and a client identity, as files.
type pki struct {
	caCert, serverCert, serverKey, identity string
	// identityCert and identityKey are the identity as two files, as a
	// kubernetes.io/tls Secret mounts it.
	identityCert, identityKey string
	caPEM                     []byte
}

func newPKI(t *testing.T, dir string) pki {
	t.Helper()
	caKey := newKey(t)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ferrofed test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, []byte) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	}
	p := pki{
		caCert: filepath.Join(dir, "ca.pem"), serverCert: filepath.Join(dir, "server.pem"),
		serverKey: filepath.Join(dir, "server-key.pem"), identity: filepath.Join(dir, "healthcheck.pem"),
		identityCert: filepath.Join(dir, "healthcheck-tls.crt"), identityKey: filepath.Join(dir, "healthcheck-tls.key"),
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
	}
	sc, sk := issue(2, "ferrofed", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	cc, ck := issue(3, "ferrofed healthcheck", x509.ExtKeyUsageClientAuth, nil)
	writeFile(t, p.caCert, string(p.caPEM))
	writeFile(t, p.serverCert, string(sc))
	writeFile(t, p.serverKey, string(sk))
	writeFile(t, p.identity, string(cc)+string(ck))
	writeFile(t, p.identityCert, string(cc))
	writeFile(t, p.identityKey, string(ck))
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
