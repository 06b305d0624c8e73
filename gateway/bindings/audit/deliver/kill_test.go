package deliver_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/deliver"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
)

// The child process of TestSIGKILLLosesNoAcknowledgedRecord is this test binary run
// again with these variables set: it spools records and delivers them, printing
// "acked <marker>" once each Append returned, until it is killed.
const (
	envChild = "FERROFED_SPOOL_CHILD_DIR"
	envURL   = "FERROFED_SPOOL_CHILD_URL"
	envFrom  = "FERROFED_SPOOL_CHILD_FROM"
	envN     = "FERROFED_SPOOL_CHILD_N"
)

// The child's delivery window: when it dies, at most inFlight × batchEntries records
// are delivered and not yet acknowledged, and fewer than cursorEvery are acknowledged
// and not yet under the durable cursor (the spool writes it lazily).
const (
	inFlight     = 2
	batchEntries = 5
	cursorEvery  = 10
)

func TestMain(m *testing.M) {
	if d := os.Getenv(envChild); d != "" {
		os.Exit(child(d))
	}
	os.Exit(m.Run())
}

func child(dir string) int {
	from, _ := strconv.Atoi(os.Getenv(envFrom))
	n, _ := strconv.Atoi(os.Getenv(envN))
	sp, err := spool.Open(spool.Options{Dir: dir, CursorEvery: cursorEvery})
	if err != nil {
		fmt.Println("open:", err)
		return 2
	}
	l, err := deliver.New(sp, deliver.Options{BaseURL: os.Getenv(envURL), InFlight: inFlight, Batch: true, BatchEntries: batchEntries,
		BackoffBase: time.Millisecond, BackoffMax: 10 * time.Millisecond, Timeout: 30 * time.Second})
	if err != nil {
		fmt.Println("deliver:", err)
		return 2
	}
	go l.Run(context.Background()) //nolint:errcheck // runs until the process is killed
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := from + w; i < from+n; i += 8 {
				m := fmt.Sprintf("k-%05d", i)
				body, _ := deliver.StampEventID(fmt.Appendf(nil, `{"resourceType":"AuditEvent","entity":[{"query":%q}]}`,
					b64("GET /fhir/Patient?name="+m)), deliver.NewEventID())
				_, err := sp.Append(context.Background(), body)
				mu.Lock()
				if err != nil {
					fmt.Printf("failed %s %v\n", m, err)
				} else {
					fmt.Printf("acked %s\n", m)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Println("done")
	select {}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// runChild starts the child and kills it with SIGKILL once it acknowledged `after`
// records (or all it was given) and ready() holds; it returns the markers the child
// acknowledged.
func runChild(t *testing.T, dir, url string, from, n, after int, ready func() bool) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+dir, envURL+"="+url, envFrom+"="+strconv.Itoa(from), envN+"="+strconv.Itoa(n))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var acked []string
	deadline := time.After(30 * time.Second)
	killed := false
	kill := func() {
		if !killed {
			killed = true
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	done := false
	for !killed {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the child exited before it was killed")
			}
			switch {
			case strings.HasPrefix(l, "acked "):
				acked = append(acked, strings.TrimPrefix(l, "acked "))
			case l == "done":
				done = true
			default:
				t.Fatalf("child: %s", l)
			}
			if (len(acked) >= after || done) && ready() {
				kill()
			}
		case <-time.After(5 * time.Millisecond):
			if (len(acked) >= after || done) && ready() {
				kill()
			}
		case <-deadline:
			kill()
			t.Fatalf("the child did not reach its kill point (acked %d of %d)", len(acked), after)
		}
	}
	// A line the child wrote before it died is still in the pipe: it was acknowledged.
	for l := range lines {
		if m, ok := strings.CutPrefix(l, "acked "); ok {
			acked = append(acked, m)
		}
	}
	_ = cmd.Wait()
	return acked
}

// TestSIGKILLLosesNoAcknowledgedRecord kills a process that spools and delivers at
// seeded points: while the repository answers 503 (the spool grows), while it holds
// every delivery after reading it (deliveries in flight), and while it works
// (deliveries done, cursor writes under way). Then the spool is opened again with the
// repository healthy: every record whose Append returned before a kill is delivered
// at least once, and the duplicates stay within the delivery window of each kill.
func TestSIGKILLLosesNoAcknowledgedRecord(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			t.Logf("seed %d", seed)
			dir := filepath.Join(t.TempDir(), "repository")
			arr := auditrepo.Start(t, auditrepo.Options{})
			always := func() bool { return true }
			var acked []string

			script := make([]int, 100000)
			for i := range script {
				script[i] = 503
			}
			arr.Script(t, double.Statuses(script...)...)
			acked = append(acked, runChild(t, dir, arr.URL, 0, 150, 1+rng.IntN(150), always)...)

			arr.Script(t)
			arr.Set(t, double.Knobs{Fault: double.FaultHold})
			held := arr.Held()
			acked = append(acked, runChild(t, dir, arr.URL, 1000, 100, 1+rng.IntN(100), func() bool { return arr.Held() > held })...)

			arr.Set(t, double.Knobs{})
			stored := len(arr.Received())
			acked = append(acked, runChild(t, dir, arr.URL, 2000, 150, 1+rng.IntN(150), func() bool { return len(arr.Received()) > stored })...)
			const kills = 3

			sp, err := spool.Open(spool.Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer sp.Close(context.Background()) //nolint:errcheck
			t.Logf("reopen: %+v", sp.Report())
			start(t, sp, deliver.Options{BaseURL: arr.URL, InFlight: inFlight, Batch: true, BatchEntries: batchEntries})
			double.Eventually(t, "the spool is delivered", func() bool { return sp.Snapshot().Pending == 0 })
			count := map[string]int{}
			for _, m := range markers(arr) {
				count[m]++
			}
			for _, m := range acked {
				if count[m] == 0 {
					t.Errorf("record %s was acknowledged before a kill and never delivered", m)
				}
			}
			dups := 0
			for _, n := range count {
				dups += n - 1
			}
			if max := kills * (inFlight*batchEntries + cursorEvery - 1); dups > max {
				t.Errorf("%d duplicates, want at most %d (%d kills × (%d in flight × %d per batch + %d acknowledged past the cursor))",
					dups, max, kills, inFlight, batchEntries, cursorEvery-1)
			}
			if q := sp.Snapshot().Quarantined; q != 0 {
				t.Errorf("quarantined = %d, want 0", q)
			}
			t.Logf("acknowledged %d, delivered %d distinct, %d duplicates", len(acked), len(count), dups)
			if len(acked) < 3 {
				t.Errorf("only %d records acknowledged: the kills came too early to test anything", len(acked))
			}
		})
	}
}
