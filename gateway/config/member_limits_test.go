package config

import (
	"strings"
	"testing"
)

func TestMemberTimeoutAndBodyCap(t *testing.T) {
	const member = "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a.test/fhir\"\n"
	cases := []struct {
		name    string
		toml    string
		problem string // "" for none
	}{
		{"no timeout is the request's budget", "[server]\nrequest_timeout_ms = 1000\n" + member, ""},
		{"a timeout within the request timeout", "[server]\nrequest_timeout_ms = 1000\n" + member + "timeout_ms = 500\n", ""},
		{"a timeout longer than the request timeout names both keys", "[server]\nrequest_timeout_ms = 1000\n" + member + "timeout_ms = 1500\n",
			"registry.members[0].timeout_ms (line 6): 1500 is longer than server.request_timeout_ms (1000)"},
		{"a negative timeout", member + "timeout_ms = -1\n", "registry.members[0].timeout_ms (line 4): must not be negative"},
		{"a negative body cap", "[registry]\nmax_member_body_bytes = -1\n" + member, "registry.max_member_body_bytes (line 2): must be greater than zero"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseDoc([]byte(c.toml), "t.toml", Options{})
			if c.problem == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Registry.MaxMemberBodyBytes != DefaultMaxMemberBodyBytes {
					t.Fatalf("max_member_body_bytes defaulted to %d", cfg.Registry.MaxMemberBodyBytes)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.problem) {
				t.Fatalf("err = %v, want %q", err, c.problem)
			}
		})
	}
}
