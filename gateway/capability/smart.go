package capability

import (
	"encoding/json"
	"net/http"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/gateway/smart"
)

// SMART on FHIR discovery (docs/security.md, "Discovery"): how a client finds where to
// get a token for the data plane, and what the gateway enforces of it. The endpoints
// are an issuer's, the first of [[auth.issuers]] that names a token_endpoint; the
// capabilities and scopes are what the gateway itself decides (gateway/access,
// gateway/smart), never what it cannot know of the authorization server (launch
// modes, client types, refresh tokens, OpenID Connect).

// SMARTCapabilities are the SMART App Launch 2.x capabilities the gateway enforces:
// scopes in either version's syntax, at the patient level (confined to the token's
// patient claim) and at the user level.
var SMARTCapabilities = []string{"permission-v1", "permission-v2", "permission-patient", "permission-user"}

// SMARTScopes are the scope forms the gateway reads, each level's with every type:
// any resource type in place of *, a v2 subset of cruds (with a ?query restriction
// too), and v1's read, write and *.
var SMARTScopes = scopeForms()

func scopeForms() []string {
	var out []string
	for _, level := range []string{"patient", "user", "system"} {
		for _, perms := range []string{"cruds", "rs", "read", "write", "*"} {
			out = append(out, level+"/*."+perms)
		}
	}
	return out
}

// SMARTConfiguration is the document at {base}/fhir/.well-known/smart-configuration
// (SMART App Launch 2.x).
type SMARTConfiguration struct {
	AuthorizationEndpoint         string   `json:"authorization_endpoint,omitempty"`
	TokenEndpoint                 string   `json:"token_endpoint"`
	GrantTypesSupported           []string `json:"grant_types_supported"`
	ResponseTypesSupported        []string `json:"response_types_supported,omitempty"`
	CodeChallengeMethodsSupported []string `json:"code_challenge_methods_supported"`
	ScopesSupported               []string `json:"scopes_supported"`
	Capabilities                  []string `json:"capabilities"`
}

// publishing is the issuer whose endpoints the gateway publishes: the first that names
// a token endpoint, on a data plane that asks for a token; nil for none.
func publishing(a config.Auth) *config.Issuer {
	if !a.DataPlaneRequired() {
		return nil
	}
	for i := range a.Issuers {
		if a.Issuers[i].TokenEndpoint != "" {
			return &a.Issuers[i]
		}
	}
	return nil
}

// SMART is the gateway's SMART configuration, false when it publishes none: on an
// open data plane (no scope is enforced), or when no issuer names a token_endpoint.
func SMART(a config.Auth) (SMARTConfiguration, bool) {
	is := publishing(a)
	if is == nil {
		return SMARTConfiguration{}, false
	}
	c := SMARTConfiguration{AuthorizationEndpoint: is.AuthorizationEndpoint, TokenEndpoint: is.TokenEndpoint, GrantTypesSupported: is.GrantTypes(),
		CodeChallengeMethodsSupported: []string{"S256"}, ScopesSupported: SMARTScopes, Capabilities: SMARTCapabilities}
	if is.AuthorizationEndpoint != "" {
		c.ResponseTypesSupported = []string{"code"}
	}
	return c, true
}

// ServeSMART answers GET (and HEAD) {base}/fhir/.well-known/smart-configuration: the
// document as JSON, or a 404 OperationOutcome saying why there is none.
func ServeSMART(w http.ResponseWriter, r *http.Request, a config.Auth) {
	if !fhir.Reads(r) {
		fhir.MethodNotAllowed(w, fhir.GetOrHead, "/fhir/"+smart.DiscoveryPath)
		return
	}
	c, ok := SMART(a)
	if !ok {
		fhir.Write(w, http.StatusNotFound, fhir.Outcome("not-found", "this gateway publishes no SMART configuration: "+
			"its data plane is open, or no [[auth.issuers]] names a token_endpoint"))
		return
	}
	body, err := json.Marshal(c)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// security is rest.security of the gateway's CapabilityStatement: on a data plane
// that asks for a token, the SMART-on-FHIR service, and the publishing issuer's
// endpoints in the oauth-uris extension; nil on an open one, which claims nothing.
func security(a config.Auth, gw string) *restSecurity {
	if !a.DataPlaneRequired() {
		return nil
	}
	s := &restSecurity{
		Service: []codeableConcept{{Coding: []coding{{System: "http://terminology.hl7.org/CodeSystem/restful-security-service", Code: "SMART-on-FHIR"}},
			Text: "SMART on FHIR"}},
		Description: "Every request of the data plane carries a bearer token of one of the gateway's issuers; " +
			"its SMART App Launch scopes (v1 and v2, patient, user and system) decide what it may do.",
	}
	is := publishing(a)
	if is == nil {
		return s
	}
	s.Description += " SMART discovery: " + gw + "/fhir/" + smart.DiscoveryPath + "."
	uris := extension{URL: "http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris"}
	if is.AuthorizationEndpoint != "" {
		uris.Extension = append(uris.Extension, extension{URL: "authorize", ValueURI: is.AuthorizationEndpoint})
	}
	uris.Extension = append(uris.Extension, extension{URL: "token", ValueURI: is.TokenEndpoint})
	s.Extension = []extension{uris}
	return s
}

type restSecurity struct {
	Extension   []extension       `json:"extension,omitempty"`
	Service     []codeableConcept `json:"service"`
	Description string            `json:"description"`
}

type codeableConcept struct {
	Coding []coding `json:"coding"`
	Text   string   `json:"text,omitempty"`
}

type coding struct {
	System string `json:"system"`
	Code   string `json:"code"`
}

type extension struct {
	URL       string      `json:"url"`
	Extension []extension `json:"extension,omitempty"`
	ValueURI  string      `json:"valueUri,omitempty"`
}
