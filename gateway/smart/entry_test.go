package smart

import (
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/fhir"
)

func TestParseEntry(t *testing.T) {
	for _, c := range []struct {
		method, url, ifNoneExist string
		ok                       bool
		typ                      string
		i                        Interaction
		params                   string // encoded; "-" for nil
	}{
		{"GET", "Observation/1", "", true, "Observation", Read, "-"},
		{"HEAD", "Observation/1", "", true, "Observation", Read, "-"},
		{"GET", "/Observation/1", "", true, "Observation", Read, "-"},
		{"GET", "Observation/1?_format=json", "", true, "Observation", Read, "-"},
		{"GET", "Observation/1/_history/2", "", true, "Observation", VRead, "-"},
		{"GET", "Observation/1/_history", "", true, "Observation", HistoryInstance, "-"},
		{"GET", "Observation/_history", "", true, "Observation", HistoryType, "-"},
		{"GET", "_history", "", true, "", HistorySystem, "-"},
		{"GET", "Observation?code=x&patient=1", "", true, "Observation", SearchType, "code=x&patient=1"},
		{"GET", "Observation", "", true, "Observation", SearchType, ""},
		{"GET", "?_type=Observation", "", true, "", SearchSystem, "_type=Observation"},
		{"GET", "", "", true, "", SearchSystem, ""},
		{"GET", "metadata", "", true, "", Capabilities, "-"},
		{"POST", "Observation", "", true, "Observation", Create, "-"},
		{"POST", "Observation", "identifier=x", true, "Observation", ConditionalCreate, "identifier=x"},
		{"POST", "Observation", "?identifier=x", true, "Observation", ConditionalCreate, "identifier=x"},
		{"POST", "Observation/_search?code=x", "", true, "Observation", SearchType, "code=x"},
		{"PUT", "Observation/1", "", true, "Observation", Update, "-"},
		{"PUT", "Observation?identifier=x", "", true, "Observation", ConditionalUpdate, "identifier=x"},
		{"PATCH", "Observation/1", "", true, "Observation", Patch, "-"},
		{"PATCH", "Observation?identifier=x", "", true, "Observation", ConditionalPatch, "identifier=x"},
		{"DELETE", "Observation/1", "", true, "Observation", Delete, "-"},
		{"DELETE", "Observation?identifier=x", "", true, "Observation", ConditionalDelete, "identifier=x"},

		// What it does not classify, which the caller refuses.
		{"GET", "https://fhir.example/Observation/1", "", false, "", 0, "-"},
		{"GET", "Observation/1/$everything", "", false, "", 0, "-"},
		{"GET", "Patient/$everything", "", false, "", 0, "-"},
		{"POST", "Patient/1/$everything", "", false, "", 0, "-"},
		{"GET", "observation/1", "", false, "", 0, "-"},
		{"GET", "Observation/1_2", "", false, "", 0, "-"},
		{"GET", "Observation/1/_history/2/x", "", false, "", 0, "-"},
		{"GET", "Observation/1/_history/", "", false, "", 0, "-"},
		{"GET", "Observation/1/x", "", false, "", 0, "-"},
		{"GET", "Observation?code=%zz", "", false, "", 0, "-"},
		{"GET", "Observation?a;b", "", false, "", 0, "-"},
		{"POST", "", "", false, "", 0, "-"},
		{"POST", "Observation/1", "", false, "", 0, "-"},
		{"POST", "Observation?code=x", "", false, "", 0, "-"},
		{"POST", "Observation", "%zz", false, "", 0, "-"},
		{"POST", "Observation", "?", false, "", 0, "-"},
		{"PUT", "Observation", "", false, "", 0, "-"},
		{"PUT", "Observation/1?x=y", "", false, "", 0, "-"},
		{"PUT", "Observation/1/_history/2", "", false, "", 0, "-"},
		{"DELETE", "Observation", "", false, "", 0, "-"},
		{"DELETE", "", "", false, "", 0, "-"},
		{"get", "Observation/1", "", false, "", 0, "-"},
		{"OPTIONS", "Observation/1", "", false, "", 0, "-"},
	} {
		name := c.method + " " + c.url + " " + c.ifNoneExist
		t.Run(name, func(t *testing.T) {
			e, ok := ParseEntry(c.method, c.url, c.ifNoneExist)
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, c.ok, e)
			}
			if !ok {
				if !reflect.DeepEqual(e, Entry{}) {
					t.Errorf("an unclassified entry came back as %+v", e)
				}
				return
			}
			if e.ResourceType != c.typ || e.Interaction != c.i {
				t.Errorf("got %q %v, want %q %v", e.ResourceType, e.Interaction, c.typ, c.i)
			}
			switch {
			case c.params == "-" && e.Params != nil:
				t.Errorf("params %v, want none", e.Params)
			case c.params != "-" && (e.Params == nil || e.Params.Encode() != c.params):
				t.Errorf("params %v, want %q", e.Params, c.params)
			}
		})
	}
}

func TestFirstRefusal(t *testing.T) {
	entry := func(method, u, ifNoneExist string) Entry {
		e, ok := ParseEntry(method, u, ifNoneExist)
		if !ok {
			t.Fatalf("ParseEntry(%s %s) refused", method, u)
		}
		return e
	}
	read := entry("GET", "Observation/1", "")
	search := entry("GET", "Observation?category=laboratory", "")
	create := entry("POST", "Observation", "")
	condCreate := entry("POST", "Observation", "identifier=x")
	condUpdateLab := entry("PUT", "Observation?identifier=x&category=laboratory", "")
	deleteCondition := entry("DELETE", "Condition/1", "")
	for _, c := range []struct {
		name    string
		scopes  string
		entries []Entry
		index   int
		needed  string
	}{
		{"none", "", nil, -1, ""},
		{"all allowed", "user/Observation.crus", []Entry{read, search, create, condCreate}, -1, ""},
		{"the first refused", "user/Observation.rs", []Entry{read, create, deleteCondition}, 1, "user/Observation.c"},
		{"a later one", "user/Observation.cruds", []Entry{read, create, deleteCondition}, 2, "user/Condition.d"},
		{"a conditional create needs s", "user/Observation.cr", []Entry{read, condCreate}, 1, "user/Observation.cs"},
		{"a restricted search, satisfied", "patient/Observation.rs?category=laboratory", []Entry{search}, -1, ""},
		{"a restricted search, not satisfied", "patient/Observation.s?category=vital-signs", []Entry{search}, 0, "patient/Observation.s"},
		{"a restricted read is allowed, its result the caller's", "patient/Observation.r?category=laboratory", []Entry{read}, -1, ""},
		{"conditional update criteria under a restriction", "user/Observation.us?category=laboratory", []Entry{condUpdateLab}, -1, ""},
		{"a nested transaction", "system/*.cruds", []Entry{read, {Interaction: Transaction}}, 1, ""},
		{"an unclassified entry", "system/*.cruds", []Entry{{}}, 0, ""},
		{"capabilities", "", []Entry{entry("GET", "metadata", "")}, -1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			i, d := Parse(strings.Fields(c.scopes)).FirstRefusal(c.entries)
			if i != c.index || d.Needed != c.needed {
				t.Errorf("FirstRefusal = %d, needed %q (%s); want %d, needed %q", i, d.Needed, d.Reason, c.index, c.needed)
			}
			switch {
			case i < 0 && !reflect.DeepEqual(d, Decision{}):
				t.Errorf("every entry allowed, but the decision is %+v", d)
			case i >= 0 && (d.Allowed || d.Reason == ""):
				t.Errorf("entry %d refused by the decision %+v", i, d)
			}
		})
	}
}

func TestAllowEntry(t *testing.T) {
	g := Parse([]string{"patient/Observation.rs?category=laboratory"})
	lab := url.Values{"category": {"laboratory"}}
	if d := g.AllowEntry(Entry{ResourceType: "Observation", Interaction: SearchType, Params: lab}); !d.Allowed || len(d.Restrictions) != 0 {
		t.Errorf("a satisfying search: %+v, want allowed without restrictions", d)
	}
	d := g.AllowEntry(Entry{ResourceType: "Observation", Interaction: Read, Params: lab})
	if !d.Allowed || len(d.Restrictions) != 1 {
		t.Errorf("a read: %+v, want allowed under the restriction (a read's params are not its result)", d)
	}
}

// validID is gateway/fhir's rule, copied to keep this package a leaf.
func TestTheIDRuleIsGatewayFHIRs(t *testing.T) {
	for _, s := range lexicalSamples {
		if got, want := validID(s), fhir.ValidID(s); got != want {
			t.Errorf("validID(%q) = %v, fhir.ValidID says %v", s, got, want)
		}
	}
}
