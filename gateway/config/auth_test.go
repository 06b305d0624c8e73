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
		{"a read-only issuer alone is none", "[auth]\ndata_plane = \"required\"\n" + testIssuer + "read_only = true\n", "that is not read_only", "", true},
		{"a read-only issuer beside one", "[auth]\ndata_plane = \"required\"\n" + testIssuer + "read_only = true\n" + testIssuer, "", "", true},
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

// The endpoints SMART discovery publishes are checked as the file is read, each
// problem naming its key.
func TestAnIssuersEndpoints(t *testing.T) {
	const base = "[[auth.issuers]]\nissuer = \"https://clients.test\"\naudience = \"ferrofed\"\noperator_scope = \"ferrofed.operator\"\njwks_url = \"https://clients.test/jwks\"\n"
	cases := []struct {
		name, keys, key, problem string
	}{
		{"a token endpoint alone", "token_endpoint = \"https://auth.test/token\"\n", "", ""},
		{"both endpoints and both grant types", "token_endpoint = \"https://auth.test/token\"\nauthorization_endpoint = \"https://auth.test/authorize\"\n" +
			"grant_types_supported = [\"authorization_code\", \"client_credentials\"]\n", "", ""},
		{"a token endpoint over http", "token_endpoint = \"http://auth.test/token\"\n", "token_endpoint", "absolute https URL"},
		{"a relative authorization endpoint", "token_endpoint = \"https://auth.test/token\"\nauthorization_endpoint = \"/authorize\"\n", "authorization_endpoint", "absolute https URL"},
		{"credentials in an endpoint", "token_endpoint = \"https://user:pw@auth.test/token\"\n", "token_endpoint", "without credentials"},
		{"an authorization endpoint without a token endpoint", "authorization_endpoint = \"https://auth.test/authorize\"\n", "authorization_endpoint", "set token_endpoint too"},
		{"grant types without a token endpoint", "grant_types_supported = [\"client_credentials\"]\n", "grant_types_supported", "set token_endpoint too"},
		{"a grant type SMART does not name", "token_endpoint = \"https://auth.test/token\"\ngrant_types_supported = [\"password\"]\n", "grant_types_supported", `"password" is not one of`},
		{"the authorization code without an authorization endpoint", "token_endpoint = \"https://auth.test/token\"\ngrant_types_supported = [\"authorization_code\"]\n",
			"grant_types_supported", "needs the issuer's authorization_endpoint"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(base+tc.keys), "t.toml", Options{})
			if tc.problem == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.Auth.Issuers[0].TokenEndpoint != "https://auth.test/token" {
					t.Fatalf("token_endpoint read as %q", c.Auth.Issuers[0].TokenEndpoint)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "auth.issuers[0]."+tc.key) || !strings.Contains(err.Error(), tc.problem) {
				t.Fatalf("got %v, want auth.issuers[0].%s: %s", err, tc.key, tc.problem)
			}
		})
	}
	for _, tc := range []struct {
		is   Issuer
		want string
	}{
		{Issuer{TokenEndpoint: "https://t"}, "client_credentials"},
		{Issuer{TokenEndpoint: "https://t", AuthorizationEndpoint: "https://a"}, "authorization_code"},
		{Issuer{TokenEndpoint: "https://t", GrantTypesSupported: []string{"client_credentials", "authorization_code"}}, "client_credentials authorization_code"},
	} {
		if got := strings.Join(tc.is.GrantTypes(), " "); got != tc.want {
			t.Errorf("GrantTypes() of %+v = %q, want %q", tc.is, got, tc.want)
		}
	}
}
