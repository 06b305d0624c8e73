// Package proctest helps tests that run the ferrofed binary as a process: it builds the
// binary and collects a process's output while the test reads it.
package proctest

import (
	"bytes"
	"fmt"
	"os/exec"
	"sync"
)

// BuildFerrofed builds the ferrofed binary to out with the given extra `go build` flags.
// The error carries the compiler's output.
func BuildFerrofed(out string, flags ...string) error {
	args := append(append([]string{"build"}, flags...), "-o", out, "github.com/ferrofed/ferrofed")
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = "/usr/local/go/bin/go"
	}
	if msg, err := exec.Command(gobin, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("go build ferrofed: %w\n%s", err, msg)
	}
	return nil
}

// SyncBuffer is a bytes.Buffer a process may write to while the test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
