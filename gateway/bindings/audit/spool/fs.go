package spool

import (
	"io"
	"io/fs"
	"os"
)

// FS is every file-system operation the spool makes. OS is the real one; tests put a
// file system behind it that forgets what was never synced (test/crashfs), or that
// fails a chosen operation.
type FS interface {
	// OpenFile is os.OpenFile.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// ReadDir lists a directory, sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// MkdirAll is os.MkdirAll.
	MkdirAll(name string, perm fs.FileMode) error
	// Rename is os.Rename: atomic, replacing newname.
	Rename(oldname, newname string) error
	// Remove is os.Remove.
	Remove(name string) error
	// SyncDir makes the directory's entries (creations, renames, removals) durable.
	SyncDir(name string) error
}

// File is an open file of an FS. Writes of a file opened with os.O_APPEND go to its
// end.
type File interface {
	io.ReaderAt
	io.Writer
	// Sync makes the file's data durable (fdatasync on Linux).
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
	Close() error
}

// OS is the operating system's file system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }
func (osFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (osFS) Remove(name string) error                     { return os.Remove(name) }

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

type osFile struct{ *os.File }

func (f osFile) Sync() error { return datasync(f.File) }
