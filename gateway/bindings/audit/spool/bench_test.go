package spool_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
)

// benchDir is a directory on the disk the spool would use (not a tmpfs), so that
// fdatasync costs what it costs.
func benchDir(b *testing.B) string {
	b.Helper()
	d, err := os.MkdirTemp(".", ".bench-spool-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// appendConcurrently appends n records from `writers` goroutines and returns the
// time it took and the syncs it cost.
func appendConcurrently(b *testing.B, o spool.Options, writers, n int) (time.Duration, uint64) {
	b.Helper()
	s, err := spool.Open(o)
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1200) // about one BALP Query AuditEvent
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := w; i < n; i += writers {
				if _, err := s.Append(context.Background(), body); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	syncs := s.Syncs()
	if err := s.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	return took, syncs
}

// BenchmarkAppendGroupCommit measures, in one run, 32 concurrent appenders with group
// commit and the same with one sync per record, on the real disk: records/s of each,
// their ratio, and the syncs per second each took.
func BenchmarkAppendGroupCommit(b *testing.B) {
	const writers, n = 32, 2000
	var gTook, eTook time.Duration
	var gSyncs, eSyncs uint64
	for i := 0; i < b.N; i++ {
		d := benchDir(b)
		t, s := appendConcurrently(b, spool.Options{Dir: filepath.Join(d, "g")}, writers, n)
		gTook, gSyncs = gTook+t, gSyncs+s
		t, s = appendConcurrently(b, spool.Options{Dir: filepath.Join(d, "e"), SyncEach: true}, writers, n)
		eTook, eSyncs = eTook+t, eSyncs+s
	}
	total := float64(b.N * n)
	b.ReportMetric(total/gTook.Seconds(), "records/s-group")
	b.ReportMetric(total/eTook.Seconds(), "records/s-each")
	b.ReportMetric(eTook.Seconds()/gTook.Seconds(), "x-group/each")
	b.ReportMetric(float64(gSyncs)/gTook.Seconds(), "fsyncs/s-group")
	b.ReportMetric(float64(eSyncs)/eTook.Seconds(), "fsyncs/s-each")
	b.ReportMetric(total/float64(gSyncs), "records/fsync-group")
}

// BenchmarkRecoverOpen100k is the time Open takes on a spool of 100,000 undelivered
// records (about 120 MB in 8 MiB segments), against reading the same files whole in
// the same run.
func BenchmarkRecoverOpen100k(b *testing.B) {
	const n = 100_000
	d := benchDir(b)
	o := spool.Options{Dir: filepath.Join(d, "r")}
	s, err := spool.Open(o)
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1200)
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := w; i < n; i += 64 {
				if _, err := s.Append(context.Background(), body); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := s.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var openTook, readTook time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		s, err := spool.Open(o)
		if err != nil {
			b.Fatal(err)
		}
		openTook += time.Since(start)
		if got := s.Report().Pending; got != n {
			b.Fatalf("pending = %d, want %d", got, n)
		}
		if err := s.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		es, _ := os.ReadDir(o.Dir)
		for _, e := range es {
			if !e.IsDir() {
				if _, err := os.ReadFile(filepath.Join(o.Dir, e.Name())); err != nil {
					b.Fatal(err)
				}
			}
		}
		readTook += time.Since(start)
	}
	b.ReportMetric(float64(openTook.Milliseconds())/float64(b.N), "ms/open")
	b.ReportMetric(openTook.Seconds()/readTook.Seconds(), "x-open/read")
	b.ReportMetric(float64(n), "records")
}
