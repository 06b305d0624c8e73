package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheTestdataConfigurations loads every configuration of testdata/configs, each of
// which says on its first line what it expects ("# want: ok", or "# want: refused KEY"),
// from that directory (their files are named relative to it, as serve would read them
// there). test/process runs the same files through `config check` and `serve`.
func TestTheTestdataConfigurations(t *testing.T) {
	paths, err := filepath.Glob("testdata/configs/*.toml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no configurations: %v", err)
	}
	t.Chdir("testdata/configs")
	for _, p := range paths {
		name := filepath.Base(p)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			want, ok := strings.CutPrefix(first, "# want: ")
			if !ok {
				t.Fatalf("the first line %q says nothing of what the file expects", first)
			}
			_, err = Load(name)
			if want == "ok" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			key, ok := strings.CutPrefix(want, "refused ")
			if !ok {
				t.Fatalf("the want %q is neither ok nor refused KEY", want)
			}
			var ps *Problems
			if !errors.As(err, &ps) {
				t.Fatalf("want a problem on %s, got %v", key, err)
			}
			for _, q := range ps.List {
				if q.Key == key && q.Line > 0 {
					return
				}
			}
			t.Fatalf("want a problem on %s with its line, got %v", key, err)
		})
	}
}
