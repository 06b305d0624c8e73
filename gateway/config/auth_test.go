package config

import (
	"bytes"
	"strings"
	"testing"
)

// testIssuer is an issuer that reads no file: the documents of this package's tests
// are about other tables, and parseDoc gives them one so that the data plane's default
// (auth.data_plane = "required", which needs an issuer) holds. The rule itself is
// TestTheDataPlaneRule's.
const testIssuer = "\n[[auth.issuers]]\nissuer = \"https://clients.test\"\naudience = \"ferrofed\"\n" +
	"operator_scope = \"ferrofed.operator\"\njwks_url = \"https://clients.test/jwks\"\n"

// parseDoc is Parse of doc, with testIssuer appended when doc names no issuer and does
// not set auth.data_plane itself.
func parseDoc(doc []byte, name string, opts Options) (*Config, error) {
	if !bytes.Contains(doc, []byte("auth.issuers")) && !bytes.Contains(doc, []byte("data_plane")) &&
		!bytes.Contains(doc, []byte("[auth]")) {
		doc = append(append([]byte(nil), doc...), testIssuer...)
	}
	return Parse(doc, name, opts)
}

func TestTheDataPlaneRule(t *testing.T) {
	tests := []struct {
		name     string
		doc      string
		problem  string // in the problems, keyed auth.data_plane; "" for none
		warning  string // in the warnings, keyed auth.data_plane; "" for none
		required bool
	}{
		{"the default needs an issuer", "[server]\n", "no [[auth.issuers]]", "", true},
		{"required written out needs one too", "[auth]\ndata_plane = \"required\"\n", "no [[auth.issuers]]", "", true},
		{"required with an issuer", "[auth]\ndata_plane = \"required\"\n" + testIssuer, "", "", true},
		{"the default with an issuer", testIssuer, "", "", true},
		{"open is warned about", "[auth]\ndata_plane = \"open\"\n", "", "anyone who can reach", false},
		{"open with an issuer is warned about too", "[auth]\ndata_plane = \"open\"\n" + testIssuer, "", "with no token", false},
		{"another word", "[auth]\ndata_plane = \"optional\"\n" + testIssuer, `"optional" must be "required" or "open"`, "", true},
		{"the empty string", "[auth]\ndata_plane = \"\"\n" + testIssuer, `"" must be "required" or "open"`, "", true},
		{"the case matters", "[auth]\ndata_plane = \"Open\"\n", `"Open" must be`, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.doc), "t.toml", Options{})
			if tc.problem != "" {
				if err == nil || !strings.Contains(err.Error(), "auth.data_plane") || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("got %v, want a problem of auth.data_plane saying %q", err, tc.problem)
				}
				if strings.Contains(tc.problem, "issuers") && !strings.Contains(err.Error(), "auth.issuers") {
					t.Errorf("the problem does not name auth.issuers: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Auth.DataPlaneRequired() != tc.required {
				t.Errorf("DataPlaneRequired() = %v, want %v", c.Auth.DataPlaneRequired(), tc.required)
			}
			var warned []string
			for _, w := range c.Warnings() {
				if w.Key == "auth.data_plane" {
					warned = append(warned, w.Message)
				}
			}
			switch {
			case tc.warning == "" && len(warned) > 0:
				t.Errorf("warned %q", warned)
			case tc.warning != "" && (len(warned) != 1 || !strings.Contains(warned[0], tc.warning)):
				t.Errorf("warnings %q, want one saying %q", warned, tc.warning)
			}
		})
	}
}
