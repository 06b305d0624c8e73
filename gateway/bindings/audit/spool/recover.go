package spool

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"slices"
	"strings"
)

// maxScanBytes bounds how much of one segment file Open reads into memory; a larger
// file is none the spool wrote (segments end near SegmentBytes) and is moved, whole,
// into quarantine.
func (s *Spool) maxScanBytes() int64 {
	return max(2*s.opts.SegmentBytes, 64<<20)
}

// seqLimit: a seq or watermark at or past it is taken for garbage, so that nextSeq
// can never wrap.
const seqLimit = math.MaxUint64 >> 1

// recover reads the folder: the cursor, the segments (truncating a torn tail,
// quarantining corrupt records, unlinking stale segments) and the quarantine count.
func (s *Spool) recover() error {
	if err := s.makeDirs(); err != nil {
		return err
	}
	entries, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("spool: read %s: %w", s.dir, err)
	}
	segs, maxName := s.listSegments(entries)
	s.watermark = s.readCursor()
	s.durableWM = s.watermark
	slices.SortFunc(segs, func(a, b *segment) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	for _, g := range segs {
		if err := s.sizeSegment(g); err != nil {
			s.problemf("segment %s: %v: left alone", g.name, err)
			g.keep = true
		}
	}
	kept, prev := s.scanSegments(segs)
	s.segs = kept
	s.leftover = s.report.Pending
	s.leftoverMax = prev
	s.nextSeq = max(prev, s.watermark, maxName) + 1
	if len(kept) > 0 {
		s.switchReaderLocked(kept[0])
	}
	s.quarantined = s.countQuarantine()
	return nil
}

// makeDirs creates the spool's directory and its quarantine directory.
func (s *Spool) makeDirs() error {
	if err := s.fs.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("spool: create %s: %w", s.dir, err)
	}
	if err := s.fs.MkdirAll(s.qdir, 0o700); err != nil {
		// A file where the quarantine directory belongs: move it aside, once.
		if aerr := s.moveAside("quarantine"); aerr != nil {
			return fmt.Errorf("spool: create %s: %w", s.qdir, err)
		}
		if err := s.fs.MkdirAll(s.qdir, 0o700); err != nil {
			return fmt.Errorf("spool: create %s: %w", s.qdir, err)
		}
	}
	return nil
}

// listSegments sorts the spool directory's entries: the segment files found (in no
// order), and the highest seq any segment's name gives, a file left alone included.
// Everything else is set aside or reported.
func (s *Spool) listSegments(entries []fs.DirEntry) (segs []*segment, maxName uint64) {
	for _, e := range entries {
		name := e.Name()
		switch name {
		case "quarantine", lockName:
		case "cursor", "cursor.tmp":
			if e.IsDir() {
				if err := s.moveAside(name); err != nil {
					s.problemf("%s is a directory and could not be moved aside: %v", name, err)
				}
			} else if name == "cursor.tmp" {
				_ = s.fs.Remove(path.Join(s.dir, name))
			}
		default:
			first, ok := parseSegmentName(name)
			switch {
			case !ok:
				s.problemf("%s is no spool file: left alone", name)
			case first >= seqLimit:
				s.problemf("%s names a seq past the limit: left alone", name)
			case e.IsDir() || !e.Type().IsRegular():
				s.problemf("%s is not a regular file: left alone", name)
				maxName = max(maxName, first)
			default:
				segs = append(segs, &segment{first: first, name: name, sealed: true})
				maxName = max(maxName, first)
			}
		}
	}
	return segs, maxName
}

// scanSegments scans the sized segments in order, counting what waits into
// s.report.Pending and s.diskBytes: it returns the segments kept and the last seq
// seen. An oversize segment is quarantined, a stale one removed.
func (s *Spool) scanSegments(segs []*segment) (kept []*segment, prev uint64) {
	lastWithData := -1
	for i, g := range segs {
		if g.size > 0 && !g.keep && !g.blank {
			lastWithData = i
		}
	}
	var buf []byte
	for i, g := range segs {
		if g.keep {
			continue
		}
		if g.size > s.maxScanBytes() {
			if err := s.moveIntoQuarantine(g.name, "oversize-"+g.name); err != nil {
				s.problemf("segment %s is %d bytes, past the scan limit, and could not be quarantined: %v", g.name, g.size, err)
			}
			continue
		}
		pending, err := s.scanSegment(g, &prev, i == lastWithData, &buf)
		if err != nil {
			s.problemf("segment %s: %v: left alone", g.name, err)
			continue
		}
		if pending == 0 && !g.keep {
			// Empty, or wholly below the cursor: its unlink was due (or it never
			// held a record). Either way nothing in it waits.
			if err := s.fs.Remove(path.Join(s.dir, g.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				s.problemf("segment %s: stale, not removed: %v", g.name, err)
				kept = append(kept, g)
				s.diskBytes += onDisk(g.size)
			}
			continue
		}
		s.report.Pending += pending
		kept = append(kept, g)
		s.diskBytes += onDisk(g.size)
	}
	return kept, prev
}

// readCursor is the durable watermark; 0 when the cursor is missing or unreadable
// (everything found is then delivered again: duplicates, never a loss).
func (s *Spool) readCursor() uint64 {
	f, err := s.fs.OpenFile(path.Join(s.dir, "cursor"), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		s.problemf("cursor: %v: every record found is delivered again", err)
		return 0
	}
	defer f.Close()
	b := make([]byte, 128)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		s.problemf("cursor: %v: every record found is delivered again", err)
		return 0
	}
	wm, err := decodeCursor(b[:n])
	if err == nil && wm >= seqLimit {
		err = fmt.Errorf("watermark %d past the limit", wm)
	}
	if err != nil {
		s.problemf("cursor: %v: every record found is delivered again", err)
		return 0
	}
	return wm
}

func (s *Spool) sizeSegment(g *segment) error {
	f, err := s.fs.OpenFile(path.Join(s.dir, g.name), os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	g.size = st.Size()
	// A segment whose first header is all zeros holds no record: preallocated, and
	// its run ended before the first one was written.
	var h [headerSize]byte
	if n, _ := f.ReadAt(h[:], 0); n > 0 && allZero(h[:n]) {
		g.blank = true
	}
	return nil
}

// allZero says whether b holds only zero bytes.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// scanSegment checks every record of one segment and returns how many are above the
// watermark. prev is the highest seq seen so far, in every segment: a record must be
// above it. A bad record with a good one after it is copied raw to quarantine and
// skipped; bad bytes with nothing good after them are a torn tail, cut, when this is
// the last segment, and are quarantined otherwise.
func (s *Spool) scanSegment(g *segment, prev *uint64, last bool, buf *[]byte) (int, error) {
	p := path.Join(s.dir, g.name)
	f, err := s.fs.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// One buffer serves every segment: nothing of it is kept past the scan.
	if int64(cap(*buf)) < g.size {
		*buf = make([]byte, g.size)
	}
	b := (*buf)[:g.size]
	if n, err := f.ReadAt(b, 0); err != nil && (!errors.Is(err, io.EOF) || int64(n) != g.size) {
		return 0, err
	}
	pending := 0
	var off int64
	end := int64(len(b))
	for off < int64(len(b)) {
		if b[off] == 0 && allZero(b[off:]) {
			// The preallocated rest of the segment, never written: its end.
			end = off
			break
		}
		seq, payload, st := decode(b[off:], s.opts.MaxRecordBytes)
		if st == recordOK && seq > *prev {
			*prev = seq
			g.last = seq
			if seq > s.watermark {
				pending++
				s.pendingBytes += int64(headerSize + len(payload))
			}
			off += int64(headerSize + len(payload))
			continue
		}
		next := s.findNext(b, off+1, *prev)
		if next < 0 && last {
			if err := f.Truncate(off); err == nil {
				_ = f.Sync()
				s.report.Truncated = append(s.report.Truncated, fmt.Sprintf("%s at %d (%d bytes)", g.name, off, int64(len(b))-off))
				g.size = off
				end = off
				break
			} else {
				s.problemf("segment %s: torn tail at %d not cut: %v", g.name, off, err)
			}
		}
		to := int64(len(b))
		if next >= 0 {
			to = next
		}
		qname := fmt.Sprintf("corrupt-%s-%d.bin", g.name, off)
		if err := writeDurable(s.fs, s.qdir, qname, b[off:to]); err != nil {
			s.problemf("segment %s: corrupt bytes %d..%d not quarantined: %v", g.name, off, to, err)
			g.keep = true
		} else {
			s.report.Quarantined = append(s.report.Quarantined, qname)
		}
		g.skips = append(g.skips, span{from: off, to: to})
		off = to
	}
	g.end = end
	return pending, nil
}

// findNext is the offset of the next whole record with a good checksum and a seq
// above prev, from `from` on; -1 when there is none.
func (s *Spool) findNext(b []byte, from int64, prev uint64) int64 {
	for i := from; i+headerSize <= int64(len(b)); i++ {
		if b[i] != magic0 || b[i+1] != magic1 || b[i+2] != version || b[i+3] != 0 {
			continue
		}
		if seq, _, st := decode(b[i:], s.opts.MaxRecordBytes); st == recordOK && seq > prev {
			return i
		}
	}
	return -1
}

// moveAside renames an entry of the spool directory that is in the way to
// <name>.moved-aside-<n>.
func (s *Spool) moveAside(name string) error {
	for n := 1; n < 100; n++ {
		to := fmt.Sprintf("%s.moved-aside-%d", name, n)
		if _, err := s.fs.OpenFile(path.Join(s.dir, to), os.O_RDONLY, 0); err == nil {
			continue
		}
		if err := s.fs.Rename(path.Join(s.dir, name), path.Join(s.dir, to)); err != nil {
			return err
		}
		s.problemf("%s was in the way: moved to %s", name, to)
		return s.fs.SyncDir(s.dir)
	}
	return errors.New("no free name to move it aside to")
}

func (s *Spool) moveIntoQuarantine(name, qname string) error {
	if err := s.fs.Rename(path.Join(s.dir, name), path.Join(s.qdir, qname)); err != nil {
		return err
	}
	if err := s.fs.SyncDir(s.qdir); err != nil {
		return err
	}
	s.report.Quarantined = append(s.report.Quarantined, qname)
	return s.fs.SyncDir(s.dir)
}

// countQuarantine counts the quarantine's entries, and removes the tmp files of a
// quarantine write a crash interrupted.
func (s *Spool) countQuarantine() int {
	entries, err := s.fs.ReadDir(s.qdir)
	if err != nil {
		s.problemf("quarantine: %v", err)
		return 0
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") && !e.IsDir() {
			_ = s.fs.Remove(path.Join(s.qdir, name))
			continue
		}
		if e.IsDir() {
			continue
		}
		if _, ok := entryID(name); ok {
			n++
		}
		if info, err := e.Info(); err == nil {
			s.quarantineSize += onDisk(info.Size())
		}
	}
	return n
}
