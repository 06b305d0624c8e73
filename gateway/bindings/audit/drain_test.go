package audit_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
	"github.com/ferrofed/ferrofed/test/crashfs"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/gatewaytest"
)

// Drain step 4 stops delivery and closes the spool without deleting what is
// undelivered, and counts it in step 4's log line and in the gauge.
func TestDrainCountsWhatIsLeftUndelivered(t *testing.T) {
	logs := &gatewaytest.Log{}
	arr := auditrepo.Start(t, auditrepo.Options{})
	arr.Set(t, double.Knobs{Fault: double.FaultHold}) // nothing is ever delivered
	dir := t.TempDir()
	termination := filepath.Join(t.TempDir(), "termination-log")
	g := startGateway(t, harnessOptions{audit: repositoryTable, spoolDir: dir, arr: arr, log: logs.Logger(),
		server: fmt.Sprintf("termination_message_path = %q\n", termination)})
	for _, m := range []string{"KEEP1", "KEEP2"} {
		if s := g.search(m); s != http.StatusOK {
			t.Fatalf("search answered %d", s)
		}
	}
	g.Stop()
	if line := logs.Find(`"signal"="BindingsStopped"`, `"audit_repository_undelivered"=2`); line == "" {
		t.Fatalf("step 4's log line does not count the 2 undelivered records: %s", logs)
	}
	// The termination message says it too, with the records' bytes in the segment.
	data, err := os.ReadFile(termination)
	if err != nil {
		t.Fatal(err)
	}
	m, err := lifecycle.ParseTerminationMessage(data)
	if err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	if len(m.Audit) != 1 || m.Audit[0].Destination != "repository" || m.Audit[0].Records != 2 {
		t.Fatalf("audit %+v, want the repository's 2 records: %s", m.Audit, data)
	}
	if want := segmentBytes(t, filepath.Join(dir, "repository")); m.Audit[0].Bytes != want {
		t.Fatalf("audit says %d bytes, the segment holds %d in records: %s", m.Audit[0].Bytes, want, data)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(g.trail.Collector())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ferrofed_audit_undelivered_at_exit Audit records still undelivered in a destination's spool when drain step 4 closed it (they are delivered after the next start on the same spool).
# TYPE ferrofed_audit_undelivered_at_exit gauge
ferrofed_audit_undelivered_at_exit{destination="audit_repository"} 2
`), "ferrofed_audit_undelivered_at_exit"); err != nil {
		t.Fatal(err)
	}
	// Nothing was deleted: the next start delivers both.
	arr.Set(t, double.Knobs{})
	startGateway(t, harnessOptions{audit: repositoryTable, spoolDir: dir, arr: arr})
	double.Eventually(t, "both left records delivered", func() bool { return delivered(arr, "KEEP1") >= 1 && delivered(arr, "KEEP2") >= 1 })
}

// The requester of an event is the data-plane token's subject, under its issuer; with
// destination = "log" the event is one log line.
func TestTheEventNamesTheTokensSubject(t *testing.T) {
	g := startGateway(t, harnessOptions{audit: repositoryTable})
	if s, _ := g.Do(http.MethodGet, "/fhir/Patient?name=WHOMARK", g.Issuer.Sign(t, "alice", issuer.ClientScope), nil); s != http.StatusOK {
		t.Fatalf("search answered %d", s)
	}
	double.Eventually(t, "delivered", func() bool { return delivered(g.arr, "WHOMARK") == 1 })
	var ev struct {
		Agent []struct {
			Who struct {
				Identifier struct{ System, Value string } `json:"identifier"`
			} `json:"who"`
			Requestor bool `json:"requestor"`
		} `json:"agent"`
	}
	for _, e := range g.arr.Received() {
		if strings.Contains(strings.Join(e.Queries, " "), "WHOMARK") {
			if err := json.Unmarshal(e.Body, &ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(ev.Agent) < 3 || !ev.Agent[0].Requestor || ev.Agent[0].Who.Identifier.Value != "alice" || ev.Agent[0].Who.Identifier.System != issuer.URL {
		t.Fatalf("agents %+v, want alice of %s first", ev.Agent, issuer.URL)
	}

	logs := &gatewaytest.Log{}
	lg := startGateway(t, harnessOptions{audit: "destination = \"log\"\n", log: logs.Logger()})
	if s := lg.search("LOGLINE"); s != http.StatusOK {
		t.Fatalf("search answered %d", s)
	}
	// base64("name=LOGLINE")
	if line := logs.Find(`"msg"="Audit event"`, `\"resourceType\":\"AuditEvent\"`, "bmFtZT1MT0dMSU5F"); line == "" {
		t.Fatalf("no log line carries the event: %s", logs)
	}
}

// A spool whose sync never returns (a hung disk) cannot be closed within
// server.bindings_drain_timeout_ms: drain step 4 abandons audit_repository by name,
// with a warning, and the termination message lists it.
func TestDrainAbandonsASpoolThatCannotClose(t *testing.T) {
	fs := crashfs.New()
	hung := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hung) }) }
	t.Cleanup(release)
	termination := filepath.Join(t.TempDir(), "termination-log")
	logs := &gatewaytest.Log{}
	g := startGateway(t, harnessOptions{
		audit: repositoryTable, spoolDir: "/spool", fs: fs, log: logs.Logger(),
		server: fmt.Sprintf("request_timeout_ms = 200\nshutdown_timeout_ms = 200\nbindings_drain_timeout_ms = 300\ntermination_message_path = %q\n", termination),
	})
	var blocking atomic.Bool
	fs.Hook = func(op crashfs.Op, name string) error {
		if op == crashfs.OpSync && blocking.Load() {
			<-hung
		}
		return nil
	}
	blocking.Store(true)
	go func() { // its append hangs in the sync; the drain cuts it
		if res, err := g.Get("/fhir/Patient?name=HUNG"); err == nil {
			res.Body.Close()
		}
	}()
	double.Eventually(t, "the search is in flight", func() bool { return logs.Find("Member endpoint changed state") != "" })
	g.Stop()
	data, err := os.ReadFile(termination)
	if err != nil {
		t.Fatal(err)
	}
	m, err := lifecycle.ParseTerminationMessage(data)
	if err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	if !slices.Contains(m.Abandoned, "audit_repository") {
		t.Fatalf("abandoned %v, want audit_repository: %s", m.Abandoned, data)
	}
	if line := logs.Find("abandoned a surface", `"surface"="audit_repository"`); line == "" {
		t.Fatalf("no warning names audit_repository: %s", logs)
	}
	release()
}

// segmentBytes is the bytes of records in the spool's one segment: up to the zeros
// its preallocation left after the last record.
func segmentBytes(t *testing.T, dir string) int64 {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "seg-*.log"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v (%v), want one", segs, err)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	return int64(end)
}

// The live backlog of each open spool is on the gateway's /metrics, read at every
// scrape: the records the repository has not taken yet, their bytes on disk, and zero
// once they are delivered. It is what the operator reads before deleting a retiring pod.
func TestTheLiveBacklogIsOnMetrics(t *testing.T) {
	arr := auditrepo.Start(t, auditrepo.Options{})
	arr.Set(t, double.Knobs{Fault: double.FaultHold})
	g := startGateway(t, harnessOptions{audit: repositoryTable, spoolDir: t.TempDir(), arr: arr})
	backlog := func() (records, bytes float64) {
		t.Helper()
		status, body := g.Do(http.MethodGet, "/metrics", "", nil)
		if status != http.StatusOK {
			t.Fatalf("/metrics answered %d", status)
		}
		records, bytes = -1, -1
		for _, line := range strings.Split(string(body), "\n") {
			var v float64
			if _, err := fmt.Sscanf(line, `ferrofed_audit_spool_undelivered_records{destination="audit_repository"} %g`, &v); err == nil {
				records = v
			}
			if _, err := fmt.Sscanf(line, `ferrofed_audit_spool_undelivered_bytes{destination="audit_repository"} %g`, &v); err == nil {
				bytes = v
			}
		}
		return records, bytes
	}
	if r, b := backlog(); r != 0 || b != 0 {
		t.Fatalf("an empty spool shows %v records in %v bytes, want 0 and 0", r, b)
	}
	for _, m := range []string{"LIVE1", "LIVE2"} {
		if s := g.search(m); s != http.StatusOK {
			t.Fatalf("search answered %d", s)
		}
	}
	if r, b := backlog(); r != 2 || b <= 0 {
		t.Fatalf("a held repository shows %v records in %v bytes, want 2 records in some bytes", r, b)
	}
	arr.Set(t, double.Knobs{})
	double.Eventually(t, "the backlog delivered", func() bool { r, b := backlog(); return r == 0 && b == 0 })
}
