package controllers

import (
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
)

// The cache's objects repeat the same few strings thousands of times: every pod of
// 1,000 Gateways has its own copy of the namespace, of each label's key and most
// values, of its owner's apiVersion and kind. trimForCache makes them share one copy
// (docs/operator.md, "The operator's memory").

// maxInterned bounds the table; when full it starts again empty (what was shared
// stays shared). maxInternedText bounds a message that is shared: longer ones are
// rarely the same twice.
const (
	maxInterned     = 1 << 13
	maxInternedText = 128
)

// boundedMap is a map goroutines share that holds at most max entries: when full it
// starts again empty. The cache's interned strings and the remembered desired sums
// (desiredSum) are kept in one.
type boundedMap[K comparable, V any] struct {
	mu  sync.Mutex
	max int
	m   map[K]V
}

func (b *boundedMap[K, V]) get(k K) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[k]
	return v, ok
}

// getOrPut is k's value, v put first when k has none.
func (b *boundedMap[K, V]) getOrPut(k K, v V) V {
	b.mu.Lock()
	defer b.mu.Unlock()
	if have, ok := b.m[k]; ok {
		return have
	}
	if b.m == nil || len(b.m) >= b.max {
		b.m = make(map[K]V)
	}
	b.m[k] = v
	return v
}

type internTable struct{ boundedMap[string, string] }

var cacheStrings = internTable{boundedMap[string, string]{max: maxInterned}}

func (t *internTable) intern(s string) string {
	if s == "" || len(s) > maxInternedText {
		return s
	}
	return t.getOrPut(s, s)
}

// The owner references' flags, shared: the cache's objects are read, never written
// (CacheOptions), and a copy read from the cache has its own.
var sharedTrue, sharedFalse = true, false

func sharedBool(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &sharedTrue
	}
	return &sharedFalse
}

// internMeta makes o's namespace, generateName, labels and owner references share
// the strings (and the label maps and owner lists) other cached objects hold.
func internMeta(o metav1.Object) {
	o.SetNamespace(cacheStrings.intern(o.GetNamespace()))
	if !strings.HasPrefix(o.GetGenerateName(), cacheMark) { // a digest: its own
		o.SetGenerateName(cacheStrings.intern(o.GetGenerateName()))
	}
	if labels := o.GetLabels(); len(labels) > 0 {
		o.SetLabels(sharedLabels(labels))
	}
	if refs := o.GetOwnerReferences(); len(refs) > 0 {
		o.SetOwnerReferences(sharedOwners(refs))
	}
}

// labelSets and ownerSets share whole label maps and owner lists between the cached
// objects that carry equal ones (the pods of one ReplicaSet; a Gateway's Deployment,
// Service and PodDisruptionBudget, owned by it): keyed by a hash of the content, and
// a hit is taken only when its content is equal.
var (
	labelSets = boundedMap[uint64, map[string]string]{max: maxInterned / 2}
	ownerSets = boundedMap[uint64, []metav1.OwnerReference]{max: maxInterned / 2}
	setSeed   = maphash.MakeSeed()
)

// sharedLabels is a map equal to labels, with interned strings, that cached objects
// with the same labels share.
func sharedLabels(labels map[string]string) map[string]string {
	var h maphash.Hash
	h.SetSeed(setSeed)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		h.WriteString(k)
		h.WriteByte(0)
		h.WriteString(labels[k])
		h.WriteByte(0)
	}
	sum := h.Sum64()
	if have, ok := labelSets.get(sum); ok && maps.Equal(have, labels) {
		return have
	}
	own := make(map[string]string, len(labels))
	for k, v := range labels {
		own[cacheStrings.intern(k)] = cacheStrings.intern(v)
	}
	if got := labelSets.getOrPut(sum, own); maps.Equal(got, own) {
		return got
	}
	return own // another set of the same hash holds the entry
}

// sharedOwners is a list equal to refs, with interned kinds and shared flags, that
// cached objects with the same owners share.
func sharedOwners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	var h maphash.Hash
	h.SetSeed(setSeed)
	for _, r := range refs {
		for _, s := range []string{r.APIVersion, r.Kind, r.Name, string(r.UID)} {
			h.WriteString(s)
			h.WriteByte(0)
		}
		h.WriteByte(flagByte(r.Controller))
		h.WriteByte(flagByte(r.BlockOwnerDeletion))
	}
	sum := h.Sum64()
	if have, ok := ownerSets.get(sum); ok && slices.EqualFunc(have, refs, sameOwner) {
		return have
	}
	own := make([]metav1.OwnerReference, len(refs))
	for i, r := range refs {
		own[i] = metav1.OwnerReference{APIVersion: cacheStrings.intern(r.APIVersion), Kind: cacheStrings.intern(r.Kind), Name: r.Name, UID: r.UID,
			Controller: sharedBool(r.Controller), BlockOwnerDeletion: sharedBool(r.BlockOwnerDeletion)}
	}
	if got := ownerSets.getOrPut(sum, own); slices.EqualFunc(got, own, sameOwner) {
		return got
	}
	return own
}

func flagByte(b *bool) byte {
	switch {
	case b == nil:
		return 0
	case *b:
		return 1
	}
	return 2
}

func sameOwner(a, b metav1.OwnerReference) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		ptr.Equal(a.Controller, b.Controller) && ptr.Equal(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
}

// internGatewayStatus makes the words of gw's status (conditions' types, statuses,
// reasons and short messages, the polled keys, states and phases) share the strings of
// the other Gateways': 1,000 Gateways mostly say the same things.
//
// Its lists are cut to their length: the JSON decoder grows a list by doubling, so a
// status of 5 keys and 7 conditions holds room for 8 of each.
func internGatewayStatus(gw *ferrofedv1alpha1.Gateway) {
	gw.Spec.Image = cacheStrings.intern(gw.Spec.Image)
	gw.Status.Conditions = exactly(gw.Status.Conditions)
	gw.Status.Drains = exactly(gw.Status.Drains)
	for i := range gw.Status.Conditions {
		c := &gw.Status.Conditions[i]
		c.Type, c.Reason, c.Message = cacheStrings.intern(c.Type), cacheStrings.intern(c.Reason), cacheStrings.intern(c.Message)
		c.Status = metav1.ConditionStatus(cacheStrings.intern(string(c.Status)))
	}
	d := gw.Status.Dependencies
	if d == nil {
		return
	}
	d.MembersReachable = cacheStrings.intern(d.MembersReachable)
	d.Keys, d.Pods = exactly(d.Keys), exactly(d.Pods)
	for i := range d.Keys {
		d.Keys[i].Key, d.Keys[i].State = cacheStrings.intern(d.Keys[i].Key), cacheStrings.intern(d.Keys[i].State)
	}
	for i := range d.Pods {
		p := &d.Pods[i]
		p.Lifecycle, p.Message = cacheStrings.intern(p.Lifecycle), cacheStrings.intern(p.Message)
		p.NotUp = exactly(p.NotUp)
		for j := range p.NotUp {
			p.NotUp[j] = cacheStrings.intern(p.NotUp[j])
		}
	}
}

// exactly is s in an array of its length: the decoder's spare room is let go.
func exactly[T any](s []T) []T {
	if cap(s) == len(s) {
		return s
	}
	return append(make([]T, 0, len(s)), s...)
}
