package process

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/deliver"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// The hand-over (docs/audit-spool.md, "Hand-over"): `ferrofed audit drain` on the
// built binary, against the audit repository double on loopback, with spools the
// tests fill through the spool package, as a gateway leaves them.

// drainRun is one run of `ferrofed audit drain`.
type drainRun struct {
	code           int
	stdout, stderr string
	message        lifecycle.HandOverMessage
}

// auditDrain runs `ferrofed audit drain --config path --termination-message-path …`
// with flags and reads its message back.
func auditDrain(t *testing.T, path string, flags ...string) drainRun {
	t.Helper()
	msg := filepath.Join(t.TempDir(), "termination-log")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"audit", "drain", "--config", path, "--termination-message-path", msg}, flags...)
	cmd := exec.CommandContext(ctx, binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := drainRun{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	data, err := os.ReadFile(msg)
	if err != nil {
		t.Fatalf("no hand-over message (%v); stdout %s stderr %s", err, r.stdout, r.stderr)
	}
	if r.message, err = lifecycle.ParseHandOverMessage(data); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return r
}

func (r drainRun) String() string {
	return fmt.Sprintf("exit %d, message %+v\nstdout:\n%sstderr:\n%s", r.code, r.message, r.stdout, r.stderr)
}

// drainConfig writes a configuration with [audit] to arr (and [audit.feed] to feed
// when not nil) with spools in spoolDir.
func drainConfig(t *testing.T, spoolDir string, arr, feed *auditrepo.Server) string {
	t.Helper()
	text := fmt.Sprintf("[server]\nlisten = \"127.0.0.1:%d\"\ntermination_message_path = \"\"\n"+
		"[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://127.0.0.1:1\"\n"+
		"[audit]\ndestination = \"repository\"\nurl = %q\nspool_dir = %q\n", freePort(t), arr.URL, spoolDir)
	if feed != nil {
		text += fmt.Sprintf("[audit.feed]\nurl = %q\nspool_dir = %q\n", feed.URL, spoolDir)
	}
	path := filepath.Join(t.TempDir(), "ferrofed.toml")
	writeFile(t, path, text)
	return path
}

// auditEvent is an AuditEvent whose entity.query decodes to marker, with an event id.
func auditEvent(t *testing.T, marker string) []byte {
	t.Helper()
	ev := fmt.Sprintf(`{"resourceType":"AuditEvent","entity":[{"query":%q}]}`, base64.StdEncoding.EncodeToString([]byte("name="+marker)))
	b, err := deliver.StampEventID([]byte(ev), deliver.NewEventID())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fillSpool appends an event per marker to the spool in dir, as a gateway whose
// repository never answered leaves it, and returns the bytes they take (headers
// included).
func fillSpool(t *testing.T, dir string, markers ...string) int64 {
	t.Helper()
	sp, err := spool.Open(spool.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, m := range markers {
		ev := auditEvent(t, m)
		if _, err := sp.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		n += int64(20 + len(ev))
	}
	if err := sp.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return n
}

func markers(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

// storedMarkers counts, per marker, the events the repository stored with it.
func storedMarkers(arr *auditrepo.Server) map[string]int {
	out := map[string]int{}
	for _, e := range arr.Received() {
		for _, q := range e.Queries {
			out[strings.TrimPrefix(q, "name=")]++
		}
	}
	return out
}

func wantAllStored(t *testing.T, arr *auditrepo.Server, ms []string) {
	t.Helper()
	got := storedMarkers(arr)
	for _, m := range ms {
		if got[m] == 0 {
			t.Fatalf("%s was never delivered (stored: %d events)", m, arr.Stored())
		}
	}
}

// A repository that refuses (503, twice) and then accepts: the command retries as the
// gateway does, delivers every record of both spools (repository and feed) and ends 0
// with outcome empty; its output has one line per spool. A second run on the
// delivered spools sends nothing.
func TestAuditDrainRetriesUntilEmptyAndASecondRunSendsNothing(t *testing.T) {
	arr := auditrepo.Start(t, auditrepo.Options{})
	feed := auditrepo.Start(t, auditrepo.Options{})
	arr.Script(t, double.Statuses(http.StatusServiceUnavailable, http.StatusServiceUnavailable)...)
	spoolDir := t.TempDir()
	ms := markers("HANDOVER", 120)
	fillSpool(t, filepath.Join(spoolDir, "repository"), ms...)
	fillSpool(t, filepath.Join(spoolDir, "feed"), ms[:7]...)
	path := drainConfig(t, spoolDir, arr, feed)

	r := auditDrain(t, path, "--timeout", "30s")
	if r.code != 0 || r.message.Outcome != lifecycle.HandOverEmpty || r.message.Delivered != 127 {
		t.Fatalf("want exit 0, outcome empty, 127 delivered: %s", r)
	}
	if arr.Requests() < 3 {
		t.Fatalf("the repository was asked %d times: the two refusals were not retried", arr.Requests())
	}
	wantAllStored(t, arr, ms)
	wantAllStored(t, feed, ms[:7])
	for _, want := range []string{
		"audit_repository: delivered=120 left_records=0 left_bytes=0 undelivered=0 quarantined=0 dir=" + filepath.Join(spoolDir, "repository") + "\n",
		"audit_feed: delivered=7 left_records=0 left_bytes=0 undelivered=0 quarantined=0 dir=" + filepath.Join(spoolDir, "feed") + "\n",
		"outcome=empty delivered=127 left_records=0 left_bytes=0 exit=0\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("the output lacks %q: %s", want, r)
		}
	}
	if len(r.message.Left) != 2 || r.message.Left[0] != (lifecycle.SpoolLeft{Destination: "repository"}) || r.message.Left[1] != (lifecycle.SpoolLeft{Destination: "feed"}) {
		t.Fatalf("left %+v, want repository and feed empty", r.message.Left)
	}

	before, beforeFeed := arr.Requests(), feed.Requests()
	again := auditDrain(t, path, "--timeout", "30s")
	if again.code != 0 || again.message.Outcome != lifecycle.HandOverEmpty || again.message.Delivered != 0 {
		t.Fatalf("the second run: %s", again)
	}
	if n, nf := arr.Requests()-before, feed.Requests()-beforeFeed; n != 0 || nf != 0 {
		t.Fatalf("the second run sent %d requests to the repository and %d to the feed", n, nf)
	}
}

// A repository that always refuses: the command ends at --timeout with exit 3,
// outcome timeout and every record left (counted, in bytes too), nothing deleted. A
// second run once the repository accepts delivers them all; a third sends nothing.
func TestAuditDrainTimesOutDeletingNothing(t *testing.T) {
	arr := auditrepo.Start(t, auditrepo.Options{Knobs: double.Knobs{Status: http.StatusServiceUnavailable}})
	spoolDir := t.TempDir()
	ms := markers("REFUSED", 40)
	size := fillSpool(t, filepath.Join(spoolDir, "repository"), ms...)
	path := drainConfig(t, spoolDir, arr, nil)

	begin := time.Now()
	r := auditDrain(t, path, "--timeout", "2s")
	if took := time.Since(begin); took < 2*time.Second || took > 20*time.Second {
		t.Errorf("a 2s timeout took %s", took)
	}
	want := lifecycle.SpoolLeft{Destination: "repository", Records: 40, Bytes: size}
	if r.code != 3 || r.message.Outcome != lifecycle.HandOverTimeout || r.message.Delivered != 0 || len(r.message.Left) != 1 || r.message.Left[0] != want {
		t.Fatalf("want exit 3, outcome timeout, %+v left: %s", want, r)
	}
	if arr.Requests() == 0 || arr.Stored() != 0 {
		t.Fatalf("the repository was asked %d times and stored %d", arr.Requests(), arr.Stored())
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("audit_repository: delivered=0 left_records=40 left_bytes=%d undelivered=40 quarantined=0", size)) ||
		!strings.Contains(r.stdout, "outcome=timeout") {
		t.Fatalf("the output does not say what is left: %s", r)
	}

	arr.Set(t, double.Knobs{})
	second := auditDrain(t, path, "--timeout", "30s")
	if second.code != 0 || second.message.Outcome != lifecycle.HandOverEmpty || second.message.Delivered != 40 {
		t.Fatalf("the second run: %s", second)
	}
	wantAllStored(t, arr, ms)
	before := arr.Requests()
	third := auditDrain(t, path)
	if third.code != 0 || third.message.Delivered != 0 || arr.Requests() != before {
		t.Fatalf("the third run sent %d requests: %s", arr.Requests()-before, third)
	}
}

// A spool with a torn tail (the last record cut by a crash mid-write) and a record
// the repository refuses for good: the torn bytes are cut (they were never
// acknowledged), every other record is delivered, the refused one goes to the
// quarantine, which the command reports and never calls empty: exit 5, outcome
// failed, the entry counted as left. A second run delivers nothing more.
func TestAuditDrainTornTailAndQuarantine(t *testing.T) {
	arr := auditrepo.Start(t, auditrepo.Options{PoisonMarker: "POISON"})
	spoolDir := t.TempDir()
	dir := filepath.Join(spoolDir, "repository")
	ms := markers("TORN", 10)
	size := fillSpool(t, dir, append(ms[:5:5], append([]string{"POISON"}, ms[5:]...)...)...)
	tearTail(t, dir, size)
	path := drainConfig(t, spoolDir, arr, nil)

	r := auditDrain(t, path, "--timeout", "30s")
	if r.code != 5 || r.message.Outcome != lifecycle.HandOverFailed || r.message.Delivered != 10 {
		t.Fatalf("want exit 5, outcome failed, 10 delivered: %s", r)
	}
	if len(r.message.Left) != 1 || r.message.Left[0].Records != 1 || r.message.Left[0].Bytes == 0 {
		t.Fatalf("left %+v, want the quarantined record", r.message.Left)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf(" at %d (", size)) {
		t.Fatalf("the log does not say the torn tail at %d was cut: %s", size, r)
	}
	if !strings.Contains(r.stdout, "undelivered=0 quarantined=1") || !strings.Contains(r.stderr, "quarantine") || !strings.Contains(r.stderr, dir) {
		t.Fatalf("the quarantine is not named: %s", r)
	}
	wantAllStored(t, arr, ms)
	if got := storedMarkers(arr)["POISON"]; got != 0 {
		t.Fatalf("the refused record was stored %d times", got)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "quarantine"))
	if err != nil || len(entries) != 2 {
		t.Fatalf("the quarantine holds %v (%v), want the record and its reason", entries, err)
	}
	before := arr.Requests()
	again := auditDrain(t, path, "--timeout", "30s")
	if again.code != 5 || again.message.Delivered != 0 || arr.Requests() != before {
		t.Fatalf("the second run sent %d requests: %s", arr.Requests()-before, again)
	}
}

// tearTail writes the first bytes of a record past the end of the spool's records
// (size bytes from the start of its one segment), as a crash in the middle of a
// write leaves them: a header whose payload never arrived.
func tearTail(t *testing.T, dir string, size int64) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "seg-*.log"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v (%v), want one", segs, err)
	}
	f, err := os.OpenFile(segs[0], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	torn := []byte{0xF3, 0xA5, 1, 0, 200, 0, 0, 0, 1, 2, 3, 4, 99, 0, 0, 0, 0, 0, 0, 0, '{', '"'}
	if _, err := f.WriteAt(torn, size); err != nil {
		t.Fatal(err)
	}
}

// A spool another process holds (here the test, as a running gateway would): the
// command refuses it, naming the folder, with exit 4 and outcome failed, and delivers
// nothing from any spool; once it is released, the command delivers.
func TestAuditDrainRefusesAHeldSpool(t *testing.T) {
	arr := auditrepo.Start(t, auditrepo.Options{})
	feed := auditrepo.Start(t, auditrepo.Options{})
	spoolDir := t.TempDir()
	ms := markers("HELD", 3)
	fillSpool(t, filepath.Join(spoolDir, "repository"), ms...)
	fillSpool(t, filepath.Join(spoolDir, "feed"), ms...)
	held, err := spool.Open(spool.Options{Dir: filepath.Join(spoolDir, "feed")})
	if err != nil {
		t.Fatal(err)
	}
	path := drainConfig(t, spoolDir, arr, feed)

	r := auditDrain(t, path, "--timeout", "10s")
	if r.code != 4 || r.message.Outcome != lifecycle.HandOverFailed || r.message.Delivered != 0 {
		t.Fatalf("want exit 4 and outcome failed: %s", r)
	}
	if !strings.Contains(r.stderr, "audit spool held") || !strings.Contains(r.stderr, filepath.Join(spoolDir, "feed")) {
		t.Fatalf("the refusal does not name the folder: %s", r)
	}
	if arr.Requests() != 0 || feed.Requests() != 0 {
		t.Fatalf("a refused hand-over sent %d and %d requests", arr.Requests(), feed.Requests())
	}
	if err := held.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ok := auditDrain(t, path, "--timeout", "30s")
	if ok.code != 0 || ok.message.Delivered != 6 {
		t.Fatalf("once released: %s", ok)
	}
}

// A configuration without a spool (destination "log"), and a --timeout out of its
// bounds, are refused before anything is opened: exit 1, naming the key or the flag.
func TestAuditDrainRefusesAConfigurationWithoutASpool(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ferrofed.toml")
	writeFile(t, path, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:%d\"\n[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://127.0.0.1:1\"\n"+
		"[audit]\ndestination = \"log\"\n", freePort(t)))
	r := auditDrain(t, path)
	if r.code != 1 || r.message.Outcome != lifecycle.HandOverFailed || !strings.Contains(r.stderr, "audit.destination") {
		t.Fatalf("want exit 1 naming audit.destination: %s", r)
	}
	r = auditDrain(t, path, "--timeout", "100h")
	if r.code != 1 || !strings.Contains(r.stderr, "--timeout") {
		t.Fatalf("want exit 1 naming --timeout: %s", r)
	}
}

// A spool folder that does not exist (a volume mounted elsewhere than audit.spool_dir
// says) is refused, never made: made, it would be empty, and the claim that holds the
// records would be deleted. Exit 4, outcome failed, the folder and the key named.
func TestAuditDrainRefusesASpoolFolderThatDoesNotExist(t *testing.T) {
	arr := auditrepo.Start(t, auditrepo.Options{})
	spoolDir := filepath.Join(t.TempDir(), "elsewhere")
	path := drainConfig(t, spoolDir, arr, nil)
	r := auditDrain(t, path, "--timeout", "10s")
	if r.code != 4 || r.message.Outcome != lifecycle.HandOverFailed {
		t.Fatalf("want exit 4 and outcome failed: %s", r)
	}
	if !strings.Contains(r.stderr, filepath.Join(spoolDir, "repository")) || !strings.Contains(r.stderr, "audit.spool_dir") {
		t.Fatalf("the refusal names neither the folder nor the key: %s", r)
	}
	if _, err := os.Stat(spoolDir); !os.IsNotExist(err) {
		t.Fatalf("the hand-over made the folder: %v", err)
	}
}

// The whole hand-over on the built binary: a gateway whose repository refuses every
// delivery answers 5 audited searches (a hand-over meanwhile refuses its spool, which
// the gateway holds) and is stopped (SIGTERM); its termination
// message says the repository spool held 5 records, with their bytes. The hand-over
// then finds those 5, delivers them once the repository accepts, and says empty.
func TestAGatewaysLeftRecordsAreCountedAndHandedOver(t *testing.T) {
	member := members.Start(t, members.Options{ID: "a"})
	arr := auditrepo.Start(t, auditrepo.Options{Knobs: double.Knobs{Status: http.StatusServiceUnavailable}})
	dir := t.TempDir()
	spoolDir, termination := filepath.Join(dir, "spool"), filepath.Join(dir, "termination-log")
	port := freePort(t)
	path := filepath.Join(dir, "ferrofed.toml")
	writeFile(t, path, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:%d\"\ntermination_message_path = %q\n"+
		"[[registry.members]]\nid = \"a\"\nquery_endpoint = %q\n"+
		"[audit]\ndestination = \"repository\"\nurl = %q\nspool_dir = %q\n", port, termination, member.URL, arr.URL, spoolDir))
	g := serve(t, path)
	waitReady(t, fmt.Sprintf("http://127.0.0.1:%d", port))
	ms := markers("LEFTOVER", 5)
	for _, m := range ms {
		res, err := clientGet(fmt.Sprintf("http://127.0.0.1:%d/fhir/Patient?name=%s", port, m))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("search %s answered %d", m, res.StatusCode)
		}
	}
	// While the gateway runs, the hand-over refuses its spool, naming the folder.
	held := auditDrain(t, path, "--timeout", "10s")
	if held.code != 4 || !strings.Contains(held.stderr, "audit spool held") || !strings.Contains(held.stderr, filepath.Join(spoolDir, "repository")) {
		t.Fatalf("a hand-over beside the running gateway: %s", held)
	}
	if held.message.Delivered != 0 {
		t.Fatalf("a refused hand-over delivered %d", held.message.Delivered)
	}
	g.stop(t)
	data, err := os.ReadFile(termination)
	if err != nil {
		t.Fatal(err)
	}
	m, err := lifecycle.ParseTerminationMessage(data)
	if err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	want := lifecycle.SpoolLeft{Destination: "repository", Records: 5, Bytes: writtenBytes(t, filepath.Join(spoolDir, "repository"))}
	if len(m.Audit) != 1 || m.Audit[0] != want {
		t.Fatalf("the termination message's audit is %+v, want %+v: %s", m.Audit, want, data)
	}

	arr.Set(t, double.Knobs{})
	r := auditDrain(t, path, "--timeout", "30s")
	if r.code != 0 || r.message.Delivered != 5 || r.message.Outcome != lifecycle.HandOverEmpty {
		t.Fatalf("the hand-over: %s", r)
	}
	wantAllStored(t, arr, ms)
}

// writtenBytes is what the records of the spool's one segment take: up to the zeros
// its preallocation left after the last one.
func writtenBytes(t *testing.T, dir string) int64 {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "seg-*.log"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v (%v), want one", segs, err)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(bytes.TrimRight(b, "\x00")))
}
