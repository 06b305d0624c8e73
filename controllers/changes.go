package controllers

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// changes gathers what one reconcile created, updated and deleted, told when the
// reconcile ends in one Event per verb: a new Gateway's five objects cost the apiserver
// one Event write, not five (on a busy control plane the Events were a third of the
// operator's writes).
type changes struct {
	done []change
}

type change struct {
	verb, kind, name string
	obj              runtime.Object
}

// Verbs of changes, in the order they are told; each is its Event's reason.
const (
	verbCreated = "Created"
	verbUpdated = "Updated"
	verbDeleted = "Deleted"
)

func (c *changes) add(verb, kind, name string, obj runtime.Object) {
	c.done = append(c.done, change{verb, kind, name, obj})
}

// changeNote is the note of the Event of one verb: "Created Secret a-page-token,
// ConfigMap a and Deployment a.", the objects in the order they were changed.
func changeNote(verb string, done []change) string {
	objs := make([]string, 0, len(done))
	for _, d := range done {
		if d.verb == verb {
			objs = append(objs, d.kind+" "+d.name)
		}
	}
	switch len(objs) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("%s %s.", verb, objs[0])
	}
	return fmt.Sprintf("%s %s and %s.", verb, strings.Join(objs[:len(objs)-1], ", "), objs[len(objs)-1])
}

// tellChanges emits the Events of what the reconcile changed. An Event of one object
// names it as related, as each Event did when there was one per object: the events
// library folds Events of the same Gateway, reason and related object into one series,
// and two changes of different objects must not fold. Several objects changed at once
// (a new Gateway, a new configuration) have no one related object.
func (r *GatewayReconciler) tellChanges(gw *ferrofedv1alpha1.Gateway, c changes) {
	for _, verb := range []string{verbCreated, verbUpdated, verbDeleted} {
		var related runtime.Object
		n := 0
		for _, d := range c.done {
			if d.verb == verb {
				n++
				related = d.obj
			}
		}
		if n == 0 {
			continue
		}
		if n > 1 {
			related = nil
		}
		action := "Apply"
		if verb == verbDeleted {
			action = "Delete"
		}
		r.Recorder.Eventf(gw, related, corev1.EventTypeNormal, verb, action, "%s", changeNote(verb, c.done))
	}
}
