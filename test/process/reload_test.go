package process

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// A SIGHUP reload is all or nothing. One that shortens the request timeout and adds an
// issuer whose key file is garbage is refused whole: a routed request to a member that
// answers in one second still gets its answer under the old five-second timeout. The
// same timeout without the bad issuer then applies, and the same request is a 504.
func TestARefusedReloadLeavesTheOldRequestTimeoutInEffect(t *testing.T) {
	dir := t.TempDir()
	m := members.Start(t, members.Options{ID: "node-a", Knobs: double.Knobs{Delay: time.Second}})
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	config := func(requestTimeoutMS int, issuer string) string {
		return fmt.Sprintf("[server]\nlisten = \"127.0.0.1:%d\"\ntermination_message_path = \"\"\nrequest_timeout_ms = %d\n\n[[registry.members]]\nid = \"node-a\"\nquery_endpoint = %q\n%s",
			port, requestTimeoutMS, m.URL, issuer)
	}
	garbage := filepath.Join(dir, "jwks.json")
	writeFile(t, garbage, "{ this is not a key set")
	badIssuer := fmt.Sprintf("\n[[auth.issuers]]\nissuer = \"https://issuer.test\"\naudience = \"ferrofed\"\noperator_scope = \"op\"\njwks_file = %q\n", garbage)

	path := filepath.Join(dir, "ferrofed.toml")
	writeFile(t, path, config(5000, ""))
	g := serve(t, path)
	waitReady(t, base)
	routed := func() int {
		t.Helper()
		res, err := clientGet(base + "/nodes/node-a/fhir/Patient/node-a-1")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, res.Body)
		return res.StatusCode
	}
	if code := routed(); code != http.StatusOK {
		t.Fatalf("before any reload the routed request answered %d", code)
	}

	writeFile(t, path, config(300, badIssuer))
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(t, "Reload refused: ", "auth.issuers[0].jwks_file", ", kept the running configuration")
	if code := routed(); code != http.StatusOK {
		t.Fatalf("after the refused reload the routed request answered %d: the new request timeout was applied", code)
	}
	if strings.Contains(g.stderr.String(), "Reloaded configuration") {
		t.Fatalf("a refused reload was logged as applied:\n%s", g.stderr.String())
	}

	writeFile(t, path, config(300, ""))
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(t, "Reloaded configuration: applied", `"requestTimeout":"300ms"`)
	if code := routed(); code != http.StatusGatewayTimeout {
		t.Fatalf("after the applied reload the routed request answered %d, want 504 under the 300 ms timeout", code)
	}
	g.stop(t)
}
