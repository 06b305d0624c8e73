package members

import (
	"sort"
	"strings"
)

// Missing values in a sorted search, and a member that does not link its pages: the
// orders and the answers the gateway must merge without a wrong order or a silent loss
// (docs/data-plane.md, "Missing values" and "No silent loss").

// SortMissing shapes what a member does with the values a sort reads.
type SortMissing struct {
	// Every leaves the date a sort reads (Patient.birthDate, Observation's
	// effectiveDateTime) out of every Every-th resource, the first one included
	// (indexes 0, Every, 2*Every…); 0: none left out, the default.
	Every int
	// FirstDesc and FirstAsc put the resources without the sorted value first on a
	// descending sort (PostgreSQL's default) and on an ascending one; otherwise they
	// come last.
	FirstDesc, FirstAsc bool
}

// withoutSortValue drops the date of resource i when SortMissing.Every says so.
func (s *Server) withoutSortValue(res map[string]any, i int) {
	if e := s.Opts.SortMissing.Every; e > 0 && i%e == 0 {
		delete(res, "birthDate")
		delete(res, "effectiveDateTime")
	}
}

// hasSortValue reports whether res has the value key reads.
func hasSortValue(res map[string]any, key string) bool {
	switch key {
	case "birthdate":
		return res["birthDate"] != nil
	case "date":
		return res["effectiveDateTime"] != nil
	}
	return true
}

// sortAll sorts a search's resources by keys ("-" for descending), the resources
// without a key's value first or last as SortMissing says; equal ones keep their order.
func (s *Server) sortAll(all []map[string]any, keys []string) {
	sort.SliceStable(all, func(i, j int) bool {
		for _, k := range keys {
			name, desc := strings.TrimPrefix(k, "-"), strings.HasPrefix(k, "-")
			hi, hj := hasSortValue(all[i], name), hasSortValue(all[j], name)
			if !hi || !hj {
				if hi == hj {
					continue
				}
				first := (desc && s.Opts.SortMissing.FirstDesc) || (!desc && s.Opts.SortMissing.FirstAsc)
				return !hi == first
			}
			a, b := sortValue(all[i], name), sortValue(all[j], name)
			if a == b {
				continue
			}
			return (a < b) != desc
		}
		return false
	})
}
