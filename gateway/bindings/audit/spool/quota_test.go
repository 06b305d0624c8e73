package spool_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
)

// quotaFS is a volume of quota bytes on the real file system: every write that would take what the files and
// directories under root hold on disk (each in whole 4 KiB blocks, a directory one
// block) past quota fails with ENOSPC, as a size-limited file system does.
type quotaFS struct {
	spool.FS
	root  string
	quota int64

	mu      sync.Mutex
	refused int
	peak    int64
}

func newQuotaFS(root string, quota int64) *quotaFS {
	return &quotaFS{FS: spool.OS, root: root, quota: quota}
}

func blocks(n int64) int64 { return (n + 4095) / 4096 * 4096 }

// usage is what the volume holds, leaving out the file except (its new size is the
// caller's).
func (q *quotaFS) usage(dir, except string) int64 {
	entries, err := q.ReadDir(dir)
	if err != nil {
		return 0
	}
	total := int64(4096)
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		switch {
		case e.IsDir():
			total += q.usage(p, except)
		case p != except:
			if info, err := e.Info(); err == nil {
				total += blocks(info.Size())
			}
		}
	}
	return total
}

func (q *quotaFS) OpenFile(name string, flag int, perm fs.FileMode) (spool.File, error) {
	f, err := q.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &quotaFile{File: f, q: q, name: name}, nil
}

type quotaFile struct {
	spool.File
	q    *quotaFS
	name string
	off  int64
}

func (f *quotaFile) Write(b []byte) (int, error) {
	f.q.mu.Lock()
	defer f.q.mu.Unlock()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := max(st.Size(), f.off+int64(len(b)))
	used := f.q.usage(f.q.root, f.name) + blocks(size)
	if used > f.q.quota {
		f.q.refused++
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	f.q.peak = max(f.q.peak, used)
	n, err := f.File.Write(b)
	f.off += int64(n)
	return n, err
}

// A spool on a volume exactly its cap (max_spool_bytes, as the operator sizes it)
// never runs out of space (docs/audit-spool.md, "Sizing"): its segments (the next one
// preallocated at each rotation), cursor and quarantine all fit, through many
// rotations while delivery keeps up, and once delivery stops it is the spool's own cap
// that refuses, with ErrFull, never the volume.
func TestASpoolOnAVolumeOfItsCapNeverRunsOutOfSpace(t *testing.T) {
	for _, maxBytes := range []int64{4 << 20, 1<<20 + 12345} {
		t.Run(fmt.Sprint(maxBytes), func(t *testing.T) {
			vol := filepath.Join(t.TempDir(), "vol")
			if err := os.Mkdir(vol, 0o700); err != nil {
				t.Fatal(err)
			}
			q := newQuotaFS(vol, maxBytes)
			o := spool.Options{Dir: filepath.Join(vol, "repository"), FS: q, MaxBytes: maxBytes, SegmentBytes: spool.SegmentBytesFor(maxBytes),
				MaxRecordBytes: 64 << 10}
			s := open(t, o)
			body := func(i int) []byte {
				return fmt.Appendf(nil, `{"resourceType":"AuditEvent","n":%d,"pad":"%s"}`, i, bytes.Repeat([]byte("x"), 8000+i%8000))
			}
			// Delivery keeps up: five caps' worth of records pass, one is quarantined.
			written, i := int64(0), 0
			for ; written < 5*maxBytes; i++ {
				b := body(i)
				if _, err := s.Append(context.Background(), b); err != nil {
					t.Fatalf("append %d (%d bytes written) while delivery keeps up: %v", i, written, err)
				}
				written += int64(len(b))
				if i%20 == 19 {
					recs := drain(t, s)
					if i == 19 {
						if err := s.Quarantine(recs[0], spool.Reason{Status: 422}); err != nil {
							t.Fatal(err)
						}
						recs = recs[1:]
					}
					ackAll(t, s, recs)
				}
			}
			// Delivery stops: the cap says full, the volume never did.
			var err error
			for n := 0; n < 100000 && err == nil; n++ {
				_, err = s.Append(context.Background(), body(i+n))
			}
			snap := s.Snapshot()
			if !errors.Is(err, spool.ErrFull) {
				t.Fatalf("the last append failed with %v, want ErrFull", err)
			}
			if q.refused != 0 || snap.Fault != spool.FaultFull {
				t.Fatalf("the volume refused %d writes (fault %q): the spool's cap does not count what it puts on disk", q.refused, snap.Fault)
			}
			if snap.Footprint > maxBytes || q.peak > maxBytes || snap.Quarantined != 1 {
				t.Fatalf("footprint %d, volume's peak %d, quarantined %d; want both within %d and one entry", snap.Footprint, q.peak, snap.Quarantined, maxBytes)
			}
			if used := q.usage(vol, ""); used > snap.Footprint {
				t.Fatalf("the volume holds %d bytes, more than the spool counts (%d)", used, snap.Footprint)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := s.Close(ctx); err != nil || q.refused != 0 {
				t.Fatalf("close: %v, %d writes refused", err, q.refused)
			}
		})
	}
}

// SegmentBytesFor gives every cap the configuration allows (4 MiB to 64 GiB) segments
// that hold the largest record, three of them and MetaBytes within the cap.
func TestSegmentBytesFor(t *testing.T) {
	for _, c := range []struct {
		maxBytes, want int64
	}{
		{4 << 20, 1384448}, // (4 MiB − 40 KiB) / 3, in whole blocks
		{1<<20 + 12345, 339968},
		{24<<20 + spool.MetaBytes, 8 << 20},
		{256 << 20, spool.DefaultSegmentBytes},
		{64 << 30, spool.DefaultSegmentBytes},
	} {
		got := spool.SegmentBytesFor(c.maxBytes)
		if got != c.want || got%4096 != 0 || 3*got+spool.MetaBytes > c.maxBytes {
			t.Errorf("SegmentBytesFor(%d) = %d, want %d: whole blocks, three and MetaBytes within the cap", c.maxBytes, got, c.want)
		}
		if c.maxBytes >= 4<<20 {
			o := spool.Options{Dir: filepath.Join(t.TempDir(), "s"), MaxBytes: c.maxBytes, SegmentBytes: got}
			s, err := spool.Open(o)
			if err != nil {
				t.Fatalf("a spool capped at %d: %v", c.maxBytes, err)
			}
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}
