package spool_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/test/crashfs"
)

const dir = "/spool/repository"

func open(t testing.TB, o spool.Options) *spool.Spool {
	t.Helper()
	if o.Dir == "" {
		o.Dir = dir
	}
	s, err := spool.Open(o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { closeSpool(t, s) })
	return s
}

func closeSpool(t testing.TB, s *spool.Spool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
}

func payload(i int) []byte { return fmt.Appendf(nil, `{"resourceType":"AuditEvent","n":%d}`, i) }

func appendN(t testing.TB, s *spool.Spool, from, n int) []uint64 {
	t.Helper()
	var seqs []uint64
	for i := from; i < from+n; i++ {
		seq, err := s.Append(context.Background(), payload(i))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

// drain hands out every record that is ready, in order.
func drain(t testing.TB, s *spool.Spool) []spool.Record {
	t.Helper()
	var out []spool.Record
	for {
		rec, ok, _, err := s.TryNext()
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		if !ok {
			return out
		}
		out = append(out, rec)
	}
}

func payloads(recs []spool.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Payload))
	}
	return out
}

func wantPayloads(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, string(payload(i)))
	}
	return out
}

func ackAll(t testing.TB, s *spool.Spool, recs []spool.Record) {
	t.Helper()
	for _, r := range recs {
		if err := s.Ack(r.Seq); err != nil {
			t.Fatalf("ack %d: %v", r.Seq, err)
		}
	}
}

func TestRecordsComeBackInOrderAndOnlyUndeliveredOnesAfterReopen(t *testing.T) {
	fsys := crashfs.New()
	o := spool.Options{FS: fsys, SegmentBytes: 512, MaxBytes: 1 << 20, MaxRecordBytes: 256}
	s := open(t, o)
	appendN(t, s, 0, 30) // ~45 bytes each: several segments
	recs := drain(t, s)
	if got, want := payloads(recs), wantPayloads(0, 30); !slices.Equal(got, want) {
		t.Fatalf("records = %q, want %q", got, want)
	}
	// Acked out of order: the watermark stops below the first unacked (seq of #10).
	for i, r := range recs {
		if i != 10 {
			if err := s.Ack(r.Seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	closeSpool(t, s)
	s2 := open(t, o)
	got := payloads(drain(t, s2))
	if want := wantPayloads(10, 30); !slices.Equal(got, want) {
		t.Fatalf("after reopen = %q, want the records from #10 on (held acks are not durable)", got)
	}
	if n := len(segments(t, fsys)); n < 2 {
		t.Errorf("segments after reopen = %d, want several (30 records at 512-byte segments)", n)
	}
}

func segments(t testing.TB, fsys *crashfs.FS) []string {
	t.Helper()
	es, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if strings.HasPrefix(e.Name(), "seg-") {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestSegmentsWhollyBelowTheCursorAreUnlinked(t *testing.T) {
	fsys := crashfs.New()
	s := open(t, spool.Options{FS: fsys, SegmentBytes: 512, MaxBytes: 1 << 20, MaxRecordBytes: 256})
	appendN(t, s, 0, 40)
	before := len(segments(t, fsys))
	ackAll(t, s, drain(t, s))
	after := segments(t, fsys)
	if before < 3 || len(after) != 1 {
		t.Fatalf("segments: %d before, %v after acking all; want several, then only the one being written", before, after)
	}
	// One segment of 512 bytes takes one 4 KiB block.
	if snap := s.Snapshot(); snap.Bytes != 4096 || snap.Pending != 0 || snap.PendingBytes != 0 || snap.Passed != 40 {
		t.Errorf("snapshot = %+v, want one block on disk, nothing pending, 40 passed", snap)
	}
}

func TestATornTailIsCutWithoutQuarantine(t *testing.T) {
	for _, cut := range []int{1, 5, 19, 21, 30} { // inside the header, and inside the payload
		t.Run(fmt.Sprintf("the last record cut %d bytes into it", cut), func(t *testing.T) {
			fsys := crashfs.New()
			o := spool.Options{FS: fsys}
			s := open(t, o)
			appendN(t, s, 0, 10)
			closeSpool(t, s)
			seg := dir + "/" + segments(t, fsys)[0]
			b, _ := fsys.ReadFile(seg)
			b = bytes.TrimRight(b, "\x00") // the records, without the preallocated rest
			last := len(b) - (20 + len(payload(9)))
			if err := fsys.WriteFile(seg, b[:last+cut]); err != nil {
				t.Fatal(err)
			}
			s2 := open(t, o)
			rep := s2.Report()
			if got, want := payloads(drain(t, s2)), wantPayloads(0, 9); !slices.Equal(got, want) {
				t.Fatalf("records = %q, want the first 9", got)
			}
			if len(rep.Truncated) != 1 || len(rep.Quarantined) != 0 {
				t.Fatalf("report = %+v, want one truncation and nothing quarantined", rep)
			}
			if b2, _ := fsys.ReadFile(seg); len(b2) != last {
				t.Errorf("segment is %d bytes, want %d (cut at the torn record)", len(b2), last)
			}
			if q := s2.Snapshot().Quarantined; q != 0 {
				t.Errorf("quarantined = %d, want 0", q)
			}
		})
	}
}

func TestACorruptRecordMidLogGoesToQuarantineAndTheRestIsRead(t *testing.T) {
	fsys := crashfs.New()
	o := spool.Options{FS: fsys}
	s := open(t, o)
	appendN(t, s, 0, 10)
	closeSpool(t, s)
	seg := dir + "/" + segments(t, fsys)[0]
	b, _ := fsys.ReadFile(seg)
	rec := 20 + len(payload(0)) // every payload here has the same length
	b[4*rec+25] ^= 0x40         // a payload byte of record #4
	if err := fsys.WriteFile(seg, b); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, o)
	want := slices.Delete(wantPayloads(0, 10), 4, 5)
	recs := drain(t, s2)
	if got := payloads(recs); !slices.Equal(got, want) {
		t.Fatalf("records = %q, want all but #4", got)
	}
	ackAll(t, s2, recs)
	rep := s2.Report()
	wantQ := fmt.Sprintf("corrupt-%s-%d.bin", filepath.Base(seg), 4*rec)
	if !slices.Equal(rep.Quarantined, []string{wantQ}) {
		t.Fatalf("quarantined = %v, want [%s]", rep.Quarantined, wantQ)
	}
	raw, err := fsys.ReadFile(dir + "/quarantine/" + wantQ)
	if err != nil || !bytes.Equal(raw, b[4*rec:5*rec]) {
		t.Errorf("quarantined bytes = %q (%v), want the raw record", raw, err)
	}
	snap := s2.Snapshot()
	if got := spool.State(snap); snap.Quarantined != 1 || got != dependencies.Degraded {
		t.Errorf("snapshot %+v: state %s, want degraded with 1 quarantined", snap, got)
	}
	list, total, err := s2.List(10)
	if err != nil || total != 1 || list[0].Reason.Kind != "corrupt" {
		t.Fatalf("list = %+v, %d, %v; want one corrupt entry", list, total, err)
	}
	if _, err := s2.Retry(context.Background(), list[0].ID); !errors.Is(err, spool.ErrNotRetryable) {
		t.Errorf("retry of corrupt bytes = %v, want ErrNotRetryable", err)
	}
	if err := s2.Drop(list[0].ID); err != nil {
		t.Fatal(err)
	}
	s2.SetDelivery(true, false)
	if st := spool.State(s2.Snapshot()); st != dependencies.Up {
		t.Errorf("state after the drop and a good delivery = %s, want up", st)
	}
}

func TestQuarantineListsRetriesAndDrops(t *testing.T) {
	fsys := crashfs.New()
	o := spool.Options{FS: fsys}
	s := open(t, o)
	appendN(t, s, 0, 3)
	recs := drain(t, s)
	for _, r := range recs {
		if !r.Kept {
			t.Errorf("record %d, appended by this process and handed out from memory: Kept false", r.Seq)
		}
	}
	why := spool.Reason{Status: 422, Issues: []string{"invalid"}, Attempts: 1}
	if err := s.Quarantine(recs[1], why); err != nil {
		t.Fatal(err)
	}
	if err := s.Quarantine(recs[2], why); err != nil {
		t.Fatal(err)
	}
	ackAll(t, s, recs[:1])
	list, total, err := s.List(1)
	if err != nil || total != 2 || len(list) != 1 {
		t.Fatalf("list(1) = %+v, total %d, %v; want 1 of 2", list, total, err)
	}
	if r := list[0].Reason; r.Kind != "rejected" || r.Status != 422 || !slices.Equal(r.Issues, []string{"invalid"}) || r.Time.IsZero() {
		t.Errorf("reason = %+v", r)
	}
	if st := spool.State(s.Snapshot()); st != dependencies.Degraded {
		t.Errorf("state with quarantine = %s, want degraded", st)
	}
	id1 := fmt.Sprint(recs[1].Seq)
	if _, err := s.Retry(context.Background(), id1); err != nil {
		t.Fatal(err)
	}
	retried := drain(t, s)
	if got := payloads(retried); !slices.Equal(got, []string{string(payload(1))}) {
		t.Fatalf("after retry the spool hands out %q, want the retried body", got)
	}
	if retried[0].Kept {
		t.Errorf("a record retried from quarantine is Kept: nothing vouches for its body")
	}
	if err := s.Drop(fmt.Sprint(recs[2].Seq)); err != nil {
		t.Fatal(err)
	}
	if err := s.Drop(fmt.Sprint(recs[2].Seq)); !errors.Is(err, spool.ErrNoEntry) {
		t.Errorf("second drop = %v, want ErrNoEntry", err)
	}
	if err := s.Drop("../cursor"); !errors.Is(err, spool.ErrNoEntry) {
		t.Errorf("drop of a path = %v, want ErrNoEntry", err)
	}
	if q := s.Snapshot().Quarantined; q != 0 {
		t.Errorf("quarantined = %d, want 0", q)
	}
	// Nothing quarantined is dropped by a reopen, and quarantined records are never
	// handed out again.
	closeSpool(t, s)
	s2 := open(t, o)
	reread := drain(t, s2)
	if got := payloads(reread); !slices.Equal(got, []string{string(payload(1))}) {
		t.Errorf("after reopen: %q, want only the retried record (not yet acked)", got)
	}
	if len(reread) > 0 && reread[0].Kept {
		t.Errorf("a record read back from its segment file after a reopen is Kept")
	}
}

func TestStateRule(t *testing.T) {
	for _, c := range []struct {
		name string
		snap spool.Snapshot
		want dependencies.State
	}{
		{"nothing ever spooled is unknown", spool.Snapshot{}, dependencies.Unknown},
		{"spooled, no delivery back yet, nothing waits, is unknown", spool.Snapshot{EverSpooled: true}, dependencies.Unknown},
		{"last delivery succeeded and nothing waits is up", spool.Snapshot{EverSpooled: true, LastDeliveryOK: true}, dependencies.Up},
		{"a retried failed delivery is degraded", spool.Snapshot{EverSpooled: true, Retrying: true}, dependencies.Degraded},
		{"a waiting record is degraded even after a good delivery", spool.Snapshot{EverSpooled: true, LastDeliveryOK: true, Waiting: 1}, dependencies.Degraded},
		{"quarantine is degraded even after a good delivery", spool.Snapshot{EverSpooled: true, LastDeliveryOK: true, Quarantined: 1}, dependencies.Degraded},
		{"quarantine left by a previous run is degraded before any message", spool.Snapshot{Quarantined: 2}, dependencies.Degraded},
		{"a spool that cannot store is failing, whatever else", spool.Snapshot{EverSpooled: true, LastDeliveryOK: true, Fault: spool.FaultStorage}, dependencies.Failing},
		{"a full spool is failing, even with a quarantine", spool.Snapshot{Quarantined: 1, Retrying: true, Fault: spool.FaultFull}, dependencies.Failing},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := spool.State(c.snap); got != c.want {
				t.Errorf("State(%+v) = %s, want %s", c.snap, got, c.want)
			}
		})
	}
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestARecordWaitsAfterOneDeliveryIntervalAndWhenLeftByAPreviousRun(t *testing.T) {
	fsys := crashfs.New()
	c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	o := spool.Options{FS: fsys, WaitAfter: 5 * time.Second, Now: c.Now}
	s := open(t, o)
	if st := spool.State(s.Snapshot()); st != dependencies.Unknown {
		t.Fatalf("fresh spool: %s, want unknown", st)
	}
	appendN(t, s, 0, 1)
	s.SetDelivery(true, false)
	if snap := s.Snapshot(); snap.Waiting != 0 || spool.State(snap) != dependencies.Up {
		t.Fatalf("just enqueued: %+v, want nothing waiting (a record merely enqueued does not wait)", snap)
	}
	c.Add(6 * time.Second)
	if snap := s.Snapshot(); snap.Waiting != 1 || spool.State(snap) != dependencies.Degraded {
		t.Fatalf("after one interval: %+v, want 1 waiting, degraded", snap)
	}
	closeSpool(t, s)
	c.Add(-time.Hour) // the previous run's clock says nothing about this one
	s2 := open(t, o)
	if snap := s2.Snapshot(); snap.Waiting != 1 || spool.State(snap) != dependencies.Degraded {
		t.Fatalf("left by a previous run: %+v, want 1 waiting, degraded", snap)
	}
	ackAll(t, s2, drain(t, s2))
	s2.SetDelivery(true, false)
	if snap := s2.Snapshot(); snap.Waiting != 0 || spool.State(snap) != dependencies.Up {
		t.Fatalf("delivered: %+v, want up", snap)
	}
}

func TestTheCapRefusesNewRecordsAndKeepsOldOnes(t *testing.T) {
	fsys := crashfs.New()
	// Room for four segments of one block each besides MetaBytes.
	const maxBytes = 4*4096 + spool.MetaBytes
	o := spool.Options{FS: fsys, SegmentBytes: 4096, MaxBytes: maxBytes, MaxRecordBytes: 512}
	s := open(t, o)
	n := 0
	var err error
	for ; n < 1000; n++ {
		if _, err = s.Append(context.Background(), payload(n)); err != nil {
			break
		}
	}
	if !errors.Is(err, spool.ErrFull) || n < 200 {
		t.Fatalf("append #%d: %v, want ErrFull after about 16 KiB", n, err)
	}
	if _, err := s.Append(context.Background(), payload(n)); !errors.Is(err, spool.ErrFull) {
		t.Fatalf("append after full = %v, want ErrFull again", err)
	}
	if f := s.Snapshot().Fault; f != spool.FaultFull {
		t.Fatalf("fault %q, want %q", f, spool.FaultFull)
	}
	if snap := s.Snapshot(); snap.Bytes != 4*4096 || snap.Footprint != maxBytes {
		t.Errorf("segments %d bytes, footprint %d; want four blocks, the cap", snap.Bytes, snap.Footprint)
	}
	closeSpool(t, s)
	s2 := open(t, o)
	recs := drain(t, s2)
	if got, want := payloads(recs), wantPayloads(0, n); !slices.Equal(got, want) {
		t.Fatalf("after reopen: %d records, want all %d accepted ones", len(got), n)
	}
	ackAll(t, s2, recs)
	if _, err := s2.Append(context.Background(), payload(n)); err != nil {
		t.Fatalf("append after delivery freed the spool: %v", err)
	}
	if f := s2.Snapshot().Fault; f != "" {
		t.Fatalf("fault %q after a record was stored again, want none", f)
	}
}

// failing returns a hook that fails op (on names containing part) with err while on.
type failing struct {
	mu   sync.Mutex
	on   bool
	op   crashfs.Op
	part string
	err  error
	hits int
}

func (f *failing) hook(op crashfs.Op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.on && op == f.op && strings.Contains(name, f.part) {
		f.hits++
		return f.err
	}
	return nil
}

func (f *failing) set(on bool) { f.mu.Lock(); f.on = on; f.mu.Unlock() }

func TestENOSPCFailsTheAppendAndLosesNothingSpooled(t *testing.T) {
	for _, op := range []crashfs.Op{crashfs.OpWrite, crashfs.OpSync, crashfs.OpCreate} {
		t.Run(fmt.Sprintf("ENOSPC on %s", op), func(t *testing.T) {
			fsys := crashfs.New()
			f := &failing{op: op, part: "seg-", err: syscall.ENOSPC}
			fsys.Hook = f.hook
			o := spool.Options{FS: fsys, SegmentBytes: 512, MaxBytes: 1 << 20, MaxRecordBytes: 256}
			s := open(t, o)
			appendN(t, s, 0, 20)
			f.set(true)
			failed := 0
			for i := 20; i < 40; i++ {
				_, err := s.Append(context.Background(), payload(i))
				if err == nil {
					continue // a create fault only bites at a rotation
				}
				failed++
				if !errors.Is(err, spool.ErrStorage) || !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("append: %v, want ErrStorage wrapping ENOSPC", err)
				}
			}
			f.set(false)
			if failed == 0 {
				t.Fatal("no append failed under ENOSPC")
			}
			if snap := s.Snapshot(); snap.Fault != spool.FaultStorage || spool.State(snap) != dependencies.Failing {
				t.Fatalf("fault %q, state %s after a failed append; want %q, failing", snap.Fault, spool.State(snap), spool.FaultStorage)
			}
			appendN(t, s, 100, 1)
			if f := s.Snapshot().Fault; f != "" {
				t.Fatalf("fault %q after a record was stored again, want none", f)
			}
			closeSpool(t, s)
			fsys.Crash()
			s2 := open(t, o)
			got := payloads(drain(t, s2))
			for _, w := range append(wantPayloads(0, 20), string(payload(100))) {
				if !slices.Contains(got, w) {
					t.Errorf("record %s lost; got %d records", w, len(got))
				}
			}
			if q := s2.Snapshot().Quarantined; q != 0 {
				t.Errorf("quarantined = %d after a poisoned segment, want 0 (its tail was cut)", q)
			}
		})
	}
}

func TestGroupCommitCoversQueuedAppendsWithOneSync(t *testing.T) {
	fsys := crashfs.New()
	var mu sync.Mutex
	fsys.Hook = func(op crashfs.Op, _ string) error {
		if op == crashfs.OpSync {
			mu.Lock()
			defer mu.Unlock()
			time.Sleep(2 * time.Millisecond) // a disk that takes its time
		}
		return nil
	}
	s := open(t, spool.Options{FS: fsys})
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if _, err := s.Append(context.Background(), payload(i)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if syncs := s.Syncs(); syncs > n/2 {
		t.Errorf("%d appends took %d syncs, want at most %d: appends queued during a sync share the next", n, syncs, n/2)
	}
	if got := len(drain(t, s)); got != n {
		t.Errorf("records = %d, want %d", got, n)
	}
}

func TestCloseSyncsAndNeverDeletesUndeliveredRecords(t *testing.T) {
	fsys := crashfs.New()
	o := spool.Options{FS: fsys}
	s := open(t, o)
	appendN(t, s, 0, 5)
	drain(t, s) // handed out, never acked
	closeSpool(t, s)
	if _, err := s.Append(context.Background(), payload(9)); !errors.Is(err, spool.ErrClosed) {
		t.Errorf("append after close = %v, want ErrClosed", err)
	}
	if _, err := s.Next(context.Background()); !errors.Is(err, spool.ErrClosed) {
		t.Errorf("next after close = %v, want ErrClosed", err)
	}
	fsys.Crash()
	s2 := open(t, o)
	if got := payloads(drain(t, s2)); !slices.Equal(got, wantPayloads(0, 5)) {
		t.Errorf("after close and crash: %q, want all 5", got)
	}
}

func TestCloseReturnsAtItsDeadlineWhenASyncHangs(t *testing.T) {
	fsys := crashfs.New()
	release := make(chan struct{})
	var hang sync.Once
	fsys.Hook = func(op crashfs.Op, _ string) error {
		if op == crashfs.OpSync {
			hang.Do(func() { <-release })
		}
		return nil
	}
	s, err := spool.Open(spool.Options{Dir: dir, FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	go s.Append(context.Background(), payload(0)) //nolint:errcheck // it hangs until released
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("close with a hung sync = %v, want the deadline's error", err)
	}
	close(release)
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("close once the sync returned: %v", err)
	}
}

func TestOpenSurvivesAnyFolderContent(t *testing.T) {
	seg := func(first uint64) string { return fmt.Sprintf("%s/seg-%016x.log", dir, first) }
	huge := append([]byte{0xF3, 0xA5, 1, 0, 0xff, 0xff, 0xff, 0x7f}, make([]byte, 40)...)
	for _, c := range []struct {
		name  string
		plant func(f *crashfs.FS) error
	}{
		{"garbage files", func(f *crashfs.FS) error { return f.WriteFile(dir+"/notes.txt", []byte("hello")) }},
		{"a zero-length segment", func(f *crashfs.FS) error { return f.WriteFile(seg(1), nil) }},
		{"a segment of random bytes", func(f *crashfs.FS) error { return f.WriteFile(seg(1), bytes.Repeat([]byte{0xF3, 0xA5, 1}, 999)) }},
		{"a huge len field", func(f *crashfs.FS) error { return f.WriteFile(seg(1), huge) }},
		{"a directory named as a segment", func(f *crashfs.FS) error { return f.MkdirAll(seg(7), 0o700) }},
		{"a directory named cursor", func(f *crashfs.FS) error { return f.MkdirAll(dir+"/cursor", 0o700) }},
		{"a bad cursor", func(f *crashfs.FS) error {
			return f.WriteFile(dir+"/cursor", []byte("ferrofed-spool-cursor 1 12 00000000\n"))
		}},
		{"an empty cursor", func(f *crashfs.FS) error { return f.WriteFile(dir+"/cursor", nil) }},
		{"a file named quarantine", func(f *crashfs.FS) error { return f.WriteFile(dir+"/quarantine", []byte("x")) }},
		{"a segment named past the seq limit", func(f *crashfs.FS) error { return f.WriteFile(dir+"/seg-ffffffffffffffff.log", []byte("x")) }},
		{"junk in quarantine", func(f *crashfs.FS) error { return f.WriteFile(dir+"/quarantine/12.json.tmp", []byte("{")) }},
		{"a reason file without its body", func(f *crashfs.FS) error { return f.WriteFile(dir+"/quarantine/3.reason.json", []byte("{")) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			fsys := crashfs.New()
			if err := c.plant(fsys); err != nil {
				t.Fatal(err)
			}
			s := open(t, spool.Options{FS: fsys})
			drain(t, s)
			appendN(t, s, 0, 3)
			recs := drain(t, s)
			if got := payloads(recs); !slices.Equal(got, wantPayloads(0, 3)) {
				t.Fatalf("records = %q, want the 3 appended (report %+v)", got, s.Report())
			}
			ackAll(t, s, recs)
			closeSpool(t, s)
			s2 := open(t, spool.Options{FS: fsys})
			if got := drain(t, s2); len(got) != 0 {
				t.Errorf("after ack and reopen: %d records, want none", len(got))
			}
		})
	}
}

func TestTheRealFileSystem(t *testing.T) {
	d := t.TempDir()
	o := spool.Options{Dir: filepath.Join(d, "repository"), SegmentBytes: 512, MaxBytes: 1 << 20, MaxRecordBytes: 256}
	s := open(t, o)
	appendN(t, s, 0, 20)
	recs := drain(t, s)
	ackAll(t, s, recs[:7])
	closeSpool(t, s)
	s2 := open(t, o)
	if got := payloads(drain(t, s2)); !slices.Equal(got, wantPayloads(7, 20)) {
		t.Fatalf("after reopen: %q", got)
	}
	if _, err := os.Stat(filepath.Join(o.Dir, "cursor")); err != nil {
		t.Errorf("cursor: %v", err)
	}
}

func TestAppendReturnsOnlyAfterItsSyncReturned(t *testing.T) {
	fsys := crashfs.New()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fsys.Hook = func(op crashfs.Op, name string) error {
		if op == crashfs.OpSync && strings.Contains(name, "seg-") {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
		return nil
	}
	s := open(t, spool.Options{FS: fsys})
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(context.Background(), payload(0))
		done <- err
	}()
	<-entered
	select {
	case err := <-done:
		t.Fatalf("Append returned (%v) while its sync was still running", err)
	default:
	}
	if _, ok, _, _ := s.TryNext(); ok {
		t.Fatal("a record not yet synced was handed out for delivery")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := payloads(drain(t, s)); !slices.Equal(got, wantPayloads(0, 1)) {
		t.Errorf("records = %q", got)
	}
}

// TestSegmentsArePreallocatedAndTheirZerosAreTheirEnd: a new segment is SegmentBytes
// of synced zeros before its first record, records overwrite them (the file's size
// never changes, so a group's sync changes no metadata), and Open takes the zeros
// after the last record for the segment's end: nothing cut, nothing quarantined.
func TestSegmentsArePreallocatedAndTheirZerosAreTheirEnd(t *testing.T) {
	fsys := crashfs.New()
	o := spool.Options{FS: fsys, SegmentBytes: 4096, MaxRecordBytes: 1024, MaxBytes: 1 << 20}
	s := open(t, o)
	appendN(t, s, 0, 3)
	segs := segments(t, fsys)
	if len(segs) != 1 {
		t.Fatalf("segments = %v, want 1", segs)
	}
	b, _ := fsys.ReadFile(dir + "/" + segs[0])
	written := bytes.TrimRight(b, "\x00")
	if len(b) != 4096 || len(written) != 3*(20+len(payload(0))) {
		t.Fatalf("segment: %d bytes, %d of them records; want 4096, and 3 records at its start", len(b), len(written))
	}
	if snap := s.Snapshot(); snap.Bytes != 4096 {
		t.Errorf("bytes on disk = %d, want the preallocated 4096", snap.Bytes)
	}
	// What a power loss leaves: the synced zeros, the synced records.
	fsys.Crash()
	s2 := open(t, o)
	rep := s2.Report()
	if len(rep.Truncated)+len(rep.Quarantined)+len(rep.Problems) != 0 || rep.Pending != 3 {
		t.Errorf("report = %+v, want 3 pending and nothing cut, quarantined or wrong", rep)
	}
	if got := payloads(drain(t, s2)); !slices.Equal(got, wantPayloads(0, 3)) {
		t.Errorf("records = %q, want #0..#2", got)
	}
}

// TestABlankNewestSegmentLeavesTheTornTailBeforeItToBeCut: a run that preallocated a
// segment and died before its first record leaves a segment of zeros after the one
// with a torn tail; that tail is still the log's end, cut, not quarantined.
func TestABlankNewestSegmentLeavesTheTornTailBeforeItToBeCut(t *testing.T) {
	fsys := crashfs.New()
	o := spool.Options{FS: fsys, SegmentBytes: 4096, MaxRecordBytes: 1024, MaxBytes: 1 << 20}
	s := open(t, o)
	appendN(t, s, 0, 3)
	closeSpool(t, s)
	seg := dir + "/" + segments(t, fsys)[0]
	b, _ := fsys.ReadFile(seg)
	written := bytes.TrimRight(b, "\x00")
	if err := fsys.WriteFile(seg, written[:len(written)-5]); err != nil {
		t.Fatal(err)
	}
	if err := fsys.WriteFile(dir+"/seg-00000000000000ff.log", make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, o)
	rep := s2.Report()
	if len(rep.Truncated) != 1 || !strings.HasPrefix(rep.Truncated[0], segments(t, fsys)[0]) || len(rep.Quarantined) != 0 {
		t.Errorf("report = %+v, want the first segment's torn tail cut and nothing quarantined", rep)
	}
	if got := payloads(drain(t, s2)); !slices.Equal(got, wantPayloads(0, 2)) {
		t.Errorf("records = %q, want #0 and #1", got)
	}
}

// The reader's cache of synced records and the file agree: a backlog larger than the
// cache over many segments, concurrent appends read while they are written, and
// Enqueue's tickets each answered with its own seq, are read back in order, each
// once, with their bytes.
func TestTheReadersCacheAndTheFileAgree(t *testing.T) {
	// Small segments: the backlog and the later records in other segments; large
	// ones: in the same segment, the uncached records between cached ones.
	for _, segBytes := range []int64{256 << 10, 16 << 20} {
		t.Run(fmt.Sprint(segBytes), func(t *testing.T) { cacheAndFileAgree(t, segBytes) })
	}
}

func cacheAndFileAgree(t *testing.T, segBytes int64) {
	fsys := crashfs.New()
	big := func(i int) []byte {
		return fmt.Appendf(nil, `{"resourceType":"AuditEvent","n":%d,"pad":"%s"}`, i, strings.Repeat("x", 3000+i%500))
	}
	s, err := spool.Open(spool.Options{Dir: dir, FS: fsys, SegmentBytes: segBytes, MaxRecordBytes: 8 << 10, MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer closeSpool(t, s)
	const backlog = 2000 // about 7 MB: past the cache, in about 27 segments
	var wg sync.WaitGroup
	tickets := make([]spool.Ticket, backlog)
	for i := range backlog {
		tk, err := s.Enqueue(big(i))
		if err != nil {
			t.Fatal(err)
		}
		tickets[i] = tk
	}
	seen := map[uint64]bool{}
	for i, tk := range tickets {
		seq, err := tk.Wait(context.Background())
		if err != nil || seen[seq] {
			t.Fatalf("ticket %d: seq %d, %v (seen before: %v)", i, seq, err, seen[seq])
		}
		seen[seq] = true
	}
	// While the backlog is read, more records are appended from 8 goroutines.
	for w := range 8 {
		wg.Go(func() {
			for i := backlog + w; i < backlog+800; i += 8 {
				if _, err := s.Append(context.Background(), big(i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var got []spool.Record
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < backlog+800 && time.Now().Before(deadline) {
		recs := drain(t, s)
		ackAll(t, s, recs)
		got = append(got, recs...)
		if len(recs) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
	got = append(got, drain(t, s)...)
	if len(got) != backlog+800 {
		t.Fatalf("read %d records, want %d", len(got), backlog+800)
	}
	ns := map[string]bool{}
	for i, r := range got {
		if i > 0 && r.Seq <= got[i-1].Seq {
			t.Fatalf("record %d: seq %d after %d", i, r.Seq, got[i-1].Seq)
		}
		if i < backlog && string(r.Payload) != string(big(i)) {
			t.Fatalf("record %d: %.60q, want %.60q", i, r.Payload, big(i))
		}
		ns[string(r.Payload)] = true
	}
	for i := range backlog + 800 {
		if !ns[string(big(i))] {
			t.Fatalf("record %d was never read", i)
		}
	}
}

// One spool, one owner: a second Open of a directory an open spool holds is ErrHeld,
// naming the directory, whatever the first holds; once the first is closed, the
// directory opens again, with what the first left.
func TestASpoolHasOneOwner(t *testing.T) {
	dir := t.TempDir()
	first, err := spool.Open(spool.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Append(context.Background(), []byte(`{"resourceType":"AuditEvent"}`)); err != nil {
		t.Fatal(err)
	}
	second, err := spool.Open(spool.Options{Dir: dir})
	if !errors.Is(err, spool.ErrHeld) || !strings.Contains(err.Error(), dir) {
		if second != nil {
			_ = second.Close(context.Background())
		}
		t.Fatalf("a second Open: %v, want spool.ErrHeld naming %s", err, dir)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	again, err := spool.Open(spool.Options{Dir: dir})
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	defer again.Close(context.Background())
	if r := again.Report(); r.Pending != 1 || len(r.Problems) != 0 {
		t.Fatalf("reopened: %+v, want the one record and no problem with the lock file", r)
	}
}
