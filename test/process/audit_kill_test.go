package process

import (
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/deliver"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// The SIGKILL test of the audit spool (docs/audit-spool.md) on the real binary: 200
// federated requests, each with a unique marker in its query, against `ferrofed serve`
// with [audit] to a repository double. Each of 5 rounds (kill points drawn from a
// printed seed) has a phase A, the repository down (503): the spool grows, and the
// gateway is killed with SIGKILL while requests are in flight; and a phase B,
// restarted with the repository holding every delivery after reading it: the gateway
// is killed while deliveries are in flight. Phase C restarts it with the repository
// healthy. Every request answered 200 before a kill must have its event delivered at
// least once, duplicates within what was in flight at the kills, the quarantine empty;
// the states seen degraded in A and B, up at the end. Set FERROFED_SIGKILL_SEED to
// replay a seed.
func TestSIGKILLLosesNoAuditRecord(t *testing.T) {
	const (
		rounds   = 5
		requests = 200
		workers  = 4
	)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FERROFED_SIGKILL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FERROFED_SIGKILL_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (FERROFED_SIGKILL_SEED=%d replays it)", seed, seed)
	rng := mrand.New(mrand.NewPCG(seed, seed))

	arr := auditrepo.Start(t, auditrepo.Options{})
	member := members.Start(t, members.Options{ID: "a"})
	dir := t.TempDir()
	spoolDir := filepath.Join(dir, "spool")
	jwks := clients.JWKS
	token := clients.Sign(t, "monitoring", issuer.OperatorScope)
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	path := filepath.Join(dir, "ferrofed.toml")
	writeFile(t, path, fmt.Sprintf(`[server]
listen = "127.0.0.1:%d"
termination_message_path = ""
[[registry.members]]
id = "a"
query_endpoint = %q
[[auth.issuers]]
issuer = "https://issuer.test"
audience = "ferrofed"
jwks_file = %q
operator_scope = "ferrofed.operator"
[audit]
destination = "repository"
url = %q
spool_dir = %q
`, port, member.URL, jwks, arr.URL, spoolDir))

	var mu sync.Mutex
	answered := map[string]bool{} // markers answered 200
	next := 0                     // the next marker's number
	// load sends federated requests from workers until n of them were answered 200
	// (or every marker is used), then returns at once: the caller kills the gateway
	// with the others in flight.
	load := func(n int) {
		if n <= 0 {
			return
		}
		enough := make(chan struct{})
		var once sync.Once
		got := 0
		for range workers {
			go func() {
				for {
					mu.Lock()
					if got >= n || next >= requests {
						mu.Unlock()
						once.Do(func() { close(enough) })
						return
					}
					marker := fmt.Sprintf("KILLMARK%04d", next)
					next++
					mu.Unlock()
					res, err := clientGet(base + "/fhir/Patient?name=" + marker)
					if err != nil {
						continue // the gateway was killed under it
					}
					_, readErr := io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if readErr == nil && res.StatusCode == http.StatusOK {
						mu.Lock()
						answered[marker] = true
						got++
						mu.Unlock()
					}
				}
			}()
		}
		<-enough
	}
	state := func() string {
		req, _ := http.NewRequest(http.MethodGet, base+"/operator/dependencies", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return "no answer"
		}
		defer res.Body.Close()
		var r map[string]any
		if json.NewDecoder(res.Body).Decode(&r) != nil {
			return "unreadable"
		}
		s, _ := r["audit_repository"].(string)
		return s
	}
	waitState := func(want string, bound time.Duration) {
		t.Helper()
		deadline := time.Now().Add(bound)
		for got := state(); got != want; got = state() {
			if time.Now().After(deadline) {
				t.Fatalf("audit_repository is %s, never %s within %s", got, want, bound)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	kill := func(g *gateway) {
		t.Helper()
		if err := g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case <-g.exited:
		case <-time.After(10 * time.Second):
			t.Fatal("the gateway outlived SIGKILL")
		}
	}

	perRound := requests / rounds
	for round := range rounds {
		// Phase A: the repository is down; the kill lands while requests are in flight.
		arr.Script(t, double.Statuses(repeat(503, 100000)...)...)
		arr.Set(t, double.Knobs{})
		g := serve(t, path)
		waitReady(t, base)
		killA := perRound/4 + rng.IntN(perRound/2) // answered before the kill
		load(killA / 2)
		waitState("degraded", 10*time.Second) // the 503s are being retried
		load(killA - killA/2)
		kill(g)

		// Phase B: the repository reads each delivery and holds it unanswered; the kill
		// lands while deliveries are in flight.
		arr.Script(t)
		arr.Set(t, double.Knobs{Fault: double.FaultHold})
		held := arr.Held()
		g = serve(t, path)
		waitReady(t, base)
		if got := state(); got != "degraded" {
			t.Fatalf("round %d: restarted over the records of a killed run, audit_repository is %s, want degraded", round, got)
		}
		deadline := time.Now().Add(10 * time.Second)
		for arr.Held() == held {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no delivery reached the holding repository", round)
			}
			time.Sleep(5 * time.Millisecond)
		}
		load(1 + rng.IntN(perRound-killA))
		kill(g)
		t.Logf("round %d: killed in A after %d answers, then in B with %d deliveries held", round, killA, arr.Held()-held)
	}

	// Phase C: healthy.
	arr.Script(t)
	arr.Set(t, double.Knobs{})
	g := serve(t, path)
	waitReady(t, base)
	load(requests) // the markers no round used
	waitState("up", 30*time.Second)

	mu.Lock()
	defer mu.Unlock()
	if len(answered) == 0 {
		t.Fatal("no request was answered 200: the test proved nothing")
	}
	// "up" says the last delivery succeeded and nothing waits; the records of the
	// last requests may still be on their way: they get a bounded while.
	var counts map[string]int
	var lost []string
	for deadline := time.Now().Add(30 * time.Second); ; {
		counts = map[string]int{}
		for _, e := range arr.Received() {
			for _, q := range e.Queries {
				if m, ok := strings.CutPrefix(q, "name="); ok && strings.HasPrefix(m, "KILLMARK") {
					counts[m]++
				}
			}
		}
		lost = lost[:0]
		for m := range answered {
			if counts[m] == 0 {
				lost = append(lost, m)
			}
		}
		if len(lost) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	dups := 0
	for _, n := range counts {
		dups += max(0, n-1)
	}
	if len(lost) > 0 {
		t.Fatalf("%d requests answered 200 have no delivered event: %v", len(lost), lost)
	}
	// What a kill can deliver twice is what was delivered and not yet under the
	// durable cursor: at most deliver.DefaultInFlight batches. In phase A the
	// repository stored nothing, so only the kills of phase B count.
	if limit := rounds * deliver.DefaultInFlight * deliver.MaxBatchEntries; dups > limit {
		t.Fatalf("%d duplicate deliveries, over the %d the kills could cause", dups, limit)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/operator/audit/quarantine", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var q struct {
		Total map[string]int `json:"total"`
	}
	err = json.NewDecoder(res.Body).Decode(&q)
	res.Body.Close()
	if err != nil || q.Total["repository"] != 0 {
		t.Fatalf("quarantine %+v (%v), want empty", q, err)
	}
	t.Logf("%d requests answered 200, all delivered; %d duplicates; %d events stored", len(answered), dups, len(arr.Received()))
	g.stop(t)
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}
