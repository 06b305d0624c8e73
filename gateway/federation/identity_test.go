package federation_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// observations is what a test reads of a federated page of Observations.
type observations struct {
	ResourceType string `json:"resourceType"`
	Meta         struct {
		Federation []federation.Record `json:"federation"`
	} `json:"meta"`
	Entry []struct {
		FullURL  string `json:"fullUrl"`
		Resource struct {
			ResourceType string `json:"resourceType"`
			ID           string `json:"id"`
			Subject      struct {
				Reference string `json:"reference"`
			} `json:"subject"`
			Performer []struct {
				Reference string `json:"reference"`
			} `json:"performer"`
			Focus []struct {
				Reference string `json:"reference"`
			} `json:"focus"`
		} `json:"resource"`
		Search struct {
			Mode string `json:"mode"`
		} `json:"search"`
	} `json:"entry"`
}

// The patient-safety table (docs/data-plane.md, "References in a search"): for each
// form a client may name a patient in, over members whose ids collide (each holds a
// Patient/1, with Observations of it) and over one member, the patients whose data is
// in the answer are exactly the one named, every match is that member's, and no other
// member is asked; or the answer is a 400 naming the parameter and how to ask.
func TestThePatientSafetyTable(t *testing.T) {
	opts := members.Options{NumericIDs: true, Subjects: true, References: true, Entries: 3}
	layouts := map[string][]node{
		"two members whose ids collide": {{id: "h", opts: opts}, {id: "m", opts: opts}},
		"one member":                    {{id: "h", opts: opts}},
	}
	for layout, nodes := range layouts {
		t.Run(layout, func(t *testing.T) {
			h := newHarness(t, harnessOptions{}, nodes...)
			gw := h.URL
			for _, c := range []struct {
				form, query string
				// want is the one patient whose data the answer holds; "" for a 400
				// naming param.
				want, param string
			}{
				{form: "a federated reference", query: "patient=Patient/h.1", want: "Patient/h.1"},
				{form: "a federated subject", query: "subject=Patient/h.2", want: "Patient/h.2"},
				{form: "a bare federated id", query: "patient=h.1", want: "Patient/h.1"},
				{form: "the gateway's fullUrl", query: "patient=" + url.QueryEscape(gw+"/fhir/Patient/h.3"), want: "Patient/h.3"},
				{form: "a routed URL", query: "subject=" + url.QueryEscape(gw+"/nodes/h/fhir/Patient/1"), want: "Patient/h.1"},
				{form: "a typed modifier with a federated id", query: "subject:Patient=h.2", want: "Patient/h.2"},
				{form: "a member's own reference", query: "patient=Patient/1", param: "patient"},
				{form: "a member's own bare id", query: "subject=1", param: "subject"},
				{form: "a typed modifier with a member's own id", query: "subject:Patient=1", param: "subject:Patient"},
				{form: "an unknown member's dotted id", query: "patient=Patient/x.1", param: "patient"},
			} {
				t.Run(c.form, func(t *testing.T) {
					asked := map[string]int{}
					for id, m := range h.members {
						asked[id] = m.Requests()
					}
					res, body := h.get("/fhir/Observation?" + c.query)
					h.assertNoMemberAddress(body)
					if c.want == "" {
						if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"search parameter `+c.param+`"`) ||
							!strings.Contains(string(body), "federated id") {
							t.Fatalf("answered %d, want a 400 naming %s and how to ask: %s", res.StatusCode, c.param, body)
						}
						for id, m := range h.members {
							if m.Requests() != asked[id] {
								t.Fatalf("member %s was asked a search the gateway refused", id)
							}
						}
						return
					}
					var b observations
					if res.StatusCode != http.StatusOK || json.Unmarshal(body, &b) != nil {
						t.Fatalf("answered %d: %s", res.StatusCode, body)
					}
					var patients []string
					for _, e := range b.Entry {
						if e.Search.Mode != "match" {
							continue
						}
						if !slices.Contains(patients, e.Resource.Subject.Reference) {
							patients = append(patients, e.Resource.Subject.Reference)
						}
						if !strings.HasPrefix(e.Resource.ID, "h.") || e.FullURL != gw+"/fhir/Observation/"+e.Resource.ID {
							t.Fatalf("a match %s (%s) is not member h's", e.Resource.ID, e.FullURL)
						}
						// The member's absolute reference to itself is federated; another
						// server's is kept.
						if len(e.Resource.Performer) != 1 || e.Resource.Performer[0].Reference != "Practitioner/"+e.Resource.ID ||
							len(e.Resource.Focus) != 1 || e.Resource.Focus[0].Reference != "http://other.example/fhir/Observation/"+strings.TrimPrefix(e.Resource.ID, "h.") {
							t.Fatalf("the references of %s: performer %v, focus %v", e.Resource.ID, e.Resource.Performer, e.Resource.Focus)
						}
					}
					if len(patients) != 1 || patients[0] != c.want {
						t.Fatalf("the answer holds the data of %v, want %s only: %s", patients, c.want, body)
					}
					if m, ok := h.members["m"]; ok {
						if m.Requests() != asked["m"] {
							t.Fatal("member m was asked for member h's patient")
						}
						if !slices.ContainsFunc(b.Meta.Federation, func(r federation.Record) bool { return r.ID == "m" && r.ExcludedBy == "reference" }) {
							t.Fatalf("meta.federation does not say m was not asked: %+v", b.Meta.Federation)
						}
					}
				})
			}
		})
	}
}

// Every id a federated answer gives reads back through the gateway: a match's fullUrl,
// the patient its subject references, a vread and a history of it, each answered in the
// federated identity from the member that holds it, valid R4, with no member address.
// An id that names no member, or one the member does not hold, is a 404.
func TestAFederatedIDReadsBackThroughTheGateway(t *testing.T) {
	opts := members.Options{NumericIDs: true, Subjects: true, Entries: 2}
	h := newHarness(t, harnessOptions{strictFHIR: true}, node{id: "h", opts: opts}, node{id: "m", opts: opts})
	_, body := h.get("/fhir/Observation")
	var b observations
	if err := json.Unmarshal(body, &b); err != nil || len(b.Entry) != 4 {
		t.Fatalf("%v: %s", err, body)
	}
	for _, e := range b.Entry {
		path := strings.TrimPrefix(e.FullURL, h.URL)
		res, body := h.get(path)
		var got struct {
			ID      string `json:"id"`
			Subject struct {
				Reference string `json:"reference"`
			} `json:"subject"`
		}
		if res.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil || got.ID != e.Resource.ID || got.Subject != e.Resource.Subject {
			t.Fatalf("GET %s: %d %s, want the page's %s", path, res.StatusCode, body, e.Resource.ID)
		}
		if res.Header.Get("ETag") != `W/"1"` {
			t.Errorf("GET %s: ETag %q", path, res.Header.Get("ETag"))
		}
		h.assertNoMemberAddress(body)
		// The reference resolves against the gateway's FHIR base, as a client resolves it.
		res, body = h.get("/fhir/" + got.Subject.Reference)
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"id":"`+strings.TrimPrefix(got.Subject.Reference, "Patient/")+`"`) {
			t.Fatalf("GET %s: %d %s", got.Subject.Reference, res.StatusCode, body)
		}
		if res, body := h.get(path + "/_history/1"); res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"id":"`+got.ID+`"`) {
			t.Fatalf("vread: %d %s", res.StatusCode, body)
		}
		res, body = h.get(path + "/_history")
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"fullUrl":"`+e.FullURL+`"`) ||
			!strings.Contains(string(body), `"url":"Observation/`+got.ID+`"`) {
			t.Fatalf("history: %d %s", res.StatusCode, body)
		}
		h.assertNoMemberAddress(body)
	}
	for _, path := range []string{"/fhir/Patient/zz.1", "/fhir/Patient/1", "/fhir/Patient/h.99", "/fhir/Patient/h.1/_history/7"} {
		if res, body := h.get(path); res.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"not-found"`) {
			t.Errorf("GET %s: %d %s, want a 404 OperationOutcome", path, res.StatusCode, body)
		}
	}
}

// An included resource is in the federated identity of the member that holds its
// referrer: over members whose ids collide, member h's Observation of Patient/1
// includes h's Patient/1 as Patient/h.1, and m's as Patient/m.1, each the one its
// match's subject names, never the other member's.
func TestAnIncludedResourceIsItsReferrersMembers(t *testing.T) {
	opts := members.Options{NumericIDs: true, Subjects: true, Entries: 2}
	h := newHarness(t, harnessOptions{strictFHIR: true}, node{id: "h", opts: opts}, node{id: "m", opts: opts})
	_, body := h.get("/fhir/Observation?_include=Observation:subject")
	var b observations
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	subjects, included := map[string]bool{}, map[string]bool{}
	for _, e := range b.Entry {
		switch e.Search.Mode {
		case "match":
			subjects[e.Resource.Subject.Reference] = true
		case "include":
			ref := e.Resource.ResourceType + "/" + e.Resource.ID
			if e.FullURL != h.URL+"/fhir/"+ref || included[ref] {
				t.Fatalf("include %s at %s", ref, e.FullURL)
			}
			included[ref] = true
		}
	}
	if len(subjects) != 4 || len(included) != 4 {
		t.Fatalf("subjects %v, included %v: %s", subjects, included, body)
	}
	for ref := range subjects {
		if !included[ref] {
			t.Fatalf("the subject %s is not the patient included (%v)", ref, included)
		}
	}
}

// An included resource travels on the page of the match that refers to it: paged one
// match at a time, each page holds its match and that match's subject, and no page
// holds a patient its matches do not refer to; every subject is included once.
//
// The second member ignores _count: its one page holds its three matches and their
// three patients, which the gateway serves over three pages, each patient with its
// Observation.
func TestAnIncludeTravelsWithItsReferrer(t *testing.T) {
	whole := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var entries []string
		for i := 1; i <= 3; i++ {
			entries = append(entries, fmt.Sprintf(`{"resource":{"resourceType":"Observation","id":"o%d","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p%d"}},"search":{"mode":"match"}}`, i, i))
		}
		for i := 3; i >= 1; i-- {
			entries = append(entries, fmt.Sprintf(`{"resource":{"resourceType":"Patient","id":"p%d"},"search":{"mode":"include"}}`, i))
		}
		w.Header().Set("Content-Type", fhir.MediaType)
		fmt.Fprintf(w, `{"resourceType":"Bundle","type":"searchset","total":3,"entry":[%s]}`, strings.Join(entries, ","))
	}))
	defer whole.Close()
	opts := members.Options{NumericIDs: true, Subjects: true, Entries: 3}
	h := newHarness(t, harnessOptions{}, node{id: "h", opts: opts}, node{id: "w", url: whole.URL + "/fhir"})
	pages := 0
	seen := map[string]bool{}
	for next := "/fhir/Observation?_count=1&_include=Observation:subject"; next != ""; pages++ {
		res, body := h.get(next)
		var b struct {
			observations
			Link []struct{ Relation, URL string } `json:"link"`
		}
		if res.StatusCode != http.StatusOK || json.Unmarshal(body, &b) != nil || pages > 10 {
			t.Fatalf("page %d: %d %s", pages+1, res.StatusCode, body)
		}
		subjects, included := map[string]bool{}, map[string]bool{}
		for _, e := range b.Entry {
			switch e.Search.Mode {
			case "match":
				subjects[e.Resource.Subject.Reference] = true
			case "include":
				included[e.Resource.ResourceType+"/"+e.Resource.ID] = true
			}
		}
		if len(subjects) != 1 || len(included) != 1 {
			t.Fatalf("page %d: subjects %v, included %v: %s", pages+1, subjects, included, body)
		}
		for ref := range subjects {
			if !included[ref] || seen[ref] {
				t.Fatalf("page %d: the match's subject %s is not included with it once (included %v)", pages+1, ref, included)
			}
			seen[ref] = true
		}
		next = ""
		for _, l := range b.Link {
			if l.Relation == "next" {
				next = strings.TrimPrefix(l.URL, h.URL)
			}
		}
	}
	if pages != 6 || len(seen) != 6 {
		t.Fatalf("%d pages, %d subjects included, want 6 of each", pages, len(seen))
	}
}
