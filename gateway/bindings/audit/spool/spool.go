package spool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults and limits of Options.
const (
	DefaultSegmentBytes   = 8 << 20
	DefaultMaxBytes       = 256 << 20
	DefaultMaxRecordBytes = 1 << 20
	DefaultWaitAfter      = 5 * time.Second
	DefaultCursorEvery    = 256
	DefaultCursorInterval = time.Second
	// MaxCursorEvery bounds CursorEvery, and with it the duplicates a crash can cause.
	MaxCursorEvery = 4096
	// MinSegmentBytes keeps a segment larger than one header and a small record.
	MinSegmentBytes = 256
	// MetaBytes is what the cap keeps for the spool's files other than its segments
	// and quarantine, in whole 4 KiB blocks: the cursor and its tmp file while it is
	// replaced, the spool's and the quarantine's directories, the volume's root
	// directory, and as many blocks again to spare (the lock file is empty).
	MetaBytes = 10 * blockBytes
)

// SegmentBytesFor is the segment size a spool capped at maxBytes uses: the default
// (8 MiB), or less, so that three segments and MetaBytes fit the cap, in whole blocks.
// Three: at a rotation the segment just filled is still there until it is delivered,
// and the third is the room the quarantine takes from, so that a few quarantined
// records do not make every rotation wait for the delivery of the segment before.
func SegmentBytesFor(maxBytes int64) int64 {
	third := (maxBytes - MetaBytes) / 3 / blockBytes * blockBytes
	return max(min(DefaultSegmentBytes, third), 0)
}

// The errors of Append, tested with errors.Is.
var (
	// ErrFull: the spool holds max_spool_bytes; the record was refused and nothing
	// already spooled was dropped to make room.
	ErrFull = errors.New("audit spool full")
	// ErrStorage: writing or syncing the segment failed (ENOSPC, EIO, ...); the
	// record was not stored. The segment is closed and the next record opens a new one.
	ErrStorage = errors.New("audit spool storage failed")
	// ErrTooLarge: the payload is larger than the record limit.
	ErrTooLarge = errors.New("audit record larger than the record limit")
	// ErrClosed: the spool was closed.
	ErrClosed = errors.New("audit spool closed")
	// ErrHeld refuses to open a spool whose directory another process holds: two
	// owners of one cursor would each deliver, and unlink, what the other appends.
	ErrHeld = errors.New("audit spool held")
)

// Options shape one spool. Dir is required; every other field has a default.
type Options struct {
	// Dir is the spool's own directory (<spool_dir>/<destination>).
	Dir string
	// FS is the file system; default OS.
	FS FS
	// SegmentBytes is the size at which a segment is closed and the next begun;
	// default 8 MiB, at least MinSegmentBytes, and at least one header plus
	// MaxRecordBytes.
	SegmentBytes int64
	// MaxBytes caps what the spool puts on disk (Footprint: its segment files, its
	// quarantine, MetaBytes for the rest), so that a volume of MaxBytes never runs out
	// of space under it; an Append that needs a new segment past it fails with ErrFull.
	// Default 256 MiB; at least 2×SegmentBytes (in whole blocks) plus MetaBytes, so
	// that the one segment being written can never alone fill the cap.
	MaxBytes int64
	// MaxRecordBytes bounds one payload; default 1 MiB.
	MaxRecordBytes int
	// WaitAfter is "one delivery interval": a record undelivered for longer waits,
	// and the state is degraded. Default 5 s.
	WaitAfter time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// CursorEvery and CursorInterval make the cursor lazy: an Ack writes it only
	// once CursorEvery records were acknowledged since the last cursor write, or when a
	// segment became wholly delivered (so that it is unlinked); otherwise the cursor
	// is written CursorInterval after that Ack, and at Close. A crash delivers again
	// the records acknowledged since the last cursor write: fewer than CursorEvery,
	// and, once the timer had its turn, none acknowledged CursorInterval before it.
	// Default 256 (at most MaxCursorEvery; 1 writes it at every Ack) and 1 s.
	CursorEvery    int
	CursorInterval time.Duration
	// SyncEach gives every record its own sync: no group commit. It exists as the
	// baseline of the benchmark, never for production.
	SyncEach bool
}

func (o *Options) defaults() error {
	if o.Dir == "" {
		return errors.New("spool: Dir is empty")
	}
	if o.FS == nil {
		o.FS = OS
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.MaxRecordBytes == 0 {
		o.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.WaitAfter == 0 {
		o.WaitAfter = DefaultWaitAfter
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CursorEvery == 0 {
		o.CursorEvery = DefaultCursorEvery
	}
	if o.CursorInterval == 0 {
		o.CursorInterval = DefaultCursorInterval
	}
	switch {
	case o.MaxRecordBytes < 1 || o.MaxRecordBytes > math.MaxInt32:
		return fmt.Errorf("spool: MaxRecordBytes %d is not in 1..%d", o.MaxRecordBytes, math.MaxInt32)
	case o.SegmentBytes < MinSegmentBytes || o.SegmentBytes < int64(headerSize+o.MaxRecordBytes):
		return fmt.Errorf("spool: SegmentBytes %d is below %d (MinSegmentBytes) or below one header plus MaxRecordBytes (%d)",
			o.SegmentBytes, MinSegmentBytes, headerSize+o.MaxRecordBytes)
	case o.MaxBytes < 2*onDisk(o.SegmentBytes)+MetaBytes:
		return fmt.Errorf("spool: MaxBytes %d is below 2×SegmentBytes on disk plus MetaBytes (%d)", o.MaxBytes, 2*onDisk(o.SegmentBytes)+MetaBytes)
	case o.WaitAfter < 0:
		return fmt.Errorf("spool: WaitAfter %v is negative", o.WaitAfter)
	case o.CursorEvery < 1 || o.CursorEvery > MaxCursorEvery:
		return fmt.Errorf("spool: CursorEvery %d is not in 1..%d", o.CursorEvery, MaxCursorEvery)
	case o.CursorInterval < 0:
		return fmt.Errorf("spool: CursorInterval %v is negative", o.CursorInterval)
	}
	return nil
}

// Record is one spooled payload.
type Record struct {
	Seq     uint64
	Payload []byte
	// Kept is true when Payload is the one an Enqueue or Append of this process
	// handed in, kept in memory since: not read back from a segment file, not
	// retried from quarantine. Whatever the appender vouches for holds for it.
	Kept bool
}

// handed is a record Next handed out: its seq and its bytes on disk.
type handed struct {
	seq uint64
	n   int64
}

// span is a byte range [from, to) of a segment the reader skips: bytes found corrupt
// at open (and copied to quarantine).
type span struct{ from, to int64 }

// segment is what the spool knows of one segment file.
type segment struct {
	first   uint64
	name    string
	end     int64 // the reader reads below end: the scanned valid end, or the synced end
	size    int64 // bytes on disk, for the cap: SegmentBytes from its creation (preallocated)
	blank   bool  // found at open with nothing but zeros at its start
	last    uint64
	skips   []span
	sealed  bool // no more appends
	keep    bool // corrupt bytes of it could not be quarantined: never unlinked
	removed bool
}

// appendReq is one Append: its payload, and its result once its group's done is
// closed.
type appendReq struct {
	payload []byte
	seq     uint64
	err     error
	retried bool // appended by Retry, from quarantine: never Kept
}

// group is the appends one sync covers: they queue while the writer writes and
// syncs the group before, and are answered at once by closing done.
type group struct {
	reqs  []appendReq
	bytes int // of the records, headers included
	done  chan struct{}
}

// cached is a record the writer wrote and synced, kept for the reader so that it
// needs no read of the file: seg and off say where it is, n its length on disk.
type cached struct {
	seg *segment
	off int64
	n   int64
	rec Record
}

type stamp struct {
	seq uint64
	at  time.Time
}

// OpenReport says what Open found and did about the folder's content. None of it
// stops the spool.
type OpenReport struct {
	// Pending is how many records above the cursor were found.
	Pending int
	// Truncated names each segment whose torn tail was cut, with the offset.
	Truncated []string
	// Quarantined names each file Open put in quarantine/.
	Quarantined []string
	// Problems says, one line each, what else was wrong and left alone.
	Problems []string
}

// Spool is a crash-safe FIFO of records in segment files; see the package comment.
type Spool struct {
	opts Options
	fs   FS
	dir  string
	qdir string
	// unlock releases the directory's lock (Locker), nil when none was taken.
	unlock func() error

	// qmu guards the queue: the groups waiting for the writer, the last one still
	// taking appends. kick tells the writer that the queue is no longer empty.
	qmu        sync.Mutex
	queue      []*group
	qclosed    bool
	kick       chan struct{}
	closing    chan struct{}
	closeOnce  sync.Once
	writerDone chan struct{}

	// writer only
	activeFile File

	cursorMu sync.Mutex // one cursor write at a time

	mu           sync.Mutex
	segs         []*segment
	active       *segment
	nextSeq      uint64
	diskBytes    int64
	watermark    uint64      // every record ≤ it is delivered or quarantined
	durableWM    uint64      // the watermark the cursor file holds
	ackedCount   uint64      // records the watermark moved over since Open
	durableAt    uint64      // ackedCount when the watermark durableWM holds was taken
	cursorTimer  *time.Timer // the cursor's lazy write, armed by an Ack that left it behind
	rseg         *segment
	rpos         int64
	rfile        File
	outstanding  []handed // records handed out by Next, in order, not yet below the watermark
	pendingBytes int64    // bytes on disk (headers included) of the records above the watermark
	cache        []cached // records synced since the reader last caught up, in order
	cacheBytes   int64
	acked        map[uint64]bool
	notify       chan struct{}
	closed       bool

	everSpooled    bool
	lastDeliveryOK bool
	retrying       bool
	times          []stamp // this run's records above the watermark, oldest first
	leftover       int     // records left by a previous run, still above the watermark
	leftoverMax    uint64
	quarantined    int
	quarantineSize int64  // the quarantine's files, each rounded up to whole blocks (onDisk)
	fault          string // FaultFull or FaultStorage since the last append failed so, until one is stored
	report         OpenReport

	syncs atomic.Uint64
}

// Open opens (or creates) the spool in opts.Dir. It fails only when the options are
// invalid or the directory cannot be made or read; whatever the folder holds, it
// opens, and says in Report what it found.
func Open(opts Options) (*Spool, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	s := &Spool{
		opts:       opts,
		fs:         opts.FS,
		dir:        opts.Dir,
		qdir:       path.Join(opts.Dir, "quarantine"),
		kick:       make(chan struct{}, 1),
		closing:    make(chan struct{}),
		writerDone: make(chan struct{}),
		acked:      map[uint64]bool{},
		notify:     make(chan struct{}),
	}
	// One owner per spool: the directory's lock is taken before anything in it is
	// read (an FS without locks, a test's, takes none).
	if l, ok := opts.FS.(Locker); ok {
		if err := opts.FS.MkdirAll(opts.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("spool: create %s: %w", opts.Dir, err)
		}
		release, err := l.Lock(opts.Dir)
		if err != nil {
			return nil, err
		}
		s.unlock = release
	}
	if err := s.recover(); err != nil {
		if s.unlock != nil {
			_ = s.unlock()
		}
		return nil, err
	}
	go s.writer()
	return s, nil
}

// Locker is an FS that can take a directory's exclusive lock (OS does, with flock).
type Locker interface {
	Lock(dir string) (release func() error, err error)
}

// lockName is the lock file in a spool's directory.
const lockName = "lock"

// Report is what Open found.
func (s *Spool) Report() OpenReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.report
	r.Truncated = slices.Clone(r.Truncated)
	r.Quarantined = slices.Clone(r.Quarantined)
	r.Problems = slices.Clone(r.Problems)
	return r
}

func (s *Spool) problemf(format string, args ...any) {
	s.report.Problems = append(s.report.Problems, fmt.Sprintf(format, args...))
}

// Append stores one payload and returns its seq once the sync that covers it has
// returned: Enqueue, then Wait. An Append whose ctx ends after the record was queued
// returns ctx's error, and the record may still be stored.
func (s *Spool) Append(ctx context.Context, payload []byte) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	t, err := s.Enqueue(payload)
	if err != nil {
		return 0, err
	}
	return t.Wait(ctx)
}

// Ticket is one queued append: Wait returns its result.
type Ticket struct {
	g *group
	i int
}

// Enqueue queues one payload for the writer and returns at once; the record is
// stored once Wait returned without error. A queued record is written whatever
// happens to the caller, so that a caller may do other work until the sync returned.
func (s *Spool) Enqueue(payload []byte) (Ticket, error) {
	return s.enqueue(payload, false)
}

func (s *Spool) enqueue(payload []byte, retried bool) (Ticket, error) {
	if len(payload) > s.opts.MaxRecordBytes {
		return Ticket{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(payload), s.opts.MaxRecordBytes)
	}
	s.qmu.Lock()
	if s.qclosed {
		s.qmu.Unlock()
		return Ticket{}, ErrClosed
	}
	var g *group
	if n := len(s.queue); n > 0 && len(s.queue[n-1].reqs) < s.maxGroup() {
		g = s.queue[n-1]
	} else {
		g = &group{done: make(chan struct{})}
		s.queue = append(s.queue, g)
	}
	i := len(g.reqs)
	g.reqs = append(g.reqs, appendReq{payload: payload, retried: retried})
	g.bytes += headerSize + len(payload)
	s.qmu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default: // the writer was told already
	}
	return Ticket{g: g, i: i}, nil
}

// Wait returns the record's seq once the sync that covers it has returned, or why
// it was not stored; ctx's error when ctx ends first (the record may still be
// stored).
func (t Ticket) Wait(ctx context.Context) (uint64, error) {
	select {
	case <-t.g.done:
		return t.g.reqs[t.i].seq, t.g.reqs[t.i].err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// maxGroup bounds how many queued appends one sync covers.
const maxGroup = 4096

func (s *Spool) maxGroup() int {
	if s.opts.SyncEach {
		return 1
	}
	return maxGroup
}

// writer is the one goroutine that writes segments: it takes the group that queued
// while the previous sync ran and covers it with one sync (group commit: the next
// group forms while this one is synced). Groups queued before Close are written.
func (s *Spool) writer() {
	defer close(s.writerDone)
	for {
		s.qmu.Lock()
		if len(s.queue) > 0 {
			g := s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			s.qmu.Unlock()
			s.commit(g)
			close(g.done)
			continue
		}
		closed := s.qclosed
		s.qmu.Unlock()
		if closed {
			s.closeActive()
			return
		}
		select {
		case <-s.kick:
		case <-s.closing:
		}
	}
}

func (s *Spool) closeActive() {
	if s.activeFile == nil {
		return
	}
	f := s.activeFile
	s.activeFile = nil
	_ = f.Sync() // every acknowledged record was synced already
	_ = f.Close()
	s.mu.Lock()
	if s.active != nil {
		s.active.sealed = true
		s.active = nil
	}
	s.mu.Unlock()
}

// commit writes one group: accepted records go to the active segment (a new one when
// it would grow past SegmentBytes), then one sync; each append's result is set.
func (s *Spool) commit(g *group) {
	var (
		buf   []byte
		spent int // bytes of the group's records encoded so far
		taken []int
	)
	flush := func() {
		if len(taken) > 0 {
			s.flush(buf, g, taken)
		}
		buf, taken = nil, nil
	}
	for k := range g.reqs {
		r := &g.reqs[k]
		size := int64(headerSize + len(r.payload))
		s.mu.Lock()
		// A record goes into the preallocated space of the active segment, or needs
		// a new segment: only that takes disk space, SegmentBytes of it.
		used := int64(len(buf))
		if s.active != nil {
			used += s.active.end
		}
		rotate := s.active == nil || (used+size > s.opts.SegmentBytes && used > 0)
		s.mu.Unlock()
		if rotate && !s.room() {
			// The segment being written is sealed, so that once delivered it is
			// removed (an active one never is); what delivery finished is removed.
			flush()
			s.closeActive()
			_ = s.removeDelivered()
		}
		s.mu.Lock()
		disk := s.footprintLocked()
		full := rotate && disk+onDisk(s.opts.SegmentBytes) > s.opts.MaxBytes
		var seq uint64
		if !full {
			seq = s.nextSeq
			s.nextSeq++
		}
		s.mu.Unlock()
		if full {
			s.setFault(FaultFull)
			r.err = fmt.Errorf("%w: %d bytes on disk, a new segment needs %d, cap %d", ErrFull, disk, onDisk(s.opts.SegmentBytes), s.opts.MaxBytes)
			continue
		}
		if rotate {
			flush()
			if err := s.rotate(seq); err != nil {
				s.setFault(FaultStorage)
				r.err = err
				continue
			}
		}
		if buf == nil {
			// One buffer for the rest of the group: it is kept by the reader's cache,
			// never reused.
			buf = make([]byte, 0, g.bytes-spent)
		}
		buf = encode(buf, seq, r.payload)
		r.seq = seq
		taken = append(taken, k)
		spent += int(size)
	}
	flush()
}

// room says whether the cap has room for a new segment.
func (s *Spool) room() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.footprintLocked()+onDisk(s.opts.SegmentBytes) <= s.opts.MaxBytes
}

// footprintLocked is what the spool takes on disk now: its segment files and its
// quarantine's, each in whole blocks, and MetaBytes for the rest.
func (s *Spool) footprintLocked() int64 {
	return s.diskBytes + s.quarantineSize + MetaBytes
}

// The fault classes of a spool that cannot store (Snapshot.Fault), as the dependency
// report names them beside the failing key (docs/audit-spool.md, "When the spool
// cannot store").
const (
	// FaultFull: the last append was refused with ErrFull.
	FaultFull = "spool-full"
	// FaultStorage: the last append failed with ErrStorage (a segment that could not
	// be created, written or synced: a read-only or failing disk, ENOSPC).
	FaultStorage = "spool-storage-failed"
)

func (s *Spool) setFault(f string) {
	s.mu.Lock()
	s.fault = f
	s.mu.Unlock()
}

// zeros is what a new segment is filled with, one write at a time.
var zeros = make([]byte, 64<<10)

// rotate seals the active segment and creates the next, named for first: SegmentBytes
// of zeros written and synced, its directory entry synced, before any record in it is
// acknowledged. Records are then written over the zeros from the start, so that the
// sync of a group changes no metadata (no size, no block allocation) and on ext4 and
// XFS an fdatasync needs no journal commit; Open takes zeros for the segment's end.
func (s *Spool) rotate(first uint64) error {
	s.closeActive()
	name := segmentName(first)
	p := path.Join(s.dir, name)
	fail := func(what string, err error) error {
		_ = s.fs.Remove(p)
		return fmt.Errorf("%w: %s segment %s: %w", ErrStorage, what, name, err)
	}
	f, err := s.fs.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("%w: create segment %s: %w", ErrStorage, name, err)
	}
	for left := s.opts.SegmentBytes; left > 0 && err == nil; left -= int64(len(zeros)) {
		_, err = f.Write(zeros[:min(left, int64(len(zeros)))])
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail("preallocate", err)
	}
	// A second handle writes from offset 0, over the zeros.
	w, err := s.fs.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return fail("open", err)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		_ = w.Close()
		_ = s.fs.Remove(p)
		return fmt.Errorf("%w: sync the spool directory: %w", ErrStorage, err)
	}
	seg := &segment{first: first, name: name, size: s.opts.SegmentBytes}
	s.activeFile = w
	s.mu.Lock()
	s.segs = append(s.segs, seg)
	s.active = seg
	s.diskBytes += onDisk(seg.size)
	s.mu.Unlock()
	return nil
}

// flush writes one group's bytes to the active segment and syncs them. A failed
// write or sync poisons the segment: what it holds past the last sync is cut (if the
// file system lets it), the segment is sealed, and the records fail with ErrStorage.
// The records written are g.reqs[k] for k in taken, whose seqs are set.
func (s *Spool) flush(buf []byte, g *group, taken []int) {
	s.mu.Lock()
	seg := s.active
	s.mu.Unlock()
	f := s.activeFile
	n, err := f.Write(buf)
	if err == nil {
		err = f.Sync()
		s.syncs.Add(1)
	}
	if err != nil {
		s.activeFile = nil
		// Cut what was written past the last sync (and the zeros after it); if the
		// cut fails, the file keeps its size, and Open cuts the torn bytes.
		kept := seg.end
		if terr := f.Truncate(seg.end); terr != nil {
			kept = max(seg.size, seg.end+int64(n))
		}
		_ = f.Close()
		s.mu.Lock()
		s.diskBytes += onDisk(kept) - onDisk(seg.size)
		seg.size = kept
		seg.sealed = true
		s.active = nil
		s.fault = FaultStorage
		s.mu.Unlock()
		for _, k := range taken {
			g.reqs[k].seq = 0
			g.reqs[k].err = fmt.Errorf("%w: segment %s: %w", ErrStorage, seg.name, err)
		}
		return
	}
	now := s.opts.Now()
	s.mu.Lock()
	base := seg.end // the offset of buf[0]
	seg.end += int64(len(buf))
	if seg.end > seg.size {
		s.diskBytes += onDisk(seg.end) - onDisk(seg.size)
		seg.size = seg.end
	}
	seg.last = g.reqs[taken[len(taken)-1]].seq
	s.everSpooled = true
	s.fault = ""
	cache := s.cacheBytes < maxCacheBytes
	var at int64 // in buf
	for _, k := range taken {
		q := g.reqs[k].seq
		s.times = append(s.times, stamp{seq: q, at: now})
		n := int64(headerSize + len(g.reqs[k].payload))
		s.pendingBytes += n
		if cache {
			s.cache = append(s.cache, cached{seg: seg, off: base + at, n: n, rec: Record{Seq: q, Payload: buf[at+headerSize : at+n : at+n], Kept: !g.reqs[k].retried}})
			s.cacheBytes += n
		}
		at += n
	}
	s.wakeLocked()
	s.mu.Unlock()
}

// maxCacheBytes bounds the records kept for the reader; past it, the reader reads
// the file.
const maxCacheBytes = 4 << 20

func (s *Spool) wakeLocked() {
	close(s.notify)
	s.notify = make(chan struct{})
}

// Next returns the oldest record not yet handed out, waiting until there is one.
func (s *Spool) Next(ctx context.Context) (Record, error) {
	for {
		rec, ok, ch, err := s.TryNext()
		if err != nil || ok {
			return rec, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return Record{}, ctx.Err()
		}
	}
}

// TryNext is Next without the wait: ok is false when nothing is ready, and ready is
// closed when something may be.
func (s *Spool) TryNext() (rec Record, ok bool, ready <-chan struct{}, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Record{}, false, nil, ErrClosed
	}
	rec, ok = s.readLocked()
	if ok {
		s.outstanding = append(s.outstanding, handed{seq: rec.Seq, n: int64(headerSize + len(rec.Payload))})
	}
	return rec, ok, s.notify, nil
}

// readLocked reads the next record above the watermark, moving over segments and
// over the spans found corrupt at open.
func (s *Spool) readLocked() (Record, bool) {
	for {
		if s.rseg == nil || s.rseg.removed {
			next := s.segAfterLocked(s.rseg)
			if next == nil {
				return Record{}, false
			}
			s.switchReaderLocked(next)
		}
		seg := s.rseg
		if i := slices.IndexFunc(seg.skips, func(sp span) bool { return s.rpos >= sp.from && s.rpos < sp.to }); i >= 0 {
			s.rpos = seg.skips[i].to
			continue
		}
		if s.rpos >= seg.end {
			if !seg.sealed {
				return Record{}, false
			}
			next := s.segAfterLocked(seg)
			if next == nil {
				return Record{}, false
			}
			s.switchReaderLocked(next)
			continue
		}
		rec, n, ok := s.cachedLocked(seg, s.rpos)
		var err error
		if !ok {
			rec, n, err = s.readAtLocked(seg, s.rpos)
		}
		if err != nil {
			// The bytes changed since they were scanned or written: nothing past
			// here in this segment can be trusted to be read in order.
			s.problemf("segment %s: unreadable at offset %d after open (%v): the rest of it is skipped", seg.name, s.rpos, err)
			seg.keep = true
			s.rpos = seg.end
			continue
		}
		s.rpos += n
		if rec.Seq <= s.watermark {
			continue
		}
		return rec, true
	}
}

// cachedLocked is the record at off in seg from the cache, when the writer kept it;
// it drops what the reader has passed.
func (s *Spool) cachedLocked(seg *segment, off int64) (Record, int64, bool) {
	for len(s.cache) > 0 {
		c := s.cache[0]
		hit := c.seg == seg && c.off == off
		if !hit && c.seg.first > seg.first || c.seg == seg && c.off > off {
			return Record{}, 0, false // not read that far yet
		}
		s.cache[0] = cached{}
		s.cache = s.cache[1:]
		s.cacheBytes -= c.n
		if hit {
			return c.rec, c.n, true
		}
	}
	return Record{}, 0, false
}

func (s *Spool) segAfterLocked(cur *segment) *segment {
	for _, g := range s.segs {
		if cur == nil || g.first > cur.first {
			return g
		}
	}
	return nil
}

func (s *Spool) switchReaderLocked(seg *segment) {
	if s.rfile != nil {
		_ = s.rfile.Close()
		s.rfile = nil
	}
	s.rseg = seg
	s.rpos = 0
}

func (s *Spool) readAtLocked(seg *segment, off int64) (Record, int64, error) {
	if s.rfile == nil {
		f, err := s.fs.OpenFile(path.Join(s.dir, seg.name), os.O_RDONLY, 0)
		if err != nil {
			return Record{}, 0, err
		}
		s.rfile = f
	}
	var h [headerSize]byte
	if _, err := s.rfile.ReadAt(h[:], off); err != nil {
		return Record{}, 0, err
	}
	n := int64(headerSize) + int64(uint32(h[4])|uint32(h[5])<<8|uint32(h[6])<<16|uint32(h[7])<<24)
	if n > int64(headerSize+s.opts.MaxRecordBytes) || off+n > seg.end {
		return Record{}, 0, errors.New("record header does not fit")
	}
	b := make([]byte, n)
	if _, err := s.rfile.ReadAt(b, off); err != nil {
		return Record{}, 0, err
	}
	seq, payload, st := decode(b, s.opts.MaxRecordBytes)
	if st != recordOK {
		return Record{}, 0, errors.New("checksum mismatch")
	}
	return Record{Seq: seq, Payload: payload}, n, nil
}

// Ack marks records handed out by Next delivered (any other seq is ignored). The
// watermark moves over every record handed out below the first one not yet
// acknowledged. The cursor is written lazily (Options.CursorEvery): by this Ack when
// CursorEvery records were acknowledged since the last write or when a segment is
// now wholly delivered, otherwise CursorInterval later or at Close. Segments are
// unlinked only below a durable cursor.
func (s *Spool) Ack(seqs ...uint64) error { return s.ack(false, seqs) }

// ack is Ack; force writes the cursor whenever the watermark moved.
func (s *Spool) ack(force bool, seqs []uint64) error {
	s.mu.Lock()
	for _, q := range seqs {
		// Only a seq handed out and still above the watermark is held: a stray
		// one would sit in the map for good.
		if q > s.watermark && len(s.outstanding) > 0 && q <= s.outstanding[len(s.outstanding)-1].seq {
			s.acked[q] = true
		}
	}
	moved := false
	for len(s.outstanding) > 0 && s.acked[s.outstanding[0].seq] {
		q := s.outstanding[0].seq
		delete(s.acked, q)
		s.pendingBytes -= s.outstanding[0].n
		s.outstanding = s.outstanding[1:]
		s.watermark = q
		s.ackedCount++
		moved = true
		if q <= s.leftoverMax && s.leftover > 0 {
			s.leftover--
		}
	}
	for len(s.times) > 0 && s.times[0].seq <= s.watermark {
		s.times = s.times[1:]
	}
	if !moved {
		s.mu.Unlock()
		return nil
	}
	due := force || s.ackedCount-s.durableAt >= uint64(s.opts.CursorEvery) || s.unlinkableLocked(s.watermark)
	if !due && s.cursorTimer == nil && !s.closed {
		s.cursorTimer = time.AfterFunc(s.opts.CursorInterval, s.timedCursor)
	}
	s.mu.Unlock()
	if !due {
		return nil
	}
	return s.syncCursor()
}

// timedCursor is the lazy cursor write CursorInterval after an Ack left the cursor
// behind. A failure is not lost: the cursor stays behind, so the next Ack arms the
// timer again, and Close writes the cursor and returns the error.
// Once Close began, the timer writes nothing: Close writes the cursor itself.
func (s *Spool) timedCursor() {
	s.cursorMu.Lock()
	defer s.cursorMu.Unlock()
	s.mu.Lock()
	s.cursorTimer = nil
	closed := s.closed
	s.mu.Unlock()
	if !closed {
		_ = s.syncCursorLocked()
	}
}

// removableLocked says whether g may be unlinked below the watermark wm: sealed,
// wholly at or below wm, never to be kept, and already passed by the reader.
func (s *Spool) removableLocked(g *segment, wm uint64) bool {
	return g.sealed && !g.keep && g != s.active && g.last <= wm && s.rseg != nil && g.first <= s.rseg.first && (g != s.rseg || s.rpos >= g.end)
}

// unlinkableLocked says whether a cursor at wm would let a segment be unlinked.
func (s *Spool) unlinkableLocked(wm uint64) bool {
	return slices.ContainsFunc(s.segs, func(g *segment) bool { return s.removableLocked(g, wm) })
}

// syncCursor writes the watermark as the cursor (tmp, fsync, rename, fsync dir) and
// then unlinks the segments wholly below it.
func (s *Spool) syncCursor() error {
	s.cursorMu.Lock()
	defer s.cursorMu.Unlock()
	return s.syncCursorLocked()
}

func (s *Spool) syncCursorLocked() error {
	s.mu.Lock()
	wm, count := s.watermark, s.ackedCount
	already := s.durableWM
	s.mu.Unlock()
	if wm > already {
		if err := writeDurable(s.fs, s.dir, "cursor", encodeCursor(wm)); err != nil {
			return fmt.Errorf("spool: write the cursor: %w", err)
		}
		s.mu.Lock()
		s.durableWM, s.durableAt = wm, count
		s.mu.Unlock()
	}
	return s.removeDelivered()
}

// removeDelivered unlinks the segments wholly below the durable cursor (a segment
// sealed after the cursor passed it, by a full cap, too).
func (s *Spool) removeDelivered() error {
	s.mu.Lock()
	wm := s.durableWM
	var gone []*segment
	kept := s.segs[:0]
	for _, g := range s.segs {
		if s.removableLocked(g, wm) {
			g.removed = true
			s.diskBytes -= onDisk(g.size)
			gone = append(gone, g)
			continue
		}
		kept = append(kept, g)
	}
	s.segs = kept
	if len(gone) > 0 && s.fault == FaultFull {
		s.fault = "" // room again for a segment, maybe: the next append says
	}
	if s.rseg != nil && s.rseg.removed && s.rfile != nil {
		_ = s.rfile.Close()
		s.rfile = nil
	}
	s.mu.Unlock()
	var errs []error
	for _, g := range gone {
		if err := s.fs.Remove(path.Join(s.dir, g.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			// A segment left behind is stale below the cursor: the next Open removes it.
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeDurable writes name in dir by tmp file, fsync, rename and fsync of dir.
func writeDurable(fsys FS, dir, name string, data []byte) error {
	if err := writeSynced(fsys, dir, name, data); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// writeSynced is writeDurable without the directory's sync, for a caller that makes
// several files durable with one.
func writeSynced(fsys FS, dir, name string, data []byte) error {
	tmp := path.Join(dir, name+".tmp")
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	return fsys.Rename(tmp, path.Join(dir, name))
}

// SetDelivery is how the delivery loop reports: whether its last delivery
// succeeded, and whether a failed one is being retried.
func (s *Spool) SetDelivery(lastOK, retrying bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastDeliveryOK = lastOK
	s.retrying = retrying
}

// Close stops the spool: appends fail with ErrClosed (those queued before are
// written), the segment being written is synced and closed, and the cursor is written if it lags behind the watermark. It
// never deletes an undelivered record. It returns ctx's error if the writer is still
// inside a sync when ctx ends (the cursor is then not written), and the cursor
// write's error.
func (s *Spool) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		if s.cursorTimer != nil {
			s.cursorTimer.Stop()
			s.cursorTimer = nil
		}
		s.wakeLocked()
		s.mu.Unlock()
		s.qmu.Lock()
		s.qclosed = true
		s.qmu.Unlock()
		close(s.closing)
	})
	select {
	case <-s.writerDone:
	case <-ctx.Done():
		return fmt.Errorf("spool: close: the writer did not finish its sync in time: %w", ctx.Err())
	}
	err := s.syncCursor()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rfile != nil {
		_ = s.rfile.Close()
		s.rfile = nil
	}
	if s.unlock != nil {
		_ = s.unlock() // the spool's last act: another owner may open it now
		s.unlock = nil
	}
	return err
}

// Syncs counts the data syncs of segments since Open.
func (s *Spool) Syncs() uint64 { return s.syncs.Load() }
