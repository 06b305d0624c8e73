package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bearer token sent over http to a host that is not loopback is refused unless the
// table says allow_insecure = true, which is then a warning; allow_insecure where
// nothing is sent in clear is refused. Every table with credentials, each by its key.
func TestTokensInClear(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spool := filepath.Join(dir, "spool")
	const issuer = "[[auth.issuers]]\nissuer = \"i\"\naudience = \"a\"\noperator_scope = \"op\"\njwks_url = \"https://i/keys\"\n"
	// Each table as a document with its url as %s; extra keys are appended to it.
	tables := map[string]func(url, extra string) string{
		"audit": func(url, extra string) string {
			return "[audit]\ndestination = \"repository\"\nspool_dir = \"" + spool + "\"\nurl = \"" + url + "\"\n" + extra
		},
		"audit.feed": func(url, extra string) string {
			return "[audit]\ndestination = \"repository\"\nspool_dir = \"" + spool + "\"\nurl = \"https://arr.example/fhir\"\n[audit.feed]\nspool_dir = \"" + spool + "\"\nurl = \"" + url + "\"\n" + extra
		},
		"pdqm":    func(url, extra string) string { return "[pdqm]\nurl = \"" + url + "\"\n" + extra },
		"consent": func(url, extra string) string { return "[consent]\nurl = \"" + url + "\"\n" + extra },
		"localizer": func(url, extra string) string {
			return "[localizer]\nprotocol = \"xcpd\"\nurl = \"" + url + "\"\n" + extra
		},
		"resolver": func(url, extra string) string {
			return "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"https://a.example/fhir\"\nidentifier_system = \"urn:oid:1.2\"\n[resolver]\nurl = \"" + url + "\"\n" + extra
		},
		"registry.mcsd": func(url, extra string) string {
			return "[registry.mcsd]\nmember_identifier_system = \"urn:oid:1.2.3\"\nurl = \"" + url + "\"\n" + extra
		},
		"pmir": func(url, extra string) string {
			return issuer + "[pmir]\nendpoint = \"https://gw.example/pmir/$process-message\"\nfeed_scope = \"s\"\nurl = \"" + url + "\"\n" + extra
		},
	}
	tok := "bearer_token_file = \"" + token + "\"\n"
	allow := "allow_insecure = true\n"
	for table, doc := range tables {
		for _, tc := range []struct {
			name, url, extra string
			wantKey, wantMsg string // "" when accepted
			warns            bool
		}{
			{"a token over https", "https://s.example/fhir", tok, "", "", false},
			{"a token over http to 127.0.0.1", "http://127.0.0.1:8080/fhir", tok, "", "", false},
			{"a token over http to 127.9.9.9", "http://127.9.9.9/fhir", tok, "", "", false},
			{"a token over http to [::1]", "http://[::1]:8080/fhir", tok, "", "", false},
			{"a token over http to localhost", "http://LocalHost:8080/fhir", tok, "", "", false},
			{"no token over http", "http://s.example/fhir", "", "", "", false},
			{"a token over http to a name", "http://s.example/fhir", tok, table + ".url",
				table + ".bearer_token_file is sent in clear over http to a non-loopback host; use https or set " + table + ".allow_insecure = true", false},
			{"a token over http to an address", "http://10.1.2.3/fhir", tok, table + ".url", "sent in clear", false},
			{"a token over http to localhost's look-alike", "http://localhost.example/fhir", tok, table + ".url", "sent in clear", false},
			{"a token over http, allowed", "http://s.example/fhir", tok + allow, "", "", true},
			{"allowed over https", "https://s.example/fhir", tok + allow, table + ".allow_insecure", "nothing is sent in clear (" + table + ".url is https): remove it", false},
			{"allowed to loopback", "http://127.0.0.1/fhir", tok + allow, table + ".allow_insecure", "url names a loopback host", false},
			{"allowed without a token", "http://s.example/fhir", allow, table + ".allow_insecure", "it has no bearer_token_file", false},
		} {
			t.Run(table+"/"+tc.name, func(t *testing.T) {
				c, err := parseDoc([]byte(doc(tc.url, tc.extra)), "t.toml", Options{})
				if tc.wantKey == "" {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					var warned []string
					for _, w := range c.Warnings() {
						warned = append(warned, w.String())
					}
					want := table + ".allow_insecure (line "
					got := strings.Join(warned, "\n")
					if tc.warns != strings.Contains(got, want) || tc.warns != (len(warned) > 0) {
						t.Fatalf("warnings %q, want one of %s: %v", got, table+".allow_insecure", tc.warns)
					}
					if tc.warns && !strings.Contains(got, "the token of "+table+".bearer_token_file is sent in clear over http to a non-loopback host ("+table+".url)") {
						t.Fatalf("warning %q does not say what is sent where", got)
					}
					return
				}
				var ps *Problems
				if !errors.As(err, &ps) {
					t.Fatalf("want problems, got %v", err)
				}
				for _, p := range ps.List {
					if p.Key == tc.wantKey && strings.Contains(p.Message, tc.wantMsg) && p.Line > 0 {
						return
					}
				}
				t.Fatalf("want a problem of %s (with its line) saying %q, got %v", tc.wantKey, tc.wantMsg, err)
			})
		}
	}
}

// The operator's webhook validates with SkipFiles: the refusal reads no file and is
// made there too.
func TestTokensInClearWithoutFiles(t *testing.T) {
	_, err := parseDoc([]byte("[consent]\nurl = \"http://pdp.example\"\nbearer_token_file = \"/var/run/secrets/t\"\n"), "t.toml", Options{SkipFiles: true})
	if err == nil || !strings.Contains(err.Error(), "consent.url") {
		t.Fatalf("err = %v, want consent.url refused", err)
	}
}
