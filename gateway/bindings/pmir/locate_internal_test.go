package pmir

import (
	"net/url"
	"testing"
)

// A create's Location names the subscription when it is on the registry's own origin
// and under its base, relative or absolute, with or without _history.
func TestLocate(t *testing.T) {
	f := &Feed{base: "https://mpi.example:8443/fhir", origin: &url.URL{Scheme: "https", Host: "mpi.example:8443"}}
	for loc, want := range map[string]string{
		"Subscription/12/_history/1":                              "12",
		"Subscription/ab-3.x":                                     "ab-3.x",
		"/fhir/Subscription/7":                                    "7",
		"https://mpi.example:8443/fhir/Subscription/9/_history/2": "9",
		"https://other.example/fhir/Subscription/9":               "",
		"http://mpi.example:8443/fhir/Subscription/9":             "",
		"https://mpi.example/fhir/Subscription/9":                 "",
		"https://u:p@mpi.example:8443/fhir/Subscription/9":        "",
		"Patient/12":            "",
		"/other/Subscription/1": "",
		"Subscription/":         "",
		"Subscription/1/2":      "",
		"Subscription/" + string(make([]byte, 70)):                    "",
		"//other.example/fhir/Subscription/3":                         "",
		"Subscription/%2e%2e":                                         "",
		"https://mpi.example:8443/fhir/Subscription/9?x=1#f":          "9",
		"https://mpi.example:8443/fhir/Subscription/9/_history/a/b/c": "9",
	} {
		held, id := f.locate(loc)
		if id != want || (want != "" && held != f.base+"/Subscription/"+want) || (want == "" && held != "") {
			t.Errorf("locate(%q) = %q, %q; want id %q", loc, held, id, want)
		}
	}
}
