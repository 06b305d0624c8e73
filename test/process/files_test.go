package process

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ferrofed/ferrofed/test/double"
)

// A bearer token sent in clear (http, to a host that is not loopback) is refused by
// both commands unless the table says allow_insecure = true; allowed, it is a warning
// `config check` prints and serve logs at start and again at every reload.
func TestATokenInClearIsRefusedOrWarnedAboutAtEveryStartAndReload(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	writeFile(t, token, "t0ken\n")
	path := filepath.Join(dir, "ferrofed.toml")
	// 192.0.2.10 (TEST-NET-1) is never dialled: the consent PDP is asked by a search.
	doc := "[server]\nlisten = \"127.0.0.1:0\"\ntermination_message_path = \"\"\n" +
		"[consent]\nurl = \"http://192.0.2.10:8080/authzen\"\nbearer_token_file = \"" + token + "\"\n"
	writeFile(t, path, doc)
	const refusal = "consent.url (line 5): consent.bearer_token_file is sent in clear over http to a non-loopback host; use https or set consent.allow_insecure = true"
	if code, _, stderr := configCheck(t, path); code != 1 || !strings.Contains(stderr, refusal) {
		t.Fatalf("config check without allow_insecure: exit %d, want 1 saying %q:\n%s", code, refusal, stderr)
	}
	if ok, out := runServe(t, sample{dir: dir, file: path}); ok || !strings.Contains(out, refusal) {
		t.Fatalf("serve without allow_insecure: listened=%v, want refused saying %q:\n%s", ok, refusal, out)
	}

	writeFile(t, path, doc+"allow_insecure = true\n")
	const warning = "consent.allow_insecure (line 7): the token of consent.bearer_token_file is sent in clear over http to a non-loopback host (consent.url)"
	if code, _, stderr := configCheck(t, path); code != 0 || !strings.Contains(stderr, "warning: "+warning) {
		t.Fatalf("config check with allow_insecure: exit %d, want 0 warning %q:\n%s", code, warning, stderr)
	}
	g := serve(t, path)
	logged := func() int { return strings.Count(g.stderr.String(), `"msg":"Warning: `+warning+`"`) }
	g.waitLog(t, "Warning: "+warning)
	if n := logged(); n != 1 {
		t.Fatalf("the warning is logged %d times at start, want once:\n%s", n, g.stderr.String())
	}
	// serve takes its signals before Run, whose first phase change says it runs: a
	// SIGHUP before that would end the process (its default action).
	g.waitLog(t, `"msg":"Phase changed"`)
	for reload := 1; reload <= 2; reload++ {
		before := strings.Count(g.stderr.String(), "Reloaded configuration")
		if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		double.Eventually(t, "the reload", func() bool { return strings.Count(g.stderr.String(), "Reloaded configuration") > before })
		double.Eventually(t, "the warning of the reload", func() bool { return logged() == 1+reload })
	}
	g.stop(t)
}
