package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const directoryBase = `
[server]
termination_message_path = ""
`

// Each key of [registry.mcsd] is checked, and each problem names its key.
func TestDirectoryTable(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		wantKey   string
		wantText  string
	}{
		{"a minimal table is valid", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"`, "", ""},
		{"both registries are refused, naming both", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
[[registry.members]]
id = "a"
query_endpoint = "https://a.example/fhir"`, "registry.mcsd", "[[registry.members]] and [registry.mcsd]"},
		{"the url is required", `[registry.mcsd]
member_identifier_system = "urn:oid:1.2.3"`, "registry.mcsd.url", "is required"},
		{"the url carries no credentials", `[registry.mcsd]
url = "https://u:p@dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"`, "registry.mcsd.url", "credentials"},
		{"the url is http(s)", `[registry.mcsd]
url = "ftp://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"`, "registry.mcsd.url", "absolute http or https"},
		{"the member identifier system is required", `[registry.mcsd]
url = "https://dir.example/fhir"`, "registry.mcsd.member_identifier_system", "is required"},
		{"the member identifier system is a URI", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "not a uri"`, "registry.mcsd.member_identifier_system", "visible ASCII"},
		{"a refresh interval under its minimum", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
refresh_interval_ms = 10`, "registry.mcsd.refresh_interval_ms", "less than the minimum, 100"},
		{"a refresh interval over its maximum", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
refresh_interval_ms = 86400001`, "registry.mcsd.refresh_interval_ms", "more than the maximum"},
		{"a timeout of zero", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
timeout_ms = 0`, "registry.mcsd.timeout_ms", "greater than zero"},
		{"a timeout longer than the interval names both", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
refresh_interval_ms = 1000
timeout_ms = 2000`, "registry.mcsd.timeout_ms", "registry.mcsd.refresh_interval_ms"},
		{"the cache file is an absolute path", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
cache_file = "cache.json"`, "registry.mcsd.cache_file", "absolute path"},
		{"the token file is read", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
bearer_token_file = "/nonexistent/token"`, "registry.mcsd.bearer_token_file", ""},
		{"the patient domain's system with [resolver] is valid", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
patient_domain_identifier_system = "https://ferrofed.example/patient-domain"
[resolver]
url = "https://pix.example/fhir"`, "", ""},
		{"the patient domain's system is required with [resolver]", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
[resolver]
url = "https://pix.example/fhir"`, "registry.mcsd.patient_domain_identifier_system", "is required with [resolver]"},
		{"the patient domain's system is required with a PIXm localizer", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
[localizer]
url = "https://pix.example/fhir"
protocol = "pixm"`, "registry.mcsd.patient_domain_identifier_system", `localizer.protocol = "pixm"`},
		{"the patient domain's system is refused when nothing reads it", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
patient_domain_identifier_system = "https://ferrofed.example/patient-domain"`, "registry.mcsd.patient_domain_identifier_system", "nothing would read it"},
		{"the patient domain's system is a URI", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
patient_domain_identifier_system = "domain"
[resolver]
url = "https://pix.example/fhir"`, "registry.mcsd.patient_domain_identifier_system", "absolute URI"},
		{"the patient domain's system is not the member identifier's", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
patient_domain_identifier_system = "urn:oid:1.2.3"
[resolver]
url = "https://pix.example/fhir"`, "registry.mcsd.patient_domain_identifier_system", "registry.mcsd.member_identifier_system"},
		{"an XCPD localizer needs no key: the home community id is the Endpoint's", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
[localizer]
url = "https://xcpd.example/gw"
protocol = "xcpd"`, "", ""},
		{"an unknown key is refused", `[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
refresh_ms = 1000`, "registry.mcsd.refresh_ms", "unknown key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseDoc([]byte(directoryBase+tc.doc), "test.toml", Options{})
			if tc.wantKey == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !cfg.Registry.Configured() {
					t.Fatal("a [registry.mcsd] registry is a configured registry (it gates readiness)")
				}
				return
			}
			var ps *Problems
			if !errors.As(err, &ps) {
				t.Fatalf("want problems, got %v", err)
			}
			for _, p := range ps.List {
				if p.Key == tc.wantKey && strings.Contains(p.Message, tc.wantText) {
					return
				}
			}
			t.Fatalf("no problem on %s with %q in %v", tc.wantKey, tc.wantText, ps)
		})
	}
}

// A directory's registry is checked by the rules of [[registry.members]], and the
// rest of the configuration against it.
func TestDirectoryMembers(t *testing.T) {
	ok := []Member{{ID: "a", QueryEndpoint: "https://a.example/fhir", EndpointID: "a-query"}}
	if ps := MemberProblems(ok); len(ps) > 0 {
		t.Fatal(ps)
	}
	for name, ms := range map[string][]Member{
		"no member":                        nil,
		"a duplicate id":                   {ok[0], ok[0]},
		"an ftp address":                   {{ID: "a", QueryEndpoint: "ftp://a.example/fhir", EndpointID: "a-query"}},
		"an id not an id":                  {{ID: "A B", QueryEndpoint: "https://a.example/fhir", EndpointID: "x-query"}},
		"a relative address":               {{ID: "a", QueryEndpoint: "/fhir", EndpointID: "a-query"}},
		"a home community id not urn:oid:": {{ID: "a", QueryEndpoint: "https://a.example/fhir", EndpointID: "a-query", HomeCommunityID: "urn:uuid:cadbf8d0-5493-11ec-bf63-0242ac130002"}},
		"one home community id on two members": {
			{ID: "a", QueryEndpoint: "https://a.example/fhir", EndpointID: "a-query", HomeCommunityID: "urn:oid:1.2.3.1"},
			{ID: "b", QueryEndpoint: "https://b.example/fhir", EndpointID: "b-query", HomeCommunityID: "urn:oid:1.2.3.1"}},
		"a domain not a URI": {{ID: "a", QueryEndpoint: "https://a.example/fhir", EndpointID: "a-query", IdentifierSystem: "domain-a"}},
		"one domain on two members": {
			{ID: "a", QueryEndpoint: "https://a.example/fhir", EndpointID: "a-query", IdentifierSystem: "urn:oid:1.2.3.1"},
			{ID: "b", QueryEndpoint: "https://b.example/fhir", EndpointID: "b-query", IdentifierSystem: "urn:oid:1.2.3.1"}},
	} {
		if ps := MemberProblems(ms); len(ps) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
	cfg, err := parseDoc([]byte(directoryBase+`[registry.mcsd]
url = "https://dir.example/fhir"
member_identifier_system = "urn:oid:1.2.3"
patient_domain_identifier_system = "https://ferrofed.example/patient-domain"
[resolver]
url = "https://pix.example/fhir"
`), "test.toml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ps := cfg.WithMembers(ok).Validate(Options{SkipFiles: true})
	if len(ps) == 0 || !strings.Contains(ps[0].Key, "identifier_system") {
		t.Fatalf("[resolver] needs each member's identifier_system; got %v", ps)
	}
	if cfg.Registry.Members != nil || cfg.Registry.MCSD == nil {
		t.Fatal("WithMembers changed the configuration it was asked of")
	}
}

// A home community id read from a directory is written as home_community_id is.
func TestNormalizeHomeCommunityID(t *testing.T) {
	for in, want := range map[string]string{
		"urn:oid:1.2.3":  "urn:oid:1.2.3",
		"URN:OID:1.2.3":  "urn:oid:1.2.3",
		"1.2.3":          "urn:oid:1.2.3",
		"urn:uuid:ab-cd": "urn:uuid:ab-cd",
		"":               "",
	} {
		if got := NormalizeHomeCommunityID(in); got != want {
			t.Errorf("%q is %q, want %q", in, got, want)
		}
		if want != "" && strings.HasPrefix(want, "urn:oid:") && homeCommunityProblem(NormalizeHomeCommunityID(in)) != "" {
			t.Errorf("%q normalised is refused as a home_community_id", in)
		}
	}
}

// registry.mcsd.cache_file is checked as serve uses it: its folder must exist and be
// writable (the file is replaced through a temporary file there), and the file, when
// it exists, must be a regular file; nothing is created.
func TestDirectoryCacheFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	table := func(file string) string {
		return "[registry.mcsd]\nurl = \"https://dir.example/fhir\"\nmember_identifier_system = \"urn:oid:1.2.3\"\ncache_file = \"" + file + "\"\n"
	}
	for _, tc := range []struct {
		name, file, want string
	}{
		{"a new file in a folder that exists", filepath.Join(dir, "cache.json"), ""},
		{"a file in a missing folder", filepath.Join(dir, "missing", "cache.json"), "its folder " + filepath.Join(dir, "missing") + " does not exist"},
		{"a file below a file", "/etc/passwd/cache.json", "/etc/passwd is a regular file, not a directory"},
		{"a named pipe", fifo, fifo + " is a named pipe (FIFO), not a regular file"},
		{"a directory", dir, dir + " is a directory, not a regular file"},
		{"a folder no one can write", "/proc/self/cache.json", "its folder /proc/self is not writable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDoc([]byte(directoryBase+table(tc.file)), "test.toml", Options{})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(tc.file); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("the check created the cache file: %v", err)
				}
				return
			}
			var ps *Problems
			if !errors.As(err, &ps) {
				t.Fatalf("want problems, got %v", err)
			}
			for _, p := range ps.List {
				if p.Key == "registry.mcsd.cache_file" && strings.Contains(p.Message, tc.want) {
					return
				}
			}
			t.Fatalf("no problem on registry.mcsd.cache_file with %q in %v", tc.want, ps)
		})
	}
	// The operator's webhook validates for another machine: no file is looked at.
	if _, err := parseDoc([]byte(directoryBase+table(filepath.Join(dir, "missing", "c.json"))), "test.toml", Options{SkipFiles: true}); err != nil {
		t.Fatalf("SkipFiles looked at the cache folder: %v", err)
	}
}
