package smart

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// want is a decision as the tables spell it: restrictions as encoded queries.
type want struct {
	allowed      bool
	level        Level
	restrictions []string
	needed       string
}

func (w want) check(t *testing.T, d Decision) {
	t.Helper()
	var got []string
	for _, r := range d.Restrictions {
		got = append(got, r.Encode())
	}
	if d.Allowed != w.allowed || d.Level != w.level || !reflect.DeepEqual(got, w.restrictions) || d.Needed != w.needed {
		t.Errorf("got allowed %v level %v restrictions %q needed %q (reason %q), want allowed %v level %v restrictions %q needed %q",
			d.Allowed, d.Level, got, d.Needed, d.Reason, w.allowed, w.level, w.restrictions, w.needed)
	}
	if d.Allowed != (d.Reason == "") {
		t.Errorf("reason %q on a decision allowed %v: a refusal says why, an allowance does not", d.Reason, d.Allowed)
	}
}

func TestAllow(t *testing.T) {
	for _, c := range []struct {
		name   string
		scopes string
		typ    string
		i      Interaction
		want   want
	}{
		// One scope, one interaction.
		{"v2 read", "patient/Observation.rs", "Observation", Read, want{true, LevelPatient, nil, ""}},
		{"v2 search", "patient/Observation.rs", "Observation", SearchType, want{true, LevelPatient, nil, ""}},
		{"v2 vread", "user/Observation.r", "Observation", VRead, want{true, LevelUser, nil, ""}},
		{"r is not s", "patient/Observation.r", "Observation", SearchType, want{false, 0, nil, "patient/Observation.s"}},
		{"s is not r", "patient/Observation.s", "Observation", Read, want{false, 0, nil, "patient/Observation.r"}},
		{"another type", "patient/Observation.rs", "Condition", Read, want{false, 0, nil, "patient/Condition.r"}},
		{"create", "system/Encounter.c", "Encounter", Create, want{true, LevelSystem, nil, ""}},
		{"write does not imply read", "patient/Observation.c", "Observation", Read, want{false, 0, nil, "patient/Observation.r"}},
		{"update", "user/Observation.u", "Observation", Update, want{true, LevelUser, nil, ""}},
		{"patch is u", "user/Observation.u", "Observation", Patch, want{true, LevelUser, nil, ""}},
		{"delete", "user/Observation.d", "Observation", Delete, want{true, LevelUser, nil, ""}},
		{"delete without d", "user/Observation.cru", "Observation", Delete, want{false, 0, nil, "user/Observation.d"}},

		// History: an instance's is r, a type's and the system's are s.
		{"instance history is r", "patient/Observation.r", "Observation", HistoryInstance, want{true, LevelPatient, nil, ""}},
		{"type history is s", "patient/Observation.r", "Observation", HistoryType, want{false, 0, nil, "patient/Observation.s"}},
		{"type history with s", "patient/Observation.s", "Observation", HistoryType, want{true, LevelPatient, nil, ""}},
		{"system history needs *", "system/Observation.s", "", HistorySystem, want{false, 0, nil, "system/*.s"}},
		{"system history with *", "system/*.s", "", HistorySystem, want{true, LevelSystem, nil, ""}},

		// v1.
		{"v1 read reads", "patient/Observation.read", "Observation", Read, want{true, LevelPatient, nil, ""}},
		{"v1 read searches", "patient/Observation.read", "Observation", SearchType, want{true, LevelPatient, nil, ""}},
		{"v1 read does not write", "patient/Observation.read", "Observation", Create, want{false, 0, nil, "patient/Observation.c"}},
		{"v1 write deletes", "user/*.write", "Observation", Delete, want{true, LevelUser, nil, ""}},
		{"v1 write does not read", "user/*.write", "Condition", Read, want{false, 0, nil, "user/Condition.r"}},
		{"v1 star", "system/*.*", "Condition", ConditionalDelete, want{true, LevelSystem, nil, ""}},

		// Wildcards.
		{"* covers a type", "patient/*.rs", "MedicationRequest", SearchType, want{true, LevelPatient, nil, ""}},
		{"* covers a system search", "patient/*.rs", "", SearchSystem, want{true, LevelPatient, nil, ""}},
		{"a type does not cover a system search", "patient/Observation.rs patient/Condition.rs", "", SearchSystem,
			want{false, 0, nil, "patient/*.s"}},

		// Permissions add up within a level, never across.
		{"r and s do not make d", "patient/Observation.r patient/Observation.s", "Observation", ConditionalDelete,
			want{false, 0, nil, "patient/Observation.ds"}},
		{"d and s add up", "patient/Observation.d patient/Observation.s", "Observation", ConditionalDelete,
			want{true, LevelPatient, nil, ""}},
		{"a type's and *'s add up", "patient/Observation.u patient/*.s", "Observation", ConditionalUpdate,
			want{true, LevelPatient, nil, ""}},
		{"not across levels", "patient/Observation.u user/Observation.s", "Observation", ConditionalUpdate,
			want{false, 0, nil, "patient/Observation.us"}},

		// The conditional interactions need s as well.
		{"conditional create needs s", "patient/Observation.c", "Observation", ConditionalCreate, want{false, 0, nil, "patient/Observation.cs"}},
		{"conditional create", "patient/Observation.cs", "Observation", ConditionalCreate, want{true, LevelPatient, nil, ""}},
		{"conditional update needs s", "user/Observation.u", "Observation", ConditionalUpdate, want{false, 0, nil, "user/Observation.us"}},
		{"conditional update", "user/Observation.us", "Observation", ConditionalUpdate, want{true, LevelUser, nil, ""}},
		{"conditional patch needs s", "user/Observation.cud", "Observation", ConditionalPatch, want{false, 0, nil, "user/Observation.us"}},
		{"conditional delete needs s", "system/Observation.d", "Observation", ConditionalDelete, want{false, 0, nil, "system/Observation.ds"}},

		// Levels: the broadest is preferred; a refusal names the narrowest held.
		{"user over patient", "patient/Observation.rs user/Observation.rs", "Observation", Read, want{true, LevelUser, nil, ""}},
		{"system over user", "user/Observation.rs system/Observation.r", "Observation", Read, want{true, LevelSystem, nil, ""}},
		{"the level that has it", "user/Observation.r patient/Observation.s", "Observation", SearchType, want{true, LevelPatient, nil, ""}},
		{"refused with patient and system held", "system/Patient.r patient/Patient.r", "Observation", Read,
			want{false, 0, nil, "patient/Observation.r"}},
		{"refused with system held", "system/Patient.r", "Observation", Read, want{false, 0, nil, "system/Observation.r"}},
		{"refused with nothing held", "openid fhirUser", "Observation", Read, want{false, 0, nil, "user/Observation.r"}},
		{"malformed scopes grant nothing", "patient/Observation.rc patient/Observation.sr patient/Observation.read?x=y",
			"Observation", Read, want{false, 0, nil, "user/Observation.r"}},

		// Restrictions.
		{"restricted", "patient/Observation.rs?category=laboratory", "Observation", SearchType,
			want{true, LevelPatient, []string{"category=laboratory"}, ""}},
		{"unrestricted preferred over restricted at a broader level", "user/Observation.rs?category=laboratory patient/Observation.rs",
			"Observation", Read, want{true, LevelPatient, nil, ""}},
		{"restricted at the broadest level that has one", "user/Observation.rs?category=laboratory patient/Observation.rs?category=vital-signs",
			"Observation", Read, want{true, LevelUser, []string{"category=laboratory"}, ""}},
		{"two restrictions, either", "patient/Observation.rs?category=laboratory patient/Observation.rs?category=vital-signs",
			"Observation", SearchType, want{true, LevelPatient, []string{"category=laboratory", "category=vital-signs"}, ""}},
		{"an unrestricted grant makes restrictions moot", "patient/Observation.rs?category=laboratory patient/Observation.r",
			"Observation", Read, want{true, LevelPatient, nil, ""}},
		{"the same restriction adds up", "patient/Observation.u?category=laboratory patient/Observation.s?category=laboratory",
			"Observation", ConditionalUpdate, want{true, LevelPatient, []string{"category=laboratory"}, ""}},
		{"different restrictions do not", "patient/Observation.u?category=laboratory patient/Observation.s?category=vital-signs",
			"Observation", ConditionalUpdate, want{false, 0, nil, "patient/Observation.us"}},
		{"unrestricted s, restricted u", "patient/Observation.s patient/Observation.u?category=laboratory",
			"Observation", ConditionalUpdate, want{true, LevelPatient, []string{"category=laboratory"}, ""}},
		{"a restriction on another permission", "patient/Observation.r?category=laboratory", "Observation", SearchType,
			want{false, 0, nil, "patient/Observation.s"}},
		{"a restricted wildcard", "system/*.rs?_security=N", "Condition", Read, want{true, LevelSystem, []string{"_security=N"}, ""}},

		// Always, never, and malformed requests.
		{"capabilities with nothing", "", "", Capabilities, want{true, 0, nil, ""}},
		{"capabilities with a type", "", "Observation", Capabilities, want{true, 0, nil, ""}},
		{"the transaction wrapper", "system/*.cruds", "", Transaction, want{false, 0, nil, ""}},
		{"an unknown interaction", "system/*.cruds", "Observation", 0, want{false, 0, nil, ""}},
		{"past the last interaction", "system/*.cruds", "Observation", Transaction + 1, want{false, 0, nil, ""}},
		{"a lower-case type", "system/*.cruds", "observation", Read, want{false, 0, nil, ""}},
		{"no type", "system/*.cruds", "", Read, want{false, 0, nil, ""}},
		{"*, as a type", "system/*.cruds", "*", Read, want{false, 0, nil, ""}},
		{"a type on a system search", "system/*.cruds", "Observation", SearchSystem, want{false, 0, nil, ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.want.check(t, Parse(strings.Fields(c.scopes)).Allow(c.typ, c.i))
		})
	}
}

func TestAllowAt(t *testing.T) {
	g := Parse(strings.Fields("patient/Observation.rs user/Condition.r system/*.s?_security=N"))
	for _, c := range []struct {
		name  string
		level Level
		typ   string
		i     Interaction
		want  want
	}{
		{"patient, held", LevelPatient, "Observation", Read, want{true, LevelPatient, nil, ""}},
		{"user, not held there", LevelUser, "Observation", Read, want{false, 0, nil, "user/Observation.r"}},
		{"user, held", LevelUser, "Condition", Read, want{true, LevelUser, nil, ""}},
		{"patient, held at user only", LevelPatient, "Condition", Read, want{false, 0, nil, "patient/Condition.r"}},
		{"system, restricted", LevelSystem, "Condition", SearchType, want{true, LevelSystem, []string{"_security=N"}, ""}},
		{"system, refused", LevelSystem, "Condition", Read, want{false, 0, nil, "system/Condition.r"}},
		{"the zero level", 0, "Observation", Read, want{false, 0, nil, ""}},
		{"the zero level, capabilities", 0, "", Capabilities, want{true, 0, nil, ""}},
	} {
		t.Run(c.name, func(t *testing.T) { c.want.check(t, g.AllowAt(c.level, c.typ, c.i)) })
	}
}

func TestAllowSearch(t *testing.T) {
	for _, c := range []struct {
		name   string
		scopes string
		typ    string
		i      Interaction
		query  string
		want   want
	}{
		{"unrestricted", "patient/Observation.rs", "Observation", SearchType, "code=x", want{true, LevelPatient, nil, ""}},
		{"restriction satisfied", "patient/Observation.rs?category=laboratory", "Observation", SearchType,
			"category=laboratory&code=x", want{true, LevelPatient, nil, ""}},
		{"restriction not satisfied", "patient/Observation.rs?category=laboratory", "Observation", SearchType,
			"code=x", want{false, 0, nil, "patient/Observation.s"}},
		{"restriction with another value", "patient/Observation.rs?category=laboratory", "Observation", SearchType,
			"category=vital-signs", want{false, 0, nil, "patient/Observation.s"}},
		{"the unsatisfied restricted level gives way", "user/Observation.rs?category=laboratory patient/Observation.rs",
			"Observation", SearchType, "code=x", want{true, LevelPatient, nil, ""}},
		{"the satisfied restricted level is broader", "user/Observation.rs?category=laboratory patient/Observation.rs",
			"Observation", SearchType, "category=laboratory", want{true, LevelUser, nil, ""}},
		{"either of two restrictions", "patient/Observation.s?category=laboratory patient/Observation.s?category=vital-signs",
			"Observation", SearchType, "category=vital-signs", want{true, LevelPatient, nil, ""}},
		{"a conditional update's criteria", "patient/Observation.us?category=laboratory", "Observation", ConditionalUpdate,
			"identifier=x&category=laboratory", want{true, LevelPatient, nil, ""}},
		{"a conditional update's criteria, unsatisfied", "patient/Observation.us?category=laboratory", "Observation",
			ConditionalUpdate, "identifier=x", want{false, 0, nil, "patient/Observation.us"}},
		{"a system search", "system/*.s?_security=N", "", SearchSystem, "_security=N&_type=Observation", want{true, LevelSystem, nil, ""}},
		{"capabilities", "", "", Capabilities, "", want{true, 0, nil, ""}},
		{"nil params", "patient/Observation.s?category=laboratory", "Observation", SearchType, "", want{false, 0, nil, "patient/Observation.s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			params, err := url.ParseQuery(c.query)
			if err != nil {
				t.Fatal(err)
			}
			if c.query == "" {
				params = nil
			}
			c.want.check(t, Parse(strings.Fields(c.scopes)).AllowSearch(c.typ, c.i, params))
		})
	}
}

func TestQueryMatches(t *testing.T) {
	for _, c := range []struct {
		name, restriction, params string
		want                      bool
	}{
		{"no restriction", "", "code=x", true},
		{"no restriction, no params", "", "", true},
		{"the same", "category=laboratory", "category=laboratory", true},
		{"among others", "category=laboratory", "code=x&category=laboratory&_count=10", true},
		{"absent", "category=laboratory", "code=x", false},
		{"no params", "category=laboratory", "", false},
		{"another value", "category=laboratory", "category=vital-signs", false},
		{"a repeated param narrows", "category=laboratory", "category=vital-signs&category=laboratory", true},
		{"a comma list widens", "category=laboratory", "category=laboratory,vital-signs", false},
		{"a modifier is another param", "category=laboratory", "category:not=vital-signs", false},
		{"the modifier of the restriction", "code:in=http://vs/x", "code:in=http://vs/x", true},
		{"the restriction's modifier missing", "code:in=http://vs/x", "code=http://vs/x", false},
		{"system and code are not code", "category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory",
			"category=laboratory", false},
		{"system and code", "category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory",
			"category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory", true},
		{"every item", "category=laboratory&status=final", "category=laboratory", false},
		{"every item present", "category=laboratory&status=final", "status=final&category=laboratory", true},
		{"both values of a repeated item", "code=a&code=b", "code=a", false},
		{"both values present", "code=a&code=b", "code=b&code=a", true},
		{"case matters", "category=laboratory", "category=Laboratory", false},
		{"names are case-sensitive", "category=laboratory", "Category=laboratory", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := url.ParseQuery(c.restriction)
			p, _ := url.ParseQuery(c.params)
			if got := QueryMatches(r, p); got != c.want {
				t.Errorf("QueryMatches(%q, %q) = %v, want %v", c.restriction, c.params, got, c.want)
			}
		})
	}
}

func TestDecisionSatisfied(t *testing.T) {
	lab := url.Values{"category": {"laboratory"}}
	vitals := url.Values{"category": {"vital-signs"}}
	for _, c := range []struct {
		name   string
		d      Decision
		params url.Values
		want   bool
	}{
		{"refused", Decision{}, nil, false},
		{"refused, whatever the params", Decision{Restrictions: []url.Values{lab}}, lab, false},
		{"unrestricted", Decision{Allowed: true}, nil, true},
		{"restricted, matched", Decision{Allowed: true, Restrictions: []url.Values{lab}}, lab, true},
		{"restricted, not matched", Decision{Allowed: true, Restrictions: []url.Values{lab}}, vitals, false},
		{"restricted, no params", Decision{Allowed: true, Restrictions: []url.Values{lab}}, nil, false},
		{"either restriction", Decision{Allowed: true, Restrictions: []url.Values{lab, vitals}}, vitals, true},
	} {
		if got := c.d.Satisfied(c.params); got != c.want {
			t.Errorf("%s: Satisfied = %v, want %v", c.name, got, c.want)
		}
	}
}

// A decision's restrictions are its own: changing them changes no later decision.
func TestRestrictionsAreCopies(t *testing.T) {
	g := Parse([]string{"patient/Observation.rs?category=laboratory"})
	d := g.Allow("Observation", Read)
	d.Restrictions[0]["category"][0] = "vital-signs"
	d.Restrictions[0].Set("status", "final")
	if got := g.Allow("Observation", Read).Restrictions[0].Encode(); got != "category=laboratory" {
		t.Errorf("after changing a decision's restriction, the next decision's is %q", got)
	}
}
