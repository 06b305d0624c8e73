package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ReadFile refuses what is not a regular file without blocking on it, follows a
// Secret volume's symbolic links to a regular file, bounds the size, and names the
// key and the file in every error.
func TestReadFileTakesRegularFilesOnly(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A Secret volume: key -> ..data/key, ..data -> ..2026_12_05/.
	if err := os.MkdirAll(filepath.Join(dir, "..2026_12_05"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "..2026_12_05", "token"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..2026_12_05", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/token", filepath.Join(dir, "token")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("fifo", filepath.Join(dir, "to-fifo")); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 101), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadFile("k.token_file", filepath.Join(dir, "token"), 100); err != nil || string(data) != "secret" {
		t.Fatalf("a Secret volume's key: %q, %v", data, err)
	}
	if data, err := ReadFile("k.token_file", filepath.Join(dir, "..data", "token"), 6); err != nil || string(data) != "secret" {
		t.Fatalf("a file of exactly the cap: %q, %v", data, err)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"a named pipe", fifo, fifo + " is a named pipe (FIFO), not a regular file"},
		{"a symbolic link to a named pipe", filepath.Join(dir, "to-fifo"), " is a named pipe (FIFO), not a regular file"},
		{"a directory", dir, dir + " is a directory, not a regular file"},
		{"a character device", "/dev/zero", "/dev/zero is a character device, not a regular file"},
		{"a file past the cap", big, big + " is larger than 100 bytes"},
		{"a missing file", filepath.Join(dir, "none"), "open " + filepath.Join(dir, "none") + ": no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := ReadFile("k.token_file", tc.path, 100)
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("ReadFile blocked")
			}
			var fe *FileError
			if !errors.As(err, &fe) || fe.Key != "k.token_file" || !strings.HasPrefix(err.Error(), "k.token_file: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a *FileError of k.token_file saying %q", err, tc.want)
			}
		})
	}
	if _, err := ReadFile("k", filepath.Join(dir, "none"), 1); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file is not fs.ErrNotExist through the error: %v", err)
	}
}

// A file whose size the file system does not tell (/proc) is bounded by the read.
func TestReadFileBoundsAFileOfUnknownSize(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := ReadFile("k", "/proc/self/status", 16); err == nil || !strings.Contains(err.Error(), "larger than 16 bytes") {
		t.Fatalf("err = %v, want the cap", err)
	}
}
