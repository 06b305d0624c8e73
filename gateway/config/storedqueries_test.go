package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStoredQueriesTable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, doc, key, msg string
	}{
		{"a store without its directory is refused", "[stored_queries]\n", "stored_queries.dir", "is required"},
		{"a directory that does not exist is refused", "[stored_queries]\ndir = \"" + dir + "/none\"\n", "stored_queries.dir", "cannot be read"},
		{"a file is not a store", "[stored_queries]\ndir = \"" + file + "\"\n", "stored_queries.dir", "is not a directory"},
		{"a drift interval under a second is refused", "[stored_queries]\ndir = \"" + dir + "\"\ndrift_interval_ms = 999\n", "stored_queries.drift_interval_ms", "999 is less than the minimum, 1000: it is from 1000 to 86400000"},
		{"a drift interval past a day is refused", "[stored_queries]\ndir = \"" + dir + "\"\ndrift_interval_ms = 86400001\n", "stored_queries.drift_interval_ms", "more than the maximum, 86400000 (24h0m0s)"},
		{"an unknown key is refused", "[stored_queries]\ndir = \"" + dir + "\"\nfolder = \"x\"\n", "stored_queries.folder", "unknown key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDoc([]byte(tc.doc), "t.toml", Options{})
			var ps *Problems
			if !errors.As(err, &ps) {
				t.Fatalf("accepted: %v", err)
			}
			for _, p := range ps.List {
				if p.Key == tc.key && strings.Contains(p.Message, tc.msg) && p.Line > 0 {
					return
				}
			}
			t.Fatalf("want %s: %q; got %v", tc.key, tc.msg, err)
		})
	}
	t.Run("a store takes the default drift interval", func(t *testing.T) {
		c, err := parseDoc([]byte("[stored_queries]\ndir = \""+dir+"\"\n"), "t.toml", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if c.StoredQueries.DriftInterval() != 5*time.Minute || c.StoredQueries.DriftIntervalMS != DefaultDriftIntervalMS {
			t.Fatalf("drift interval %v", c.StoredQueries.DriftInterval())
		}
	})
	t.Run("without the table there is no store", func(t *testing.T) {
		c, err := parseDoc(nil, "t.toml", Options{})
		if err != nil || c.StoredQueries != nil {
			t.Fatalf("%v %+v", err, c.StoredQueries)
		}
	})
	t.Run("the webhook does not look for the directory", func(t *testing.T) {
		if _, err := parseDoc([]byte("[stored_queries]\ndir = \"/no/such/dir\"\n"), "t.toml", Options{SkipFiles: true}); err != nil {
			t.Fatal(err)
		}
	})
}
