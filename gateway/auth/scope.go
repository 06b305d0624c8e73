package auth

import (
	"encoding/json"
	"slices"
	"strings"
)

// Scopes reads a token's scopes from its two customary claims: `scope`, a
// space-separated string (RFC 8693 §4.2, and most issuers), and `scp`, an array of
// strings (Azure AD, Okta). Either may also come in the other's shape; anything else
// (a number, an object) contributes nothing rather than failing the token, since a
// token without the operator scope is refused anyway.
func Scopes(scope, scp json.RawMessage) []string {
	var out []string
	for _, raw := range []json.RawMessage{scope, scp} {
		if len(raw) == 0 {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			out = append(out, strings.Fields(s)...)
			continue
		}
		var list []string
		if json.Unmarshal(raw, &list) == nil {
			for _, item := range list {
				out = append(out, strings.Fields(item)...)
			}
		}
	}
	return out
}

// HasScope reports whether scopes holds want exactly. A scope that merely starts with
// want ("ferrofed.operator.read" for "ferrofed.operator", or "ferrofed" for
// "ferrofed.operator") is a different scope.
func HasScope(scopes []string, want string) bool {
	return want != "" && slices.Contains(scopes, want)
}
