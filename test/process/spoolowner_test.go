package process

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
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
