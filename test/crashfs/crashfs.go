// Package crashfs is an in-memory file system for the audit spool's power-loss tests:
// it keeps, for every file, the bytes written and the bytes synced, and for every
// directory, its entries and the entries synced. Crash forgets what was not synced,
// as a machine that loses power does (SIGKILL cannot show this: the page cache
// survives a killed process). Hook fails or observes any operation, so that a test
// can crash between two chosen steps, or inject ENOSPC.
//
// The model, and where it is simpler than ext4: a file's data survives a crash as
// of its last Sync (nothing of what was written after it: a real disk may keep a
// part, which only makes the spool's torn-tail case likelier, and that case has its
// own test); a directory entry (a create, a rename, a remove) survives as of the
// directory's last SyncDir; MkdirAll is durable at once.
package crashfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
)

// Op names an operation for Hook.
type Op string

// The operations a Hook sees.
const (
	OpCreate   Op = "create"
	OpWrite    Op = "write"
	OpSync     Op = "sync"
	OpTruncate Op = "truncate"
	OpRename   Op = "rename"
	OpRemove   Op = "remove"
	OpSyncDir  Op = "syncdir"
)

// ErrCrashed is what a file opened before a Crash answers afterwards.
var ErrCrashed = errors.New("crashfs: file opened before the crash")

type inode struct {
	dir     bool
	data    []byte
	synced  []byte
	cur     map[string]*inode
	durable map[string]*inode
	mod     time.Time
}

func newDir() *inode {
	return &inode{dir: true, cur: map[string]*inode{}, durable: map[string]*inode{}}
}

// FS is the file system; the zero value is not usable, call New.
type FS struct {
	mu   sync.Mutex
	root *inode
	gen  int
	// Hook, when set, is called before each operation that changes something, with
	// the path (for a rename, "old -> new"); an error it returns is the operation's.
	Hook func(op Op, name string) error
	// Syncs counts file syncs.
	Syncs int
}

var _ spool.FS = (*FS)(nil)

// New returns an empty file system.
func New() *FS { return &FS{root: newDir()} }

func split(name string) []string {
	name = strings.Trim(path.Clean("/"+name), "/")
	if name == "" {
		return nil
	}
	return strings.Split(name, "/")
}

// parent is the directory holding name, and the base name.
func (f *FS) parent(name string) (*inode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", &fs.PathError{Op: "open", Path: name, Err: syscall.EINVAL}
	}
	d := f.root
	for _, p := range parts[:len(parts)-1] {
		n, ok := d.cur[p]
		if !ok {
			return nil, "", &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		if !n.dir {
			return nil, "", &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTDIR}
		}
		d = n
	}
	return d, parts[len(parts)-1], nil
}

func (f *FS) lookup(name string) (*inode, error) {
	if len(split(name)) == 0 {
		return f.root, nil
	}
	d, base, err := f.parent(name)
	if err != nil {
		return nil, err
	}
	n, ok := d.cur[base]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

func (f *FS) hook(op Op, name string) error {
	if f.Hook == nil {
		return nil
	}
	return f.Hook(op, name)
}

// OpenFile opens a file; O_CREATE, O_EXCL, O_TRUNC and O_APPEND are honoured.
func (f *FS) OpenFile(name string, flag int, _ fs.FileMode) (spool.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, base, err := f.parent(name)
	if err != nil {
		return nil, err
	}
	n, ok := d.cur[base]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case ok && n.dir && flag&(os.O_WRONLY|os.O_RDWR) != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		if err := f.hook(OpCreate, name); err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		n = &inode{mod: time.Now()}
		d.cur[base] = n
	}
	if flag&os.O_TRUNC != 0 && !n.dir {
		n.data = nil
	}
	return &file{fs: f, n: n, name: name, gen: f.gen, flag: flag}, nil
}

// ReadDir lists a directory, sorted by name.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	if !d.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: syscall.ENOTDIR}
	}
	var out []fs.DirEntry
	for _, k := range slices.Sorted(maps.Keys(d.cur)) {
		out = append(out, fs.FileInfoToDirEntry(info{name: k, n: d.cur[k]}))
	}
	return out, nil
}

// MkdirAll makes a directory and its parents, durable at once.
func (f *FS) MkdirAll(name string, _ fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.root
	for _, p := range split(name) {
		n, ok := d.cur[p]
		if !ok {
			n = newDir()
			d.cur[p] = n
			d.durable[p] = n
		}
		if !n.dir {
			return &fs.PathError{Op: "mkdir", Path: name, Err: syscall.ENOTDIR}
		}
		d = n
	}
	return nil
}

// Rename moves an entry, replacing newname unless it is a directory.
func (f *FS) Rename(oldname, newname string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	od, ob, err := f.parent(oldname)
	if err != nil {
		return err
	}
	nd, nb, err := f.parent(newname)
	if err != nil {
		return err
	}
	n, ok := od.cur[ob]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	if t, ok := nd.cur[nb]; ok && (t.dir || n.dir) {
		return &fs.PathError{Op: "rename", Path: newname, Err: syscall.EEXIST}
	}
	if err := f.hook(OpRename, oldname+" -> "+newname); err != nil {
		return &fs.PathError{Op: "rename", Path: oldname, Err: err}
	}
	delete(od.cur, ob)
	nd.cur[nb] = n
	return nil
}

// Remove removes a file or an empty directory.
func (f *FS) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, base, err := f.parent(name)
	if err != nil {
		return err
	}
	n, ok := d.cur[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(n.cur) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	if err := f.hook(OpRemove, name); err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	delete(d.cur, base)
	return nil
}

// SyncDir makes a directory's entries durable.
func (f *FS) SyncDir(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.lookup(name)
	if err != nil {
		return err
	}
	if !d.dir {
		return &fs.PathError{Op: "fsync", Path: name, Err: syscall.ENOTDIR}
	}
	if err := f.hook(OpSyncDir, name); err != nil {
		return &fs.PathError{Op: "fsync", Path: name, Err: err}
	}
	d.durable = maps.Clone(d.cur)
	return nil
}

// Crash loses power: every directory goes back to its synced entries and every file
// to its synced bytes, and every file opened before fails with ErrCrashed.
func (f *FS) Crash() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	seen := map[*inode]bool{}
	var walk func(n *inode)
	walk = func(n *inode) {
		if seen[n] {
			return
		}
		seen[n] = true
		if !n.dir {
			n.data = slices.Clone(n.synced)
			return
		}
		n.cur = maps.Clone(n.durable)
		for _, c := range n.cur {
			walk(c)
		}
	}
	walk(f.root)
}

// WriteFile writes a whole file and makes it and its entry durable: for a test that
// plants content in a spool folder.
func (f *FS) WriteFile(name string, data []byte) error {
	if err := f.MkdirAll(path.Dir(name), 0o700); err != nil {
		return err
	}
	h := f.Hook
	f.Hook = nil
	defer func() { f.Hook = h }()
	w, err := f.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	if err := w.Sync(); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.SyncDir(path.Dir(name))
}

// ReadFile is a file's current bytes.
func (f *FS) ReadFile(name string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EISDIR}
	}
	return slices.Clone(n.data), nil
}

type file struct {
	fs   *FS
	n    *inode
	name string
	gen  int
	flag int
	off  int64
}

func (w *file) live() error {
	if w.gen != w.fs.gen {
		return &fs.PathError{Op: "use", Path: w.name, Err: ErrCrashed}
	}
	return nil
}

func (w *file) ReadAt(p []byte, off int64) (int, error) {
	w.fs.mu.Lock()
	defer w.fs.mu.Unlock()
	if err := w.live(); err != nil {
		return 0, err
	}
	if w.n.dir {
		return 0, &fs.PathError{Op: "read", Path: w.name, Err: syscall.EISDIR}
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: w.name, Err: syscall.EINVAL}
	}
	if off >= int64(len(w.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, w.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (w *file) Write(p []byte) (int, error) {
	w.fs.mu.Lock()
	defer w.fs.mu.Unlock()
	if err := w.live(); err != nil {
		return 0, err
	}
	if w.flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return 0, &fs.PathError{Op: "write", Path: w.name, Err: syscall.EBADF}
	}
	if err := w.fs.hook(OpWrite, w.name); err != nil {
		return 0, &fs.PathError{Op: "write", Path: w.name, Err: err}
	}
	if w.flag&os.O_APPEND != 0 {
		w.off = int64(len(w.n.data))
	}
	if end := w.off + int64(len(p)); end > int64(len(w.n.data)) {
		w.n.data = append(w.n.data, make([]byte, end-int64(len(w.n.data)))...)
	}
	copy(w.n.data[w.off:], p)
	w.off += int64(len(p))
	w.n.mod = time.Now()
	return len(p), nil
}

func (w *file) Sync() error {
	w.fs.mu.Lock()
	defer w.fs.mu.Unlock()
	if err := w.live(); err != nil {
		return err
	}
	if err := w.fs.hook(OpSync, w.name); err != nil {
		return &fs.PathError{Op: "fsync", Path: w.name, Err: err}
	}
	w.fs.Syncs++
	w.n.synced = slices.Clone(w.n.data)
	return nil
}

func (w *file) Truncate(size int64) error {
	w.fs.mu.Lock()
	defer w.fs.mu.Unlock()
	if err := w.live(); err != nil {
		return err
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: w.name, Err: syscall.EINVAL}
	}
	if err := w.fs.hook(OpTruncate, w.name); err != nil {
		return &fs.PathError{Op: "truncate", Path: w.name, Err: err}
	}
	if size <= int64(len(w.n.data)) {
		w.n.data = w.n.data[:size]
	} else {
		w.n.data = append(w.n.data, make([]byte, size-int64(len(w.n.data)))...)
	}
	return nil
}

func (w *file) Stat() (fs.FileInfo, error) {
	w.fs.mu.Lock()
	defer w.fs.mu.Unlock()
	if err := w.live(); err != nil {
		return nil, err
	}
	return info{name: path.Base(w.name), n: w.n}, nil
}

func (w *file) Close() error { return nil }

type info struct {
	name string
	n    *inode
}

func (i info) Name() string { return i.name }
func (i info) Size() int64  { return int64(len(i.n.data)) }
func (i info) Mode() fs.FileMode {
	if i.n.dir {
		return fs.ModeDir | 0o700
	}
	return 0o600
}
func (i info) ModTime() time.Time { return i.n.mod }
func (i info) IsDir() bool        { return i.n.dir }
func (i info) Sys() any           { return nil }

// String is for test failures.
func (i info) String() string { return fmt.Sprintf("%s (%d bytes)", i.name, i.Size()) }
