package storedquery_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/storedquery"
)

// A named pipe dropped in the store's directory is a file that cannot be used, named in
// the listing's problems, and never blocks the read of the store (an open of a FIFO
// without a writer waits for one).
func TestANamedPipeInTheStoreIsAProblemNotAHang(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var ps []storedquery.Problem
	go func() {
		s, err := storedquery.NewStore(dir)
		if err == nil {
			_, ps, err = s.List()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading the store blocked on the named pipe")
	}
	if len(ps) != 1 || ps[0].File != "pipe.json" || !strings.Contains(ps[0].Error, "is a named pipe (FIFO), not a regular file") {
		t.Fatalf("problems = %+v, want pipe.json named as a named pipe", ps)
	}
}
