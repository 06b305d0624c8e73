package spool_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
	"github.com/ferrofed/ferrofed/test/crashfs"
)

// FuzzOpenSegment puts arbitrary bytes in two segment files (and in the cursor) and
// opens the spool: Open never fails, never panics and returns (the fuzzer's own
// deadline catches a loop); what it hands out is in seq order; and the spool still
// takes and hands out a new record.
func FuzzOpenSegment(f *testing.F) {
	seed := crashfs.New()
	// Small segments: a segment file is preallocated, zeros after its records.
	s, err := spool.Open(spool.Options{Dir: dir, FS: seed, SegmentBytes: 1 << 10, MaxRecordBytes: 1 << 9, MaxBytes: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Append(context.Background(), payload(i)); err != nil {
			f.Fatal(err)
		}
	}
	_ = s.Close(context.Background())
	es, _ := seed.ReadDir(dir)
	var good []byte
	for _, e := range es {
		if e.Name() != "quarantine" {
			good, _ = seed.ReadFile(dir + "/" + e.Name())
		}
	}
	written := bytes.TrimRight(good, "\x00") // the records without the preallocated rest
	f.Add(good, []byte{}, []byte("ferrofed-spool-cursor 1 1 00000000\n"))
	f.Add(written[:len(written)-3], good, []byte{})
	f.Add(written, append(slices.Clone(written[:30]), make([]byte, 64)...), []byte{})
	f.Add([]byte{0xF3, 0xA5, 1, 0, 0xff, 0xff, 0xff, 0xff}, good[20:], []byte("x"))
	f.Fuzz(func(t *testing.T, seg1, seg2, cursor []byte) {
		fsys := crashfs.New()
		_ = fsys.WriteFile(dir+"/seg-0000000000000001.log", seg1)
		_ = fsys.WriteFile(dir+"/seg-0000000000000002.log", seg2)
		_ = fsys.WriteFile(dir+"/cursor", cursor)
		s, err := spool.Open(spool.Options{Dir: dir, FS: fsys, SegmentBytes: 1 << 16, MaxBytes: 1 << 20, MaxRecordBytes: 1 << 12})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if err := s.Close(ctx); err != nil {
				t.Error(err)
			}
		}()
		var last uint64
		for range len(seg1) + len(seg2) + 1 {
			rec, ok, _, err := s.TryNext()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if rec.Seq <= last {
				t.Fatalf("seq %d after %d", rec.Seq, last)
			}
			last = rec.Seq
		}
		seq, err := s.Append(context.Background(), []byte("new"))
		if err != nil {
			t.Fatalf("append after open: %v", err)
		}
		rec, ok, _, err := s.TryNext()
		if err != nil || !ok || rec.Seq != seq || string(rec.Payload) != "new" {
			t.Fatalf("the new record: %+v %v %v, want seq %d", rec, ok, err, seq)
		}
	})
}
