package config

import (
	"strings"
	"testing"
)

// A key set to zero is validated as zero, never replaced by its default in silence.
func TestZeroIsNotTheDefault(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		wantKey string
	}{
		{"a zero read header timeout is refused", "[server]\nread_header_timeout_ms = 0\n", "server.read_header_timeout_ms"},
		{"a zero check timeout is refused", "[health]\ncheck_timeout_ms = 0\n", "health.check_timeout_ms"},
		{"an empty listen is refused", "[server]\nlisten = \"\"\n", "server.listen"},
		{"an empty base path is refused", "[server]\nbase_path = \"\"\n", "server.base_path"},
		{"an empty push job is refused", "[metrics]\npush_job = \"\"\n", "metrics.push_job"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseDoc([]byte(tt.doc), "t.toml", Options{})
			if err == nil || !strings.Contains(err.Error(), tt.wantKey) {
				t.Fatalf("parseDoc() error = %v, want a problem naming %s", err, tt.wantKey)
			}
		})
	}
	t.Run("an empty termination message path turns the message off", func(t *testing.T) {
		c, err := parseDoc([]byte("[server]\ntermination_message_path = \"\"\n"), "t.toml", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Server.TerminationMessagePath != "" {
			t.Fatalf("TerminationMessagePath = %q, want empty (off), not the default", c.Server.TerminationMessagePath)
		}
	})
	t.Run("a zero cache TTL turns the cache off", func(t *testing.T) {
		c, err := parseDoc([]byte("[health]\ncache_ttl_ms = 0\n"), "t.toml", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Health.CacheTTL() != 0 {
			t.Fatalf("CacheTTL() = %s, want 0", c.Health.CacheTTL())
		}
	})
}
