package smart

import "testing"

func TestRequired(t *testing.T) {
	for _, c := range []struct {
		i    Interaction
		want Perm
	}{
		{Read, PermRead},
		{VRead, PermRead},
		{HistoryInstance, PermRead},
		{HistoryType, PermSearch},
		{HistorySystem, PermSearch},
		{SearchType, PermSearch},
		{SearchSystem, PermSearch},
		{Create, PermCreate},
		{ConditionalCreate, PermCreate | PermSearch},
		{Update, PermUpdate},
		{ConditionalUpdate, PermUpdate | PermSearch},
		{Patch, PermUpdate},
		{ConditionalPatch, PermUpdate | PermSearch},
		{Delete, PermDelete},
		{ConditionalDelete, PermDelete | PermSearch},
		{Capabilities, 0},
		{Transaction, 0},
		{0, 0},
		{Transaction + 1, 0},
	} {
		if got := Required(c.i); got != c.want {
			t.Errorf("Required(%v) = %q, want %q", c.i, got, c.want)
		}
	}
}

func TestInteractionString(t *testing.T) {
	for i, want := range map[Interaction]string{
		Read: "read", VRead: "vread", HistoryInstance: "history-instance", HistoryType: "history-type",
		HistorySystem: "history-system", SearchType: "search-type", SearchSystem: "search-system", Create: "create",
		ConditionalCreate: "conditional-create", Update: "update", ConditionalUpdate: "conditional-update", Patch: "patch",
		ConditionalPatch: "conditional-patch", Delete: "delete", ConditionalDelete: "conditional-delete",
		Capabilities: "capabilities", Transaction: "transaction", 0: "unknown", Transaction + 1: "unknown",
	} {
		if got := i.String(); got != want {
			t.Errorf("Interaction(%d).String() = %q, want %q", i, got, want)
		}
	}
}
