package searchset

// Head is what a page knows of one member's stream when it chooses whom to ask
// (docs/data-plane.md, "A federated search").
type Head struct {
	// Done: nothing more to ask of the member; Loaded: a page of it is read, Matches of
	// its matches not yet served.
	Done, Loaded bool
	Matches      int
	// Remaining is how many matches the member has not given yet, -1 when unknown.
	Remaining int
}

// Needed is the members (indexes of heads, in registry order) to ask before the next
// entry can be chosen, want entries short of a full page. A sorted merge needs the
// head of every member that has more, and so does a first page (every member's record
// and total belong on it): all is true for both. An unsorted later page serves the
// members in registry order: the first member that has more, and with it, at once, the
// members after it that the page will reach by their remaining counts, so that a page
// that ends one member and starts the next waits for one round, not two.
func Needed(heads []Head, all bool, want int) []int {
	var need []int
	for i, h := range heads {
		if h.Done {
			continue
		}
		if h.Loaded {
			if !all && h.Matches > 0 {
				if len(need) > 0 || h.Remaining < 0 {
					return need
				}
				want -= max(h.Remaining, h.Matches)
				if want <= 0 {
					return need
				}
			}
			continue
		}
		need = append(need, i)
		if !all {
			if h.Remaining < 0 {
				return need
			}
			if want -= h.Remaining; want <= 0 {
				return need
			}
		}
	}
	return need
}
