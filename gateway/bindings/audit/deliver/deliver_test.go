package deliver_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/deliver"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/test/crashfs"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/auditrepo"
)

const dir = "/spool/repository"

// memSpool is a spool on fsys with 256 KiB segments: a segment is preallocated, and
// crashfs copies a file's whole content at each sync.
func memSpool(fsys *crashfs.FS) spool.Options {
	return spool.Options{Dir: dir, FS: fsys, SegmentBytes: 256 << 10, MaxRecordBytes: 64 << 10, MaxBytes: 64 << 20}
}

// event is a BALP-shaped Query AuditEvent whose entity.query carries marker, stamped
// with a fresh event id.
func event(t testing.TB, marker string) []byte {
	t.Helper()
	q := base64.StdEncoding.EncodeToString([]byte("GET /fhir/Patient?name=" + marker))
	b := fmt.Appendf(nil, `{"resourceType":"AuditEvent","type":{"system":"http://terminology.hl7.org/CodeSystem/audit-event-type","code":"rest"},`+
		`"action":"E","recorded":"2026-12-01T10:00:00Z","outcome":"0","agent":[{"requestor":true,"who":{"display":"test"}}],`+
		`"source":{"observer":{"display":"ferrofed"}},"entity":[{"query":%q}]}`, q)
	out, err := deliver.StampEventID(b, deliver.NewEventID())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// markers are the markers the repository received, in order.
func markers(arr *auditrepo.Server) []string {
	var out []string
	for _, e := range arr.Received() {
		for _, q := range e.Queries {
			if _, m, ok := strings.Cut(q, "name="); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

type rig struct {
	sp   *spool.Spool
	arr  *auditrepo.Server
	stop func()
}

func fast(o deliver.Options) deliver.Options {
	o.BackoffBase = time.Millisecond
	o.BackoffMax = 20 * time.Millisecond
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	o.Seed = 1
	return o
}

// start runs a delivery loop on sp to arr until the test ends.
func start(t *testing.T, sp *spool.Spool, o deliver.Options) func() {
	t.Helper()
	l, err := deliver.New(sp, fast(o))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func newRig(t *testing.T, ao auditrepo.Options, o deliver.Options) *rig {
	t.Helper()
	arr := auditrepo.Start(t, ao)
	sp, err := spool.Open(memSpool(crashfs.New()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sp.Close(context.Background()) })
	if o.BaseURL == "" {
		o.BaseURL = arr.URL
	}
	return &rig{sp: sp, arr: arr, stop: start(t, sp, o)}
}

func (r *rig) appendMarkers(t *testing.T, prefix string, n int) []string {
	t.Helper()
	var ms []string
	for i := range n {
		m := fmt.Sprintf("%s-%03d", prefix, i)
		if _, err := r.sp.Append(context.Background(), event(t, m)); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}

func state(sp *spool.Spool) dependencies.State { return spool.State(sp.Snapshot()) }

func TestEveryRecordIsDeliveredOnceInOrder(t *testing.T) {
	for _, c := range []struct {
		name string
		o    deliver.Options
	}{
		{"one POST per record, one in flight", deliver.Options{InFlight: 1}},
		{"batches of 7, one in flight", deliver.Options{InFlight: 1, Batch: true, BatchEntries: 7}},
		{"batches of at most 2 KiB, one in flight", deliver.Options{InFlight: 1, Batch: true, BatchBytes: 2048}},
		{"batches, four in flight", deliver.Options{InFlight: 4, Batch: true, BatchEntries: 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, auditrepo.Options{}, c.o)
			want := r.appendMarkers(t, "m", 120)
			double.Eventually(t, "all 120 are delivered", func() bool { return len(r.arr.Received()) >= 120 && r.sp.Snapshot().Pending == 0 })
			got := markers(r.arr)
			if c.o.InFlight == 1 && !slices.Equal(got, want) {
				t.Fatalf("delivered %q, want %q in order", got, want)
			}
			if sorted := slices.Sorted(slices.Values(got)); !slices.Equal(sorted, want) {
				t.Fatalf("delivered %d markers, want each of the 120 once", len(got))
			}
			for id, n := range r.arr.ByEventID() {
				if id == "" || n != 1 {
					t.Errorf("event id %q stored %d times, want a stamped id once", id, n)
				}
			}
			if st := state(r.sp); st != dependencies.Up {
				t.Errorf("state = %s, want up", st)
			}
		})
	}
}

func TestFailedDeliveriesAreRetriedAndTheStateIsDegradedMeanwhile(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, arr *auditrepo.Server)
		heal  func(t *testing.T, arr *auditrepo.Server)
	}{
		// The answer after the refusals is held until the heal, so that the retrying
		// state lasts until the test has seen it.
		{"503 three times, then 201", func(t *testing.T, a *auditrepo.Server) {
			a.Set(t, double.Knobs{Fault: double.FaultHold})
			a.Script(t, double.Statuses(503, 503, 503)...)
		}, func(t *testing.T, a *auditrepo.Server) { a.Set(t, double.Knobs{}) }},
		{"429 with Retry-After past the bound", func(t *testing.T, a *auditrepo.Server) {
			a.Set(t, double.Knobs{Fault: double.FaultHold})
			a.Script(t, double.Knobs{Status: 429, RetryAfter: "3600"}, double.Knobs{Status: 429, RetryAfter: "3600"})
		}, func(t *testing.T, a *auditrepo.Server) { a.Set(t, double.Knobs{}) }},
		{"408 with an HTTP-date Retry-After", func(t *testing.T, a *auditrepo.Server) {
			a.Set(t, double.Knobs{Fault: double.FaultHold})
			a.Script(t, double.Knobs{Status: 408, RetryAfter: time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)})
		}, func(t *testing.T, a *auditrepo.Server) { a.Set(t, double.Knobs{}) }},
		{"401 (never quarantined)", func(t *testing.T, a *auditrepo.Server) { a.Set(t, double.Knobs{Status: http.StatusUnauthorized}) }, func(t *testing.T, a *auditrepo.Server) { a.Set(t, double.Knobs{}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			arr := auditrepo.Start(t, auditrepo.Options{})
			c.setup(t, arr)
			sp, err := spool.Open(memSpool(crashfs.New()))
			if err != nil {
				t.Fatal(err)
			}
			defer sp.Close(context.Background()) //nolint:errcheck
			var seen sync.Map
			start(t, sp, deliver.Options{BaseURL: arr.URL, InFlight: 1, RetryAfterMax: 30 * time.Millisecond,
				Logf: func(f string, a ...any) { t.Logf(f, a...) }})
			r := &rig{sp: sp, arr: arr}
			r.appendMarkers(t, "r", 3)
			double.Eventually(t, "a retry is seen", func() bool {
				s := sp.Snapshot()
				seen.Store(spool.State(s), true)
				return s.Retrying
			})
			if st := state(sp); st != dependencies.Degraded {
				t.Errorf("state while retrying = %s, want degraded", st)
			}
			c.heal(t, arr)
			double.Eventually(t, "all 3 are delivered", func() bool { return len(arr.Received()) == 3 && sp.Snapshot().Pending == 0 })
			double.Eventually(t, "the state is up", func() bool { return state(sp) == dependencies.Up })
			if q := sp.Snapshot().Quarantined; q != 0 {
				t.Errorf("quarantined = %d, want 0: a retryable answer never quarantines", q)
			}
		})
	}
}

func TestAPoisonRecordIsQuarantinedWithItsReasonAndTheRestDelivered(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch %v", batch), func(t *testing.T) {
			r := newRig(t, auditrepo.Options{PoisonMarker: "p-007"}, deliver.Options{InFlight: 2, Batch: batch, BatchEntries: 4})
			want := slices.DeleteFunc(r.appendMarkers(t, "p", 20), func(m string) bool { return m == "p-007" })
			double.Eventually(t, "19 delivered and one quarantined", func() bool {
				return len(r.arr.Received()) == 19 && r.sp.Snapshot().Quarantined == 1 && r.sp.Snapshot().Pending == 0
			})
			if got := slices.Sorted(slices.Values(markers(r.arr))); !slices.Equal(got, want) {
				t.Fatalf("delivered %q, want every marker but p-007", got)
			}
			list, _, err := r.sp.List(10)
			if err != nil || len(list) != 1 {
				t.Fatalf("quarantine %+v, %v", list, err)
			}
			why := list[0].Reason
			if why.Kind != "rejected" || why.Status != 422 || !slices.Equal(why.Issues, []string{"business-rule"}) || why.Attempts != 1 || why.Time.IsZero() {
				t.Errorf("reason = %+v, want rejected 422 [business-rule] after 1 attempt, timed", why)
			}
			if st := state(r.sp); st != dependencies.Degraded {
				t.Errorf("state with a quarantined record = %s, want degraded", st)
			}
			if err := r.sp.Drop(list[0].ID); err != nil {
				t.Fatal(err)
			}
			if st := state(r.sp); st != dependencies.Up {
				t.Errorf("state once cleared = %s, want up", st)
			}
		})
	}
}

func TestABatchRefusedAsTooLargeIsSentSingly(t *testing.T) {
	r := newRig(t, auditrepo.Options{}, deliver.Options{InFlight: 1, Batch: true})
	r.arr.Set(t, double.Knobs{Route: auditrepo.BatchRoute, Status: http.StatusRequestEntityTooLarge})
	r.appendMarkers(t, "s", 10)
	double.Eventually(t, "all 10 are delivered", func() bool { return len(r.arr.Received()) == 10 && r.sp.Snapshot().Pending == 0 })
	for _, e := range r.arr.Received() {
		if e.Batch {
			t.Errorf("event %s came in a batch, want singly after the 413", e.ID)
		}
	}
	if q := r.sp.Snapshot().Quarantined; q != 0 {
		t.Errorf("quarantined = %d, want 0", q)
	}
}

func TestARefusedOrRedirectingRepositoryIsRetriedNeverFollowed(t *testing.T) {
	arr := auditrepo.Start(t, auditrepo.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	redirects := 0
	var mu sync.Mutex
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		redirects++
		mu.Unlock()
		http.Redirect(w, r, arr.URL+r.URL.Path, http.StatusTemporaryRedirect)
	})}
	go srv.Serve(ln) //nolint:errcheck
	defer srv.Close()
	refused := auditrepo.Start(t, auditrepo.Options{Knobs: double.Knobs{Fault: double.FaultRefused}})
	for _, base := range []string{"http://" + ln.Addr().String(), refused.URL} {
		sp, err := spool.Open(memSpool(crashfs.New()))
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, sp, deliver.Options{BaseURL: base, InFlight: 1})
		if _, err := sp.Append(context.Background(), event(t, "x")); err != nil {
			t.Fatal(err)
		}
		double.Eventually(t, "a retry is seen", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return sp.Snapshot().Retrying && (base == refused.URL || redirects >= 2)
		})
		if st := state(sp); st != dependencies.Degraded {
			t.Errorf("%s: state = %s, want degraded", base, st)
		}
		stop()
		_ = sp.Close(context.Background())
	}
	if n := len(arr.Received()); n != 0 {
		t.Errorf("the redirect target received %d events: the redirect was followed", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if redirects < 2 {
		t.Errorf("redirecting server saw %d requests, want retries", redirects)
	}
}

func TestAMidLogCorruptRecordIsQuarantinedAndTheRestDelivered(t *testing.T) {
	fsys := crashfs.New()
	sp, err := spool.Open(memSpool(fsys))
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for i := range 10 {
		e := event(t, fmt.Sprintf("c-%03d", i))
		sizes = append(sizes, 20+len(e))
		if _, err := sp.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	_ = sp.Close(context.Background())
	es, _ := fsys.ReadDir(dir)
	var seg string
	for _, e := range es {
		if strings.HasPrefix(e.Name(), "seg-") {
			seg = dir + "/" + e.Name()
		}
	}
	b, _ := fsys.ReadFile(seg)
	off := 0
	for _, n := range sizes[:4] {
		off += n
	}
	b[off+40] ^= 0x01 // inside record #4's payload
	if err := fsys.WriteFile(seg, b); err != nil {
		t.Fatal(err)
	}
	arr := auditrepo.Start(t, auditrepo.Options{})
	sp2, err := spool.Open(memSpool(fsys))
	if err != nil {
		t.Fatal(err)
	}
	defer sp2.Close(context.Background()) //nolint:errcheck
	start(t, sp2, deliver.Options{BaseURL: arr.URL, Batch: true})
	double.Eventually(t, "9 delivered", func() bool { return len(arr.Received()) == 9 && sp2.Snapshot().Pending == 0 })
	if got := markers(arr); slices.Contains(got, "c-004") || len(got) != 9 {
		t.Errorf("delivered %q, want all but c-004", got)
	}
	if q := sp2.Snapshot().Quarantined; q != 1 || state(sp2) != dependencies.Degraded {
		t.Errorf("quarantined %d, state %s; want 1 and degraded", q, state(sp2))
	}
}

func TestEachExchangeIsBoundedInTimeAndInAnswerSize(t *testing.T) {
	t.Run("a held delivery times out and is retried", func(t *testing.T) {
		r := newRig(t, auditrepo.Options{}, deliver.Options{InFlight: 1, Timeout: 50 * time.Millisecond})
		r.arr.Set(t, double.Knobs{Fault: double.FaultHold})
		r.appendMarkers(t, "h", 1)
		double.Eventually(t, "the repository held the delivery twice", func() bool { return r.arr.Held() >= 2 })
		if st := state(r.sp); st != dependencies.Degraded {
			t.Errorf("state = %s, want degraded", st)
		}
	})
	t.Run("a batch-response cut by the answer cap proves nothing", func(t *testing.T) {
		arr := auditrepo.Start(t, auditrepo.Options{})
		sp, err := spool.Open(memSpool(crashfs.New()))
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Close(context.Background()) //nolint:errcheck
		r := &rig{sp: sp, arr: arr}
		r.appendMarkers(t, "b", 2) // both spooled before the loop starts: one batch
		start(t, sp, deliver.Options{BaseURL: arr.URL, InFlight: 1, Batch: true, MaxResponseBytes: 64})
		double.Eventually(t, "a retry is seen", func() bool { return r.sp.Snapshot().Retrying })
		if p := r.sp.Snapshot().Pending; p != 2 {
			t.Errorf("pending = %d, want 2: not acknowledged on an unreadable answer", p)
		}
	})
	t.Run("a single create's status suffices when its body is cut", func(t *testing.T) {
		r := newRig(t, auditrepo.Options{}, deliver.Options{InFlight: 1, MaxResponseBytes: 16})
		r.appendMarkers(t, "c", 2)
		double.Eventually(t, "both are delivered", func() bool { return r.sp.Snapshot().Pending == 0 })
	})
}

// TestABatchLingersUntilItIsFull appends records one by one to a loop whose batch
// waits (Linger) for more: the repository gets one full batch, not the first record
// alone and then the rest.
func TestABatchLingersUntilItIsFull(t *testing.T) {
	r := newRig(t, auditrepo.Options{}, deliver.Options{InFlight: 1, Batch: true, BatchEntries: 5, Linger: deliver.MaxLinger})
	var ms []string
	for i := range 5 {
		ms = append(ms, r.appendMarkers(t, fmt.Sprintf("linger%d", i), 1)...)
		time.Sleep(20 * time.Millisecond) // time for the loop to take the record (and, without Linger, send it)
	}
	double.Eventually(t, "the batch is delivered", func() bool { return len(r.arr.Received()) == 5 })
	if n := r.arr.Requests(); n != 1 {
		t.Errorf("%d requests for 5 records appended one by one, want 1 full batch", n)
	}
	for i, e := range r.arr.Received() {
		if !e.Batch || !slices.ContainsFunc(e.Queries, func(q string) bool { return strings.Contains(q, ms[i]) }) {
			t.Errorf("event %d = %+v, want %s in a batch", i, e, ms[i])
		}
	}
}

func TestLingerIsBounded(t *testing.T) {
	for _, d := range []time.Duration{-time.Millisecond, deliver.MaxLinger + time.Millisecond} {
		if _, err := deliver.New(nil, deliver.Options{BaseURL: "http://127.0.0.1:1", Linger: d}); err == nil || !strings.Contains(err.Error(), "Linger") {
			t.Errorf("Linger %v: %v, want an error naming Linger", d, err)
		}
	}
}

// A record read back from a segment file is checked before it joins a batch even when
// the appender vouches for what it appends (KeptIsJSON): a payload that is not one
// JSON value but would make a batch of two entries out of one is sent alone, refused
// and quarantined, and the records around it are delivered.
func TestARecordReadBackIsCheckedBeforeItJoinsABatch(t *testing.T) {
	arr := auditrepo.Start(t, auditrepo.Options{})
	fsys := crashfs.New()
	sp, err := spool.Open(memSpool(fsys))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 10 {
		if i == 5 {
			// Inside a batch entry's {"resource": … ,"request":…} this closes the
			// entry and opens a second one: the batch stays JSON, one entry longer.
			odd := `{"resourceType":"AuditEvent"},"request":{"method":"POST","url":"AuditEvent"}},{"resource":{"resourceType":"AuditEvent"}`
			if _, err := sp.Append(context.Background(), []byte(odd)); err != nil {
				t.Fatal(err)
			}
		}
		m := fmt.Sprintf("r-%03d", i)
		if _, err := sp.Append(context.Background(), event(t, m)); err != nil {
			t.Fatal(err)
		}
		want = append(want, m)
	}
	if err := sp.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sp, err = spool.Open(memSpool(fsys)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sp.Close(context.Background()) })
	start(t, sp, deliver.Options{BaseURL: arr.URL, InFlight: 1, Batch: true, KeptIsJSON: true})
	double.Eventually(t, "10 delivered and one quarantined", func() bool {
		s := sp.Snapshot()
		return len(arr.Received()) == 10 && s.Quarantined == 1 && s.Pending == 0
	})
	if got := slices.Sorted(slices.Values(markers(arr))); !slices.Equal(got, want) {
		t.Fatalf("delivered %q, want %q", got, want)
	}
}
