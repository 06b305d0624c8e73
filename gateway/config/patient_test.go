package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestThePatientBindingTables(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	member := func(id, extra string) string {
		return "[[registry.members]]\nid = \"" + id + "\"\nquery_endpoint = \"http://" + id + ".example/fhir\"\n" + extra
	}
	two := member("a", "identifier_system = \"urn:oid:1.2.3\"\n") + member("b", "identifier_system = \"urn:oid:1.2.4\"\n")
	const resolver = "[resolver]\nurl = \"http://pix.example/fhir\"\n"
	cases := []struct {
		name    string
		doc     string
		wantKey string // "" when the document is accepted
		wantMsg string
	}{
		{"a resolver with every member's domain", two + resolver, "", ""},
		{"every table with its keys", two + strings.Replace(resolver, "http:", "https:", 1) + "timeout_ms = 1500\nmax_body_bytes = 4096\nbearer_token_file = \"" + token + "\"\n" +
			"[pdqm]\nurl = \"https://mpi.example/fhir\"\n[consent]\nurl = \"http://pdp.example\"\nprotocol = \"authzen\"\npurpose_of_use = \"urn:x|ETREAT\"\n" +
			"[localizer]\nurl = \"http://pix2.example/fhir\"\nprotocol = \"pixm\"\n", "", ""},
		{"an xcpd localizer with every member's community", member("a", "home_community_id = \"urn:oid:1.2.3\"\n") + "[localizer]\nurl = \"http://gw.example/xcpd\"\nprotocol = \"xcpd\"\n", "", ""},
		{"a resolver without a url", two + "[resolver]\n", "resolver.url", "is required"},
		{"a pdqm url with credentials", "[pdqm]\nurl = \"http://u:p@mpi/fhir\"\n", "pdqm.url", "credentials"},
		{"a zero timeout", two + resolver + "timeout_ms = 0\n", "resolver.timeout_ms", "greater than zero"},
		{"a timeout past the maximum", "[pdqm]\nurl = \"http://m/fhir\"\ntimeout_ms = 60001\n", "pdqm.timeout_ms", "more than the maximum, 60000"},
		{"a timeout past the request timeout", "[server]\nrequest_timeout_ms = 1000\n[consent]\nurl = \"http://p\"\ntimeout_ms = 2000\n", "consent.timeout_ms", "server.request_timeout_ms"},
		{"a zero body cap", "[pdqm]\nurl = \"http://m/fhir\"\nmax_body_bytes = 0\n", "pdqm.max_body_bytes", "not from 1"},
		{"a body cap past 64 MiB", "[pdqm]\nurl = \"http://m/fhir\"\nmax_body_bytes = 67108865\n", "pdqm.max_body_bytes", "64 MiB"},
		{"a certificate without its key", "[consent]\nurl = \"http://p\"\nclient_certificate_file = \"/c.pem\"\n", "consent.client_key_file", "both files"},
		{"a missing token file", "[consent]\nurl = \"http://p\"\nbearer_token_file = \"" + filepath.Join(dir, "nope") + "\"\n", "consent.bearer_token_file", "no such file"},
		{"a consent protocol other than authzen", "[consent]\nurl = \"http://p\"\nprotocol = \"xacml\"\n", "consent.protocol", "only protocol"},
		{"a purpose of use with a space", "[consent]\nurl = \"http://p\"\npurpose_of_use = \"a b\"\n", "consent.purpose_of_use", "visible ASCII"},
		{"a localizer without a protocol", "[localizer]\nurl = \"http://l\"\n", "localizer.protocol", "is required"},
		{"a localizer of an unknown protocol", "[localizer]\nurl = \"http://l\"\nprotocol = \"pdqm\"\n", "localizer.protocol", "neither"},
		{"a member without a domain under a resolver", member("a", "") + resolver, "registry.members[0].identifier_system", "is required with [resolver]"},
		{"a member without a domain under a pixm localizer", member("a", "") + "[localizer]\nurl = \"http://l\"\nprotocol = \"pixm\"\n", "registry.members[0].identifier_system", "localizer.protocol = \"pixm\""},
		{"a domain nothing reads", member("a", "identifier_system = \"urn:oid:1\"\n"), "registry.members[0].identifier_system", "neither [resolver]"},
		{"one domain for two members", member("a", "identifier_system = \"urn:oid:1\"\n") + member("b", "identifier_system = \"urn:oid:1\"\n") + resolver,
			"registry.members[1].identifier_system", "registry.members[0].identifier_system"},
		{"a domain that is no URI", member("a", "identifier_system = \"oid-1\"\n") + resolver, "registry.members[0].identifier_system", "absolute URI"},
		{"a domain with a bar", member("a", "identifier_system = \"urn:a|b\"\n") + resolver, "registry.members[0].identifier_system", "without |"},
		{"a domain of 300 bytes", member("a", "identifier_system = \"urn:"+strings.Repeat("x", 300)+"\"\n") + resolver, "registry.members[0].identifier_system", "longer than 256"},
		{"a member without a community under xcpd", member("a", "") + "[localizer]\nurl = \"http://l\"\nprotocol = \"xcpd\"\n", "registry.members[0].home_community_id", "is required with localizer.protocol = \"xcpd\""},
		{"a community nothing reads", member("a", "home_community_id = \"urn:oid:1.2\"\n"), "registry.members[0].home_community_id", "not \"xcpd\""},
		{"a community that is no OID", member("a", "home_community_id = \"urn:oid:1..2\"\n") + "[localizer]\nurl = \"http://l\"\nprotocol = \"xcpd\"\n", "registry.members[0].home_community_id", "OID"},
		{"one community for two members", member("a", "home_community_id = \"urn:oid:1.2\"\n") + member("b", "home_community_id = \"urn:oid:1.2\"\n") + "[localizer]\nurl = \"http://l\"\nprotocol = \"xcpd\"\n",
			"registry.members[1].home_community_id", "registry.members[0].home_community_id"},
		{"a resolver cache past a minute", two + resolver + "cache_ttl_ms = 60001\n", "resolver.cache_ttl_ms", "more than the maximum, 60000"},
		{"a negative consent cache", "[consent]\nurl = \"http://p\"\ncache_ttl_ms = -1\n", "consent.cache_ttl_ms", "must not be negative"},
		{"a consent cache past 30 s", "[consent]\nurl = \"http://p\"\ncache_ttl_ms = 30001\n", "consent.cache_ttl_ms", "more than the maximum, 30000"},
		{"an unknown key", "[resolver]\nurl = \"http://p/fhir\"\nretries = 2\n", "resolver.retries", "unknown key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseDoc([]byte(tc.doc), "t.toml", Options{})
			if tc.wantKey == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if c.Consent != nil && (c.Consent.Protocol != ConsentAuthZEN || c.Consent.PurposeOfUse == "") {
					t.Errorf("consent defaults not applied: %+v", c.Consent)
				}
				return
			}
			var ps *Problems
			if !errors.As(err, &ps) {
				t.Fatalf("err = %v, want the problems", err)
			}
			for _, p := range ps.List {
				if p.Key == tc.wantKey && strings.Contains(p.Message, tc.wantMsg) {
					return
				}
			}
			t.Fatalf("no problem of %s saying %q in %v", tc.wantKey, tc.wantMsg, ps)
		})
	}
}

func TestTheBindingDefaults(t *testing.T) {
	c, err := parseDoc([]byte("[consent]\nurl = \"http://p\"\n[pdqm]\nurl = \"http://m/fhir\"\n"), "t.toml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Consent.PurposeOfUse != DefaultPurposeOfUse || c.Consent.Protocol != ConsentAuthZEN {
		t.Errorf("consent = %+v", c.Consent)
	}
	if c.Resolver != nil || c.Localizer != nil {
		t.Error("absent tables decoded as present")
	}
	// Each table has its own defaults, applied by Timeout and BodyCap; a key set wins.
	c, err = parseDoc([]byte("[server]\nrequest_timeout_ms = 10000\n[consent]\nurl = \"http://p\"\n[pdqm]\nurl = \"http://m/fhir\"\n"+
		"[resolver]\nurl = \"http://r/fhir\"\ntimeout_ms = 700\nmax_body_bytes = 1000\n[localizer]\nurl = \"http://l\"\nprotocol = \"xcpd\"\n"+
		"[[registry.members]]\nid = \"a\"\nquery_endpoint = \"http://a/fhir\"\nidentifier_system = \"urn:oid:1.2\"\nhome_community_id = \"urn:oid:1.3\"\n"), "t.toml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		table   string
		b       *BindingService
		timeout int64
		cap     int64
	}{
		{"consent", &c.Consent.BindingService, DefaultConsentTimeoutMS, DefaultConsentMaxBodyBytes},
		{"pdqm", &c.PDQm.BindingService, DefaultPDQmTimeoutMS, DefaultPDQmMaxBodyBytes},
		{"resolver", &c.Resolver.BindingService, 700, 1000},
		{"localizer", &c.Localizer.BindingService, DefaultLocalizerTimeoutMS, DefaultLocalizerMaxBodyBytes},
	} {
		if got := tc.b.Timeout(); got.Milliseconds() != tc.timeout {
			t.Errorf("%s timeout = %v, want %d ms", tc.table, got, tc.timeout)
		}
		if got := tc.b.BodyCap(); got != tc.cap {
			t.Errorf("%s cap = %d, want %d", tc.table, got, tc.cap)
		}
	}
	// A service not read from a file, setting nothing, is bounded by the largest allowed.
	var bare BindingService
	if bare.Timeout().Milliseconds() != MaxBindingTimeoutMS || bare.BodyCap() != MaxBindingBodyBytes {
		t.Errorf("a bare service: timeout %v, cap %d", bare.Timeout(), bare.BodyCap())
	}
}
