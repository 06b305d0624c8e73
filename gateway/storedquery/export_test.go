package storedquery

import (
	"os"
	"syscall"
)

// MakeReadOnly makes s refuse every write as a read-only mount does (EROFS): the
// tests run as root, whom a directory's mode does not stop.
func MakeReadOnly(s *Store) {
	s.createTemp = func(string, string) (*os.File, error) {
		return nil, &os.PathError{Op: "open", Path: s.dir, Err: syscall.EROFS}
	}
	s.remove = func(name string) error { return &os.PathError{Op: "remove", Path: name, Err: syscall.EROFS} }
}
