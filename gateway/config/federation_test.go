package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTheFederationTable(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("key", strings.Repeat("k", 32)+"\n")
	short := write("short", "0123456789\n")
	huge := write("huge", strings.Repeat("k", MaxPageTokenKeyBytes+1))
	cases := []struct {
		name    string
		toml    string
		opts    Options
		problem string // "" for none
	}{
		{"no table takes every default", "", Options{}, ""},
		{"strict_fhir and a key file of 32 bytes", "[federation]\nstrict_fhir = true\npage_token_key_file = \"" + good + "\"\n", Options{}, ""},
		{"a key file that is missing names the key", "[federation]\npage_token_key_file = \"" + filepath.Join(dir, "nope") + "\"\n", Options{},
			"federation.page_token_key_file (line 2): open"},
		{"a missing key file is not read for another machine", "[federation]\npage_token_key_file = \"" + filepath.Join(dir, "nope") + "\"\n", Options{SkipFiles: true}, ""},
		{"a key shorter than 32 bytes is refused", "[federation]\npage_token_key_file = \"" + short + "\"\n", Options{}, "holds 10 bytes, fewer than 32"},
		{"a key file larger than 4096 bytes is refused", "[federation]\npage_token_key_file = \"" + huge + "\"\n", Options{}, "larger than 4096 bytes"},
		{"a max_count of 1000", "[federation]\nmax_count = 1000\n", Options{}, ""},
		{"a max_count above 1000 is refused", "[federation]\nmax_count = 1001\n", Options{}, "federation.max_count (line 2): 1001 is not from 1 to 1000"},
		{"a max_count of 0 is refused", "[federation]\nmax_count = 0\n", Options{}, "federation.max_count"},
		{"a default_count above max_count names both keys", "[federation]\nmax_count = 50\ndefault_count = 60\n", Options{},
			"federation.default_count (line 3): 60 is not from 1 to federation.max_count (50)"},
		{"a default_count of 0 is refused", "[federation]\ndefault_count = 0\n", Options{}, "federation.default_count"},
		{"a capability_ttl_ms of 0 asks every time", "[federation]\ncapability_ttl_ms = 0\n", Options{}, ""},
		{"a negative capability_ttl_ms is refused", "[federation]\ncapability_ttl_ms = -1\n", Options{}, "federation.capability_ttl_ms (line 2): must not be negative"},
		{"a page_token_ttl_ms of a second", "[federation]\npage_token_ttl_ms = 1000\n", Options{}, ""},
		{"a page_token_ttl_ms under a second is refused", "[federation]\npage_token_ttl_ms = 999\n", Options{},
			"federation.page_token_ttl_ms (line 2): 999 is less than the minimum, 1000"},
		{"a page_token_ttl_ms of 0 is refused", "[federation]\npage_token_ttl_ms = 0\n", Options{}, "federation.page_token_ttl_ms (line 2)"},
		{"an unknown key in the table is named", "[federation]\nstrict = true\n", Options{}, "federation.strict (line 2): unknown key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseDoc([]byte(c.toml), "t.toml", c.opts)
			if c.problem == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.toml == "" && (cfg.Federation != Federation{DefaultCount: 20, MaxCount: 1000, CapabilityTTLMS: 60000, PageTokenTTLMS: 3600000}) {
					t.Fatalf("defaults %+v", cfg.Federation)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.problem) {
				t.Fatalf("err = %v, want %q", err, c.problem)
			}
		})
	}
}

func TestThePageTokenTTLIsReadAsADuration(t *testing.T) {
	cfg, err := parseDoc([]byte("[federation]\npage_token_ttl_ms = 1500\n"), "t.toml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Federation.PageTokenTTL(); got != 1500*time.Millisecond {
		t.Fatalf("PageTokenTTL() = %s", got)
	}
	// A Config assembled in code, with no defaults applied, gets the default.
	if got := (Federation{}).PageTokenTTL(); got != time.Hour {
		t.Fatalf("the zero table's PageTokenTTL() = %s, want an hour", got)
	}
}

func TestReadPageTokenKeyTrimsTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "key")
	key := strings.Repeat("ab", 20)
	if err := os.WriteFile(p, []byte("  "+key+"\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPageTokenKey(p)
	if err != nil || string(got) != key {
		t.Fatalf("ReadPageTokenKey = %q, %v", got, err)
	}
}
