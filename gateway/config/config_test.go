package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// want is one problem a configuration must report: its key, its line (0: not checked)
// and words its message must hold.
type want struct {
	key   string
	line  int
	words []string
}

func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var ps *Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %T is not *Problems: %v", err, err)
	}
	return ps.List
}

func checkProblems(t *testing.T, got []Problem, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("got %d problem(s), want %d:\n%s", len(got), len(wants), listProblems(got))
	}
next:
	for _, w := range wants {
		for _, p := range got {
			if p.Key != w.key || (w.line != 0 && p.Line != w.line) {
				continue
			}
			for _, word := range w.words {
				if !strings.Contains(p.Message, word) {
					continue next
				}
			}
			continue next
		}
		t.Errorf("no problem %s (line %d) with %q in:\n%s", w.key, w.line, w.words, listProblems(got))
	}
}

func listProblems(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("  " + p.String() + "\n")
	}
	return b.String()
}

func TestParseRules(t *testing.T) {
	files := newFiles(t)
	tests := []struct {
		name  string
		toml  string
		wants []want
	}{
		// Documents.
		{"an empty file is valid", "", nil},
		{"an unknown top-level key is named with its line", "\n\nmystery = 1\n", []want{{"mystery", 3, []string{"unknown key"}}}},
		{"an unknown key in a table is named with its line", "[server]\nlisten = \"127.0.0.1:1\"\nlisen = \"x\"\n", []want{{"server.lisen", 3, []string{"unknown key"}}}},
		{"an unknown table is named", "[servers]\nlisten = \"x\"\n", []want{{"servers", 1, []string{"unknown key"}}}},
		{"every unknown key is reported, with the other problems",
			"[server]\nfoo = 1\nbar = 2\nrequest_timeout_ms = 0\n",
			[]want{{"server.foo", 2, nil}, {"server.bar", 3, nil}, {"server.request_timeout_ms", 4, []string{"greater than zero"}}}},
		{"an empty table name is quoted, never an empty key", "[\"\"]\n", []want{{`""`, 1, []string{"unknown key"}}}},
		{"a quoted key with a dot is quoted", "[server]\n\"a.b\" = 1\n", []want{{`server."a.b"`, 2, []string{"unknown key"}}}},
		{"a wrong type names the key and its line", "[server]\n\nrequest_timeout_ms = \"30s\"\n", []want{{"server.request_timeout_ms", 3, nil}}},
		{"a syntax error names its line", "[server\nlisten = 1\n", []want{{"(document)", 1, nil}}},

		// server.listen.
		{"listen without a port", "[server]\nlisten = \"localhost\"\n", []want{{"server.listen", 2, []string{"host:port"}}}},
		{"listen with a port out of range", "[server]\nlisten = \"0.0.0.0:70000\"\n", []want{{"server.listen", 2, []string{"0 to 65535"}}}},
		{"listen with a named port", "[server]\nlisten = \"0.0.0.0:http\"\n", []want{{"server.listen", 2, []string{"number"}}}},
		{"listen on the IPv6 wildcard", "[server]\nlisten = \"[::]:8080\"\n", nil},
		{"listen on the dual-stack wildcard", "[server]\nlisten = \":8080\"\n", nil},
		{"listen on the IPv4 wildcard", "[server]\nlisten = \"0.0.0.0:8080\"\n", nil},

		// server.termination_message_path.
		{"a relative termination message path", "[server]\ntermination_message_path = \"termination-log\"\n",
			[]want{{"server.termination_message_path", 2, []string{"absolute path", "empty"}}}},
		{"a dot-relative termination message path", "[server]\ntermination_message_path = \"./dev/termination-log\"\n",
			[]want{{"server.termination_message_path", 2, []string{"absolute path"}}}},
		{"a termination message path with a NUL", "[server]\ntermination_message_path = \"/dev/termination\\u0000log\"\n",
			[]want{{"server.termination_message_path", 2, []string{"NUL"}}}},
		{"a termination message path over 4096 bytes", "[server]\ntermination_message_path = \"/" + strings.Repeat("d", 4096) + "\"\n",
			[]want{{"server.termination_message_path", 2, []string{"4097 bytes", "more than 4096"}}}},
		{"a termination message path of 4096 bytes", "[server]\ntermination_message_path = \"/" + strings.Repeat("d", 4095) + "\"\n", nil},
		{"another absolute termination message path", "[server]\ntermination_message_path = \"/var/run/ferrofed/termination\"\n", nil},
		{"an empty termination message path turns it off", "[server]\ntermination_message_path = \"\"\n", nil},

		// server.base_path.
		{"base path without a leading slash", "[server]\nbase_path = \"gw\"\n", []want{{"server.base_path", 2, []string{"start with /"}}}},
		{"base path with a trailing slash", "[server]\nbase_path = \"/gw/\"\n", []want{{"server.base_path", 2, []string{"end with /"}}}},
		{"base path with a double slash", "[server]\nbase_path = \"/a//b\"\n", []want{{"server.base_path", 2, []string{"//"}}}},
		{"base path with a wildcard", "[server]\nbase_path = \"/a/*x\"\n", []want{{"server.base_path", 2, []string{"plain path"}}}},
		{"base path with a parameter", "[server]\nbase_path = \"/a/:x\"\n", []want{{"server.base_path", 2, []string{"plain path"}}}},
		{"a nested base path", "[server]\nbase_path = \"/a/b\"\n", nil},

		// Budgets (the rules of gateway/lifecycle, named by their TOML keys).
		{"a zero request timeout", "[server]\nrequest_timeout_ms = 0\n", []want{{"server.request_timeout_ms", 2, []string{"greater than zero"}}}},
		{"a negative drain delay", "[server]\ndrain_delay_ms = -1\n", []want{{"server.drain_delay_ms", 2, []string{"negative"}}}},
		{"a negative bindings budget", "[server]\nbindings_drain_timeout_ms = -5\n", []want{{"server.bindings_drain_timeout_ms", 2, []string{"negative"}}}},
		{"a budget over an hour", "[server]\ndrain_delay_ms = 3600001\n", []want{{"server.drain_delay_ms", 2, []string{"at most 1h"}}}},
		{"a shutdown timeout shorter than the request timeout names both keys",
			"[server]\nrequest_timeout_ms = 2000\nshutdown_timeout_ms = 1000\n",
			[]want{{"server.shutdown_timeout_ms", 3, []string{"server.shutdown_timeout_ms", "server.request_timeout_ms"}}}},
		{"a shutdown timeout shorter than the default request timeout",
			"[server]\nshutdown_timeout_ms = 1000\n",
			[]want{{"server.shutdown_timeout_ms", 2, []string{"server.request_timeout_ms (30s)"}}}},
		{"an equal shutdown timeout", "[server]\nrequest_timeout_ms = 2000\nshutdown_timeout_ms = 2000\n", nil},
		{"a grace period that does not outlast the drain names every budget",
			"[server]\nrequest_timeout_ms = 10000\ndrain_delay_ms = 5000\ntermination_grace_period_seconds = 20\n",
			[]want{{"server.termination_grace_period_seconds", 4, []string{"server.drain_delay_ms", "server.shutdown_timeout_ms", "server.bindings_drain_timeout_ms"}}}},
		{"a grace period that outlasts the drain", "[server]\nrequest_timeout_ms = 10000\ntermination_grace_period_seconds = 16\n", nil},
		{"a negative read header timeout", "[server]\nread_header_timeout_ms = -1\n", []want{{"server.read_header_timeout_ms", 2, []string{"greater than zero"}}}},

		// server.tls.
		{"a certificate without its key", "[server.tls]\ncertificate_file = \"c.pem\"\n", []want{{"server.tls.key_file", 1, []string{"required"}}}},
		{"a key without its certificate", "[server.tls]\nkey_file = \"k.pem\"\n", []want{{"server.tls.certificate_file", 1, []string{"required"}}}},
		{"a client CA without TLS", "[server.tls]\nclient_ca_file = \"ca.pem\"\n", []want{{"server.tls.client_ca_file", 2, []string{"server.tls.certificate_file"}}}},
		{"a healthcheck identity without TLS", "[server.tls]\nhealthcheck_identity_file = \"id.pem\"\n", []want{{"server.tls.healthcheck_identity_file", 2, []string{"server.tls.certificate_file"}}}},
		{"a healthcheck identity without a client CA", files.tls("", files.identity), []want{{"server.tls.healthcheck_identity_file", 5, []string{"client_ca_file"}}}},
		{"certificate files that do not load", "[server.tls]\ncertificate_file = \"/nonexistent/c.pem\"\nkey_file = \"/nonexistent/k.pem\"\n",
			[]want{{"server.tls.certificate_file", 2, []string{"server.tls.key_file"}}}},
		{"a client CA without a certificate in it", files.tls(files.key, ""), []want{{"server.tls.client_ca_file", 4, []string{"no PEM certificate"}}}},
		{"an identity without its key", files.tls(files.ca, files.cert), []want{{"server.tls.healthcheck_identity_file", 5, []string{"certificate and its key"}}}},
		{"a complete TLS table", files.tls(files.ca, files.identity), nil},
		{"an identity whose key is in its own file", files.tls(files.ca, files.cert) + fmt.Sprintf("healthcheck_identity_key_file = %q\n", files.key), nil},
		{"an identity key file that is no key", files.tls(files.ca, files.cert) + fmt.Sprintf("healthcheck_identity_key_file = %q\n", files.ca),
			[]want{{"server.tls.healthcheck_identity_file", 5, []string{"server.tls.healthcheck_identity_key_file"}}}},
		{"an identity key file without its certificate", files.tls(files.ca, "") + fmt.Sprintf("healthcheck_identity_key_file = %q\n", files.key),
			[]want{{"server.tls.healthcheck_identity_key_file", 5, []string{"server.tls.healthcheck_identity_file"}}}},
		{"an identity key file without TLS", "[server.tls]\nhealthcheck_identity_key_file = \"k.pem\"\n",
			[]want{{"server.tls.healthcheck_identity_key_file", 2, []string{"server.tls.certificate_file"}}}},

		// [health] and [metrics].
		{"a negative check timeout", "[health]\ncheck_timeout_ms = -1\n", []want{{"health.check_timeout_ms", 2, nil}}},
		{"a negative cache TTL", "[health]\ncache_ttl_ms = -1\n", []want{{"health.cache_ttl_ms", 2, []string{"negative"}}}},
		{"member_ready_check without members", "[health]\nmember_ready_check = true\n", []want{{"health.member_ready_check", 2, []string{"registry.members"}}}},
		{"a metrics path on the root", "[metrics]\npath = \"/\"\n", []want{{"metrics.path", 2, []string{"root"}}}},
		{"a relative metrics path", "[metrics]\npath = \"metrics\"\n", []want{{"metrics.path", 2, []string{"start with /"}}}},
		{"a relative push URL", "[metrics]\npush_url = \"pushgateway:9091\"\n", []want{{"metrics.push_url", 2, []string{"absolute"}}}},
		{"a push URL of another scheme", "[metrics]\npush_url = \"ftp://pushgateway:9091\"\n", []want{{"metrics.push_url", 2, []string{"http or https"}}}},
		{"a push URL with credentials", "[metrics]\npush_url = \"https://u:p@pushgateway:9091\"\n", []want{{"metrics.push_url", 2, []string{"credentials"}}}},
		{"a push URL with a query", "[metrics]\npush_url = \"http://pushgateway:9091/?x=1\"\n", []want{{"metrics.push_url", 2, []string{"query"}}}},
		{"an empty push job", "[metrics]\npush_url = \"http://pushgateway:9091\"\npush_job = \" \"\n", []want{{"metrics.push_job", 3, []string{"empty"}}}},
		{"a push URL with a path prefix and a job", "[metrics]\npush_url = \"https://metrics.example/push/\"\npush_job = \"edge\"\n", nil},
		{"a push URL with the metrics endpoint disabled is valid", "[metrics]\ndisabled = true\npush_url = \"http://10.0.0.1:9091\"\n", nil},

		// [[registry.members]].
		{"a member without id or endpoint", "[[registry.members]]\n", []want{
			{"registry.members[0].id", 1, []string{"required"}}, {"registry.members[0].query_endpoint", 1, []string{"required"}}}},
		{"a member id with capitals", "[[registry.members]]\nid = \"Node-A\"\nquery_endpoint = \"http://a\"\n", []want{{"registry.members[0].id", 2, []string{"lower-case"}}}},
		{"two members with one id", "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a\"\n[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://b\"\n",
			[]want{{"registry.members[1].id", 5, []string{"registry.members[0]"}}}},
		{"two members with one endpoint id", "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a\"\nendpoint_id = \"e\"\n[[registry.members]]\nid = \"b\"\nquery_endpoint = \"http://b\"\nendpoint_id = \"e\"\n",
			[]want{{"registry.members[1].endpoint_id", 8, []string{"registry.members[0]"}}}},
		{"a problem of the second member names its own line", "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a\"\n\n[[registry.members]]\nid = \"b\"\nquery_endpoint = \"ftp://b\"\n",
			[]want{{"registry.members[1].query_endpoint", 7, []string{"absolute"}}}},
		{"a second member without an id names its table's line", "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a\"\n[[registry.members]]\nquery_endpoint = \"http://b\"\n",
			[]want{{"registry.members[1].id", 4, []string{"required"}}}},
		{"a derived endpoint id too long is reported", "[[registry.members]]\nid = \"" + strings.Repeat("a", 60) + "\"\nquery_endpoint = \"http://a\"\n",
			[]want{{"registry.members[0].endpoint_id", 1, []string{"at most 63"}}}},
		{"a relative query endpoint", "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"/fhir\"\n", []want{{"registry.members[0].query_endpoint", 3, []string{"absolute"}}}},
		{"a query endpoint with credentials", "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"https://u:p@a/fhir\"\n", []want{{"registry.members[0].query_endpoint", 3, []string{"credentials"}}}},
		{"a bad endpoint id", "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a\"\nendpoint_id = \"A B\"\n", []want{{"registry.members[0].endpoint_id", 4, nil}}},
		{"a valid registry", "[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a/fhir\"\n[[registry.members]]\nid = \"b\"\nquery_endpoint = \"https://b/fhir\"\n[health]\nmember_ready_check = true\n", nil},

		// [[auth.issuers]].
		{"an empty issuer", "[[auth.issuers]]\n", []want{
			{"auth.issuers[0].issuer", 1, []string{"required"}}, {"auth.issuers[0].audience", 1, []string{"required"}},
			{"auth.issuers[0].operator_scope", 1, []string{"required"}}, {"auth.issuers[0].jwks_file", 1, []string{"jwks_url"}}}},
		{"an issuer with both key sources, a spaced scope, an unknown algorithm and a negative refresh",
			"[[auth.issuers]]\nissuer = \"i\"\naudience = \"a\"\noperator_scope = \"a b\"\njwks_file = \"k.json\"\njwks_url = \"https://i/keys\"\nalgorithms = [\"HS256\"]\njwks_refresh_ms = -1\n",
			[]want{{"auth.issuers[0].operator_scope", 4, []string{"one scope"}}, {"auth.issuers[0].jwks_url", 6, []string{"only one"}},
				{"auth.issuers[0].algorithms", 7, []string{"HS256"}}, {"auth.issuers[0].jwks_refresh_ms", 8, []string{"must not be negative"}}}},
		{"a relative JWKS URL", "[[auth.issuers]]\nissuer = \"i\"\naudience = \"a\"\noperator_scope = \"op\"\njwks_url = \"/keys\"\n", []want{{"auth.issuers[0].jwks_url", 5, []string{"absolute"}}}},
		{"a JWKS file that does not exist", "[[auth.issuers]]\nissuer = \"i\"\naudience = \"a\"\noperator_scope = \"op\"\njwks_file = \"/nonexistent/k.json\"\n", []want{{"auth.issuers[0].jwks_file", 5, nil}}},
		{"a valid issuer", "[[auth.issuers]]\nissuer = \"i\"\naudience = \"a\"\noperator_scope = \"op\"\njwks_url = \"https://i/keys\"\n", nil},
		{"a CA file for an http JWKS URL", issuerURL("http://i/keys") + "ca_file = \"/nonexistent/ca.pem\"\n",
			[]want{{"auth.issuers[0].ca_file", 6, []string{"https jwks_url"}}}},
		{"a CA file for a JWKS file", "[[auth.issuers]]\nissuer = \"i\"\naudience = \"a\"\noperator_scope = \"op\"\n" +
			fmt.Sprintf("jwks_file = \"/nonexistent/k.json\"\nca_file = %q\n", files.ca),
			[]want{{"auth.issuers[0].jwks_file", 5, nil}, {"auth.issuers[0].ca_file", 6, []string{"https jwks_url"}}}},
		{"a CA file that does not exist", issuerURL("https://i/keys") + "ca_file = \"/nonexistent/ca.pem\"\n",
			[]want{{"auth.issuers[0].ca_file", 6, []string{"/nonexistent/ca.pem"}}}},
		{"a CA file without a certificate", issuerURL("https://i/keys") + fmt.Sprintf("ca_file = %q\n", files.key),
			[]want{{"auth.issuers[0].ca_file", 6, []string{"no PEM certificate"}}}},
		{"an issuer behind a private CA", issuerURL("https://i/keys") + fmt.Sprintf("ca_file = %q\n", files.ca), nil},

		// Every problem, not the first.
		{"every problem of a file is reported",
			"[server]\nlisten = \"nope\"\nbase_path = \"x\"\nrequest_timeout_ms = 2000\nshutdown_timeout_ms = 1000\n[health]\ncache_ttl_ms = -1\n[metrics]\npath = \"/\"\n",
			[]want{{"server.listen", 2, nil}, {"server.base_path", 3, nil}, {"server.shutdown_timeout_ms", 5, nil}, {"health.cache_ttl_ms", 7, nil}, {"metrics.path", 9, nil}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseDoc([]byte(tt.toml), "test.toml", Options{})
			got := problemsOf(t, err)
			checkProblems(t, got, tt.wants)
			if (err == nil) != (cfg != nil) {
				t.Fatalf("Parse returned a configuration %v together with an error %v", cfg, err)
			}
			for _, p := range got {
				if p.Key == "" || p.Message == "" {
					t.Errorf("a problem without key or message: %+v", p)
				}
			}
		})
	}
}

func TestProblemsAreSortedAndTheErrorListsEach(t *testing.T) {
	_, err := parseDoc([]byte("[server]\nlisten = \"nope\"\nbase_path = \"x\"\n"), "f.toml", Options{})
	if err == nil {
		t.Fatal("accepted")
	}
	text := err.Error()
	if !strings.HasPrefix(text, "f.toml: 2 problem(s)") ||
		!strings.Contains(text, "\n  server.base_path (line 3): ") || !strings.Contains(text, "\n  server.listen (line 2): ") {
		t.Fatalf("error text:\n%s", text)
	}
	if strings.Index(text, "server.base_path") > strings.Index(text, "server.listen") {
		t.Fatal("problems are not sorted by key")
	}
}

func TestSkipFilesLeavesReferencedFilesUnread(t *testing.T) {
	text := "[server.tls]\ncertificate_file = \"/nonexistent/c\"\nkey_file = \"/nonexistent/k\"\nclient_ca_file = \"/nonexistent/ca\"\n" +
		"[[auth.issuers]]\nissuer = \"i\"\naudience = \"a\"\noperator_scope = \"op\"\njwks_file = \"/nonexistent/k.json\"\n" +
		"[[auth.issuers]]\nissuer = \"j\"\naudience = \"a\"\noperator_scope = \"op\"\njwks_url = \"https://j/keys\"\nca_file = \"/nonexistent/ca.pem\"\n"
	if _, err := parseDoc([]byte(text), "t", Options{SkipFiles: true}); err != nil {
		t.Fatalf("SkipFiles still read files: %v", err)
	}
	if _, err := parseDoc([]byte(text), "t", Options{}); err == nil {
		t.Fatal("without SkipFiles the missing files were not reported")
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := parseDoc([]byte("[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a\"\n[[auth.issuers]]\nissuer = \"i\"\naudience = \"a\"\noperator_scope = \"op\"\njwks_url = \"https://i/k\"\n"), "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"server.listen", cfg.Server.Listen, ":8080"},
		{"server.base_path", cfg.Server.BasePath, "/"},
		{"server.termination_message_path", cfg.Server.TerminationMessagePath, "/dev/termination-log"},
		{"read header timeout", cfg.Server.ReadHeaderTimeout(), 5 * time.Second},
		{"check timeout", cfg.Health.CheckTimeout(), 100 * time.Millisecond},
		{"cache TTL", cfg.Health.CacheTTL(), time.Second},
		{"metrics.path", cfg.Metrics.Path, "/metrics"},
		{"metrics.push_url", cfg.Metrics.PushURL, ""},
		{"metrics.push_job", cfg.Metrics.PushJob, "ferrofed"},
		{"lifecycle", cfg.Lifecycle(), lifecycle.Plan{RequestTimeout: 30 * time.Second, ShutdownTimeout: 30 * time.Second,
			BindingsDrainTimeout: 5 * time.Second, TerminationHeadroom: 5 * time.Second, GracePeriodSeconds: 40, DrainDelayFromPoll: true}},
		{"member endpoint id", cfg.Registry.Members[0].EndpointID, "a-query"},
		{"issuer algorithms", fmt.Sprint(cfg.Auth.Issuers[0].Algorithms), fmt.Sprint(DefaultAlgorithms)},
		{"issuer refresh", cfg.Auth.Issuers[0].JWKSRefreshMS, int64(DefaultJWKSRefreshMS)},
		{"TLS off", cfg.Server.TLS.Enabled(), false},
		{"registry configured", cfg.Registry.Configured(), true},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestShutdownTimeoutFollowsTheRequestTimeout(t *testing.T) {
	cfg, err := parseDoc([]byte("[server]\nrequest_timeout_ms = 12000\n"), "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Lifecycle(); r.ShutdownTimeout != 12*time.Second {
		t.Fatalf("shutdown timeout %s, want the request timeout", r.ShutdownTimeout)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "missing.toml")); err == nil || !strings.Contains(err.Error(), "read configuration") {
		t.Fatalf("missing file: %v", err)
	}
	path := filepath.Join(dir, "ferrofed.toml")
	if err := os.WriteFile(path, []byte("[server]\nbase_path = \"x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	var ps *Problems
	if !errors.As(err, &ps) || ps.Source != path {
		t.Fatalf("Load: %v", err)
	}
}

// fixtures are PEM files for the TLS rules.
// issuerURL is an [[auth.issuers]] table whose jwks_url (line 5) is url.
func issuerURL(url string) string {
	return fmt.Sprintf("[[auth.issuers]]\nissuer = \"i\"\naudience = \"a\"\noperator_scope = \"op\"\njwks_url = %q\n", url)
}

type fixtures struct {
	dir, cert, key, ca, identity string
}

func newFiles(t *testing.T) fixtures {
	t.Helper()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	f := fixtures{dir: dir, cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem"),
		ca: filepath.Join(dir, "ca.pem"), identity: filepath.Join(dir, "identity.pem")}
	for path, data := range map[string][]byte{f.cert: certPEM, f.key: keyPEM, f.ca: certPEM, f.identity: append(certPEM, keyPEM...)} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// tls renders a [server.tls] table with the fixture certificate and key; client_ca_file
// is line 4 and healthcheck_identity_file line 5 when set.
func (f fixtures) tls(clientCA, identity string) string {
	s := fmt.Sprintf("[server.tls]\ncertificate_file = %q\nkey_file = %q\n", f.cert, f.key)
	if clientCA != "" {
		s += fmt.Sprintf("client_ca_file = %q\n", clientCA)
	} else {
		s += "# no client CA\n"
	}
	if identity != "" {
		s += fmt.Sprintf("healthcheck_identity_file = %q\n", identity)
	}
	return s
}
