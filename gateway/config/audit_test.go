package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestTheAuditTable(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("  abc.def  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	spool := filepath.Join(dir, "spool")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	repo := "[audit]\ndestination = \"repository\"\nurl = \"https://arr.example/fhir\"\nspool_dir = \"" + spool + "\"\n"
	cases := []struct {
		name    string
		doc     string
		wantKey string // "" when the document is accepted
		wantMsg string
	}{
		{"an empty table logs", "[audit]\n", "", ""},
		{"a repository with its url and spool", repo, "", ""},
		{"a repository with a feed and a token", repo + "bearer_token_file = \"" + token + "\"\n[audit.feed]\nurl = \"https://feed.example/fhir\"\nspool_dir = \"" + spool + "\"\n", "", ""},
		{"an unknown destination", "[audit]\ndestination = \"syslog\"\n", "audit.destination", "neither"},
		{"a repository without a url", "[audit]\ndestination = \"repository\"\nspool_dir = \"" + spool + "\"\n", "audit.url", "is required"},
		{"a url with credentials", strings.Replace(repo, "https://arr", "https://u:p@arr", 1), "audit.url", "credentials"},
		{"a url with a query", strings.Replace(repo, "/fhir", "/fhir?x=1", 1), "audit.url", "query"},
		{"a relative spool dir", strings.Replace(repo, spool, "spool", 1), "audit.spool_dir", "absolute"},
		{"a spool dir at the root", strings.Replace(repo, spool, "/", 1), "audit.spool_dir", "root"},
		{"a cap below the floor", repo + "max_spool_bytes = 1024\n", "audit.max_spool_bytes", "not from 4194304"},
		{"a cap above the ceiling", repo + "max_spool_bytes = 68719476737\n", "audit.max_spool_bytes", "64 GiB"},
		{"a zero timeout", repo + "timeout_ms = 0\n", "audit.timeout_ms", "greater than zero"},
		{"a timeout past the minute", repo + "timeout_ms = 60001\n", "audit.timeout_ms", "more than the maximum, 60000"},
		{"an unknown on_failure", repo + "on_failure = \"drop\"\n", "audit.on_failure", "neither"},
		{"a certificate without its key", repo + "client_certificate_file = \"/c.pem\"\n", "audit.client_key_file", "both files"},
		{"an empty token file", repo + "bearer_token_file = \"" + empty + "\"\n", "audit.bearer_token_file", "is empty"},
		{"a missing CA file", repo + "ca_file = \"" + filepath.Join(dir, "nope") + "\"\n", "audit.ca_file", "no such file"},
		{"a url with the log destination", "[audit]\nurl = \"http://arr/fhir\"\n", "audit.url", "destination is \"log\""},
		{"a feed with the log destination", "[audit]\n[audit.feed]\nurl = \"http://f/fhir\"\nspool_dir = \"" + spool + "\"\n", "audit.feed", "destination is \"log\""},
		{"a feed without a spool dir", repo + "[audit.feed]\nurl = \"http://f/fhir\"\n", "audit.feed.spool_dir", "is required"},
		{"a feed at the repository's url", repo + "[audit.feed]\nurl = \"https://arr.example/fhir\"\nspool_dir = \"" + spool + "\"\n", "audit.feed.url", "twice"},
		// Every file is read without blocking and must be a regular file.
		{"a named pipe as the token file", repo + "bearer_token_file = \"" + fifo + "\"\n", "audit.bearer_token_file", fifo + " is a named pipe (FIFO), not a regular file"},
		{"a named pipe as the CA file", repo + "ca_file = \"" + fifo + "\"\n", "audit.ca_file", "named pipe"},
		{"a named pipe as the client certificate", repo + "client_certificate_file = \"" + fifo + "\"\nclient_key_file = \"" + token + "\"\n", "audit.client_certificate_file", "named pipe"},
		{"a directory as the token file", repo + "bearer_token_file = \"" + dir + "\"\n", "audit.bearer_token_file", "is a directory"},
		// The spool directories are stat-ed as serve's creating them would find them.
		{"a file as the spool dir", strings.Replace(repo, spool, "/etc/passwd", 1), "audit.spool_dir", "/etc/passwd is a regular file, not a directory"},
		{"a spool dir no one can write", strings.Replace(repo, spool, "/proc/self", 1), "audit.spool_dir", "/proc/self is not writable"},
		{"a file as the feed's spool dir", repo + "[audit.feed]\nurl = \"https://f/fhir\"\nspool_dir = \"" + token + "\"\n", "audit.feed.spool_dir", "not a directory"},
		// A token sent in clear.
		{"a token over http to another host", strings.Replace(repo, "https://arr", "http://arr", 1) + "bearer_token_file = \"" + token + "\"\n", "audit.url", "audit.bearer_token_file is sent in clear over http to a non-loopback host; use https or set audit.allow_insecure = true"},
		{"a feed token over http to another host", repo + "[audit.feed]\nurl = \"http://10.0.0.1/fhir\"\nspool_dir = \"" + spool + "\"\nbearer_token_file = \"" + token + "\"\n", "audit.feed.url", "allow_insecure = true"},
		{"allow_insecure with nothing in clear", repo + "allow_insecure = true\n", "audit.allow_insecure", "nothing is sent in clear (it has no bearer_token_file)"},
		{"allow_insecure with https", repo + "allow_insecure = true\nbearer_token_file = \"" + token + "\"\n", "audit.allow_insecure", "audit.url is https"},
		{"allow_insecure with the log destination", "[audit]\nallow_insecure = true\n", "audit.allow_insecure", "destination is \"log\""},
		{"an unknown key of the feed", repo + "[audit.feed]\nurl = \"http://f/fhir\"\nspool_dir = \"" + spool + "\"\nretries = 3\n", "audit.feed.retries", "unknown key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseDoc([]byte(tc.doc), "t.toml", Options{})
			if tc.wantKey == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if c.Audit == nil {
					t.Fatal("the table is present but Audit is nil")
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

func TestTheAuditDefaults(t *testing.T) {
	c, err := parseDoc([]byte("[server]\nlisten = \":8080\"\n"), "t.toml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Audit != nil {
		t.Fatal("no [audit] table, but Audit is set: audit must be off unless its table is present")
	}
	c, err = parseDoc([]byte("[audit]\ndestination = \"repository\"\nurl = \"http://a/fhir\"\nspool_dir = \""+t.TempDir()+"\"\n"), "t.toml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Audit.OnFailure != AuditRefuse || !c.Audit.Refuses() || c.Audit.SpoolBytes() != DefaultMaxSpoolBytes || c.Audit.Timeout().Milliseconds() != DefaultAuditTimeoutMS {
		t.Fatalf("defaults: %+v", c.Audit)
	}
	if c.Audit.Destination != AuditToRepository {
		t.Fatalf("destination = %q", c.Audit.Destination)
	}
}

func TestReadBearerToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if tok, err := ReadBearerToken("audit.bearer_token_file", write("ok", "tok-1\n")); err != nil || tok != "tok-1" {
		t.Fatalf("ReadBearerToken = %q, %v", tok, err)
	}
	if _, err := ReadBearerToken("audit.bearer_token_file", write("two", "a b")); err == nil {
		t.Fatal("two tokens accepted")
	}
	if _, err := ReadBearerToken("audit.bearer_token_file", write("big", strings.Repeat("a", MaxBearerTokenBytes+1))); err == nil {
		t.Fatal("an oversized token accepted")
	}
}

// RequiredSpoolBytes is the volume every spool of a configuration needs:
// max_spool_bytes for each (docs/audit-spool.md, "Sizing").
func TestRequiredSpoolBytes(t *testing.T) {
	dir := t.TempDir()
	repo := "[audit]\ndestination = \"repository\"\nurl = \"http://a/fhir\"\nspool_dir = \"" + dir + "\"\n"
	feed := "[audit.feed]\nurl = \"http://f/fhir\"\nspool_dir = \"" + dir + "\"\n"
	for _, c := range []struct {
		name string
		doc  string
		want int64
	}{
		{"no [audit]", "", 0},
		{"destination log", "[audit]\ndestination = \"log\"\n", 0},
		{"one spool, the default cap", repo, DefaultMaxSpoolBytes},
		{"one spool of 8 MiB", repo + "max_spool_bytes = 8388608\n", 8 << 20},
		{"two spools of 8 MiB", repo + "max_spool_bytes = 8388608\n" + feed, 16 << 20},
		{"two spools, the default cap", repo + feed, 2 * DefaultMaxSpoolBytes},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseDoc([]byte("[server]\nlisten = \":8080\"\n"+c.doc), "t.toml", Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := RequiredSpoolBytes(cfg); got != c.want {
				t.Fatalf("RequiredSpoolBytes = %d, want %d", got, c.want)
			}
		})
	}
	if got := RequiredSpoolBytes(nil); got != 0 {
		t.Fatalf("RequiredSpoolBytes(nil) = %d", got)
	}
}
