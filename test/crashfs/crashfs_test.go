package crashfs_test

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/ferrofed/ferrofed/test/crashfs"
)

func write(t *testing.T, f *crashfs.FS, name, data string, sync bool) {
	t.Helper()
	w, err := f.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

func read(f *crashfs.FS, name string) string {
	b, err := f.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "<none>"
	}
	return string(b)
}

func TestACrashKeepsOnlyWhatWasSynced(t *testing.T) {
	f := crashfs.New()
	if err := f.MkdirAll("/d", 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, f, "/d/synced", "one", true)
	write(t, f, "/d/synced", "two", false) // data after the sync
	write(t, f, "/d/entry-never-synced", "x", true)
	if err := f.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	write(t, f, "/d/new", "y", true) // created after the directory's sync
	if err := f.Rename("/d/synced", "/d/renamed"); err != nil {
		t.Fatal(err)
	}
	old, err := f.OpenFile("/d/renamed", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Crash()
	if got := read(f, "/d/synced"); got != "one" {
		t.Errorf("synced file = %q, want its synced bytes (the rename was not synced)", got)
	}
	if got := read(f, "/d/renamed"); got != "<none>" {
		t.Errorf("renamed name = %q, want none", got)
	}
	if got := read(f, "/d/new"); got != "<none>" {
		t.Errorf("a file whose entry was never synced = %q, want none", got)
	}
	if got := read(f, "/d/entry-never-synced"); got != "x" {
		t.Errorf("file = %q, want x (its entry was synced with the directory)", got)
	}
	if _, err := old.Write([]byte("z")); !errors.Is(err, crashfs.ErrCrashed) {
		t.Errorf("write through a file opened before the crash = %v, want ErrCrashed", err)
	}
}

func TestRemoveAndRenameAreDurableOnlyWithTheDirectorysSync(t *testing.T) {
	f := crashfs.New()
	if err := f.WriteFile("/d/a", []byte("A")); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFile("/d/b.tmp", []byte("B")); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove("/d/a"); err != nil {
		t.Fatal(err)
	}
	if err := f.Rename("/d/b.tmp", "/d/b"); err != nil {
		t.Fatal(err)
	}
	f.Crash()
	if read(f, "/d/a") != "A" || read(f, "/d/b") != "<none>" || read(f, "/d/b.tmp") != "B" {
		t.Fatalf("after a crash without the directory's sync: a=%q b=%q b.tmp=%q", read(f, "/d/a"), read(f, "/d/b"), read(f, "/d/b.tmp"))
	}
	if err := f.Remove("/d/a"); err != nil {
		t.Fatal(err)
	}
	if err := f.Rename("/d/b.tmp", "/d/b"); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	f.Crash()
	es, _ := f.ReadDir("/d")
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"b"}) || read(f, "/d/b") != "B" {
		t.Errorf("after the directory's sync and a crash: %v, b=%q", names, read(f, "/d/b"))
	}
}

func TestTheHookFailsTheOperation(t *testing.T) {
	f := crashfs.New()
	f.Hook = func(op crashfs.Op, _ string) error {
		if op == crashfs.OpWrite {
			return syscall.ENOSPC
		}
		return nil
	}
	w, err := f.OpenFile("/x", os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("a")); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("write = %v, want ENOSPC", err)
	}
	if got := read(f, "/x"); got != "" {
		t.Errorf("file = %q after a failed write, want empty", got)
	}
	if _, err := f.OpenFile("/x", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); !errors.Is(err, fs.ErrExist) {
		t.Errorf("O_EXCL on an existing file = %v, want ErrExist", err)
	}
}
