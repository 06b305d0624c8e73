package bindings

import (
	"strconv"
	"testing"
	"time"
)

func TestTheCache(t *testing.T) {
	now := time.Unix(1000, 0)
	c := NewCache[int](time.Second, func() time.Time { return now })
	c.Put(CacheKey("caller", "patient"), 1)
	if v, ok := c.Get(CacheKey("caller", "patient")); !ok || v != 1 {
		t.Fatalf("Get = %d, %v", v, ok)
	}
	if _, ok := c.Get(CacheKey("caller", "other patient")); ok {
		t.Fatal("an answer reused for another patient")
	}
	if _, ok := c.Get(CacheKey("other caller", "patient")); ok {
		t.Fatal("an answer reused for another caller")
	}
	now = now.Add(time.Second)
	if _, ok := c.Get(CacheKey("caller", "patient")); ok {
		t.Fatal("an expired answer reused")
	}
	if NewCache[int](0, nil) != nil {
		t.Fatal("a zero ttl made a cache")
	}
	var off *Cache[int]
	off.Put("k", 1)
	if _, ok := off.Get("k"); ok {
		t.Fatal("a nil cache kept something")
	}
}

func TestTheCacheIsBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	c := NewCache[int](time.Second, func() time.Time { return now })
	for i := range MaxCacheEntries + 10 {
		c.Put(strconv.Itoa(i), i)
	}
	if c.Len() != MaxCacheEntries {
		t.Fatalf("%d entries, want the bound %d", c.Len(), MaxCacheEntries)
	}
	now = now.Add(time.Second)
	c.Put("fresh", 1)
	if c.Len() != 1 {
		t.Fatalf("the expired entries were not dropped: %d", c.Len())
	}
}

func TestCacheKeysAreUnambiguous(t *testing.T) {
	if CacheKey("a|b", "c") == CacheKey("a", "b|c") || CacheKey("ab", "") == CacheKey("a", "b") {
		t.Fatal("two lists of parts share a key")
	}
}

func TestClearDropsEveryEntry(t *testing.T) {
	c := NewCache[int](time.Minute, nil)
	c.Put("a", 1)
	c.Put("b", 2)
	c.Clear()
	if _, ok := c.Get("a"); ok || c.Len() != 0 {
		t.Fatalf("after Clear: %d entries", c.Len())
	}
	c.Put("a", 3)
	if v, ok := c.Get("a"); !ok || v != 3 {
		t.Fatal("a cleared cache keeps nothing new")
	}
	var off *Cache[int]
	off.Clear()
}
