package controllers

import (
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// the strings other cached objects hold.
func internMeta(o metav1.Object) {
	o.SetNamespace(cacheStrings.intern(o.GetNamespace()))
	if !strings.HasPrefix(o.GetGenerateName(), cacheMark) { // a digest: its own
		o.SetGenerateName(cacheStrings.intern(o.GetGenerateName()))
	}
	if labels := o.GetLabels(); len(labels) > 0 {
		shared := make(map[string]string, len(labels))
		for k, v := range labels {
			shared[cacheStrings.intern(k)] = cacheStrings.intern(v)
		}
		o.SetLabels(shared)
	}
	refs := o.GetOwnerReferences()
	for i := range refs {
		refs[i].APIVersion = cacheStrings.intern(refs[i].APIVersion)
		refs[i].Kind = cacheStrings.intern(refs[i].Kind)
		refs[i].Controller = sharedBool(refs[i].Controller)
		refs[i].BlockOwnerDeletion = sharedBool(refs[i].BlockOwnerDeletion)
	}
	o.SetOwnerReferences(refs)
}

// internGatewayStatus makes the words of gw's status (conditions' types, statuses,
// reasons and short messages, the polled keys, states and phases) share the strings of
// the other Gateways': 1,000 Gateways mostly say the same things.
func internGatewayStatus(gw *ferrofedv1alpha1.Gateway) {
	gw.Spec.Image = cacheStrings.intern(gw.Spec.Image)
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
	for i := range d.Keys {
		d.Keys[i].Key, d.Keys[i].State = cacheStrings.intern(d.Keys[i].Key), cacheStrings.intern(d.Keys[i].State)
	}
	for i := range d.Pods {
		p := &d.Pods[i]
		p.Lifecycle, p.Message = cacheStrings.intern(p.Lifecycle), cacheStrings.intern(p.Message)
		for j := range p.NotUp {
			p.NotUp[j] = cacheStrings.intern(p.NotUp[j])
		}
	}
}
