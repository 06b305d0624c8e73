package controllers

import "testing"

func TestChangeNote(t *testing.T) {
	done := []change{
		{verb: verbCreated, kind: "Secret", name: "a-page-token"},
		{verb: verbUpdated, kind: "Deployment", name: "a"},
		{verb: verbCreated, kind: "ConfigMap", name: "a"},
		{verb: verbCreated, kind: "Service", name: "a"},
		{verb: verbDeleted, kind: "PodDisruptionBudget", name: "a"},
	}
	for _, tc := range []struct {
		name, verb, want string
	}{
		{"several objects are listed in the order they changed", verbCreated, "Created Secret a-page-token, ConfigMap a and Service a."},
		{"one object is named alone", verbUpdated, "Updated Deployment a."},
		{"a deletion reads as one", verbDeleted, "Deleted PodDisruptionBudget a."},
		{"a verb with no change has no note", "Renamed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := changeNote(tc.verb, done); got != tc.want {
				t.Errorf("changeNote(%q) = %q, want %q", tc.verb, got, tc.want)
			}
		})
	}
	if got := changeNote(verbCreated, done[:1:1]); got != "Created Secret a-page-token." {
		t.Errorf("one created object: %q", got)
	}
}
