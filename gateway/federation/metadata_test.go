package federation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

type capabilityAnswer struct {
	ResourceType   string            `json:"resourceType"`
	Kind           string            `json:"kind"`
	FHIRVersion    string            `json:"fhirVersion"`
	Format         []string          `json:"format"`
	Implementation map[string]string `json:"implementation"`
	Rest           []struct {
		Mode     string `json:"mode"`
		Resource []struct {
			Type        string             `json:"type"`
			SearchParam []fhir.SearchParam `json:"searchParam"`
		} `json:"resource"`
	} `json:"rest"`
}

func (h *harness) metadata() capabilityAnswer {
	h.t.Helper()
	res, body := h.get("/fhir/metadata")
	var c capabilityAnswer
	if err := json.Unmarshal(body, &c); err != nil || res.StatusCode != 200 {
		h.t.Fatalf("metadata: %d %s", res.StatusCode, body)
	}
	return c
}

func (h *harness) metadataRequests() map[string]int {
	out := map[string]int{}
	for id, m := range h.members {
		for _, r := range m.Log() {
			if r.Path == "/fhir/metadata" {
				out[id]++
			}
		}
	}
	return out
}

func TestTheGatewaysCapabilityStatementIsWhatTheMembersHaveInCommon(t *testing.T) {
	h := newHarness(t, harnessOptions{},
		node{id: "node-a"},
		node{id: "node-b", opts: members.Options{ResourceTypes: []string{"Patient", "Encounter"}, OmitSearchParams: []string{"gender"}}},
		node{id: "node-down", opts: members.Options{Knobs: double.Knobs{Status: 500}}})
	h.wantStates(map[string]string{"node-a-query": "unknown", "node-b-query": "unknown", "node-down-query": "unknown"})
	c := h.metadata()
	if c.ResourceType != "CapabilityStatement" || c.Kind != "instance" || c.FHIRVersion != "4.0.1" || !slices.Contains(c.Format, "json") ||
		c.Implementation["url"] != h.URL+"/fhir" || len(c.Rest) != 1 || c.Rest[0].Mode != "server" {
		t.Fatalf("statement %+v", c)
	}
	var types []string
	params := map[string]string{}
	for _, r := range c.Rest[0].Resource {
		types = append(types, r.Type)
		if r.Type == "Patient" {
			for _, p := range r.SearchParam {
				params[p.Name] = p.Type
			}
		}
	}
	if strings.Join(types, ",") != "Encounter,Patient" {
		t.Fatalf("types %v, want the two both members serve", types)
	}
	if params["family"] != "string" || params["birthdate"] != "date" || params["_id"] != "token" {
		t.Fatalf("Patient's parameters %v", params)
	}
	if _, ok := params["gender"]; ok {
		t.Fatal("gender is listed though node-b does not know it")
	}
	// Each member was asked once, and each call recorded its state.
	if got := h.metadataRequests(); got["node-a"] != 1 || got["node-b"] != 1 || got["node-down"] != 1 {
		t.Fatalf("metadata requests %v", got)
	}
	h.wantStates(map[string]string{"node-a-query": "up", "node-b-query": "up", "node-down-query": "failing"})
	// Within the TTL the statement is the cached one: no member is asked again.
	h.metadata()
	if got := h.metadataRequests(); got["node-a"] != 1 {
		t.Fatalf("the cached statement asked again: %v", got)
	}
}

func TestTheProbeRefreshesTheStatementAndAZeroTTLAsksEveryTime(t *testing.T) {
	h := newHarness(t, harnessOptions{}, node{id: "node-a"}, node{id: "node-b", opts: members.Options{ResourceTypes: []string{"Observation"}}})
	res, _, err := h.do(context.Background(), http.MethodPost, "/operator/probe", "Bearer "+h.Token, nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("probe %v %v", res, err)
	}
	c := h.metadata()
	if got := h.metadataRequests(); got["node-a"] != 1 || got["node-b"] != 1 {
		t.Fatalf("after a probe the metadata asked again: %v", got)
	}
	if len(c.Rest[0].Resource) != 1 || c.Rest[0].Resource[0].Type != "Observation" {
		t.Fatalf("statement %+v", c.Rest)
	}

	every := newHarness(t, harnessOptions{federation: "capability_ttl_ms = 0"}, node{id: "node-a"})
	every.metadata()
	every.metadata()
	if got := every.metadataRequests(); got["node-a"] != 2 {
		t.Fatalf("with capability_ttl_ms = 0: %v", got)
	}
}

const endpoints = "token_endpoint = \"https://auth.test/token\"\nauthorization_endpoint = \"https://auth.test/authorize\"\n"

// The statement says how to authorize (docs/security.md, "Discovery"): on a data plane
// that asks for a token, the SMART-on-FHIR service and, when an issuer names its
// endpoints, the oauth-uris extension with them; on an open one, no security at all.
// Every statement is valid R4 (the harness validates each answer).
func TestTheCapabilityStatementSaysHowToAuthorize(t *testing.T) {
	for _, tc := range []struct {
		name             string
		o                harnessOptions
		service          bool
		authorize, token string
	}{
		{"both endpoints", harnessOptions{issuerKeys: endpoints}, true, "https://auth.test/authorize", "https://auth.test/token"},
		{"a token endpoint alone", harnessOptions{issuerKeys: "token_endpoint = \"https://auth.test/token\"\n"}, true, "", "https://auth.test/token"},
		{"no endpoints", harnessOptions{}, true, "", ""},
		{"an open data plane", harnessOptions{tables: "[auth]\ndata_plane = \"open\"\n", issuerKeys: endpoints}, false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.o, node{id: "node-a"})
			_, body := h.get("/fhir/metadata")
			var c struct {
				Rest []struct {
					Security *struct {
						Service []struct {
							Coding []struct{ System, Code string }
						}
						Extension []struct {
							URL       string
							Extension []struct {
								URL      string
								ValueURI string `json:"valueUri"`
							}
						}
					}
				}
			}
			if err := json.Unmarshal(body, &c); err != nil || len(c.Rest) != 1 {
				t.Fatalf("%v: %s", err, body)
			}
			sec := c.Rest[0].Security
			if !tc.service {
				if sec != nil || strings.Contains(string(body), "SMART") {
					t.Fatalf("an open data plane claims a security service: %s", body)
				}
				return
			}
			if sec == nil || len(sec.Service) != 1 || len(sec.Service[0].Coding) != 1 ||
				sec.Service[0].Coding[0].System != "http://terminology.hl7.org/CodeSystem/restful-security-service" || sec.Service[0].Coding[0].Code != "SMART-on-FHIR" {
				t.Fatalf("no SMART-on-FHIR service: %s", body)
			}
			uris := map[string]string{}
			for _, e := range sec.Extension {
				if e.URL != "http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris" {
					t.Fatalf("an extension %s", e.URL)
				}
				for _, sub := range e.Extension {
					uris[sub.URL] = sub.ValueURI
				}
			}
			if uris["authorize"] != tc.authorize || uris["token"] != tc.token || (tc.token == "") != (len(sec.Extension) == 0) {
				t.Fatalf("oauth-uris %v, want authorize %q and token %q: %s", uris, tc.authorize, tc.token, body)
			}
		})
	}
}

// smartConfiguration is the SMART discovery document as a client reads it.
type smartConfiguration struct {
	AuthorizationEndpoint         string   `json:"authorization_endpoint"`
	TokenEndpoint                 string   `json:"token_endpoint"`
	GrantTypesSupported           []string `json:"grant_types_supported"`
	ResponseTypesSupported        []string `json:"response_types_supported"`
	CodeChallengeMethodsSupported []string `json:"code_challenge_methods_supported"`
	ScopesSupported               []string `json:"scopes_supported"`
	Capabilities                  []string `json:"capabilities"`
}

// SMART discovery publishes the endpoints of the first issuer that names a token
// endpoint, and what the gateway itself enforces: the permission capabilities and the
// scope forms it reads, never a launch mode or a client type it cannot know of.
// Without such an issuer, and on an open data plane, there is none to publish: a 404.
func TestSMARTDiscoveryPublishesTheFirstIssuerWithATokenEndpoint(t *testing.T) {
	second := issuer.New(t)
	secondTable := func(keys string) string {
		return fmt.Sprintf("[[auth.issuers]]\nissuer = \"https://second.test\"\naudience = %q\njwks_file = %q\noperator_scope = \"second.operator\"\n%s",
			issuer.Audience, second.JWKS, keys)
	}
	const path = "/fhir/.well-known/smart-configuration"
	for _, tc := range []struct {
		name  string
		o     harnessOptions
		token string
		// authorize is the authorization endpoint published, and grant the grant types.
		authorize, grant string
	}{
		{"the first issuer's", harnessOptions{issuerKeys: endpoints,
			tables: secondTable("token_endpoint = \"https://second.test/token\"\n")}, "https://auth.test/token", "https://auth.test/authorize", "authorization_code"},
		{"the first issuer that has one", harnessOptions{tables: secondTable("token_endpoint = \"https://second.test/token\"\n")},
			"https://second.test/token", "", "client_credentials"},
		{"its own grant types", harnessOptions{issuerKeys: endpoints + "grant_types_supported = [\"client_credentials\", \"authorization_code\"]\n"},
			"https://auth.test/token", "https://auth.test/authorize", "client_credentials authorization_code"},
		{"none without a token endpoint", harnessOptions{}, "", "", ""},
		{"none on an open data plane", harnessOptions{issuerKeys: endpoints, tables: "[auth]\ndata_plane = \"open\"\n"}, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.o, node{id: "node-a"})
			res, body := h.get(path)
			if tc.token == "" {
				if oo := outcomeOf(t, body); res.StatusCode != http.StatusNotFound || oo.Issue[0].Code != "not-found" {
					t.Fatalf("answered %d: %s", res.StatusCode, body)
				}
				return
			}
			var c smartConfiguration
			if err := json.Unmarshal(body, &c); err != nil || res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("answered %d %s: %s", res.StatusCode, res.Header.Get("Content-Type"), body)
			}
			if c.TokenEndpoint != tc.token || c.AuthorizationEndpoint != tc.authorize || strings.Join(c.GrantTypesSupported, " ") != tc.grant ||
				(tc.authorize != "") != slices.Equal(c.ResponseTypesSupported, []string{"code"}) {
				t.Fatalf("endpoints %+v, want token %s, authorize %q, grant types %s", c, tc.token, tc.authorize, tc.grant)
			}
			if !slices.Equal(c.CodeChallengeMethodsSupported, []string{"S256"}) ||
				!slices.Equal(c.Capabilities, []string{"permission-v1", "permission-v2", "permission-patient", "permission-user"}) ||
				!slices.Contains(c.ScopesSupported, "patient/*.rs") || !slices.Contains(c.ScopesSupported, "system/*.read") || len(c.ScopesSupported) != 15 {
				t.Fatalf("what the gateway enforces: %s", body)
			}
			if strings.Contains(string(body), "issuer") || strings.Contains(string(body), "jwks") || strings.Contains(string(body), "operator") {
				t.Fatalf("discovery says more than SMART asks of it: %s", body)
			}
		})
	}
	h := newHarness(t, harnessOptions{issuerKeys: endpoints}, node{id: "node-a"})
	res, body, err := h.do(context.Background(), http.MethodPost, path, "", nil)
	if err != nil || res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("a POST answered %v %v %s", res, err, body)
	}
}
