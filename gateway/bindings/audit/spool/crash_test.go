package spool_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
	"github.com/ferrofed/ferrofed/test/crashfs"
	"github.com/ferrofed/ferrofed/test/double"
)

// killer is a Hook that lets the machine die at a chosen operation: that operation
// and every later one fail with EIO, as if the process had stopped there; the test
// then calls Crash and opens the spool again.
type killer struct {
	mu   sync.Mutex
	at   func(n int, op crashfs.Op, name string) bool
	n    int
	dead bool
}

func (k *killer) hook(op crashfs.Op, name string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.n++
	if !k.dead && k.at(k.n, op, name) {
		k.dead = true
	}
	if k.dead {
		return syscall.EIO
	}
	return nil
}

func (k *killer) isDead() bool { k.mu.Lock(); defer k.mu.Unlock(); return k.dead }

// abandon stops a spool whose machine died, without asserting anything of it.
func abandon(s *spool.Spool) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.Close(ctx)
}

// TestPowerLossKeepsEveryAcknowledgedRecord crashes the file system at a seeded
// operation while four goroutines append and one delivers and acks, then opens the
// spool on what survived: every record whose Append returned, and that was not
// acknowledged as delivered, is there, once, in order; of the acknowledged ones,
// fewer than CursorEvery (seeded) come back, plus those of the Ack the crash cut.
func TestPowerLossKeepsEveryAcknowledgedRecord(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 12))
			crashAt := 1 + rng.IntN(400)
			fsys := crashfs.New()
			k := &killer{at: func(n int, _ crashfs.Op, _ string) bool { return n == crashAt }}
			fsys.Hook = k.hook
			// The timer never fires: only the count and the unlinks write the cursor.
			cursorEvery := 1 + rng.IntN(12)
			o := spool.Options{Dir: dir, FS: fsys, SegmentBytes: 512, MaxBytes: 1 << 20, MaxRecordBytes: 256,
				CursorEvery: cursorEvery, CursorInterval: time.Hour}
			s, err := spool.Open(o)
			if err != nil {
				t.Fatal(err)
			}
			var (
				mu        sync.Mutex
				appended  = map[string]bool{} // Append returned nil
				attempted = map[string]bool{}
				acked     = map[string]bool{} // an Ack covering it was tried
			)
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					for i := range 40 {
						p := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
						mu.Lock()
						attempted[p] = true
						mu.Unlock()
						if _, err := s.Append(context.Background(), []byte(p)); err == nil {
							mu.Lock()
							appended[p] = true
							mu.Unlock()
						} else if !errors.Is(err, spool.ErrStorage) {
							t.Errorf("append: %v", err)
						}
					}
				})
			}
			deliverEvery := 1 + rng.IntN(5)
			done := make(chan struct{})
			go func() {
				defer close(done)
				var batch []spool.Record
				for i := 0; i < 400 && !k.isDead(); i++ {
					rec, ok, _, err := s.TryNext()
					if err != nil || !ok {
						continue
					}
					batch = append(batch, rec)
					if len(batch) < deliverEvery {
						continue
					}
					mu.Lock()
					for _, r := range batch {
						acked[string(r.Payload)] = true
					}
					mu.Unlock()
					var seqs []uint64
					for _, r := range batch {
						seqs = append(seqs, r.Seq)
					}
					if s.Ack(seqs...) != nil {
						return
					}
					batch = nil
				}
			}()
			wg.Wait()
			<-done
			abandon(s)
			fsys.Crash()
			fsys.Hook = nil
			s2 := open(t, o)
			recs := drain(t, s2)
			seen := map[string]bool{}
			for i, r := range recs {
				p := string(r.Payload)
				if seen[p] {
					t.Errorf("record %s handed out twice", p)
				}
				seen[p] = true
				if !attempted[p] {
					t.Errorf("record %q was never appended", p)
				}
				if i > 0 && r.Seq <= recs[i-1].Seq {
					t.Errorf("seq %d after %d: out of order", r.Seq, recs[i-1].Seq)
				}
			}
			again := 0
			for p := range seen {
				if acked[p] {
					again++
				}
			}
			if limit := cursorEvery - 1 + deliverEvery; again > limit {
				t.Errorf("%d acknowledged records came back, want at most %d (CursorEvery %d − 1, plus the %d of the Ack the crash cut)",
					again, limit, cursorEvery, deliverEvery)
			}
			lost := 0
			for p := range appended {
				if !acked[p] && !seen[p] {
					lost++
					t.Errorf("record %s: its Append returned, it was never delivered, and it is gone (crash at op %d)", p, crashAt)
				}
			}
			if lost > 0 {
				t.Logf("report: %+v", s2.Report())
			}
		})
	}
}

// TestDeleteOrderingCrashes stops the machine at each step of an acknowledgement
// (cursor tmp written, renamed, directory synced, segments unlinked) and opens what
// survived: Open succeeds, no record above the durable cursor is missing, and the
// spool goes on.
func TestDeleteOrderingCrashes(t *testing.T) {
	for _, c := range []struct {
		name string
		at   func(op crashfs.Op, name string) bool
	}{
		{"before the cursor's tmp file is synced", func(op crashfs.Op, name string) bool {
			return op == crashfs.OpSync && strings.HasSuffix(name, "cursor.tmp")
		}},
		{"between the cursor's rename and the directory's sync", func(op crashfs.Op, name string) bool {
			return op == crashfs.OpSyncDir && !strings.Contains(name, "quarantine")
		}},
		{"between the cursor's rename and the segments' unlink", func(op crashfs.Op, name string) bool {
			return op == crashfs.OpRemove && strings.Contains(name, "seg-")
		}},
		{"after one unlink, before the next (the unlinks never synced)", func() func(op crashfs.Op, name string) bool {
			removes := 0
			return func(op crashfs.Op, name string) bool {
				if op == crashfs.OpRemove && strings.Contains(name, "seg-") {
					removes++
				}
				return removes == 2
			}
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			fsys := crashfs.New()
			// CursorEvery 1: every Ack writes the cursor, the steps under test.
			o := spool.Options{Dir: dir, FS: fsys, SegmentBytes: 512, MaxBytes: 1 << 20, MaxRecordBytes: 256, CursorEvery: 1}
			s := open(t, o)
			appendN(t, s, 0, 40)
			recs := drain(t, s)
			ackAll(t, s, recs[:5]) // a durable cursor at #4 before the crash
			k := &killer{at: func(_ int, op crashfs.Op, name string) bool { return c.at(op, name) }}
			fsys.Hook = k.hook
			seqs := make([]uint64, 0, 25)
			for _, r := range recs[5:30] {
				seqs = append(seqs, r.Seq)
			}
			err := s.Ack(seqs...)
			if !k.isDead() || err == nil {
				t.Fatalf("the crash point was not reached (ack: %v)", err)
			}
			abandon(s)
			fsys.Crash()
			fsys.Hook = nil
			s2 := open(t, o)
			got := payloads(drain(t, s2))
			// Records 30..39 were never delivered: all there. Records 5..29 may come
			// back (the cursor did not survive) but then all of them, in order: no gap.
			if len(got) != 10 && len(got) != 35 {
				t.Fatalf("after the crash: %d records %q, want the 10 undelivered ones, or those and the 25 whose cursor was lost", len(got), got)
			}
			want := wantPayloads(40-len(got), 40)
			if !slices.Equal(got, want) {
				t.Fatalf("after the crash: %q, want %q", got, want)
			}
			appendN(t, s2, 100, 1)
			if got := payloads(drain(t, s2)); !slices.Equal(got, []string{string(payload(100))}) {
				t.Fatalf("the spool does not go on: %q", got)
			}
			if n := len(segments(t, fsys)); len(got) == 10 && n > 3 {
				t.Errorf("%d segments left, want the stale ones removed at open", n)
			}
		})
	}
}

// TestSegmentsMissingBelowOrAboveTheCursorAreTolerated is the other order's failure
// (unlink, then cursor: a crash between leaves a cursor behind segments that are
// gone): Open must not wait for them.
func TestSegmentsMissingBelowOrAboveTheCursorAreTolerated(t *testing.T) {
	fsys := crashfs.New()
	o := spool.Options{Dir: dir, FS: fsys, SegmentBytes: 512, MaxBytes: 1 << 20, MaxRecordBytes: 256}
	s := open(t, o)
	appendN(t, s, 0, 40)
	closeSpool(t, s)
	segs := segments(t, fsys)
	if len(segs) < 4 {
		t.Fatalf("segments = %v, want at least 4", segs)
	}
	if err := fsys.Remove(dir + "/" + segs[0]); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(dir + "/" + segs[2]); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, o)
	recs := drain(t, s2)
	if len(recs) == 0 || len(recs) >= 40 {
		t.Fatalf("after removing 2 segments: %d records, want the ones in the others", len(recs))
	}
	ackAll(t, s2, recs)
	appendN(t, s2, 100, 1)
	if got := payloads(drain(t, s2)); !slices.Equal(got, []string{string(payload(100))}) {
		t.Fatalf("the spool does not go on: %q", got)
	}
}

// TestTheCursorIsWrittenLazily crashes the machine after acknowledgements that left
// the cursor behind, and after ones that wrote it: below CursorEvery records the
// acknowledged ones come back, the CursorEvery-th writes it, Close writes it, and so
// does the timer CursorInterval after an Ack.
func TestTheCursorIsWrittenLazily(t *testing.T) {
	fsys := crashfs.New()
	o := spool.Options{Dir: dir, FS: fsys, CursorEvery: 5, CursorInterval: time.Hour}
	reopen := func() *spool.Spool {
		s, err := spool.Open(o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// crash stops s as a dead machine would (nothing it writes now survives), then
	// opens what was synced.
	crash := func(s *spool.Spool) *spool.Spool {
		fsys.Hook = func(crashfs.Op, string) error { return syscall.EIO }
		_ = s.Close(context.Background())
		fsys.Hook = nil
		fsys.Crash()
		return reopen()
	}
	s := reopen()
	appendN(t, s, 0, 20)
	ackAll(t, s, drain(t, s)[:4])
	s = crash(s)
	got := drain(t, s)
	if !slices.Equal(payloads(got), wantPayloads(0, 20)) {
		t.Fatalf("after 4 acknowledgements (CursorEvery 5) and a crash: %q, want all 20 again", payloads(got))
	}
	ackAll(t, s, got[:5])
	s = crash(s)
	got = drain(t, s)
	if !slices.Equal(payloads(got), wantPayloads(5, 20)) {
		t.Fatalf("after 5 acknowledgements and a crash: %q, want #5..#19", payloads(got))
	}
	ackAll(t, s, got[:3])
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
	s = crash(reopen())
	got = drain(t, s)
	if !slices.Equal(payloads(got), wantPayloads(8, 20)) {
		t.Fatalf("after 3 acknowledgements, Close and a crash: %q, want #8..#19", payloads(got))
	}
	closeSpool(t, s)

	o.CursorInterval = 20 * time.Millisecond
	s = reopen()
	got = drain(t, s)
	ackAll(t, s, got[:1])
	want := fmt.Sprintf(" %d ", got[0].Seq)
	var b []byte
	var err error
	double.Eventually(t, fmt.Sprintf("the timer writes the cursor at %d", got[0].Seq), func() bool {
		b, err = fsys.ReadFile(dir + "/cursor")
		return err == nil && strings.Contains(string(b), want)
	}, func() string { return fmt.Sprintf("%q, %v", b, err) })
	s = crash(s)
	got = drain(t, s)
	if !slices.Equal(payloads(got), wantPayloads(9, 20)) {
		t.Fatalf("after 1 acknowledgement, the timer's write and a crash: %q, want #9..#19", payloads(got))
	}
	closeSpool(t, s)
}
