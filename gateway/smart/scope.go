package smart

import (
	"net/url"
	"slices"
	"strings"
)

// MaxScopes is how many of a token's scopes Parse considers: the rest are counted
// (Grants.Dropped) and grant nothing. A token with more scopes than this is not one
// SMART clients are issued; the cap keeps a hostile token from costing more than it.
const MaxScopes = 256

// MaxScopeLen is the longest scope, in bytes, Parse reads. A longer one is counted
// (Grants.Dropped) and grants nothing, nor is it kept among the other scopes.
const MaxScopeLen = 512

// maxTypeLen is the longest resource type name: the rule of gateway/fhir's
// ValidResourceType, which this package mirrors to stay a leaf.
const maxTypeLen = 64

// Level is the context of a SMART resource scope: the part before the slash.
type Level uint8

// The three levels of SMART App Launch 2.x. The zero Level is none (a decision
// that needed no grant, such as the capability statement's).
const (
	// LevelPatient is patient/: data about the one patient of the token's patient
	// claim. A grant at this level leaves the caller to restrict the request to that
	// patient's compartment.
	LevelPatient Level = iota + 1
	// LevelUser is user/: data the authorizing user may see.
	LevelUser
	// LevelSystem is system/: data the client itself is authorized to (backend
	// services, no user in the loop).
	LevelSystem
)

// levels are the levels in the order they are tried, broadest first.
var levels = []Level{LevelSystem, LevelUser, LevelPatient}

// String is the level's scope prefix: "patient", "user" or "system" ("" for none).
func (l Level) String() string {
	switch l {
	case LevelPatient:
		return "patient"
	case LevelUser:
		return "user"
	case LevelSystem:
		return "system"
	}
	return ""
}

func parseLevel(s string) (Level, bool) {
	for _, l := range levels {
		if s == l.String() {
			return l, true
		}
	}
	return 0, false
}

// Perm is a set of SMART v2 permissions, c r u d s.
type Perm uint8

// The permissions, in the order a v2 scope spells them.
const (
	PermCreate Perm = 1 << iota // c: type-level create
	PermRead                    // r: read, vread, instance history
	PermUpdate                  // u: update, patch
	PermDelete                  // d: delete
	PermSearch                  // s: type and system search, type and system history
)

// PermAll is every permission, v2's .cruds and v1's .*.
const PermAll = PermCreate | PermRead | PermUpdate | PermDelete | PermSearch

// permLetters spell the permissions in their one valid order.
const permLetters = "cruds"

// String spells p as a v2 suffix, in order: "rs", "cud", "cruds" ("" for none).
func (p Perm) String() string {
	var b strings.Builder
	for i := range len(permLetters) {
		if p&(1<<i) != 0 {
			b.WriteByte(permLetters[i])
		}
	}
	return b.String()
}

// Has reports whether p holds every permission of want.
func (p Perm) Has(want Perm) bool { return p&want == want }

// parsePerms reads a permission suffix: v1's read, write or *, or a non-empty v2
// subset of "cruds" in that order, each letter at most once. v1 reports whether the
// suffix was a v1 one (which takes no query).
func parsePerms(s string) (p Perm, v1, ok bool) {
	switch s {
	case "read":
		return PermRead | PermSearch, true, true
	case "write":
		return PermCreate | PermUpdate | PermDelete, true, true
	case "*":
		return PermAll, true, true
	case "":
		return 0, false, false
	}
	next := 0 // the first letter of permLetters s may still use
	for i := 0; i < len(s); i++ {
		at := strings.IndexByte(permLetters[next:], s[i])
		if at < 0 {
			return 0, false, false // unknown, repeated or out of order
		}
		p |= 1 << (next + at)
		next += at + 1
	}
	return p, false, true
}

// Grant is one resource scope a token holds.
type Grant struct {
	// Level is the scope's context: patient, user or system.
	Level Level
	// Type is the resource type, or "*" for every type.
	Type string
	// Perms are the permissions the scope grants (a v1 suffix already translated).
	Perms Perm
	// Query is the scope's restriction (`?category=laboratory`), decoded as a URL
	// query is; nil when the scope has none. The grant applies only to requests and
	// results that match it.
	Query url.Values
	// Scope is the scope as the token spelled it.
	Scope string
}

// String is the grant in canonical v2 form: level/Type.perms, then the query, its
// keys sorted and its values escaped as a URL query is.
func (g Grant) String() string {
	s := g.Level.String() + "/" + g.Type + "." + g.Perms.String()
	if len(g.Query) > 0 {
		s += "?" + g.Query.Encode()
	}
	return s
}

// ParseScope reads one SMART resource scope: v2's context/Type.perms[?query] or
// v1's context/Type.read|write|*. It reports false for anything else (openid,
// launch/patient, an operator scope, a malformed or over-long scope), which grants
// nothing. A v1 suffix with a query, an empty query or a query item without a key or
// value is malformed: a restriction that cannot be read grants nothing rather than
// everything.
func ParseScope(scope string) (Grant, bool) {
	if len(scope) > MaxScopeLen {
		return Grant{}, false
	}
	ctx, rest, ok := strings.Cut(scope, "/")
	if !ok {
		return Grant{}, false
	}
	level, ok := parseLevel(ctx)
	if !ok {
		return Grant{}, false
	}
	body, rawQuery, hasQuery := strings.Cut(rest, "?")
	typ, suffix, ok := strings.Cut(body, ".")
	if !ok || (typ != "*" && !validType(typ)) {
		return Grant{}, false
	}
	perms, v1, ok := parsePerms(suffix)
	if !ok || (v1 && hasQuery) {
		return Grant{}, false
	}
	g := Grant{Level: level, Type: typ, Perms: perms, Scope: scope}
	if hasQuery {
		if g.Query, ok = parseRestriction(rawQuery); !ok {
			return Grant{}, false
		}
	}
	return g, true
}

// parseRestriction reads a scope's query: param=value items joined by &, each with a
// key and a value, decoded as net/url decodes a request's query (so that the two
// compare alike).
func parseRestriction(raw string) (url.Values, bool) {
	if raw == "" {
		return nil, false
	}
	q := url.Values{}
	for item := range strings.SplitSeq(raw, "&") {
		k, v, ok := strings.Cut(item, "=")
		if !ok || k == "" || v == "" {
			return nil, false
		}
		key, err1 := url.QueryUnescape(k)
		val, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil || key == "" || val == "" {
			return nil, false
		}
		q.Add(key, val)
	}
	return q, true
}

// validType is FHIR's lexical rule for a resource type, [A-Z][A-Za-z]+ of at most 64
// characters: gateway/fhir's ValidResourceType, kept here so that this package
// imports nothing (a test holds the two equal).
func validType(t string) bool {
	if len(t) < 2 || len(t) > maxTypeLen || t[0] < 'A' || t[0] > 'Z' {
		return false
	}
	for i := 1; i < len(t); i++ {
		if c := t[i]; (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// Grants are the resource scopes of one token, read by Parse. The zero value grants
// nothing.
type Grants struct {
	grants  []Grant
	other   []string
	dropped int
}

// Parse reads a token's scopes (as auth.Scopes returns them) into its grants. Only
// the first MaxScopes scopes are considered, and only those of at most MaxScopeLen
// bytes; the rest are counted as dropped. A scope that is no resource grant is kept,
// in order, among the other scopes (Other), for the audit trail; empty ones are
// skipped.
func Parse(scopes []string) Grants {
	var g Grants
	for i, s := range scopes {
		if i == MaxScopes {
			g.dropped += len(scopes) - i
			break
		}
		if len(s) > MaxScopeLen {
			g.dropped++
			continue
		}
		if grant, ok := ParseScope(s); ok {
			g.grants = append(g.grants, grant)
		} else if s != "" {
			g.other = append(g.other, s)
		}
	}
	return g
}

// List returns the resource grants, in the token's order (a copy).
func (g Grants) List() []Grant {
	out := make([]Grant, len(g.grants))
	for i, gr := range g.grants {
		gr.Query = cloneValues(gr.Query)
		out[i] = gr
	}
	return out
}

// Other returns the scopes that grant no resource access (openid, fhirUser,
// launch/patient, offline_access, operator scopes, malformed resource scopes), in
// the token's order (a copy).
func (g Grants) Other() []string { return slices.Clone(g.other) }

// Dropped is how many scopes Parse did not consider: those past MaxScopes and those
// longer than MaxScopeLen.
func (g Grants) Dropped() int { return g.dropped }

// Levels returns the levels at which the token holds at least one grant, narrowest
// first: patient, user, system.
func (g Grants) Levels() []Level {
	var out []Level
	for _, l := range []Level{LevelPatient, LevelUser, LevelSystem} {
		if slices.ContainsFunc(g.grants, func(gr Grant) bool { return gr.Level == l }) {
			out = append(out, l)
		}
	}
	return out
}

func cloneValues(v url.Values) url.Values {
	if v == nil {
		return nil
	}
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}
