package issuer

import "strings"

// The remote issuer: an identity provider known by its jwks_url, as a Gateway in a
// cluster trusts its organisation's (docs/operator.md, "The data plane's issuer"). It is
// for configurations that are rendered and checked but never asked to verify a token
// (the operator's Gateways on envtest, the webhook's reviews, the builders' golden
// files): `config check` reads no file for it, and the gateway fetches a jwks_url only
// when a token arrives, so nothing here is ever fetched.
const (
	// RemoteURL is the remote issuer's iss.
	RemoteURL = "https://login.example.org/realms/clinic"
	// RemoteJWKSURL is where its keys would be fetched.
	RemoteJWKSURL = RemoteURL + "/protocol/openid-connect/certs"
	// RemoteTable is the [[auth.issuers]] table that trusts it: with it, the data plane
	// (auth.data_plane, "required" by default) has an issuer to verify its tokens.
	RemoteTable = "[[auth.issuers]]\n" +
		"issuer = \"" + RemoteURL + "\"\n" +
		"audience = \"" + Audience + "\"\n" +
		"jwks_url = \"" + RemoteJWKSURL + "\"\n" +
		"operator_scope = \"" + OperatorScope + "\"\n"
)

// WithRemote is the configuration toml with RemoteTable after it: what a Gateway's
// spec.config says besides what a test is about.
func WithRemote(toml string) string {
	if toml != "" && !strings.HasSuffix(toml, "\n") {
		toml += "\n"
	}
	return toml + RemoteTable
}
