package process

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/certpool"
)

// certIssuer is a CA that issues server certificates for 127.0.0.1 with chosen serials and
// validity.
type certIssuer struct {
	cert *x509.Certificate
	key  any
	pool *x509.CertPool
}

func newIssuer(t *testing.T) certIssuer {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ferrofed rotation CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(100 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return certIssuer{cert: cert, key: key, pool: certpool.Of(cert)}
}

// serverPair is a server certificate for 127.0.0.1 and its key, as PEM.
func (is certIssuer) serverPair(t *testing.T, serial int64, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "ferrofed"},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, is.cert, &key.PublicKey, is.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// secretVolume lays files out as the kubelet does for a Secret volume: each version in
// a directory of its own, `..data` a symlink to the current one, replaced atomically
// (a new symlink renamed over it), and tls.crt and tls.key symlinks through ..data.
type secretVolume struct {
	dir      string
	versions int
}

func newSecretVolume(t *testing.T, certPEM, keyPEM []byte) *secretVolume {
	t.Helper()
	v := &secretVolume{dir: filepath.Join(t.TempDir(), "tls")}
	if err := os.Mkdir(v.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	v.publish(t, certPEM, keyPEM)
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

func (v *secretVolume) certFile() string { return filepath.Join(v.dir, "tls.crt") }
func (v *secretVolume) keyFile() string  { return filepath.Join(v.dir, "tls.key") }

// publish writes a new version's directory, then swaps ..data to it in one rename.
func (v *secretVolume) publish(t *testing.T, certPEM, keyPEM []byte) {
	t.Helper()
	v.versions++
	version := fmt.Sprintf("..2026_12_01_00_00_%02d.%d", v.versions, v.versions)
	if err := os.Mkdir(filepath.Join(v.dir, version), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(v.dir, version, name), data, 0o400); err != nil {
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

// slowMember is a FHIR member on loopback: /fhir/Patient/fast answers at once,
// /fhir/Patient/slow sends its first bytes, then the rest when released (or after 15 s).
type slowMember struct {
	srv     *httptest.Server
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	freed   sync.Once
}

// free lets the slow request finish.
func (m *slowMember) free() { m.freed.Do(func() { close(m.release) }) }

const slowBody = `{"resourceType":"Patient","id":"slow"}`

func newSlowMember(t *testing.T) *slowMember {
	m := &slowMember{entered: make(chan struct{}), release: make(chan struct{})}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/fhir+json")
		switch r.URL.Path {
		case "/fhir/Patient/fast":
			_, _ = io.WriteString(w, `{"resourceType":"Patient","id":"fast"}`)
		case "/fhir/Patient/slow":
			_, _ = io.WriteString(w, slowBody[:10])
			w.(http.Flusher).Flush()
			m.once.Do(func() { close(m.entered) })
			select {
			case <-m.release:
			case <-time.After(15 * time.Second):
			}
			_, _ = io.WriteString(w, slowBody[10:])
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(m.srv.Close)
	t.Cleanup(m.free) // before Close, which waits for the slow handler
	return m
}

// observation is one request of the load: when it started, what it got.
type observation struct {
	at     time.Time
	fresh  bool   // made on a connection of its own (a new handshake)
	serial string // the serial of the certificate its handshake saw
	err    error
}

func TestTheListenerServesARotatedCertificateUnderLoad(t *testing.T) {
	dir := t.TempDir()
	ca := newIssuer(t)
	now := time.Now()
	oldCert, oldKey := ca.serverPair(t, 0x1001, now.Add(-time.Hour), now.Add(20*24*time.Hour))
	newCert, newKey := ca.serverPair(t, 0x2002, now.Add(-time.Minute), now.Add(90*24*time.Hour))
	vol := newSecretVolume(t, oldCert, oldKey)
	member := newSlowMember(t)

	port := freePort(t)
	path := filepath.Join(dir, "ferrofed.toml")
	writeFile(t, path, fmt.Sprintf(`[server]
listen = "127.0.0.1:%d"
request_timeout_ms = 20000
termination_message_path = ""

[server.tls]
certificate_file = %q
key_file = %q

[[registry.members]]
id = "a"
query_endpoint = "%s/fhir"
`, port, vol.certFile(), vol.keyFile(), member.srv.URL))
	g := serve(t, path)
	pid := g.cmd.Process.Pid
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	if code, out := healthcheck(t, path); code != 0 {
		t.Fatalf("healthcheck before the rotation: %d %s", code, out)
	}

	// Clients verify the certificate for real, against the CA.
	tlsConfig := &tls.Config{RootCAs: ca.pool}
	newHandshakes := &http.Client{Timeout: 10 * time.Second,
		Transport: authorized(&http.Transport{Proxy: nil, TLSClientConfig: tlsConfig, DisableKeepAlives: true})}
	keepAlive := &http.Client{Timeout: 10 * time.Second,
		Transport: authorized(&http.Transport{Proxy: nil, TLSClientConfig: tlsConfig, MaxIdleConnsPerHost: 1})}
	defer keepAlive.CloseIdleConnections()
	get := func(c *http.Client, url string) observation {
		o := observation{at: time.Now(), fresh: c == newHandshakes}
		resp, err := c.Get(url)
		if err != nil {
			o.err = err
			return o
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		switch {
		case err != nil:
			o.err = err
		case resp.StatusCode != http.StatusOK:
			o.err = fmt.Errorf("%s: %d %s", url, resp.StatusCode, body)
		}
		o.serial = resp.TLS.PeerCertificates[0].SerialNumber.Text(16)
		return o
	}

	// The slow request is in flight (the member sent its first bytes) before the swap,
	// and finishes after the new certificate is served.
	slowDone := make(chan observation, 1)
	go func() {
		c := &http.Client{Timeout: 30 * time.Second, Transport: authorized(&http.Transport{Proxy: nil, TLSClientConfig: tlsConfig})}
		o := observation{at: time.Now()}
		resp, err := c.Get(base + "/nodes/a/fhir/Patient/slow")
		if err != nil {
			o.err = err
			slowDone <- o
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && (resp.StatusCode != 200 || string(body) != slowBody) {
			err = fmt.Errorf("the slow request got %d %q", resp.StatusCode, body)
		}
		o.err, o.serial = err, resp.TLS.PeerCertificates[0].SerialNumber.Text(16)
		slowDone <- o
	}()
	select {
	case <-member.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow request never reached the member")
	}

	// The load: three clients each making a new TLS connection per request, one reusing
	// its connection; routed requests and health requests; bounded in count and time.
	const maxPerWorker = 150
	stop := make(chan struct{})
	var mu sync.Mutex
	var seen []observation
	var wg sync.WaitGroup
	var firstNew atomic.Pointer[time.Time]
	worker := func(c *http.Client, url string) {
		defer wg.Done()
		for i := 0; i < maxPerWorker; i++ {
			select {
			case <-stop:
				return
			default:
			}
			o := get(c, url)
			if o.err == nil && o.serial == "2002" && o.fresh {
				at := time.Now()
				firstNew.CompareAndSwap(nil, &at)
			}
			mu.Lock()
			seen = append(seen, o)
			mu.Unlock()
			time.Sleep(15 * time.Millisecond)
		}
	}
	wg.Add(4)
	go worker(newHandshakes, base+"/nodes/a/fhir/Patient/fast")
	go worker(newHandshakes, base+"/nodes/a/fhir/Patient/fast")
	go worker(newHandshakes, base+"/health/readiness")
	go worker(keepAlive, base+"/nodes/a/fhir/Patient/fast")
	time.Sleep(time.Second) // load on the old certificate first

	swappedAt := time.Now()
	vol.publish(t, newCert, newKey)
	deadline := swappedAt.Add(10 * time.Second)
	for firstNew.Load() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	switched := firstNew.Load()
	if switched == nil {
		close(stop)
		wg.Wait()
		t.Fatalf("10 s after the swap no new handshake saw the new certificate")
	}
	took := switched.Sub(swappedAt)
	time.Sleep(time.Second) // load on the new certificate, the slow request still in flight
	member.free()
	slow := <-slowDone
	close(stop)
	wg.Wait()

	if slow.err != nil {
		t.Errorf("the request in flight across the swap failed: %v", slow.err)
	} else if slow.serial != "1001" {
		t.Errorf("the request in flight ran on a connection with certificate %s, want the old 1001", slow.serial)
	}
	var failed, before, after, staleHandshakes int
	for _, o := range seen {
		switch {
		case o.err != nil:
			failed++
			t.Errorf("request at %s: %v", o.at.Format(time.RFC3339Nano), o.err)
		case o.serial == "1001":
			before++
			// A handshake begun after one saw the new certificate sees it too; the
			// keep-alive client's connection keeps the handshake it made.
			if o.fresh && o.at.After(*switched) {
				staleHandshakes++
			}
		case o.serial == "2002":
			after++
		}
	}
	t.Logf("rotation: new handshakes saw the new certificate %s after the ..data swap (poll: 1 s); %d requests (%d on the old certificate, %d on the new, %d failed), one slow request of %s across the swap",
		took.Round(time.Millisecond), len(seen), before, after, failed, time.Since(slow.at).Round(100*time.Millisecond))
	if len(seen) < 100 || before == 0 || after == 0 {
		t.Errorf("the load was %d requests, %d before and %d after the switch", len(seen), before, after)
	}
	if staleHandshakes > 0 {
		t.Errorf("%d new handshakes begun after the switch saw the old certificate", staleHandshakes)
	}
	if o := get(newHandshakes, base+"/health"); o.err != nil || o.serial != "2002" {
		t.Errorf("a new handshake after the rotation: %s %v", o.serial, o.err)
	}

	// No restart: the same process, serving since before the swap, said why it reloaded.
	select {
	case <-g.exited:
		t.Fatalf("serve exited: %v", g.err)
	default:
	}
	if g.cmd.Process.Pid != pid || strings.Count(g.stderr.String(), `"msg":"Serving"`) != 1 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("serve restarted:\n%s", g.stderr.String())
	}
	g.waitLog(t, `"msg":"Reloaded the TLS key pair"`, `"serial":"2002"`, `"reason":"files changed"`)

	// The expiry metric follows, and the healthcheck pins the new certificate.
	resp, err := newHandshakes.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	newLeaf, err := x509.ParseCertificate(mustDecode(t, newCert))
	if err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, string(metrics), "ferrofed_tls_certificate_expiry_seconds"); got != float64(newLeaf.NotAfter.Unix()) {
		t.Errorf("ferrofed_tls_certificate_expiry_seconds = %v, want %d", got, newLeaf.NotAfter.Unix())
	}
	if code, out := healthcheck(t, path); code != 0 {
		t.Fatalf("healthcheck after the rotation: %d %s", code, out)
	}
	g.stop(t)
}

func mustDecode(t *testing.T, certPEM []byte) []byte {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("no PEM")
	}
	return b.Bytes
}

// gauge reads an unlabelled sample from a Prometheus text exposition.
func gauge(t *testing.T, exposition, name string) float64 {
	t.Helper()
	for _, l := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no %s in the metrics", name)
	return 0
}

// configCheck runs `ferrofed config check --config path`.
func configCheck(t *testing.T, path string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary, "config", "check", "--config", path)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee := new(exec.ExitError); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

func TestAnExpiringCertificateIsAWarningAndAnExpiredOneUnready(t *testing.T) {
	ca := newIssuer(t)
	now := time.Now()
	for _, tt := range []struct {
		name             string
		notBefore, until time.Time
		warning          string
		ready            bool
	}{
		{"valid for 90 days", now.Add(-time.Hour), now.Add(90 * 24 * time.Hour), "", true},
		{"expiring in 3 days", now.Add(-time.Hour), now.Add(3 * 24 * time.Hour), "the certificate expires at", true},
		{"expired an hour ago", now.Add(-48 * time.Hour), now.Add(-time.Hour), "the certificate expired at", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			certPEM, keyPEM := ca.serverPair(t, 0x3003, tt.notBefore, tt.until)
			vol := newSecretVolume(t, certPEM, keyPEM)
			path := filepath.Join(t.TempDir(), "ferrofed.toml")
			writeFile(t, path, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:%d\"\ntermination_message_path = \"\"\n[server.tls]\ncertificate_file = %q\nkey_file = %q\n",
				freePort(t), vol.certFile(), vol.keyFile()))

			code, stdout, stderr := configCheck(t, path)
			if code != 0 || !strings.Contains(stdout, ": ok") {
				t.Fatalf("config check exited %d:\n%s%s", code, stdout, stderr)
			}
			notAfter := tt.until.UTC().Truncate(time.Second).Format(time.RFC3339)
			if tt.warning == "" {
				if stderr != "" {
					t.Fatalf("config check warned: %s", stderr)
				}
			} else if want := "warning: server.tls.certificate_file (line 5): " + tt.warning + " " + notAfter; !strings.Contains(stderr, want) {
				t.Fatalf("config check's stderr %q does not hold %q", stderr, want)
			}

			// serve starts (the pods already running serve it anyway) and the
			// healthcheck tells the runtime whether the certificate is still valid.
			g := serve(t, path)
			code, out := healthcheck(t, path)
			switch {
			case tt.ready && code != 0:
				t.Fatalf("healthcheck exited %d: %s", code, out)
			case !tt.ready && (code != 1 || !strings.Contains(out, "expired at "+notAfter)):
				t.Fatalf("healthcheck of an expired certificate exited %d: %s", code, out)
			}
			if !tt.ready {
				g.waitLog(t, "Warning: the TLS certificate served has expired")
			}
			g.stop(t)
		})
	}
}
