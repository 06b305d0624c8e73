package auth

import (
	"sync"
	"time"
)

// The verified-token cache: a token that verified is not verified again for a while,
// so that a client's every request costs a map lookup instead of a signature check.
const (
	// MaxCachedTokens bounds the cache; past it, an arbitrary entry makes room.
	MaxCachedTokens = 4096
	// MaxCachedFor is the longest a verification is trusted without being done again:
	// a key removed from an issuer's key set stops its tokens within it.
	MaxCachedFor = time.Minute
)

type cacheKey struct{ token, scope string }

type cached struct {
	p     *Principal
	until time.Time
}

// tokenCache holds verifications that succeeded, each until the earlier of its token's
// expiry and MaxCachedFor after it was done. A refusal is never cached.
type tokenCache struct {
	mu sync.Mutex
	m  map[cacheKey]cached
}

func (c *tokenCache) get(k cacheKey, now time.Time) (*Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return nil, false
	}
	if !now.Before(e.until) {
		delete(c.m, k)
		return nil, false
	}
	return e.p, true
}

func (c *tokenCache) put(k cacheKey, p *Principal, expiry, now time.Time) {
	until := now.Add(MaxCachedFor)
	if expiry.Before(until) {
		until = expiry
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[cacheKey]cached{}
	}
	if len(c.m) >= MaxCachedTokens {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = cached{p: p, until: until}
}
