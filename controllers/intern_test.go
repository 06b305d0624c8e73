package controllers

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// Two pods decoded apart (their strings each their own) share one copy of what they
// repeat once cached, and keep every value.
func TestTheCacheSharesRepeatedStrings(t *testing.T) {
	pod := func() *corev1.Pod {
		// strings.Clone: each pod its own bytes, as a decoder makes them.
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: "gw-0-abc", Namespace: strings.Clone("bench"), GenerateName: strings.Clone("gw-0-5d8f9c-"),
			Labels: map[string]string{strings.Clone(LabelInstance): strings.Clone("gw-0")},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: strings.Clone("apps/v1"), Kind: strings.Clone("ReplicaSet"), Name: "gw-0-5d8f9c", UID: "u",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}},
		}}
	}
	var cached []*cachedPod
	for range 2 {
		out, err := trimForCache(pod())
		if err != nil {
			t.Fatal(err)
		}
		cached = append(cached, out.(*cachedPod))
	}
	a, b := cached[0], cached[1]
	same := func(what, x, y string) {
		t.Helper()
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q are not one copy", what, x, y)
		}
	}
	same("namespace", a.Namespace, b.Namespace)
	same("generateName", a.GenerateName, b.GenerateName)
	same("owner apiVersion", a.OwnerReferences[0].APIVersion, b.OwnerReferences[0].APIVersion)
	same("owner kind", a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind)
	same("label value", a.Labels[LabelInstance], b.Labels[LabelInstance])
	if a.Namespace != "bench" || a.Labels[LabelInstance] != "gw-0" || a.OwnerReferences[0].Kind != "ReplicaSet" || a.GenerateName != "gw-0-5d8f9c-" {
		t.Errorf("values changed: %+v", a.ObjectMeta)
	}
	ctl, block := a.OwnerReferences[0].Controller, a.OwnerReferences[0].BlockOwnerDeletion
	if !*ctl || *block || ctl != b.OwnerReferences[0].Controller || block != b.OwnerReferences[0].BlockOwnerDeletion {
		t.Errorf("owner flags %v %v, want true false and shared", *ctl, *block)
	}
	full := internTable{boundedMap[string, string]{max: maxInterned}}
	for i := range maxInterned + 1 {
		full.intern(strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("y", i/26))
	}
	if len(full.m) > maxInterned {
		t.Errorf("the table holds %d strings, more than %d", len(full.m), maxInterned)
	}
}

// The pods of one ReplicaSet share one label map and one owner list once cached; a pod
// whose labels or owner differ in anything keeps its own, with its own values.
func TestCachedPodsShareEqualLabelsAndOwners(t *testing.T) {
	pod := func(name, hash string, controller *bool) *cachedPod {
		t.Helper()
		out, err := trimForCache(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			Labels:          map[string]string{LabelInstance: strings.Clone("gw"), "pod-template-hash": strings.Clone(hash)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "gw-" + hash, UID: types.UID("u-" + hash), Controller: controller}}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.(*cachedPod)
	}
	sameMap := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	a, b := pod("gw-a", "abc", ptr.To(true)), pod("gw-b", "abc", ptr.To(true))
	if !sameMap(a.Labels, b.Labels) || &a.OwnerReferences[0] != &b.OwnerReferences[0] {
		t.Error("two pods of one ReplicaSet keep their own labels or owners")
	}
	other := pod("gw-c", "def", ptr.To(true))
	noFlag := pod("gw-d", "abc", nil)
	if sameMap(a.Labels, other.Labels) || other.Labels["pod-template-hash"] != "def" || other.OwnerReferences[0].Name != "gw-def" {
		t.Errorf("a pod of another ReplicaSet got the first one's labels or owner: %+v", other.ObjectMeta)
	}
	if &noFlag.OwnerReferences[0] == &a.OwnerReferences[0] || noFlag.OwnerReferences[0].Controller != nil || !sameMap(noFlag.Labels, a.Labels) {
		t.Errorf("an owner without the controller flag shares the flagged one's: %+v", noFlag.OwnerReferences)
	}
	if a.Labels[LabelInstance] != "gw" || !*a.OwnerReferences[0].Controller || a.OwnerReferences[0].UID != "u-abc" {
		t.Errorf("values changed: %+v", a.ObjectMeta)
	}
}

// Gateways that say the same things in their status share the words once cached; a
// long message keeps its own copy.
func TestCachedGatewaysShareTheirStatusWords(t *testing.T) {
	long := strings.Repeat("m", maxInternedText+1)
	gw := func() *ferrofedv1alpha1.Gateway {
		return &ferrofedv1alpha1.Gateway{Status: ferrofedv1alpha1.GatewayStatus{
			Conditions: []metav1.Condition{
				{Type: strings.Clone("MembersReachable"), Status: metav1.ConditionStatus(strings.Clone("True")), Reason: strings.Clone("AllMembersReachable"), Message: strings.Clone("Every replica read (3) reports every member endpoint it asked reachable (3/3).")},
				{Type: strings.Clone("Ready"), Status: "False", Reason: "R", Message: strings.Clone(long)},
			},
			Dependencies: &ferrofedv1alpha1.DependenciesStatus{MembersReachable: strings.Clone("3/3"),
				Keys: []ferrofedv1alpha1.DependencyKeyStatus{{Key: strings.Clone("member/a"), State: strings.Clone("up")}},
				Pods: []ferrofedv1alpha1.PolledPodStatus{{Name: "gw-0", Lifecycle: strings.Clone("serving"), NotUp: []string{strings.Clone("consent=down")}}}},
		}}
	}
	a, b := gw(), gw()
	for _, g := range []*ferrofedv1alpha1.Gateway{a, b} {
		if _, err := trimForCache(g); err != nil {
			t.Fatal(err)
		}
	}
	shared := func(x, y string) bool { return x == y && unsafe.StringData(x) == unsafe.StringData(y) }
	ca, cb := a.Status.Conditions[0], b.Status.Conditions[0]
	da, db := a.Status.Dependencies, b.Status.Dependencies
	for what, ok := range map[string]bool{
		"type": shared(ca.Type, cb.Type), "status": shared(string(ca.Status), string(cb.Status)), "reason": shared(ca.Reason, cb.Reason),
		"message": shared(ca.Message, cb.Message), "members": shared(da.MembersReachable, db.MembersReachable),
		"key": shared(da.Keys[0].Key, db.Keys[0].Key), "state": shared(da.Keys[0].State, db.Keys[0].State),
		"lifecycle": shared(da.Pods[0].Lifecycle, db.Pods[0].Lifecycle), "notUp": shared(da.Pods[0].NotUp[0], db.Pods[0].NotUp[0]),
	} {
		if !ok {
			t.Errorf("%s: not one copy", what)
		}
	}
	if la, lb := a.Status.Conditions[1].Message, b.Status.Conditions[1].Message; la != long || unsafe.StringData(la) == unsafe.StringData(lb) {
		t.Errorf("a message over %d bytes was shared or changed", maxInternedText)
	}

	// The decoder's spare room in the lists is let go, their content kept.
	roomy := gw()
	roomy.Status.Conditions = append(make([]metav1.Condition, 0, 8), roomy.Status.Conditions...)
	roomy.Status.Dependencies.Keys = append(make([]ferrofedv1alpha1.DependencyKeyStatus, 0, 8), roomy.Status.Dependencies.Keys...)
	roomy.Status.Dependencies.Pods = append(make([]ferrofedv1alpha1.PolledPodStatus, 0, 4), roomy.Status.Dependencies.Pods...)
	if _, err := trimForCache(roomy); err != nil {
		t.Fatal(err)
	}
	st := roomy.Status
	if cap(st.Conditions) != 2 || cap(st.Dependencies.Keys) != 1 || cap(st.Dependencies.Pods) != 1 ||
		st.Conditions[1].Message != long || st.Dependencies.Keys[0].Key != "member/a" || st.Dependencies.Pods[0].Name != "gw-0" {
		t.Errorf("the cached lists keep room or lost content: conditions %d/%d, keys %d/%d, pods %d/%d", len(st.Conditions), cap(st.Conditions),
			len(st.Dependencies.Keys), cap(st.Dependencies.Keys), len(st.Dependencies.Pods), cap(st.Dependencies.Pods))
	}
}
