package capability

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

// The common part is served within its TTL, of the registry it was made of only.
func TestTheCacheServesItsOwnRegistryWithinItsTTL(t *testing.T) {
	var c Cache
	one, other := new(int), new(int)
	now := time.Now()
	st := &fhir.MemberCapability{ResourceType: "CapabilityStatement"}
	if _, answered := c.Store(one, []*fhir.MemberCapability{st, nil}, now); answered != 1 {
		t.Fatalf("answered %d, want 1 of 2", answered)
	}
	if _, answered, ok := c.Cached(one, time.Minute, now.Add(59*time.Second)); !ok || answered != 1 {
		t.Fatal("not served within its TTL")
	}
	for what, ok := range map[string]bool{
		"past its TTL":        func() bool { _, _, ok := c.Cached(one, time.Minute, now.Add(time.Minute)); return ok }(),
		"a TTL of 0":          func() bool { _, _, ok := c.Cached(one, 0, now); return ok }(),
		"of another registry": func() bool { _, _, ok := c.Cached(other, time.Minute, now); return ok }(),
	} {
		if ok {
			t.Errorf("served %s", what)
		}
	}
}

func issuers(keys ...config.Issuer) config.Auth {
	return config.Auth{DataPlane: config.DataPlaneRequired, Issuers: keys}
}

// Discovery is the first issuer's with a token endpoint, on a data plane that asks for
// a token only; the statement's security says the same, and is valid R4 either way.
func TestWhatTheGatewaySaysOfItsAuthorization(t *testing.T) {
	plain := config.Issuer{Issuer: "https://plain.test"}
	backend := config.Issuer{Issuer: "https://backend.test", TokenEndpoint: "https://backend.test/token"}
	launch := config.Issuer{Issuer: "https://launch.test", TokenEndpoint: "https://launch.test/token", AuthorizationEndpoint: "https://launch.test/authorize"}
	open := issuers(launch)
	open.DataPlane = config.DataPlaneOpen
	for _, tc := range []struct {
		name      string
		auth      config.Auth
		token     string // "" for no discovery
		security  bool
		oauthURIs string
	}{
		{"the first issuer with a token endpoint", issuers(plain, backend, launch), "https://backend.test/token", true, `"token","valueUri":"https://backend.test/token"`},
		{"an authorization endpoint too", issuers(launch, backend), "https://launch.test/token", true,
			`"authorize","valueUri":"https://launch.test/authorize"},{"url":"token"`},
		{"no issuer with a token endpoint", issuers(plain), "", true, ""},
		{"an open data plane", open, "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := SMART(tc.auth)
			if ok != (tc.token != "") || c.TokenEndpoint != tc.token {
				t.Fatalf("SMART = %+v, %v; want token endpoint %q", c, ok, tc.token)
			}
			body, err := json.Marshal(Statement(Gateway{Base: "https://gw.test/api", Members: 2, Answered: 1, Auth: tc.auth}, nil, time.Now()))
			if err != nil {
				t.Fatal(err)
			}
			if err := fhirschema.Validate(body); err != nil {
				t.Fatalf("not valid R4: %v\n%s", err, body)
			}
			if got := strings.Contains(string(body), `"code":"SMART-on-FHIR"`); got != tc.security {
				t.Fatalf("the statement claims SMART %v, want %v: %s", got, tc.security, body)
			}
			if got := strings.Contains(string(body), "oauth-uris"); got != (tc.oauthURIs != "") || !strings.Contains(string(body), tc.oauthURIs) {
				t.Fatalf("oauth-uris: %s", body)
			}
			if got := strings.Contains(string(body), "/fhir/.well-known/smart-configuration"); got != ok {
				t.Fatalf("the statement names discovery %v, which it serves %v: %s", got, ok, body)
			}
		})
	}
}
