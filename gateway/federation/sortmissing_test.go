package federation_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/members"
)

// memberPatient is one Patient as its member holds it, for the expectation the tests
// compute on their own: the member's registry index and the resource's place in the
// member's unsorted listing.
type memberPatient struct {
	url       string // node-a/fhir/Patient/3
	member    int
	index     int
	birthDate string
	family    string
}

// allPatients asks each member directly (not through the gateway) for every Patient it
// holds, in its own order.
func allPatients(t *testing.T, h *harness, ids ...string) []memberPatient {
	t.Helper()
	var out []memberPatient
	for mi, id := range ids {
		res, err := http.Get(h.members[id].URL + "/Patient?_count=100")
		if err != nil {
			t.Fatal(err)
		}
		var b struct {
			Entry []struct {
				Resource struct {
					ID        string `json:"id"`
					BirthDate string `json:"birthDate"`
					Name      []struct {
						Family string `json:"family"`
					} `json:"name"`
				} `json:"resource"`
			} `json:"entry"`
		}
		err = json.NewDecoder(res.Body).Decode(&b)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range b.Entry {
			out = append(out, memberPatient{url: id + "/fhir/Patient/" + e.Resource.ID, member: mi, index: i,
				birthDate: e.Resource.BirthDate, family: strings.ToLower(e.Resource.Name[0].Family)})
		}
	}
	return out
}

// mergedOrder is every member's Patients sorted by sort (birthdate or family, "-" for
// descending, several comma-separated) as the gateway documents it: a missing value
// after every present one in either direction, equal values in registry order, then
// in each member's own order.
func mergedOrder(all []memberPatient, sort string) []string {
	all = slices.Clone(all)
	slices.SortStableFunc(all, func(a, b memberPatient) int {
		for k := range strings.SplitSeq(sort, ",") {
			name, desc := strings.TrimPrefix(k, "-"), strings.HasPrefix(k, "-")
			x, y := a.birthDate, b.birthDate
			if name == "family" {
				x, y = a.family, b.family
			}
			switch {
			case x == y:
				continue
			case x == "":
				return 1
			case y == "":
				return -1
			}
			if c := strings.Compare(x, y); desc {
				return -c
			} else {
				return c
			}
		}
		if a.member != b.member {
			return a.member - b.member
		}
		return a.index - b.index
	})
	var out []string
	for _, p := range all {
		out = append(out, p.url)
	}
	return out
}

func TestSortedPagesMergeMembersThatPutMissingValuesFirstOrLast(t *testing.T) {
	pg := members.SortMissing{Every: 3, FirstDesc: true} // PostgreSQL's order
	both := members.SortMissing{Every: 4, FirstDesc: true, FirstAsc: true}
	last := members.SortMissing{Every: 2}
	for _, set := range []struct {
		name  string
		order [3]members.SortMissing
	}{
		{"missing first", [3]members.SortMissing{both, {Every: 3, FirstDesc: true, FirstAsc: true}, {Every: 2, FirstDesc: true, FirstAsc: true}}},
		{"missing last", [3]members.SortMissing{last, {Every: 3}, {Every: 4}}},
		{"mixed", [3]members.SortMissing{pg, both, last}},
	} {
		t.Run(set.name, func(t *testing.T) {
			nodes := []node{
				{id: "node-a", opts: members.Options{Entries: 23, NumericIDs: true, SortMissing: set.order[0]}},
				{id: "node-b", opts: members.Options{Entries: 11, NumericIDs: true, SortMissing: set.order[1]}},
				{id: "node-c", opts: members.Options{Entries: 9, NumericIDs: true, SortMissing: set.order[2]}},
			}
			h := newHarness(t, harnessOptions{}, nodes...)
			all := allPatients(t, h, "node-a", "node-b", "node-c")
			missing := 0
			for _, p := range all {
				if p.birthDate == "" {
					missing++
				}
			}
			if len(all) != 43 || missing < 10 {
				t.Fatalf("%d patients, %d without a birthDate", len(all), missing)
			}
			for _, sort := range []string{"-birthdate", "birthdate", "family,-birthdate", "-family,birthdate"} {
				t.Run(sort, func(t *testing.T) {
					pages := walk(t, "/fhir/Patient?_count=7&_sort="+sort, h)
					got := matchURLs(t, pages)
					want := mergedOrder(all, sort)
					if strings.Join(got, " ") != strings.Join(want, " ") {
						t.Fatalf("merged order over %d pages:\n%v\nwant\n%v", len(pages), got, want)
					}
					for i, p := range pages {
						if p.matches() > 7 || p.Total == nil || *p.Total != 43 {
							t.Fatalf("page %d: %d matches, total %v", i+1, p.matches(), p.Total)
						}
						for _, e := range p.Entry {
							if e.Search.Mode == "outcome" {
								t.Fatalf("page %d carries an outcome: %+v", i+1, e.Resource.Issue)
							}
						}
					}
					if len(pages) < 7 {
						t.Fatalf("%d pages for 43 matches of 7", len(pages))
					}
				})
			}
		})
	}
}

// A member's order with missing values first is learned from its stream: the member
// whose values would all come first by a concatenation is merged, not appended.
func TestADescendingSortIsNotOneMemberThenTheOther(t *testing.T) {
	h := newHarness(t, harnessOptions{},
		node{id: "node-a", opts: members.Options{Entries: 12, NumericIDs: true, SortMissing: members.SortMissing{Every: 5, FirstDesc: true}}},
		node{id: "node-b", opts: members.Options{Entries: 12, NumericIDs: true, SortMissing: members.SortMissing{Every: 5, FirstDesc: true}}})
	pages := walk(t, "/fhir/Patient?_count=5&_sort=-birthdate", h)
	got := matchURLs(t, pages)
	if want := mergedOrder(allPatients(t, h, "node-a", "node-b"), "-birthdate"); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("merged order %v, want %v", got, want)
	}
	// The first six matches are not all one member's.
	a := 0
	for _, u := range got[:6] {
		if strings.HasPrefix(u, "node-a/") {
			a++
		}
	}
	if a == 0 || a == 6 {
		t.Fatalf("the first six matches %v are one member's", got[:6])
	}
}

// unreachedIssues are the diagnostics of the outcome entries of the pages that name
// member as one whose matches are unreachable.
func unreachedIssues(pages []searchAnswer, member string) []string {
	var out []string
	for _, p := range pages {
		for _, e := range p.Entry {
			if e.Search.Mode != "outcome" {
				continue
			}
			for _, is := range e.Resource.Issue {
				if is.Severity == "warning" && strings.Contains(is.Diagnostics, "member "+member+" ") && strings.Contains(is.Diagnostics, "unreachable") {
					out = append(out, is.Code+" "+is.Diagnostics)
				}
			}
		}
	}
	return out
}

func TestAMemberThatGivesNoNextLinkIsNamedWithWhatIsUnreachable(t *testing.T) {
	h := newHarness(t, harnessOptions{},
		node{id: "node-x", opts: members.Options{Entries: 57, NumericIDs: true, NoNext: true}},
		node{id: "node-y", opts: members.Options{Entries: 8, NumericIDs: true}})
	for _, c := range []struct {
		query            string
		reachable, pages int
	}{
		{"_count=50", 58, 2},                  // node-x gives 50 of its 57
		{"_count=10", 18, 2},                  // node-x gives 10 of its 57
		{"_count=10&_sort=-birthdate", 18, 2}, // merged: the same
	} {
		t.Run(c.query, func(t *testing.T) {
			pages := walk(t, "/fhir/Patient?"+c.query, h)
			urls := matchURLs(t, pages)
			if len(urls) != c.reachable || len(pages) != c.pages {
				t.Fatalf("%d matches over %d pages, want %d over %d", len(urls), len(pages), c.reachable, c.pages)
			}
			for i, p := range pages {
				if p.Total == nil || *p.Total != c.reachable {
					t.Fatalf("page %d: total %v, the walk reaches %d", i+1, p.Total, c.reachable)
				}
			}
			issues := unreachedIssues(pages, "node-x")
			want := fmt.Sprintf("%d of its matches are unreachable", 57-(c.reachable-8))
			if len(issues) != 1 || !strings.HasPrefix(issues[0], "incomplete ") || !strings.Contains(issues[0], want) {
				t.Fatalf("outcomes naming node-x: %q, want one saying %q", issues, want)
			}
			if len(unreachedIssues(pages, "node-y")) != 0 {
				t.Fatal("node-y, which lost nothing, is named")
			}
			raw, _ := json.Marshal(pages)
			h.assertNoMemberAddress(raw)
		})
	}
}

func TestAMemberThatFailsMidWalkIsNamedWithWhatIsUnreachable(t *testing.T) {
	h := newHarness(t, harnessOptions{},
		node{id: "node-a", opts: members.Options{Entries: 30, NumericIDs: true}},
		node{id: "node-b", opts: members.Options{Entries: 4, NumericIDs: true}})
	_, body := h.get("/fhir/Patient?_count=10")
	var first searchAnswer
	if err := json.Unmarshal(body, &first); err != nil {
		t.Fatal(err)
	}
	if first.Total == nil || *first.Total != 34 {
		t.Fatalf("first page total %v", first.Total)
	}
	if err := h.members["node-a"].SetKnobs(double.Knobs{Status: http.StatusInternalServerError}); err != nil {
		t.Fatal(err)
	}
	_, next, _ := strings.Cut(first.link("next"), testBase)
	pages := walk(t, next, h)
	issues := unreachedIssues(pages, "node-a")
	if len(issues) != 1 || !strings.Contains(issues[0], "20 of its matches are unreachable") {
		t.Fatalf("outcomes naming node-a: %q", issues)
	}
	// node-b's matches are still served; the page says the difference from the total.
	if n := len(matchURLs(t, pages)); n != 4 {
		t.Fatalf("%d matches after node-a failed, want node-b's 4", n)
	}
}
