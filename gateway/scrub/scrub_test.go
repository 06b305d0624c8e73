package scrub

import (
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		// What issue 30 found: a member's diagnostics naming its backend.
		{"the finding", "backend http://10.11.12.13:8443/internal/fhir?token=abc123 refused the search",
			"backend [url] refused the search"},
		{"an https URL", "see https://fhir.hospital.example/fhir/Patient/1 for more", "see [url] for more"},
		{"a URL in mixed case", "HTTPS://Backend.Internal:8443/Fhir failed", "[url] failed"},
		{"a URL with userinfo", "db postgres://admin:hunter2@db.internal:5432/fhir is down", "db [url] is down"},
		{"a URL ending a sentence", "try http://10.0.0.1/fhir.", "try [url]."},
		{"a URL in quotes", `upstream "http://backend/fhir" timed out`, `upstream "[url]" timed out`},
		{"another scheme", "ldap://ldap.corp:389 and jdbc:postgresql://db:5432/x", "[url] and jdbc:[url]"},

		{"a bare host with a port", "connect to backend:8443 refused", "connect to [host] refused"},
		{"a dotted host with a port", "fhir-db.ns.svc.cluster.local:5432 timed out", "[host] timed out"},
		{"a dotted host with a port, mixed case", "Backend.Internal:443.", "[host]."},
		{"localhost", "localhost:8080 and LOCALHOST", "[host] and [host]"},
		{"a dotted host without a port", "resolved fhir.hospital.org and member-a.ns.svc", "resolved [host] and [host]"},
		{"a host of an internal suffix", "from hapi.internal", "from [host]"},

		{"IPv4", "peer 10.11.12.13 reset", "peer [host] reset"},
		{"IPv4 with a port", "dial tcp 192.168.1.20:5432: connection refused", "dial tcp [host]: connection refused"},
		{"IPv4 ending a sentence", "from 172.16.0.1.", "from [host]."},
		{"IPv6 bracketed with a port", "dial tcp [fd00::1234]:8443: i/o timeout", "dial tcp [host]: i/o timeout"},
		{"IPv6 bracketed", "at [2001:db8::1]", "at [host]"},
		{"IPv6 bare", "peer 2001:db8:0:0:1:0:0:1 reset", "peer [host] reset"},
		{"IPv6 loopback", "listening on ::1", "listening on [host]"},
		{"IPv6 with a zone", "via fe80::1%eth0, gone", "via [host], gone"},
		{"IPv6 mapped IPv4", "from ::ffff:10.1.2.3", "from [host]"},

		{"userinfo before a host", "as svc:s3cret@backend failed", "as [host] failed"},
		{"userinfo without a password", "mail ops@hospital.org", "mail [host]"},

		{"a query token", "Patient?_id=1&access_token=eyX1 failed", "Patient?_id=1&access_token=[redacted] failed"},
		{"token=", "token=abc.def refused", "token=[redacted] refused"},
		{"password=", "login as fhir password=hunter2;", "login as fhir password=[redacted];"},
		{"PASSWORD: in capitals", "PASSWORD: Hunter2 rejected", "PASSWORD: [redacted] rejected"},
		{"apikey=", "apikey=AKIA1234&x=1", "apikey=[redacted]&x=1"},
		{"api_key and X-Api-Key", "api_key=k1, X-Api-Key: k2", "api_key=[redacted], X-Api-Key: [redacted]"},
		{"a client secret", `client_secret="a b c"`, `client_secret=[redacted]`},
		{"a session id", "JSESSIONID=ABCDEF0123", "JSESSIONID=[redacted]"},
		{"Authorization: Bearer", "sent Authorization: Bearer eyJhbGciOi.eyJzdWIi.sig to upstream", "sent Authorization: [redacted] to upstream"},
		{"authorization= in lower case", "authorization=Basic dXNlcjpwYXNz", "authorization=[redacted]"},
		{"Proxy-Authorization", "Proxy-Authorization: Basic Zm9vOmJhcg==", "Proxy-Authorization: [redacted]"},
		{"a bearer token alone", "with bearer abcdef0123456789 denied", "with bearer [redacted] denied"},
		{"a JWT alone", "token eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl expired", "token [redacted] expired"},

		{"everything at once", "GET https://user:pw@10.0.0.5:8443/fhir?apikey=1 via proxy.corp:3128 (Authorization: Bearer abcdefgh123) from [::1]:9000",
			"GET [url] via [host] (Authorization: [redacted]) from [host]"},

		// What stays: the member's own words, codes, FHIRPath, ids, times, OIDs.
		{"a plain message", "unknown search parameter \"foo\" for resource type Patient", "unknown search parameter \"foo\" for resource type Patient"},
		{"FHIRPath", "Patient.name.given: minimum required = 1 (Patient.identifier[0].value)", "Patient.name.given: minimum required = 1 (Patient.identifier[0].value)"},
		{"a FHIRPath function", "Observation.value.ofType(Quantity) and name.exists()", "Observation.value.ofType(Quantity) and name.exists()"},
		{"a relative reference", "Patient/123/_history/2 not found", "Patient/123/_history/2 not found"},
		{"a time", "at 2026-12-05T12:30:00Z and 10:30", "at 2026-12-05T12:30:00Z and 10:30"},
		{"an OID", "system urn:oid:2.16.840.1.113883.2.4.6.3 and urn:oid:1.2.3.4", "system urn:oid:2.16.840.1.113883.2.4.6.3 and urn:oid:1.2.3.4"},
		{"a UUID", "urn:uuid:0f4e1c2a-8d6b-4a4e-9c55-1f2d3e4a5b6c", "urn:uuid:0f4e1c2a-8d6b-4a4e-9c55-1f2d3e4a5b6c"},
		{"a version", "HAPI FHIR 6.4.0 (R4 4.0.1)", "HAPI FHIR 6.4.0 (R4 4.0.1)"},
		{"a file name", "see ferrofed.toml and config.json", "see ferrofed.toml and config.json"},
		{"the words token and password", "the token has expired; no password given", "the token has expired; no password given"},
		{"a C++ scope", "std::string", "std::string"},
		{"the replacements", "[url] [host] token=[redacted]", "[url] [host] token=[redacted]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Text(c.in)
			if got != c.want {
				t.Fatalf("Text(%q)\n = %q\nwant %q", c.in, got, c.want)
			}
			if again := Text(got); again != got {
				t.Fatalf("not idempotent: %q then %q", got, again)
			}
		})
	}
}

func TestTextIsBounded(t *testing.T) {
	long := strings.Repeat("é", MaxBytes) // two bytes each: the cut falls inside one
	got := Text(long)
	if len(got) > MaxBytes || !strings.HasPrefix(long, got) || len(got) < MaxBytes-1 {
		t.Fatalf("%d bytes kept", len(got))
	}
	if got := Text("a\x00b\x1bc\td\ne\x7f"); got != "abc\td\ne" {
		t.Fatalf("control characters: %q", got)
	}
}

func BenchmarkText(b *testing.B) {
	s := "backend http://10.11.12.13:8443/internal/fhir?token=abc refused: Patient.name.given minimum 1; " +
		strings.Repeat("unknown search parameter foo ", 40)
	b.ReportAllocs()
	for b.Loop() {
		Text(s)
	}
}

func BenchmarkTextShort(b *testing.B) {
	s := "unknown search parameter \"foo\" for resource type Patient (Patient.name.given)"
	b.ReportAllocs()
	for b.Loop() {
		Text(s)
	}
}

// BenchmarkTextWorst is a text a member could write to make the rule work hardest:
// every word a credential, an address and a URL.
func BenchmarkTextWorst(b *testing.B) {
	s := strings.Repeat("token=a:1.2.3.4@h.com http://x ", MaxBytes/32+1)
	b.ReportAllocs()
	for b.Loop() {
		Text(s)
	}
}
