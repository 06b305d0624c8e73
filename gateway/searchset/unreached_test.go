package searchset

import (
	"slices"
	"strings"
	"testing"
)

func TestUnreachedNamesTheMemberAndTheCount(t *testing.T) {
	for _, c := range []struct {
		unlinked bool
		lost     int
		want     []string
	}{
		{false, 7, []string{"member node-x answered fewer matches than its total", "7 of its matches are unreachable"}},
		{false, 1, []string{"1 of its matches is unreachable"}},
		{true, 0, []string{"member node-x gave a next link the gateway does not follow", "longer than 2048 bytes"}},
		{true, 40, []string{"its further matches are not paged; 40 of its matches are unreachable"}},
	} {
		oo := Unreached("node-x", c.unlinked, 2048, c.lost)
		is := oo.Issue[0]
		if is.Severity != "warning" || is.Code != "incomplete" {
			t.Fatalf("%+v", is)
		}
		for _, w := range c.want {
			if !strings.Contains(is.Diagnostics, w) {
				t.Fatalf("%q lacks %q", is.Diagnostics, w)
			}
		}
	}
	if UnreachedNote(0) != "" || UnreachedNote(-1) != "" {
		t.Fatal("an unknown count is said")
	}
	if n := 57; *Less(&n, 7) != 50 || Less(nil, 7) != nil || *Less(&n, 60) != 0 {
		t.Fatal("Less")
	}
}

func TestNeededAsksWhatThePageWillReach(t *testing.T) {
	unloaded := func(remaining int) Head { return Head{Remaining: remaining} }
	for name, c := range map[string]struct {
		heads []Head
		all   bool
		want  int
		need  []int
	}{
		"a first page asks every member":             {[]Head{unloaded(5), unloaded(5), {Done: true}}, true, 3, []int{0, 1}},
		"a later page asks as far as counts reach":   {[]Head{unloaded(2), unloaded(2), unloaded(9)}, false, 3, []int{0, 1}},
		"an unknown count stops there":               {[]Head{unloaded(-1), unloaded(2)}, false, 3, []int{0}},
		"a loaded member that fills the page":        {[]Head{{Loaded: true, Matches: 4, Remaining: 4}, unloaded(2)}, false, 3, nil},
		"a sorted merge asks every unloaded member":  {[]Head{{Loaded: true, Matches: 4, Remaining: 4}, unloaded(2)}, true, 3, []int{1}},
		"a loaded member short of the page, and one": {[]Head{{Loaded: true, Matches: 1, Remaining: 1}, unloaded(5)}, false, 3, []int{1}},
	} {
		if got := Needed(c.heads, c.all, c.want); !slices.Equal(got, c.need) {
			t.Errorf("%s: %v, want %v", name, got, c.need)
		}
	}
}
