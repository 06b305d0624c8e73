//go:build unix

package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Lock takes the spool directory's exclusive lock: an flock on its lock file, held
// until the returned release (closing the file releases it, and so does the end of
// the process, however it ends). A directory another process (or another Open) holds
// is ErrHeld, naming the directory.
func (osFS) Lock(dir string) (release func() error, err error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spool: lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is open in another process (a gateway, or ferrofed audit drain): one spool has one owner", ErrHeld, dir)
		}
		return nil, fmt.Errorf("spool: lock %s: %w", dir, err)
	}
	return f.Close, nil
}
