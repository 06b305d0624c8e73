package process

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dualStackPort returns a port nothing listens on now, in either address family.
func dualStackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// The gateway told to listen on every interface, ":<port>" (the default's form and what
// the operator renders), answers on IPv4 and IPv6, and `ferrofed healthcheck` of that
// configuration reaches it.
func TestServeOnTheDualStackWildcardAnswersOnIPv4AndIPv6(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ferrofed.toml")
	port := dualStackPort(t)
	writeFile(t, path, fmt.Sprintf("[server]\nlisten = \":%d\"\ntermination_message_path = %q\n", port, filepath.Join(dir, "termination-log")))
	g := serve(t, path)

	hosts := []string{"127.0.0.1"}
	if ln, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Logf("no IPv6 loopback on this machine (%v): the [::1] half is not checked", err)
	} else {
		ln.Close()
		hosts = append(hosts, "::1")
	}
	c := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 5 * time.Second}
	for _, h := range hosts {
		url := fmt.Sprintf("http://%s/health", net.JoinHostPort(h, fmt.Sprint(port)))
		resp, err := c.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", url, resp.StatusCode)
		}
		t.Logf("listen \":%d\" answered on %s", port, url)
	}

	code, out := healthcheck(t, path)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("http://127.0.0.1:%d/health/readiness: 200", port)) {
		t.Fatalf("healthcheck of listen \":%d\" exited %d: %s", port, code, out)
	}
	oneLine(t, out)
	g.stop(t)
}
