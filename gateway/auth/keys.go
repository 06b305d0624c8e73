package auth

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// keySet is one accepted key set and when it was fetched.
type keySet struct {
	keys      []jose.JSONWebKey
	fetchedAt time.Time
}

// match returns the keys a token with this kid and alg may be verified with: the key
// with that kid, or, for a token without a kid, every key whose declared algorithm (if
// any) is alg.
func (s *keySet) match(kid, alg string) []jose.JSONWebKey {
	if s == nil {
		return nil
	}
	var out []jose.JSONWebKey
	for _, k := range s.keys {
		if kid != "" && k.KeyID != kid {
			continue
		}
		if k.Algorithm != "" && k.Algorithm != alg {
			continue
		}
		out = append(out, k)
	}
	return out
}

// keySource is where one issuer's keys come from: a file read once, or a URL fetched
// on first use, refreshed when older than refresh, and refetched when a token names a
// kid the set does not hold. Every fetch, whatever its reason, waits at least
// minInterval after the previous one: a stream of tokens with made-up kids must not
// turn the gateway into a load generator against the issuer.
type keySource struct {
	url         string
	client      *http.Client
	refresh     time.Duration
	minInterval time.Duration
	now         func() time.Time

	set        atomic.Pointer[keySet]
	mu         sync.Mutex // serialises fetches
	lastFetch  time.Time  // guarded by mu
	refreshing atomic.Bool
	fetches    atomic.Int64
}

func fileKeySource(key, path string, now func() time.Time) (*keySource, error) {
	keys, err := config.ReadJWKSFile(key, path)
	if err != nil {
		return nil, err
	}
	s := &keySource{now: now}
	s.set.Store(&keySet{keys: keys, fetchedAt: now()})
	return s, nil
}

// keysOf is the key source of issuer ic, whose key is key (auth.issuers[0]): its
// jwks_file read now, or its jwks_url, fetched through opts.HTTPClient or, with a
// ca_file, through a client that trusts that CA only. A file that cannot be read is a
// *config.FileError naming its key.
func keysOf(key string, ic config.Issuer, opts Options) (*keySource, error) {
	switch {
	case ic.JWKSFile != "":
		return fileKeySource(key+".jwks_file", ic.JWKSFile, opts.Now)
	case ic.JWKSURL != "":
		client, err := jwksClient(key+".ca_file", ic.CAFile, opts.HTTPClient)
		if err != nil {
			return nil, err
		}
		return &keySource{url: ic.JWKSURL, client: client, refresh: ic.JWKSRefresh(), minInterval: opts.MinRefetchInterval, now: opts.Now}, nil
	}
	return nil, fmt.Errorf("%s.jwks_file: one of jwks_file or jwks_url is required", key)
}

// jwksClient is base, or, with a caFile (key names it), a copy of base whose TLS roots
// are that bundle's certificates instead of the system's.
func jwksClient(key, caFile string, base *http.Client) (*http.Client, error) {
	if caFile == "" {
		return base, nil
	}
	pool, err := config.ReadCertPool(key, caFile)
	if err != nil {
		return nil, err
	}
	tr, ok := base.Transport.(*http.Transport)
	if !ok {
		tr = http.DefaultTransport.(*http.Transport)
	}
	tr = tr.Clone()
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if tr.TLSClientConfig != nil {
		tc = tr.TLSClientConfig.Clone()
	}
	tc.RootCAs = pool
	tr.TLSClientConfig = tc
	c := *base
	c.Transport = tr
	return &c, nil
}

// lookup returns the keys for kid and alg, fetching as the rules above allow.
func (s *keySource) lookup(ctx context.Context, kid, alg string) []jose.JSONWebKey {
	if s.url == "" {
		return s.set.Load().match(kid, alg)
	}
	cur := s.set.Load()
	if cur == nil {
		s.fetch(ctx)
		cur = s.set.Load()
	} else if s.now().Sub(cur.fetchedAt) >= s.refresh && s.refreshing.CompareAndSwap(false, true) {
		// A stale set still verifies the tokens it knows: refresh beside the request
		// rather than in front of it.
		go func() {
			defer s.refreshing.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
			defer cancel()
			s.fetch(ctx)
		}()
	}
	keys := cur.match(kid, alg)
	if len(keys) == 0 && kid != "" && s.fetch(ctx) {
		keys = s.set.Load().match(kid, alg)
	}
	return keys
}

// MaxResponseHeaderBytes bounds the head of a JWKS answer.
const MaxResponseHeaderBytes = 64 << 10

// fetchTimeout bounds one JWKS fetch, whoever waits for it.
const fetchTimeout = 5 * time.Second

// fetch gets the key set from the URL unless the last fetch was less than minInterval
// ago. It reports whether a new set was stored.
func (s *keySource) fetch(ctx context.Context) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if !s.lastFetch.IsZero() && now.Sub(s.lastFetch) < s.minInterval {
		return false
	}
	s.lastFetch = now
	s.fetches.Add(1)
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	keys, err := s.get(ctx)
	if err != nil {
		// The last accepted set keeps serving; the next fetch is allowed after
		// minInterval. The reason is not the client's business, and names a URL.
		return false
	}
	s.set.Store(&keySet{keys: keys, fetchedAt: now})
	return true
}

func (s *keySource) get(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	res, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("JWKS answered %d", res.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, config.MaxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > config.MaxJWKSBytes {
		return nil, fmt.Errorf("JWKS is larger than %d bytes", config.MaxJWKSBytes)
	}
	return config.ParseJWKS(data)
}
