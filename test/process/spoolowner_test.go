package process

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// One spool has one owner (docs/audit-spool.md, "One owner"): a second gateway
// configured with the spool_dir of a running one refuses to start, naming the folder,
// and the first keeps serving; once the first has stopped, the second starts on it.
func TestASecondGatewayOnOneSpoolRefusesToStart(t *testing.T) {
	member := members.Start(t, members.Options{ID: "a"})
	arr := auditrepo.Start(t, auditrepo.Options{})
	spoolDir := t.TempDir()
	config := func(name string) string {
		path := filepath.Join(t.TempDir(), name+".toml")
		writeFile(t, path, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:%d\"\ntermination_message_path = \"\"\n"+
			"[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n"+
			"[audit]\ndestination = \"repository\"\nurl = %q\nspool_dir = %q\n", freePort(t), member.URL, arr.URL, spoolDir))
		return path
	}
	first := serve(t, config("first"))
	second := config("second")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "serve", "--config", second).CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("the second gateway did not refuse to start (%v): %s", err, out)
	}
	if want := filepath.Join(spoolDir, "repository"); !strings.Contains(string(out), want) || !strings.Contains(string(out), "audit spool held") {
		t.Fatalf("the refusal does not name the folder %s: %s", want, out)
	}
	first.stop(t)
	serve(t, second).stop(t)
}

// A SIGTERM that arrives while the gateway is still starting (its spool opened, its
// address not yet printed) drains the gateway instead of killing it: the process exits 0
// after its drain, its spool closed and released. Before the signals were taken ahead of
// the listener, such a SIGTERM killed the process (seen in a CI run of the test above).
func TestASIGTERMDuringStartDrains(t *testing.T) {
	member := members.Start(t, members.Options{ID: "a"})
	arr := auditrepo.Start(t, auditrepo.Options{})
	for i := range 5 {
		path := filepath.Join(t.TempDir(), "ferrofed.toml")
		writeFile(t, path, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:%d\"\ntermination_message_path = \"\"\n"+
			"[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n"+
			"[audit]\ndestination = \"repository\"\nurl = %q\nspool_dir = %q\n", freePort(t), member.URL, arr.URL, t.TempDir()))
		cmd := exec.Command(binary, "serve", "--config", path)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var log strings.Builder
		sent := false
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if !sent && strings.Contains(sc.Text(), "Opened the audit spool") {
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				sent = true
			}
		}
		err = cmd.Wait()
		if !sent {
			t.Fatalf("start %d: the gateway never logged its spool:\n%s", i, log.String())
		}
		if err != nil || !strings.Contains(log.String(), `"msg":"Stopped"`) {
			t.Fatalf("start %d: a SIGTERM during start ended serve with %v, want a drain and exit 0:\n%s", i, err, log.String())
		}
	}
}
