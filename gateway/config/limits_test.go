package config

import (
	"strings"
	"testing"
)

func TestLimitsAreRefusedOutOfRangeNamingTheirKeys(t *testing.T) {
	const member = "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a.test/fhir\"\n"
	cases := []struct {
		name    string
		toml    string
		problem string // "" for none
	}{
		{"the defaults", member, ""},
		{"every limit at its lowest", "[limits]\nmax_in_flight_requests = 1\nmax_member_calls = 1\nmax_queued_member_calls = 1\nmax_member_calls_per_member = 1\n" +
			"max_member_entries = 1000\nmax_answer_entries = 1000\nmax_search_bytes = 16777216\nmax_query_bytes = 9216\nmax_registry_members = 1\n" +
			"max_routed_body_buffer_bytes = 1\nmember_call_wait_ms = 1\nmin_member_call_ms = 1\n" + member, ""},
		{"no in-flight request", "[limits]\nmax_in_flight_requests = 0\n", "limits.max_in_flight_requests (line 2): 0 is not from 1 to 100000"},
		{"more calls per member than in total", "[limits]\nmax_member_calls = 4\nmax_member_calls_per_member = 5\n",
			"limits.max_member_calls_per_member (line 3): 5 is not from 1 to 4"},
		{"a queue shorter than a first page of the registry", "[limits]\nmax_queued_member_calls = 999\nmax_member_calls = 10\n",
			"limits.max_queued_member_calls (line 2): 999 is not from 1000 to 10000000"},
		{"fewer member entries than a full page", "[limits]\nmax_member_entries = 999\n", "limits.max_member_entries (line 2): 999 is not from 1000 to 1000000"},
		{"a smaller max_count lowers the floor", "[federation]\nmax_count = 10\ndefault_count = 10\n[limits]\nmax_member_entries = 10\nmax_answer_entries = 10\n", ""},
		{"fewer answer entries than a full page", "[limits]\nmax_answer_entries = -1\n", "limits.max_answer_entries (line 2): -1 is not from 1000"},
		{"a search budget below one member's body cap", "[limits]\nmax_search_bytes = 1024\n", "limits.max_search_bytes (line 2): 1024 is not from 16777216"},
		{"a query limit past what net/http reads", "[limits]\nmax_query_bytes = 1048576\n", "limits.max_query_bytes (line 2): 1048576 is not from 9216 to 524288"},
		{"no routed body buffer", "[limits]\nmax_routed_body_buffer_bytes = -1\n", "limits.max_routed_body_buffer_bytes (line 2): -1 is not from 1 to 16777216"},
		{"a routed body buffer past 16 MiB", "[limits]\nmax_routed_body_buffer_bytes = 16777217\n", "limits.max_routed_body_buffer_bytes (line 2): 16777217 is not from 1 to 16777216"},
		{"a slot wait past an hour", "[limits]\nmember_call_wait_ms = 3600001\n", "limits.member_call_wait_ms (line 2): 3600001 is more than the maximum, 3600000 (1h0m0s)"},
		{"a slot wait that wraps a duration", "[limits]\nmember_call_wait_ms = 18446744083710\n", "limits.member_call_wait_ms (line 2): 18446744083710 is more than the maximum, 3600000 (1h0m0s)"},
		{"a least call budget past a minute", "[limits]\nmin_member_call_ms = 60001\n", "limits.min_member_call_ms (line 2): 60001 is more than the maximum, 60000 (1m0s)"},
		{"a negative least call budget", "[limits]\nmin_member_call_ms = -5\n", "limits.min_member_call_ms (line 2): must be greater than zero: it is from 1 to 60000 (1m0s)"},
		{"more members than the registry may list", "[limits]\nmax_registry_members = 1\n" + member + strings.Replace(member, `"a"`, `"b"`, 1),
			"registry.members (line 3): lists 2 members, more than limits.max_registry_members (1)"},
		{"a trusted proxy that is no CIDR", "[forwarding]\ntrusted_proxies = [\"10.0.0.0/8\", \"10.0.0.1\"]\n",
			`forwarding.trusted_proxies (line 2): entry 1, "10.0.0.1", is not a CIDR`},
		{"a via id that is no token", "[forwarding]\nvia_id = \"two words\"\n", `forwarding.via_id (line 2): "two words" must be 1 to 64`},
		{"trusted proxies and a via id", "[forwarding]\ntrusted_proxies = [\"10.0.0.0/8\", \"::1/128\"]\nvia_id = \"gw-1\"\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseDoc([]byte(c.toml), "t.toml", Options{})
			if c.problem == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.name == "the defaults" && cfg.Limits != defaultLimits() {
					t.Fatalf("limits defaulted to %+v", cfg.Limits)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.problem) {
				t.Fatalf("err = %v, want %q", err, c.problem)
			}
		})
	}
}

func TestAMemberThatIsTheGatewayItselfIsRefused(t *testing.T) {
	cases := []struct {
		name, listen, base, endpoint string
		self                         bool
	}{
		{"loopback, same port, under the base path", ":8080", "/", "http://127.0.0.1:8080/fhir", true},
		{"localhost on the listener's port", ":8080", "/api", "http://localhost:8080/api/fhir", true},
		{"IPv6 loopback", "[::]:8080", "/", "http://[::1]:8080/nodes/a/fhir", true},
		{"the listener's own address", "10.1.2.3:443", "/", "https://10.1.2.3/fhir", true},
		{"the scheme's default port", ":80", "/", "http://127.0.0.1/fhir", true},
		{"the base path itself", ":8080", "/api", "http://127.0.0.1:8080/api", true},
		{"another port", ":8080", "/", "http://127.0.0.1:8081/fhir", false},
		{"outside the base path", ":8080", "/api", "http://127.0.0.1:8080/other/fhir", false},
		{"a prefix that is not a path segment", ":8080", "/api", "http://127.0.0.1:8080/apix/fhir", false},
		{"loopback, but the listener is on another address", "10.1.2.3:8080", "/", "http://127.0.0.1:8080/fhir", false},
		{"another host", ":8080", "/", "http://member.test:8080/fhir", false},
		{"a listener on port 0 cannot be told", "127.0.0.1:0", "/", "http://127.0.0.1:0/fhir", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := "[server]\nlisten = \"" + c.listen + "\"\nbase_path = \"" + c.base + "\"\n[[registry.members]]\nid = \"a\"\nquery_endpoint = \"" + c.endpoint + "\"\n"
			_, err := parseDoc([]byte(doc), "t.toml", Options{})
			const want = "registry.members[0].query_endpoint (line 6): " + `"`
			switch {
			case c.self && (err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "this gateway's own listener")):
				t.Fatalf("err = %v, want a refusal of the member", err)
			case !c.self && err != nil:
				t.Fatalf("err = %v, want none", err)
			}
		})
	}
}
