package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// podsOf finds the cached pods of one namespace by label, sorted by name, expanded;
// a pod of another namespace or without every label is not listed.
func TestPodsOfReadsTheCachedPods(t *testing.T) {
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	add := func(ns, name string, labels map[string]string) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Status: corev1.PodStatus{PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
		out, err := trimForCache(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(out); err != nil {
			t.Fatal(err)
		}
	}
	add("a", "gw-2", map[string]string{LabelInstance: "gw", LabelName: "ferrofed"})
	add("a", "gw-1", map[string]string{LabelInstance: "gw"})
	add("a", "other-1", map[string]string{LabelInstance: "other"})
	add("b", "gw-0", map[string]string{LabelInstance: "gw"})
	add("a", "job-1", map[string]string{LabelHandOverOf: "gw"})

	for _, s := range []toolscache.Store{store, toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)} {
		if s != store { // a store without the namespace index lists them all
			for _, o := range store.List() {
				_ = s.Add(o)
			}
		}
		got, err := podsOf(s, "a", map[string]string{LabelInstance: "gw"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Name != "gw-1" || got[1].Name != "gw-2" || got[0].Status.PodIP != "10.0.0.1" ||
			got[1].Status.Conditions[0].Status != corev1.ConditionTrue {
			t.Errorf("podsOf(a, instance=gw) = %+v, want gw-1 and gw-2, ready, with their IP", got)
		}
		if got, _ := podsOf(s, "a", map[string]string{LabelHandOverOf: "gw"}); len(got) != 1 || got[0].Name != "job-1" {
			t.Errorf("podsOf(a, hand-over-of=gw) = %+v, want job-1", got)
		}
		if got, _ := podsOf(s, "c", nil); len(got) != 0 {
			t.Errorf("podsOf(c) = %+v, want none", got)
		}
	}
}
