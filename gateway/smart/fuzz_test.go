package smart

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzParse: whatever the scope string, Parse neither panics nor reads past its
// caps, every grant it returns is one ParseScope reads back from its canonical form,
// and every scope is accounted for exactly once.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"openid fhirUser launch/patient patient/*.rs offline_access",
		"patient/Observation.rs?category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory",
		"user/*.read system/Observation.* patient/Observation.rc patient/Observation.rr patient/Observation.",
		"user/Observation.s?code=a%7Cb&code=c system/*.cruds?_security=N patient/Observation.rs?%zz=1",
		"patient/Observation.read?x=y patient/**.rs group/A.r Patient/B.r patient/observation.rs",
		"patient/Observation.rs?a=b&&c=d patient/Observation.rs?=x patient/Observation.rs?a= ?=&/.*",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if gr, ok := ParseScope(s); ok {
			checkGrant(t, gr)
		}
		scopes := strings.Fields(s)
		g := Parse(scopes)
		grants, other := g.List(), g.Other()
		if len(grants)+len(other) > MaxScopes {
			t.Fatalf("%d scopes kept, over MaxScopes", len(grants)+len(other))
		}
		if len(grants)+len(other)+g.Dropped() != len(scopes) {
			t.Fatalf("%d grants + %d other + %d dropped != %d scopes", len(grants), len(other), g.Dropped(), len(scopes))
		}
		for _, o := range other {
			if len(o) > MaxScopeLen {
				t.Fatalf("an other scope of %d bytes was kept", len(o))
			}
		}
		for _, gr := range grants {
			checkGrant(t, gr)
		}
	})
}

func checkGrant(t *testing.T, gr Grant) {
	t.Helper()
	if gr.Perms == 0 || gr.Perms&^PermAll != 0 || gr.Level.String() == "" || len(gr.Scope) > MaxScopeLen {
		t.Fatalf("a grant out of range: %+v", gr)
	}
	if gr.Type != "*" && !validType(gr.Type) {
		t.Fatalf("a grant of type %q", gr.Type)
	}
	canonical := gr.String()
	if len(canonical) > MaxScopeLen {
		return // escaping may lengthen it past the cap
	}
	back, ok := ParseScope(canonical)
	if !ok {
		t.Fatalf("%q (from %q) does not read back", canonical, gr.Scope)
	}
	if back.Level != gr.Level || back.Type != gr.Type || back.Perms != gr.Perms || !reflect.DeepEqual(back.Query, gr.Query) {
		t.Fatalf("%q reads back as %+v, from %+v", canonical, back, gr)
	}
}
