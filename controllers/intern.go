package controllers

import (
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cache's objects repeat the same few strings thousands of times: every pod of
// 1,000 Gateways has its own copy of the namespace, of each label's key and most
// values, of its owner's apiVersion and kind. trimForCache makes them share one copy
// (docs/operator.md, "The operator's memory").

// maxInterned bounds the table; when full it starts again empty (what was shared
// stays shared).
const maxInterned = 1 << 13

type internTable struct {
	mu sync.Mutex
	m  map[string]string
}

var cacheStrings internTable

func (t *internTable) intern(s string) string {
	if s == "" {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.m[s]; ok {
		return c
	}
	if t.m == nil || len(t.m) >= maxInterned {
		t.m = make(map[string]string)
	}
	t.m[s] = s
	return s
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
