package pmir_test

import (
	"cmp"

	"github.com/ferrofed/ferrofed/test/double"
)

// state is identity_registry and identity_registry_fault ("-" when absent), as
// "state/fault".
func (g *gateway) state() string {
	r, _ := g.Report()
	s, _ := r["identity_registry"].(string)
	f, _ := r["identity_registry_fault"].(string)
	return cmp.Or(s, "-") + "/" + cmp.Or(f, "-")
}

// waitState waits until the report reads want.
func (g *gateway) waitState(want string) {
	g.t.Helper()
	last := ""
	double.Eventually(g.t, "identity_registry reads "+want, func() bool {
		last = g.state()
		return last == want
	}, func() string { return "last " + last })
}
