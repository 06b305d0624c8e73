package config

import (
	"errors"
	"strings"
	"testing"
)

func TestATypeErrorNamesTheDottedKeyAndItsLine(t *testing.T) {
	const members = "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a/fhir\"\n"
	cases := []struct {
		name, doc, key string
		line           int
		message        string
	}{
		{"a key of a table", "[server]\nlisten = 1\n", "server.listen", 2, "must be a string, not an integer"},
		{"a dotted key", "\nserver.listen = 1\n", "server.listen", 2, "must be a string, not an integer"},
		{"a key of an inline table", "server = { listen = 1 }\n", "server.listen", 1, "must be a string, not an integer"},
		{"the second key of an inline table", "# c\n\nserver = { base_path = \"/x\", request_timeout_ms = \"30s\" }\n", "server.request_timeout_ms", 3, "must be an integer, not a string"},
		{"a key of a nested inline table", "[server]\ntls = { certificate_file = \"c\", key_file = true }\n", "server.tls.key_file", 2, "must be a string, not a boolean"},
		{"a key of the second entry of an array of tables", members + members + "timeout_ms = 1.5\n", "registry.members[1].timeout_ms", 7, "must be an integer, not a float"},
		{"a key of an inline array of tables", "[registry]\nmembers = [\n  { id = \"a\", query_endpoint = \"http://a/fhir\" },\n  { id = 7 },\n]\n", "registry.members[1].id", 4, "must be a string, not an integer"},
		{"an array of tables as an inline table", "registry = { members = [ { id = \"a\" }, { endpoint_id = [1] } ] }\n", "registry.members[1].endpoint_id", 1, "must be a string, not an array"},
		{"an element of an array", "[[auth.issuers]]\nissuer = \"i\"\nalgorithms = [\"RS256\", 1]\n", "auth.issuers[0].algorithms[1]", 3, "must be a string, not an integer"},
		{"a table written as a value", "server = 3\n", "server", 1, "must be a table, not an integer"},
		{"an array of tables written as a value", "[registry]\nmembers = \"a\"\n", "registry.members", 2, "must be an array of tables, not a string"},
		{"an integer past 64 bits", "[health]\ncheck_timeout_ms = 99999999999999999999\n", "health.check_timeout_ms", 2, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "t.toml", Options{})
			if err == nil {
				t.Fatal("accepted")
			}
			var ps *Problems
			if !errors.As(err, &ps) || len(ps.List) != 1 {
				t.Fatalf("want one problem, got %v", err)
			}
			p := ps.List[0]
			if p.Key != tc.key || p.Line != tc.line || !strings.Contains(p.Message, tc.message) {
				t.Fatalf("got %s; want %s (line %d): %s", p, tc.key, tc.line, tc.message)
			}
			for _, goName := range []string{"config.", "struct field", "int64", "[]string"} {
				if strings.Contains(p.String(), goName) {
					t.Fatalf("the problem %q names Go's %q", p, goName)
				}
			}
		})
	}
}
