package smart

import (
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/fhir"
)

func TestParseScope(t *testing.T) {
	lab := url.Values{"category": {"http://terminology.hl7.org/CodeSystem/observation-category|laboratory"}}
	for _, c := range []struct {
		name, scope string
		ok          bool
		level       Level
		typ         string
		perms       Perm
		query       url.Values
	}{
		// v2
		{"v2 rs", "patient/Observation.rs", true, LevelPatient, "Observation", PermRead | PermSearch, nil},
		{"v2 cruds", "user/*.cruds", true, LevelUser, "*", PermAll, nil},
		{"v2 c", "system/Encounter.c", true, LevelSystem, "Encounter", PermCreate, nil},
		{"v2 r", "patient/Patient.r", true, LevelPatient, "Patient", PermRead, nil},
		{"v2 s", "patient/Observation.s", true, LevelPatient, "Observation", PermSearch, nil},
		{"v2 cud", "system/Encounter.cud", true, LevelSystem, "Encounter", PermCreate | PermUpdate | PermDelete, nil},
		{"v2 rd, a gap", "user/Appointment.rd", true, LevelUser, "Appointment", PermRead | PermDelete, nil},
		{"v2 cs", "user/Appointment.cs", true, LevelUser, "Appointment", PermCreate | PermSearch, nil},
		{"v2 wildcard rs", "patient/*.rs", true, LevelPatient, "*", PermRead | PermSearch, nil},
		{"v2 query", "patient/Observation.rs?category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory",
			true, LevelPatient, "Observation", PermRead | PermSearch, lab},
		{"v2 query, two items", "user/Observation.s?category=laboratory&status=final", true, LevelUser, "Observation", PermSearch,
			url.Values{"category": {"laboratory"}, "status": {"final"}}},
		{"v2 query, a repeated key", "user/Observation.s?code=a&code=b", true, LevelUser, "Observation", PermSearch,
			url.Values{"code": {"a", "b"}}},
		{"v2 query, escaped", "user/Observation.s?code=a%7Cb", true, LevelUser, "Observation", PermSearch, url.Values{"code": {"a|b"}}},
		{"v2 query, a modifier", "user/Observation.rs?code:in=http://vs.example/diabetes", true, LevelUser, "Observation",
			PermRead | PermSearch, url.Values{"code:in": {"http://vs.example/diabetes"}}},
		{"v2 query on a wildcard", "system/*.rs?_security=N", true, LevelSystem, "*", PermRead | PermSearch, url.Values{"_security": {"N"}}},

		// v1
		{"v1 read", "patient/Observation.read", true, LevelPatient, "Observation", PermRead | PermSearch, nil},
		{"v1 write", "user/Observation.write", true, LevelUser, "Observation", PermCreate | PermUpdate | PermDelete, nil},
		{"v1 star", "system/Observation.*", true, LevelSystem, "Observation", PermAll, nil},
		{"v1 star star", "patient/*.*", true, LevelPatient, "*", PermAll, nil},
		{"v1 wildcard read", "user/*.read", true, LevelUser, "*", PermRead | PermSearch, nil},

		// Not resource grants.
		{"openid", "openid", false, 0, "", 0, nil},
		{"fhirUser", "fhirUser", false, 0, "", 0, nil},
		{"launch", "launch", false, 0, "", 0, nil},
		{"launch/patient", "launch/patient", false, 0, "", 0, nil},
		{"launch/encounter", "launch/encounter", false, 0, "", 0, nil},
		{"offline_access", "offline_access", false, 0, "", 0, nil},
		{"online_access", "online_access", false, 0, "", 0, nil},
		{"an operator scope", "ferrofed.operator", false, 0, "", 0, nil},
		{"an extension scope", "__profilePhoto.manage", false, 0, "", 0, nil},
		{"an extension URL", "https://ehr.example.org/scopes/profilePhoto.manage", false, 0, "", 0, nil},
		{"empty", "", false, 0, "", 0, nil},

		// Malformed resource scopes.
		{"out of order rc", "patient/Observation.rc", false, 0, "", 0, nil},
		{"out of order dus", "patient/Observation.dus", false, 0, "", 0, nil},
		{"out of order sr", "patient/Observation.sr", false, 0, "", 0, nil},
		{"repeated rr", "patient/Observation.rr", false, 0, "", 0, nil},
		{"repeated crudss", "patient/Observation.crudss", false, 0, "", 0, nil},
		{"empty perms", "patient/Observation.", false, 0, "", 0, nil},
		{"no perms", "patient/Observation", false, 0, "", 0, nil},
		{"unknown letter", "patient/Observation.rx", false, 0, "", 0, nil},
		{"upper-case perms", "patient/Observation.RS", false, 0, "", 0, nil},
		{"v1 upper case", "patient/Observation.READ", false, 0, "", 0, nil},
		{"v1 read with a query", "patient/Observation.read?category=x", false, 0, "", 0, nil},
		{"v1 star with a query", "patient/Observation.*?category=x", false, 0, "", 0, nil},
		{"unknown context", "group/Observation.rs", false, 0, "", 0, nil},
		{"upper-case context", "Patient/Observation.rs", false, 0, "", 0, nil},
		{"no context", "/Observation.rs", false, 0, "", 0, nil},
		{"v1 dotted form", "patient.Observation.read", false, 0, "", 0, nil},
		{"lower-case type", "patient/observation.rs", false, 0, "", 0, nil},
		{"a type with a digit", "patient/Observation2.rs", false, 0, "", 0, nil},
		{"a one-letter type", "patient/O.rs", false, 0, "", 0, nil},
		{"a type over 64", "patient/" + "A" + strings.Repeat("a", 64) + ".rs", false, 0, "", 0, nil},
		{"a slash in the type", "patient/Observation/1.rs", false, 0, "", 0, nil},
		{"no type", "patient/.rs", false, 0, "", 0, nil},
		{"two wildcards", "patient/**.rs", false, 0, "", 0, nil},
		{"a second dot", "patient/Observation.rs.x", false, 0, "", 0, nil},
		{"empty query", "patient/Observation.rs?", false, 0, "", 0, nil},
		{"a query item without a value", "patient/Observation.rs?category", false, 0, "", 0, nil},
		{"a query item with an empty value", "patient/Observation.rs?category=", false, 0, "", 0, nil},
		{"a query item without a key", "patient/Observation.rs?=laboratory", false, 0, "", 0, nil},
		{"an empty query item", "patient/Observation.rs?category=x&&status=y", false, 0, "", 0, nil},
		{"a bad escape", "patient/Observation.rs?category=%zz", false, 0, "", 0, nil},
		{"an escaped key", "patient/Observation.rs?%20=x", true, LevelPatient, "Observation", PermRead | PermSearch,
			url.Values{" ": {"x"}}},
		{"a space inside", "patient/Observation.rs extra", false, 0, "", 0, nil},
		{"over MaxScopeLen", "patient/Observation.rs?code=" + strings.Repeat("x", MaxScopeLen), false, 0, "", 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, ok := ParseScope(c.scope)
			if ok != c.ok {
				t.Fatalf("ParseScope(%q) ok = %v, want %v (%+v)", c.scope, ok, c.ok, g)
			}
			if !ok {
				if !reflect.DeepEqual(g, Grant{}) {
					t.Errorf("a refused scope returned %+v, want the zero Grant", g)
				}
				return
			}
			if g.Level != c.level || g.Type != c.typ || g.Perms != c.perms || g.Scope != c.scope {
				t.Errorf("ParseScope(%q) = %v %q %v %q, want %v %q %v", c.scope, g.Level, g.Type, g.Perms, g.Scope, c.level, c.typ, c.perms)
			}
			if !reflect.DeepEqual(g.Query, c.query) {
				t.Errorf("ParseScope(%q).Query = %v, want %v", c.scope, g.Query, c.query)
			}
		})
	}
}

func TestMaxScopeLenIsInclusive(t *testing.T) {
	prefix := "patient/Observation.rs?code="
	at := prefix + strings.Repeat("x", MaxScopeLen-len(prefix))
	if _, ok := ParseScope(at); !ok {
		t.Errorf("a scope of exactly %d bytes was refused", MaxScopeLen)
	}
	if _, ok := ParseScope(at + "x"); ok {
		t.Errorf("a scope of %d bytes was read", MaxScopeLen+1)
	}
}

func TestPermString(t *testing.T) {
	for _, c := range []struct {
		p    Perm
		want string
	}{
		{0, ""},
		{PermCreate, "c"},
		{PermSearch, "s"},
		{PermRead | PermSearch, "rs"},
		{PermCreate | PermUpdate | PermDelete, "cud"},
		{PermUpdate | PermSearch, "us"},
		{PermAll, "cruds"},
	} {
		if got := c.p.String(); got != c.want {
			t.Errorf("Perm(%d).String() = %q, want %q", c.p, got, c.want)
		}
	}
}

func TestPermHas(t *testing.T) {
	for _, c := range []struct {
		p, want Perm
		has     bool
	}{
		{PermAll, PermRead, true},
		{PermRead | PermSearch, PermRead | PermSearch, true},
		{PermRead, PermRead | PermSearch, false},
		{0, 0, true},
		{0, PermRead, false},
	} {
		if got := c.p.Has(c.want); got != c.has {
			t.Errorf("%q.Has(%q) = %v, want %v", c.p, c.want, got, c.has)
		}
	}
}

// Every suffix of one to five letters of "cruds" is valid exactly when its letters
// are in order and unique: the 31 non-empty ordered subsets.
func TestEveryPermSuffix(t *testing.T) {
	valid := 0
	var walk func(prefix string)
	walk = func(prefix string) {
		if len(prefix) == 5 {
			return
		}
		for _, c := range permLetters {
			s := prefix + string(c)
			p, v1, ok := parsePerms(s)
			ordered := true
			for i := 1; i < len(s); i++ {
				if strings.IndexByte(permLetters, s[i-1]) >= strings.IndexByte(permLetters, s[i]) {
					ordered = false
				}
			}
			if ok != ordered || v1 {
				t.Errorf("parsePerms(%q) = %v, v1 %v; want ok %v", s, ok, v1, ordered)
			}
			if ok {
				valid++
				if p.String() != s {
					t.Errorf("parsePerms(%q) spells back as %q", s, p.String())
				}
			}
			walk(s)
		}
	}
	walk("")
	if valid != 31 {
		t.Errorf("%d valid suffixes, want 31", valid)
	}
}

func TestLevelString(t *testing.T) {
	for l, want := range map[Level]string{0: "", LevelPatient: "patient", LevelUser: "user", LevelSystem: "system", 9: ""} {
		if got := l.String(); got != want {
			t.Errorf("Level(%d).String() = %q, want %q", l, got, want)
		}
	}
}

func TestGrantString(t *testing.T) {
	for _, c := range []struct{ scope, want string }{
		{"patient/Observation.rs", "patient/Observation.rs"},
		{"patient/Observation.read", "patient/Observation.rs"},
		{"user/*.write", "user/*.cud"},
		{"system/*.*", "system/*.cruds"},
		{"user/Observation.s?status=final&category=laboratory", "user/Observation.s?category=laboratory&status=final"},
		{"user/Observation.s?category=a|b", "user/Observation.s?category=a%7Cb"},
	} {
		g, ok := ParseScope(c.scope)
		if !ok {
			t.Fatalf("ParseScope(%q) refused", c.scope)
		}
		if got := g.String(); got != c.want {
			t.Errorf("ParseScope(%q).String() = %q, want %q", c.scope, got, c.want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name    string
		scopes  []string
		grants  []string // canonical
		other   []string
		dropped int
		levels  []Level
	}{
		{"nothing", nil, nil, nil, 0, nil},
		{"a patient app", []string{"openid", "fhirUser", "launch/patient", "patient/*.rs", "offline_access"},
			[]string{"patient/*.rs"}, []string{"openid", "fhirUser", "launch/patient", "offline_access"}, 0, []Level{LevelPatient}},
		{"v1 and v2 mixed", []string{"user/Observation.read", "user/Patient.rs", "system/*.cruds"},
			[]string{"user/Observation.rs", "user/Patient.rs", "system/*.cruds"}, nil, 0, []Level{LevelUser, LevelSystem}},
		{"malformed kept as other", []string{"patient/Observation.rc", "patient/Observation.rs", "patient/observation.rs"},
			[]string{"patient/Observation.rs"}, []string{"patient/Observation.rc", "patient/observation.rs"}, 0, []Level{LevelPatient}},
		{"empty scopes skipped", []string{"", "patient/Patient.r", ""}, []string{"patient/Patient.r"}, nil, 0, []Level{LevelPatient}},
		{"an over-long scope dropped, not kept", []string{"patient/Patient.r", strings.Repeat("x", MaxScopeLen+1), "openid"},
			[]string{"patient/Patient.r"}, []string{"openid"}, 1, []Level{LevelPatient}},
		{"an operator token", []string{"ferrofed.operator"}, nil, []string{"ferrofed.operator"}, 0, nil},
		{"all three levels", []string{"system/Account.r", "patient/Basic.r", "user/Claim.r"}, nil, nil, 0, []Level{LevelPatient, LevelUser, LevelSystem}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := Parse(c.scopes)
			if c.grants != nil {
				var got []string
				for _, gr := range g.List() {
					got = append(got, gr.String())
				}
				if !slices.Equal(got, c.grants) {
					t.Errorf("grants %q, want %q", got, c.grants)
				}
			}
			if got := g.Other(); !slices.Equal(got, c.other) {
				t.Errorf("Other() = %q, want %q", got, c.other)
			}
			if g.Dropped() != c.dropped {
				t.Errorf("Dropped() = %d, want %d", g.Dropped(), c.dropped)
			}
			if got := g.Levels(); !slices.Equal(got, c.levels) {
				t.Errorf("Levels() = %v, want %v", got, c.levels)
			}
		})
	}
}

func TestParseCapsTheScopesConsidered(t *testing.T) {
	scopes := make([]string, 0, MaxScopes+44)
	for range MaxScopes - 1 {
		scopes = append(scopes, "openid")
	}
	scopes = append(scopes, "patient/Observation.r") // the last one considered
	for range 44 {
		scopes = append(scopes, "system/*.cruds") // never read
	}
	g := Parse(scopes)
	if g.Dropped() != 44 {
		t.Errorf("Dropped() = %d, want 44", g.Dropped())
	}
	if n := len(g.List()) + len(g.Other()); n != MaxScopes {
		t.Errorf("%d scopes considered, want %d", n, MaxScopes)
	}
	if got := g.Levels(); !slices.Equal(got, []Level{LevelPatient}) {
		t.Errorf("Levels() = %v: a scope past the cap was read", got)
	}
}

func TestListAndOtherAreCopies(t *testing.T) {
	g := Parse([]string{"patient/Observation.rs?category=laboratory", "openid"})
	l := g.List()
	l[0].Query["category"][0] = "vital-signs"
	l[0].Type = "Patient"
	g.Other()[0] = "changed"
	if got := g.List()[0]; got.Type != "Observation" || got.Query.Get("category") != "laboratory" {
		t.Errorf("changing List's result changed the grants: %+v", got)
	}
	if g.Other()[0] != "openid" {
		t.Errorf("changing Other's result changed the grants")
	}
}

// validType is gateway/fhir's rule, copied to keep this package a leaf.
func TestTheTypeRuleIsGatewayFHIRs(t *testing.T) {
	for _, s := range lexicalSamples {
		if got, want := validType(s), fhir.ValidResourceType(s); got != want {
			t.Errorf("validType(%q) = %v, fhir.ValidResourceType says %v", s, got, want)
		}
	}
}

var lexicalSamples = []string{"", "A", "Ab", "Observation", "observation", "Observation2", "Obs-ervation", "Obs.x", "*",
	"A" + strings.Repeat("b", 63), "A" + strings.Repeat("b", 64), "Patient ", "ÄObservation", "1", "a-b.C", strings.Repeat("1", 64),
	strings.Repeat("1", 65), "id_1", "id/1", "12.3-x", "Patient/1"}
