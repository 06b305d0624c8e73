package gatewayspec

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
)

// The operator's issuer comes after the user's, read-only, with the Gateway's own
// audience; admission's rendering has none of it.
func TestRenderForPollingAppendsTheOperatorsReadOnlyIssuer(t *testing.T) {
	spec := &ferrofedv1alpha1.GatewaySpec{Image: "x", Config: withIssuer("")}
	user := []byte(*spec.Config.Inline)
	rendered, err := RenderForPolling(spec, Plan(spec), user, OperatorIssuer("clinic", "front"), "kid-1")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseRendered(rendered)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Auth.Issuers) != 2 {
		t.Fatalf("issuers %+v, want the user's and the operator's", cfg.Auth.Issuers)
	}
	user0, op := cfg.Auth.Issuers[0], cfg.Auth.Issuers[1]
	if user0.ReadOnly || user0.Issuer == OperatorIssuerID {
		t.Errorf("the user's issuer changed: %+v", user0)
	}
	want := OperatorIssuer("clinic", "front")
	if op.Issuer != OperatorIssuerID || op.Audience != "urn:ferrofed:gateway:clinic/front" || !op.ReadOnly ||
		op.JWKSFile != OperatorJWKSFile || op.OperatorScope != want.OperatorScope {
		t.Errorf("the operator's issuer %+v", op)
	}
	plain, err := RenderAndCheck(spec, Plan(spec), user)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain), OperatorIssuerID) {
		t.Errorf("RenderAndCheck rendered the operator's issuer:\n%s", plain)
	}
}

// A data plane that needs an issuer is not given one by the operator's.
func TestTheOperatorsIssuerIsNotTheDataPlanes(t *testing.T) {
	spec := &ferrofedv1alpha1.GatewaySpec{Image: "x", Config: &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To("[health]\ncheck_timeout_ms = 250\n")}}
	_, err := RenderForPolling(spec, Plan(spec), []byte(*spec.Config.Inline), OperatorIssuer("clinic", "front"), "kid-1")
	if err == nil || !strings.Contains(err.Error(), "auth.data_plane") {
		t.Fatalf("a required data plane with only the operator's issuer: %v, want the auth.data_plane problem", err)
	}
}

// A user issuer that names the operator's is refused, in admission's rendering too,
// naming its key.
func TestAUserIssuerMayNotNameTheOperators(t *testing.T) {
	table := issuer.WithRemote("") + "\n[[auth.issuers]]\nissuer = \"" + OperatorIssuerID + "\"\naudience = \"x\"\noperator_scope = \"s\"\njwks_url = \"https://a.test/jwks\"\n"
	spec := &ferrofedv1alpha1.GatewaySpec{Image: "x", Config: &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To(table)}}
	for name, render := range map[string]func() ([]byte, error){
		"admission": func() ([]byte, error) { return RenderAndCheck(spec, Plan(spec), []byte(table)) },
		"polling": func() ([]byte, error) {
			return RenderForPolling(spec, Plan(spec), []byte(table), OperatorIssuer("clinic", "front"), "kid-1")
		},
	} {
		_, err := render()
		if err == nil || !strings.Contains(err.Error(), "auth.issuers[1].issuer") || !strings.Contains(err.Error(), "the operator's own issuer") {
			t.Errorf("%s: %v, want auth.issuers[1].issuer refused", name, err)
		}
	}
}
