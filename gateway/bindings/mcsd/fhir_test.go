package mcsd

import (
	"net/url"
	"testing"
)

func TestTypeAndID(t *testing.T) {
	for ref, want := range map[string][2]string{
		"Endpoint/ep-1":                          {"Endpoint", "ep-1"},
		"Organization/o1/_history/3":             {"Organization", "o1"},
		"https://dir.example/fhir/Endpoint/ep-2": {"Endpoint", "ep-2"},
		"/Endpoint/ep-3/":                        {"Endpoint", "ep-3"},
		"Endpoint":                               {"", ""},
		"":                                       {"", ""},
	} {
		typ, id, ok := typeAndID(ref)
		if typ != want[0] || id != want[1] || ok != (want[0] != "") {
			t.Errorf("typeAndID(%q) = %q, %q, %v; want %v", ref, typ, id, ok, want)
		}
	}
}

// A next link is followed only under the directory's url: the same scheme, host and
// port, a path under its path, no credentials.
func TestUnder(t *testing.T) {
	base, _ := url.Parse("https://dir.example:8443/fhir")
	d := &Directory{base: base}
	for link, want := range map[string]bool{
		"https://dir.example:8443/fhir/Organization?_offset=100":  true,
		"/fhir/Organization/_history?_since=x&_offset=2":          true,
		"Organization?_offset=100":                                true,
		"https://dir.example:8443/fhirx/Organization":             false,
		"https://dir.example:8443/other/Organization":             false,
		"https://dir.example:8443/fhir/../admin":                  false,
		"http://dir.example:8443/fhir/Organization":               false,
		"https://dir.example/fhir/Organization":                   false,
		"https://evil.example:8443/fhir/Organization":             false,
		"https://user:pw@dir.example:8443/fhir/Organization":      false,
		"//evil.example/fhir/Organization":                        false,
		"https://dir.example:8443/fhir/Organization#fragment":     false,
		"https://dir.example:8443/fhir/%2e%2e/admin/Organization": false,
	} {
		if _, got := d.under(link); got != want {
			t.Errorf("under(%q) = %v, want %v", link, got, want)
		}
	}
}
