package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

func i64(v int64) *int64 { return &v }

func TestRenderWritesTheSetFieldsOfTheTypedServer(t *testing.T) {
	owned := Owned{
		Server: Server{Listen: "0.0.0.0:9000", DrainDelayMS: i64(0), TLS: TLS{CertificateFile: "/c", KeyFile: "/k"}},
		Fields: map[string]string{"server.listen": "spec.port", "server.drain_delay_ms": "spec.drainDelay", "server.tls": "spec.tls"},
	}
	out, err := Render(owned, []byte("[health]\ncheck_timeout_ms = 250\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, want := range []string{"listen = '0.0.0.0:9000'", "drain_delay_ms = 0", "[server.tls]", "certificate_file = '/c'", "[health]", "check_timeout_ms = 250"} {
		if !strings.Contains(got, want) {
			t.Errorf("rendered file lacks %q:\n%s", want, got)
		}
	}
	// Zero values and nil pointers are not set: the gateway's defaults apply to them.
	for _, absent := range []string{"base_path", "request_timeout_ms", "read_header_timeout_ms", "client_ca_file"} {
		if strings.Contains(got, absent) {
			t.Errorf("rendered file sets %s, which the owner left unset:\n%s", absent, got)
		}
	}
	if _, err := parseDoc(out, "rendered", Options{SkipFiles: true}); err != nil {
		t.Errorf("the rendered file does not parse: %v", err)
	}
}

func TestRenderRefusesWhatTheOwnerReserves(t *testing.T) {
	owned := Owned{Server: Server{Listen: "0.0.0.0:1"}, Fields: map[string]string{"server.listen": "spec.port", "server.tls": "spec.tls.secretName"}}
	tests := []struct {
		name, user, want string
	}{
		{"a key", "[server]\nlisten = '0.0.0.0:2'\n", "server.listen: is set by the Gateway from spec.port; set spec.port instead"},
		{"a key under a reserved table, even when the owner sets none", "[server.tls]\nkey_file = 'k'\n", "server.tls: is set by the Gateway from spec.tls.secretName"},
		{"a document that is not TOML, with its line", "[server\n", "(line 1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Render(owned, []byte(tt.user))
			var ps *Problems
			if !errors.As(err, &ps) || !strings.Contains(ps.Error(), tt.want) {
				t.Fatalf("Render = %v, want problems containing %q", err, tt.want)
			}
		})
	}
	if _, err := Render(owned, []byte("[server]\nread_header_timeout_ms = 3000\n")); err != nil {
		t.Errorf("a key the owner does not reserve was refused: %v", err)
	}
}

func TestRenderRefusesAnOwnerThatSetsAKeyItDoesNotReserve(t *testing.T) {
	_, err := Render(Owned{Server: Server{BasePath: "/x"}, Fields: map[string]string{}}, nil)
	if err == nil || !strings.Contains(err.Error(), "server.base_path is set but not reserved") {
		t.Fatalf("Render = %v, want the unreserved key named", err)
	}
}

func TestAuditSpoolsCountsTheSpoolsOfARepositoryDestination(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want int
	}{
		{"", 0},
		{"[audit]\ndestination = 'log'\n", 0},
		{"[audit]\n", 0},
		{"[audit]\ndestination = 'repository'\nurl = 'https://a.example/fhir'\n", 1},
		{"[audit]\ndestination = 'repository'\n[audit.feed]\nurl = 'https://f.example/fhir'\n", 2},
		{"[audit\n", 0},
	} {
		if got := AuditSpools([]byte(c.doc)); got != c.want {
			t.Errorf("AuditSpools(%q) = %d, want %d", c.doc, got, c.want)
		}
	}
}

// TestMountsOfReadsAsEachPredicate: the one decode of MountsOf answers what
// AuditSpools and HasStoredQueries answer on their own, also when one table does not
// decode and the other does.
func TestMountsOfReadsAsEachPredicate(t *testing.T) {
	for _, doc := range []string{
		"",
		"[audit]\ndestination = 'log'\n",
		"[audit]\ndestination = 'repository'\n[audit.feed]\nurl = 'https://f.example/fhir'\n[stored_queries]\n",
		"[stored_queries]\nmax = 3\n",
		"audit = 1\n[stored_queries]\n",
		"stored_queries = 'x'\n[audit]\ndestination = 'repository'\n",
		"[audit]\ndestination = 7\n[stored_queries]\n",
		"[[audit.feed]]\n[stored_queries]\n",
		"[audit\n",
	} {
		want := Mounts{AuditSpools: AuditSpools([]byte(doc)), StoredQueries: HasStoredQueries([]byte(doc))}
		if got := MountsOf([]byte(doc)); got != want {
			t.Errorf("MountsOf(%q) = %+v, want %+v", doc, got, want)
		}
	}
	if got := MountsOf([]byte("audit = 1\n[stored_queries]\n")); !got.StoredQueries {
		t.Errorf("an [audit] that does not decode hid [stored_queries]: %+v", got)
	}
}

func TestRenderMergesTheOwnedSpoolDirsIntoTheUsersAuditTable(t *testing.T) {
	owned := Owned{Audit: Audit{SpoolDir: "/var/spool", Feed: &AuditFeed{SpoolDir: "/var/spool"}},
		Fields: map[string]string{"audit.spool_dir": "spec.audit.spool", "audit.feed.spool_dir": "spec.audit.spool"}}
	out, err := Render(owned, []byte("[audit]\ndestination = 'repository'\nurl = 'https://a.example/fhir'\n[audit.feed]\nurl = 'https://f.example/fhir'\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Audit Audit `toml:"audit"`
	}
	if err := toml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Audit.SpoolDir != "/var/spool" || got.Audit.URL != "https://a.example/fhir" || got.Audit.Feed == nil ||
		got.Audit.Feed.SpoolDir != "/var/spool" || got.Audit.Feed.URL != "https://f.example/fhir" {
		t.Fatalf("rendered audit = %+v\n%s", got.Audit, out)
	}
	_, err = Render(owned, []byte("[audit]\nspool_dir = '/elsewhere'\n"))
	if err == nil || !strings.Contains(err.Error(), "spec.audit.spool") {
		t.Fatalf("a user spool_dir: err = %v, want it refused naming spec.audit.spool", err)
	}
}

// allow_insecure is the user's: the rendered file keeps it where the user set it, in
// [audit] beside the owned spool_dir and in any other table.
func TestRenderKeepsTheUsersAllowInsecure(t *testing.T) {
	owned := Owned{Audit: Audit{SpoolDir: "/var/spool"},
		Fields: map[string]string{"audit.spool_dir": "spec.audit.spool"}}
	out, err := Render(owned, []byte("[audit]\ndestination = 'repository'\nurl = 'http://a.example/fhir'\nbearer_token_file = '/t'\nallow_insecure = true\n"+
		"[consent]\nurl = 'http://pdp.example'\nbearer_token_file = '/t'\nallow_insecure = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Audit   Audit   `toml:"audit"`
		Consent Consent `toml:"consent"`
	}
	if err := toml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if !got.Audit.AllowInsecure || !got.Consent.AllowInsecure || got.Audit.SpoolDir != "/var/spool" {
		t.Fatalf("rendered: audit %+v, consent %+v\n%s", got.Audit, got.Consent, out)
	}
}
