package config

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// FuzzParse feeds arbitrary documents to Parse. It must never panic; every refusal is a
// *Problems whose problems each name a key; and a configuration that parses must
// validate clean again (the defaults never produce a configuration Validate refuses).
// The unknown keys Parse reports are go-toml's DisallowUnknownFields' (unknownKeys), for
// documents small enough for go-toml to report them. Seeds: the f.Add calls below
// (among them a configuration of 1 MiB with its problems on its last lines) and
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add(append(append([]byte("[server]\nlisten = \":8080\"\n"), bytes.Repeat([]byte("\n# padding\n"), 1<<20/11)...),
		"[health]\ncheck_timeout_ms = \"1s\"\nmystery = 1\n"...))
	for _, seed := range []string{
		"",
		"[server]\nlisten = \"0.0.0.0:8080\"\nbase_path = \"/gw\"\nrequest_timeout_ms = 30000\ndrain_delay_ms = 5000\nshutdown_timeout_ms = 30000\nbindings_drain_timeout_ms = 5000\nread_header_timeout_ms = 5000\n",
		"[server]\nrequest_timeout_ms = 2000\nshutdown_timeout_ms = 1000\n",
		"[server]\nlisten = \"[::]:8443\"\ntermination_grace_period_seconds = 45\n[server.tls]\ncertificate_file = \"c\"\nkey_file = \"k\"\nclient_ca_file = \"ca\"\nhealthcheck_identity_file = \"id\"\n",
		"[health]\ncheck_timeout_ms = 100\ncache_ttl_ms = 1000\nmember_ready_check = true\nminimal = true\n[metrics]\npath = \"/m\"\ndisabled = false\n",
		"[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a/fhir\"\n[[registry.members]]\nid = \"a\"\nquery_endpoint = \"https://u:p@b/?q#f\"\nendpoint_id = \"A\"\n",
		"[[auth.issuers]]\nissuer = \"i\"\naudience = \"a\"\noperator_scope = \"op\"\njwks_url = \"https://i/keys\"\nalgorithms = [\"RS256\", \"none\"]\njwks_refresh_ms = -1\n",
		"mystery = 1\n[server]\nlisen = 2\n[server.tls.x]\ny = 3\n",
		"[server\nlisten = ",
		"server = 1\n",
		"[server]\nrequest_timeout_ms = 9223372036854775807\ndrain_delay_ms = -9223372036854775808\n",
		"registry.members = [{id = \"a\", query_endpoint = \"http://a\"}]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if c := defaults(); len(data) <= 16<<10 && toml.Unmarshal(data, &c) == nil {
			if err := sameUnknownKeys(unknownKeys(data, reflect.TypeFor[Config]()), goTomlUnknownKeys(t, data)); err != nil {
				t.Fatal(err)
			}
		}
		opts := Options{SkipFiles: true}
		cfg, err := Parse(data, "fuzz.toml", opts)
		if err != nil {
			var ps *Problems
			if !errors.As(err, &ps) || len(ps.List) == 0 {
				t.Fatalf("Parse refused with %T %v, want *Problems with at least one problem", err, err)
			}
			for _, p := range ps.List {
				if p.Key == "" || p.Message == "" || p.Line < 0 {
					t.Fatalf("problem without key, message or with a negative line: %+v", p)
				}
			}
			if cfg != nil {
				t.Fatal("Parse returned a configuration with its error")
			}
			return
		}
		if again := cfg.Validate(opts); len(again) > 0 {
			t.Fatalf("a parsed configuration does not validate again: %v", again)
		}
		r := cfg.Lifecycle()
		if r.ShutdownTimeout < r.RequestTimeout || r.RequestTimeout <= 0 {
			t.Fatalf("accepted budgets that do not fit: %+v", r)
		}
		_ = cfg.Server.ReadHeaderTimeout() + cfg.Health.CheckTimeout() + cfg.Health.CacheTTL()
	})
}
