package spool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

// Reason says why a record sits in quarantine. It is listed to operators, so it
// never holds the record's body or the repository's.
type Reason struct {
	// Kind is "rejected" (the repository refused the record for good) or "corrupt"
	// (bytes Open found damaged), or "oversize" (a segment file too large to scan).
	Kind string `json:"kind"`
	// Status is the HTTP status of the rejection.
	Status int `json:"status,omitempty"`
	// Issues are the issue codes of the OperationOutcome that came with it.
	Issues []string `json:"issues,omitempty"`
	// Attempts is how many deliveries were made.
	Attempts int `json:"attempts,omitempty"`
	// Time is when it was quarantined.
	Time time.Time `json:"time,omitzero"`
}

// Entry is one listed quarantine entry.
type Entry struct {
	// ID names it for Retry and Drop: the seq of a rejected record, or the file name
	// (without .bin) of corrupt bytes.
	ID     string `json:"id"`
	Reason Reason `json:"reason"`
}

// ErrNoEntry: no quarantine entry has that id.
var ErrNoEntry = errors.New("no quarantine entry with that id")

// ErrNotRetryable: the entry is raw bytes, not a record; it can only be dropped.
var ErrNotRetryable = errors.New("quarantine entry holds no record to retry")

// maxReasonBytes bounds the reason file read back.
const maxReasonBytes = 64 << 10

// entryID is the id a quarantine file stands for: "<seq>.json" is the body of
// record seq, "corrupt-….bin" and "oversize-seg-….log" are raw bytes. Reason files
// and anything else are no entry of their own.
func entryID(name string) (string, bool) {
	if num, ok := strings.CutSuffix(name, ".json"); ok && !strings.HasSuffix(num, ".reason") {
		if _, err := strconv.ParseUint(num, 10, 64); err == nil {
			return num, true
		}
		return "", false
	}
	if id, ok := strings.CutSuffix(name, ".bin"); ok && strings.HasPrefix(id, "corrupt-") {
		return id, true
	}
	if strings.HasPrefix(name, "oversize-seg-") {
		return name, true
	}
	return "", false
}

// Quarantine puts a record the repository will never accept into quarantine/ (its
// body and its reason, each by tmp+fsync+rename, then one sync of the directory),
// and then counts it as done for the watermark.
func (s *Spool) Quarantine(rec Record, why Reason) error {
	if why.Kind == "" {
		why.Kind = "rejected"
	}
	if why.Time.IsZero() {
		why.Time = s.opts.Now().UTC()
	}
	reason, err := json.Marshal(why)
	if err != nil {
		return err
	}
	id := strconv.FormatUint(rec.Seq, 10)
	if err := writeSynced(s.fs, s.qdir, id+".json", rec.Payload); err != nil {
		return fmt.Errorf("spool: quarantine %s: %w", id, err)
	}
	if err := writeSynced(s.fs, s.qdir, id+".reason.json", reason); err != nil {
		return fmt.Errorf("spool: quarantine %s: %w", id, err)
	}
	if err := s.fs.SyncDir(s.qdir); err != nil {
		return fmt.Errorf("spool: quarantine %s: %w", id, err)
	}
	s.mu.Lock()
	s.quarantined++
	s.quarantineSize += onDisk(int64(len(rec.Payload))) + onDisk(int64(len(reason)))
	s.mu.Unlock()
	// Rare, and written durably anyway: the cursor follows at once, so that a crash
	// does not quarantine the record a second time.
	return s.ack(true, []uint64{rec.Seq})
}

// List lists at most limit quarantine entries, ids and reasons only, with the total.
func (s *Spool) List(limit int) ([]Entry, int, error) {
	entries, err := s.fs.ReadDir(s.qdir)
	if err != nil {
		return nil, 0, fmt.Errorf("spool: list the quarantine: %w", err)
	}
	var out []Entry
	total := 0
	for _, e := range entries {
		id, ok := entryID(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		total++
		if len(out) >= limit {
			continue
		}
		out = append(out, Entry{ID: id, Reason: s.reasonOf(id)})
	}
	return out, total, nil
}

func (s *Spool) reasonOf(id string) Reason {
	switch {
	case strings.HasPrefix(id, "corrupt-"):
		return Reason{Kind: "corrupt"}
	case strings.HasPrefix(id, "oversize-"):
		return Reason{Kind: "oversize"}
	}
	var r Reason
	b, err := s.readBounded(path.Join(s.qdir, id+".reason.json"), maxReasonBytes)
	if err != nil || json.Unmarshal(b, &r) != nil {
		// The body was kept and its reason not (a crash between the two writes),
		// or the reason file was damaged: the entry is still listed.
		return Reason{Kind: "rejected"}
	}
	return r
}

func (s *Spool) readBounded(name string, limit int64) ([]byte, error) {
	f, err := s.fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, over %d", path.Base(name), st.Size(), limit)
	}
	b := make([]byte, st.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && (!errors.Is(err, io.EOF) || int64(n) != st.Size()) {
		return nil, err
	}
	return b, nil
}

// sizeOf is the size of a file, 0 when it cannot be read.
func (s *Spool) sizeOf(name string) int64 {
	f, err := s.fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	return st.Size()
}

// blockBytes is the block the spool rounds a file's size up to when it counts what the
// file takes on disk: a file system allocates whole blocks (4 KiB on ext4, XFS, and
// tmpfs's pages).
const blockBytes = 4096

// onDisk is what a file of n bytes takes on disk: n rounded up to whole blocks.
func onDisk(n int64) int64 {
	return (n + blockBytes - 1) / blockBytes * blockBytes
}

// files is every file of one entry.
func (s *Spool) files(id string) ([]string, error) {
	entries, err := s.fs.ReadDir(s.qdir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if got, ok := entryID(e.Name()); ok && got == id && !e.IsDir() {
			if strings.HasSuffix(e.Name(), ".json") {
				return []string{id + ".json", id + ".reason.json"}, nil
			}
			return []string{e.Name()}, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrNoEntry, id)
}

// Retry appends a rejected record again (a new seq, the same body, so the same event
// id) and then removes it from quarantine. A crash in between leaves it in both:
// delivered twice, never lost.
func (s *Spool) Retry(ctx context.Context, id string) (uint64, error) {
	names, err := s.files(id)
	if err != nil {
		return 0, err
	}
	if !strings.HasSuffix(names[0], ".json") {
		return 0, fmt.Errorf("%w: %q", ErrNotRetryable, id)
	}
	body, err := s.readBounded(path.Join(s.qdir, names[0]), int64(s.opts.MaxRecordBytes))
	if err != nil {
		return 0, fmt.Errorf("spool: retry %s: %w", id, err)
	}
	t, err := s.enqueue(body, true)
	var seq uint64
	if err == nil {
		seq, err = t.Wait(ctx)
	}
	if err != nil {
		return 0, fmt.Errorf("spool: retry %s: %w", id, err)
	}
	return seq, s.remove(id, names)
}

// Drop removes a quarantine entry for good.
func (s *Spool) Drop(id string) error {
	names, err := s.files(id)
	if err != nil {
		return err
	}
	return s.remove(id, names)
}

func (s *Spool) remove(id string, names []string) error {
	for _, n := range names {
		size := s.sizeOf(path.Join(s.qdir, n))
		if err := s.fs.Remove(path.Join(s.qdir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("spool: drop %s: %w", id, err)
		}
		s.mu.Lock()
		s.quarantineSize = max(0, s.quarantineSize-onDisk(size))
		s.mu.Unlock()
	}
	if err := s.fs.SyncDir(s.qdir); err != nil {
		return fmt.Errorf("spool: drop %s: %w", id, err)
	}
	s.mu.Lock()
	if s.quarantined > 0 {
		s.quarantined--
	}
	s.mu.Unlock()
	return nil
}
