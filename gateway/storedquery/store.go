package storedquery

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// MaxStored bounds the stored queries one store holds (and a listing reads).
const MaxStored = 1000

// reuse is how long a read of the directory is reused when the directory itself has
// not changed: a replica sees another's upload (or a new ConfigMap) within it.
const reuse = time.Second

var (
	// ErrReadOnly: the store's directory cannot be written (on Kubernetes it is the
	// StoredQuery resources' ConfigMap, mounted read-only).
	ErrReadOnly = errors.New("the stored-query store is read-only")
	// ErrNotFound: no stored query has this id.
	ErrNotFound = errors.New("no stored query has this id")
	// ErrCodeTaken: another stored query has this code already.
	ErrCodeTaken = errors.New("another stored query has this code")
	// ErrFull: the store holds MaxStored queries.
	ErrFull = fmt.Errorf("the store holds %d stored queries, its maximum", MaxStored)
)

// Store is the directory of stored queries: one <id>.json per query. Every replica
// reads the same directory, so every replica answers the same list; what one writes,
// the others read on their next look (within reuse).
type Store struct {
	dir string
	// createTemp and remove are os.CreateTemp and os.Remove; tests make the store
	// read-only through them.
	createTemp func(dir, pattern string) (*os.File, error)
	remove     func(name string) error

	mu       sync.Mutex
	snap     *snapshot
	writeMu  sync.Mutex
	loadedOK bool
}

// snapshot is one read of the directory.
type snapshot struct {
	at      time.Time
	modTime time.Time
	defs    []*Definition // sorted by id
	// problems are the files that could not be used, by name.
	problems map[string]string
	err      error
}

// Problem is a file of the store that could not be used.
type Problem struct {
	File  string `json:"file"`
	Error string `json:"error"`
}

// NewStore reads dir once; the error says why it cannot be read.
func NewStore(dir string) (*Store, error) {
	s := &Store{dir: dir, createTemp: os.CreateTemp, remove: os.Remove}
	snap := s.load(time.Now())
	if snap.err != nil {
		return nil, snap.err
	}
	s.loadedOK = true
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// current is the last read of the directory, read again when the directory changed
// or the read is older than reuse.
func (s *Store) current() *snapshot {
	now := time.Now()
	s.mu.Lock()
	snap := s.snap
	s.mu.Unlock()
	if snap != nil && snap.err == nil && now.Sub(snap.at) < reuse {
		if fi, err := os.Stat(s.dir); err == nil && fi.ModTime().Equal(snap.modTime) {
			return snap
		}
	}
	return s.load(now)
}

func (s *Store) invalidate() {
	s.mu.Lock()
	s.snap = nil
	s.mu.Unlock()
}

// load reads every <id>.json of the directory. A file that is not a valid stored
// query is left out and named in problems; the directory itself unreadable is err.
func (s *Store) load(now time.Time) *snapshot {
	snap := &snapshot{at: now, problems: map[string]string{}}
	fi, err := os.Stat(s.dir)
	if err == nil && !fi.IsDir() {
		err = fmt.Errorf("%s is not a directory", s.dir)
	}
	if err != nil {
		snap.err = fmt.Errorf("stored_queries.dir: %w", err)
		return snap
	}
	snap.modTime = fi.ModTime()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		snap.err = fmt.Errorf("stored_queries.dir: %w", err)
		return snap
	}
	codes := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		// A ConfigMap volume holds ..data and timestamped directories besides the
		// keys' symbolic links; an upload's temporary file starts with a dot too.
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		if len(snap.defs) == MaxStored {
			snap.problems[name] = fmt.Sprintf("left out: the store holds more than %d stored queries", MaxStored)
			continue
		}
		d, err := readDefinition(filepath.Join(s.dir, name))
		switch {
		case err != nil:
			snap.problems[name] = err.Error()
		case d.ID+".json" != name:
			snap.problems[name] = fmt.Sprintf("holds the stored query %q: the file of a stored query is named <id>.json", d.ID)
		case codes[d.Code] != "":
			snap.problems[name] = fmt.Sprintf("its code %q is the code of %s too", d.Code, codes[d.Code])
		default:
			codes[d.Code] = d.ID
			snap.defs = append(snap.defs, d)
		}
	}
	sort.Slice(snap.defs, func(i, j int) bool { return snap.defs[i].ID < snap.defs[j].ID })
	s.mu.Lock()
	s.snap = snap
	s.mu.Unlock()
	return snap
}

// readDefinition reads one file of the store through config.ReadFile: a named pipe
// dropped in the directory cannot hang the request that reads it.
func readDefinition(path string) (*Definition, error) {
	data, err := config.ReadFile("stored_queries.dir", path, MaxDefinitionBytes)
	if err != nil {
		var fe *config.FileError
		if errors.As(err, &fe) {
			return nil, fe.Err // the file is named; the problem is the file's
		}
		return nil, err
	}
	return Parse(data)
}

// List is every stored query, by id, and the files that could not be used.
func (s *Store) List() ([]*Definition, []Problem, error) {
	snap := s.current()
	if snap.err != nil {
		return nil, nil, snap.err
	}
	ps := make([]Problem, 0, len(snap.problems))
	for f, e := range snap.problems {
		ps = append(ps, Problem{File: f, Error: e})
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].File < ps[j].File })
	return snap.defs, ps, nil
}

// Get is the stored query id.
func (s *Store) Get(id string) (*Definition, error) {
	snap := s.current()
	if snap.err != nil {
		return nil, snap.err
	}
	for _, d := range snap.defs {
		if d.ID == id {
			return d, nil
		}
	}
	return nil, ErrNotFound
}

// ByCode is the stored query _query={code} names.
func (s *Store) ByCode(code string) (*Definition, error) {
	snap := s.current()
	if snap.err != nil {
		return nil, snap.err
	}
	for _, d := range snap.defs {
		if d.Code == code {
			return d, nil
		}
	}
	return nil, ErrNotFound
}

// Put writes d, replacing the query of the same id: a temporary file renamed over
// <id>.json, so that a replica reads the old query or the new one, never half of one.
// created is true when no query had the id.
func (s *Store) Put(d *Definition) (created bool, err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.invalidate()
	defs, _, err := s.List()
	if err != nil {
		return false, err
	}
	created = true
	for _, o := range defs {
		if o.ID == d.ID {
			created = false
		} else if o.Code == d.Code {
			return false, fmt.Errorf("%w: %s", ErrCodeTaken, o.ID)
		}
	}
	if created && len(defs) >= MaxStored {
		return false, ErrFull
	}
	tmp, err := s.createTemp(s.dir, ".upload-*")
	if err != nil {
		return false, storeError(err)
	}
	_, err = tmp.Write(d.Raw)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(s.dir, d.ID+".json"))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return false, storeError(err)
	}
	s.invalidate()
	return created, nil
}

// Delete removes the stored query id.
func (s *Store) Delete(id string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, err := s.Get(id); err != nil {
		return err
	}
	err := s.remove(filepath.Join(s.dir, id+".json"))
	s.invalidate()
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotFound
	}
	return storeError(err)
}

// Readable is the readiness check's question: the store was loaded at start and its
// directory can be read now.
func (s *Store) Readable() error {
	if !s.loadedOK {
		return errors.New("the stored-query store was not loaded")
	}
	if _, err := os.ReadDir(s.dir); err != nil {
		return fmt.Errorf("the stored-query store cannot be read: %w", err)
	}
	return nil
}

// storeError marks the errors of a directory that cannot be written as ErrReadOnly.
func storeError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	}
	return err
}
