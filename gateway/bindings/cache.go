package bindings

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxCacheEntries bounds every binding cache: past it, expired entries are dropped,
// and while it is still full nothing more is kept (an answer is then simply asked
// again).
const MaxCacheEntries = 10000

// Cache keeps a binding's answers for a while: the resolver's mapping and the consent
// pre-filter's decisions, each off unless its cache_ttl_ms is set. A key names the
// caller and the patient (CacheKey), so that an answer is never reused for another
// patient or another caller. Only answers are kept, never a failure. A nil *Cache
// keeps nothing.
type Cache[V any] struct {
	ttl time.Duration
	now func() time.Time
	mu  sync.Mutex
	m   map[string]cached[V]
}

type cached[V any] struct {
	v       V
	expires time.Time
}

// NewCache is a cache whose entries live for ttl; nil when ttl is not positive. now,
// when nil, is time.Now.
func NewCache[V any](ttl time.Duration, now func() time.Time) *Cache[V] {
	if ttl <= 0 {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	return &Cache[V]{ttl: ttl, now: now, m: map[string]cached[V]{}}
}

// Get is the value kept under key, if it has not expired.
func (c *Cache[V]) Get(key string) (v V, ok bool) {
	if c == nil {
		return v, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !c.now().Before(e.expires) {
		return v, false
	}
	return e.v, true
}

// Put keeps v under key for the cache's ttl.
func (c *Cache[V]) Put(key string, v V) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.m) >= MaxCacheEntries {
		for k, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= MaxCacheEntries {
			return
		}
	}
	c.m[key] = cached[V]{v: v, expires: now.Add(c.ttl)}
}

// Clear drops every entry: what the cache holds may be wrong now (a PMIR feed
// message merged or updated a patient), and its keys do not say which entries.
func (c *Cache[V]) Clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
}

// Len is how many entries the cache holds, expired ones included.
func (c *Cache[V]) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// CacheKey joins parts unambiguously (each prefixed with its length), so that no two
// lists of parts give one key.
func CacheKey(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}
