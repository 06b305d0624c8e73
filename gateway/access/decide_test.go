package access

import (
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/smart"
)

func TestDecide(t *testing.T) {
	q := func(s string) url.Values {
		v, err := url.ParseQuery(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	get := func(path, query string) Call { return Call{Method: http.MethodGet, Path: path, Params: q(query)} }
	routed := func(method, path, query string) Call {
		return Call{Routed: true, Member: "h", Method: method, Path: path, Params: q(query)}
	}
	tests := []struct {
		name    string
		scopes  string
		patient string
		call    Call
		status  int
		needed  string
		reason  string // in the reason, when refused
		add     url.Values
		drop    []string
		confirm []url.Values
	}{
		// The interaction and its type, v1 and v2, on both surfaces.
		{name: "a v2 search", scopes: "system/Patient.rs", call: get("Patient", "name=x")},
		{name: "a v2 read, routed", scopes: "system/Patient.rs", call: routed("GET", "Patient/1", "")},
		{name: "a HEAD is a read", scopes: "system/Patient.r", call: routed("HEAD", "Patient/1", "")},
		{name: "read alone does not search", scopes: "system/Patient.r", call: get("Patient", "name=x"), status: 403, needed: "system/Patient.s"},
		{name: "another type", scopes: "system/Patient.rs", call: get("Observation", ""), status: 403, needed: "system/Observation.s"},
		{name: "v1 read on every type", scopes: "system/*.read", call: get("Observation", "code=x")},
		{name: "v1 read does not create", scopes: "system/*.read", call: routed("POST", "Observation", ""), status: 403, needed: "system/Observation.c"},
		{name: "v1 write creates", scopes: "user/Observation.write", call: routed("POST", "Observation", "")},
		{name: "v2 update", scopes: "user/Observation.cruds", call: routed("PUT", "Observation/1", "")},
		{name: "v2 delete refused without d", scopes: "user/Observation.cru", call: routed("DELETE", "Observation/1", ""), status: 403, needed: "user/Observation.d"},
		{name: "a conditional delete needs s too", scopes: "user/Observation.d", call: routed("DELETE", "Observation", "code=x"), status: 403, needed: "user/Observation.ds"},
		{name: "a conditional delete", scopes: "user/Observation.ds", call: routed("DELETE", "Observation", "code=x")},
		{name: "a conditional update", scopes: "user/Observation.us", call: routed("PUT", "Observation", "code=x")},
		{name: "the capability statement needs nothing", scopes: "", call: get("metadata", "")},
		{name: "no scope at all", scopes: "openid fhirUser", call: get("Patient", ""), status: 403, needed: "user/Patient.s"},
		{name: "a path of no interaction, a token that may do everything", scopes: "system/*.cruds", call: routed("GET", "Patient;v=1/a..b", "")},
		{name: "a path of no interaction", scopes: "system/*.rs", call: routed("GET", "Patient/1/x/y", ""), status: 403, needed: "system/*.cruds"},
		{name: "a compartment search is a search of its type", scopes: "system/Observation.s", call: routed("GET", "Patient/1/Observation", "")},
		{name: "a compartment search needs its type", scopes: "system/Patient.rs", call: routed("GET", "Patient/1/Observation", ""), status: 403, needed: "system/Observation.s"},
		// What a search reaches beyond its type.
		{name: "_type, every type searchable", scopes: "system/Patient.s system/Observation.s", call: routed("GET", "", "_type=Patient,Observation")},
		{name: "_type into a type it may not search", scopes: "system/Patient.s", call: routed("GET", "", "_type=Patient,Observation"), status: 403, needed: "system/Observation.s"},
		{name: "a chain into a type it may not search", scopes: "system/Observation.rs", call: get("Observation", "patient.identifier=x|1"), status: 403, needed: "system/Patient.s"},
		{name: "a chain into a type it may search", scopes: "system/Observation.rs system/Patient.s", call: get("Observation", "patient.identifier=x|1")},
		{name: "a chain with a type modifier", scopes: "system/Observation.rs system/Patient.s", call: get("Observation", "subject:Patient.name=x")},
		{name: "a chain of no single type", scopes: "system/Observation.rs system/Patient.s", call: get("Observation", "subject.name=x"), status: 403, needed: "system/*.s"},
		{name: "a reverse chain", scopes: "system/Patient.rs", call: get("Patient", "_has:Observation:patient:code=x"), status: 403, needed: "system/Observation.s"},
		{name: "an include it may not read is dropped", scopes: "system/Observation.rs", call: get("Observation", "_include=Observation:patient&_include=Observation:subject:Group"),
			drop: []string{"_include=Observation:patient", "_include=Observation:subject:Group"}},
		{name: "an include it may read stays", scopes: "system/Observation.rs system/Patient.r", call: get("Observation", "_include=Observation:patient")},
		{name: "a revinclude it may not read is dropped", scopes: "system/Patient.rs", call: get("Patient", "_revinclude=Provenance:target"), drop: []string{"_revinclude=Provenance:target"}},
		{name: "an include of any type needs a * read", scopes: "system/Observation.rs system/Patient.r", call: get("Observation", "_include=*"), drop: []string{"_include=*"}},
		// Restricted scopes.
		{name: "a restricted scope, a matching search", scopes: "system/Observation.rs?category=laboratory", call: get("Observation", "category=laboratory&code=x")},
		{name: "a restricted scope, another search", scopes: "system/Observation.rs?category=laboratory", call: get("Observation", "code=x"), status: 403},
		{name: "a restricted scope, a read is found first", scopes: "system/Observation.rs?category=laboratory", call: routed("GET", "Observation/1", ""),
			confirm: []url.Values{{"category": {"laboratory"}}}},
		{name: "two restricted scopes, a read found by either", scopes: "system/Observation.rs?category=laboratory system/Observation.r?category=vital-signs", call: routed("GET", "Observation/1/_history/2", ""),
			confirm: []url.Values{{"category": {"laboratory"}}, {"category": {"vital-signs"}}}},
		{name: "an unrestricted scope asks nothing of the member", scopes: "system/Observation.rs?category=laboratory system/Observation.r", call: routed("GET", "Observation/1", "")},
		{name: "a restricted scope, a write", scopes: "system/Observation.cruds?category=laboratory", call: routed("PUT", "Observation/1", ""), status: 403, reason: "nothing else"},
		// Operations.
		{name: "an operation with every permission", scopes: "system/*.cruds", call: routed("GET", "Patient/1/$everything", "")},
		{name: "an operation with less", scopes: "system/Patient.rs", call: routed("GET", "Patient/1/$everything", ""), status: 403, needed: "system/Patient.cruds"},
		{name: "a base operation needs the * grant", scopes: "system/Patient.cruds", call: routed("POST", "$export", ""), status: 403, needed: "system/*.cruds"},
		// The patient context.
		{name: "a patient search gets the patient", scopes: "patient/*.rs", patient: "h.123", call: get("Observation", "code=x"), add: url.Values{"subject": {"Patient/h.123"}}},
		{name: "a routed patient search gets the member's own id", scopes: "patient/*.rs", patient: "h.123", call: routed("GET", "Observation", "code=x"), add: url.Values{"subject": {"Patient/123"}}},
		{name: "a routed patient search at another member", scopes: "patient/*.rs", patient: "m.123", call: routed("GET", "Observation", "code=x"), status: 403, reason: "held by member m"},
		{name: "a patient claim that is no federated id", scopes: "patient/*.rs", patient: "123", call: get("Observation", "code=x"), status: 403, reason: "not a federated id"},
		{name: "a Patient search gets its _id", scopes: "patient/Patient.rs", patient: "h.123", call: get("Patient", "name=x"), add: url.Values{"_id": {"h.123"}}},
		{name: "a search naming the patient", scopes: "patient/*.rs", patient: "h.123", call: get("Observation", "subject=Patient/h.123"), add: url.Values{"subject": {"Patient/h.123"}}},
		{name: "a search naming the patient by the member's own id", scopes: "patient/*.rs", patient: "h.123", call: get("Observation", "subject=Patient/123"), status: 403},
		{name: "a search naming another patient", scopes: "patient/*.rs", patient: "h.123", call: get("Observation", "subject=Patient/9"), status: 403, reason: "its own patient only"},
		{name: "a search naming two patients", scopes: "patient/*.rs", patient: "h.123", call: get("Observation", "subject=Patient/h.123,Patient/h.9"), status: 403},
		{name: "a type outside the compartment", scopes: "patient/*.rs", patient: "h.123", call: get("Practitioner", "name=x")},
		{name: "a read of the patient", scopes: "patient/*.rs", patient: "h.123", call: routed("GET", "Patient/123", "")},
		{name: "a read of another patient is a 404", scopes: "patient/*.rs", patient: "h.123", call: routed("GET", "Patient/9", ""), status: 404},
		{name: "a vread of another patient is a 404", scopes: "patient/*.rs", patient: "h.123", call: routed("GET", "Patient/9/_history/1", ""), status: 404},
		{name: "a federated read of the patient", scopes: "patient/*.rs", patient: "h.123", call: get("Patient/h.123", "")},
		{name: "a federated read of the same id at another member", scopes: "patient/*.rs", patient: "h.123", call: get("Patient/m.123", ""), status: 404},
		{name: "a federated read of a compartment resource", scopes: "patient/*.rs", patient: "h.123", call: get("Observation/h.5", ""),
			confirm: []url.Values{{"subject": {"Patient/123"}}}},
		{name: "a federated read of a compartment resource at another member", scopes: "patient/*.rs", patient: "h.123", call: get("Observation/m.5", ""), status: 404},
		{name: "a routed read of the patient at another member", scopes: "patient/*.rs", patient: "m.123", call: routed("GET", "Patient/123", ""), status: 404},
		{name: "a compartment read by id is found in the compartment first", scopes: "patient/*.rs", patient: "h.123", call: routed("GET", "Observation/5", ""),
			confirm: []url.Values{{"subject": {"Patient/123"}}}},
		{name: "a compartment history by id likewise", scopes: "patient/Observation.r", patient: "h.123", call: routed("GET", "Observation/5/_history", ""),
			confirm: []url.Values{{"subject": {"Patient/123"}}}},
		{name: "a restricted compartment read", scopes: "patient/Observation.rs?category=laboratory", patient: "h.123", call: routed("GET", "Observation/5", ""),
			confirm: []url.Values{{"category": {"laboratory"}, "subject": {"Patient/123"}}}},
		{name: "a read outside the compartment", scopes: "patient/*.rs", patient: "h.123", call: routed("GET", "Practitioner/5", "")},
		{name: "a type's history at the patient level", scopes: "patient/*.rs", patient: "h.123", call: routed("GET", "Observation/_history", ""), status: 403},
		{name: "a compartment search of another patient", scopes: "patient/*.rs", patient: "h.123", call: routed("GET", "Patient/9/Observation", ""), status: 403},
		{name: "a patient-level write", scopes: "patient/*.cruds", patient: "h.123", call: routed("POST", "Observation", ""), status: 403},
		{name: "no patient claim", scopes: "patient/*.rs", call: get("Observation", ""), status: 403, reason: "patient claim"},
		{name: "a system grant wins over the patient's", scopes: "patient/*.rs system/Observation.rs", patient: "h.123", call: get("Observation", "subject=Patient/9")},
		{name: "_type at the patient level", scopes: "patient/*.rs", patient: "h.123", call: routed("GET", "", "_type=Observation"), status: 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(smart.Parse(strings.Fields(tc.scopes)), tc.patient, tc.call)
			if v.Status != tc.status {
				t.Fatalf("status %d (%s), want %d", v.Status, v.Reason, tc.status)
			}
			if tc.needed != "" && v.Needed != tc.needed {
				t.Errorf("needed %q, want %q", v.Needed, tc.needed)
			}
			if tc.reason != "" && !strings.Contains(v.Reason, tc.reason) {
				t.Errorf("reason %q, want it to say %q", v.Reason, tc.reason)
			}
			if (len(v.Add) > 0 || len(tc.add) > 0) && !reflect.DeepEqual(v.Add, tc.add) {
				t.Errorf("add %v, want %v", v.Add, tc.add)
			}
			if (len(v.Drop) > 0 || len(tc.drop) > 0) && !sameItems(v.Drop, tc.drop) {
				t.Errorf("drop %v, want %v", v.Drop, tc.drop)
			}
			if (len(v.Confirm) > 0 || len(tc.confirm) > 0) && !reflect.DeepEqual(v.Confirm, tc.confirm) {
				t.Errorf("confirm %v, want %v", v.Confirm, tc.confirm)
			}
		})
	}
}

func TestDecideATransactionEntryByEntry(t *testing.T) {
	entry := func(method, u string) smart.Entry {
		e, ok := smart.ParseEntry(method, u, "")
		if !ok {
			t.Fatalf("%s %s", method, u)
		}
		return e
	}
	entries := []smart.Entry{entry("POST", "Patient"), entry("DELETE", "Observation/1")}
	if v := Decide(smart.Parse([]string{"user/Patient.c"}), "", Call{Routed: true, Method: "POST", Entries: entries}); v.Status != 403 ||
		v.Needed != "user/Observation.d" || !strings.Contains(v.Reason, "entry 1") {
		t.Errorf("%+v, want entry 1 refused for user/Observation.d", v)
	}
	if v := Decide(smart.Parse([]string{"user/Patient.c", "user/Observation.d"}), "", Call{Routed: true, Method: "POST", Entries: entries}); v.Status != 0 {
		t.Errorf("%+v, want allowed", v)
	}
	if v := Decide(smart.Parse([]string{"patient/*.cruds"}), "1", Call{Routed: true, Method: "POST", Entries: entries}); v.Status != 403 {
		t.Errorf("%+v, want a patient-level transaction refused", v)
	}
}

func sameItems(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// A read is found only by a match of the searchset that is the resource itself: an
// included resource, an outcome entry, another type or id do not count, and a body
// that is not a Bundle is no answer.
func TestHolds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		body      string
		found, ok bool
	}{
		{"a match", `{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"Observation","id":"9"},"search":{"mode":"match"}}]}`, true, true},
		{"a match without a mode", `{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"Observation","id":"9"}}]}`, true, true},
		{"an include only", `{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"Observation","id":"9"},"search":{"mode":"include"}}]}`, false, true},
		{"another id", `{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"Observation","id":"90"}}]}`, false, true},
		{"another type", `{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"Encounter","id":"9"}}]}`, false, true},
		{"an empty searchset", `{"resourceType":"Bundle","type":"searchset"}`, false, true},
		{"an OperationOutcome", `{"resourceType":"OperationOutcome"}`, false, false},
		{"cut off", `{"resourceType":"Bundle","entry":[{"resou`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if found, ok := holds([]byte(tc.body), "Observation", "9"); found != tc.found || ok != tc.ok {
				t.Errorf("holds = %v, %v; want %v, %v", found, ok, tc.found, tc.ok)
			}
		})
	}
}
