package config

import (
	"bytes"
	"fmt"
	"time"
)

// Defaults and limits of the [federation] table (docs/data-plane.md).
const (
	// DefaultCount is the page size of a federated search without _count.
	DefaultCount = 20
	// MaxCountLimit is the largest federation.max_count: a page of a federated search
	// is merged in memory.
	MaxCountLimit = 1000
	// DefaultMaxCount is federation.max_count's default: a larger _count is served as
	// this many entries a page, the rest behind next.
	DefaultMaxCount = MaxCountLimit
	// DefaultCapabilityTTLMS is how long the gateway's CapabilityStatement, made from
	// the members' own, is reused.
	DefaultCapabilityTTLMS = 60000
	// MaxCapabilityTTLMS bounds federation.capability_ttl_ms (one day).
	MaxCapabilityTTLMS = 86400000
	// MinPageTokenKeyBytes is the shortest key federation.page_token_key_file may
	// hold: HMAC-SHA256 wants a key of its output's size.
	MinPageTokenKeyBytes = 32
	// MaxPageTokenKeyBytes bounds what is read of the key file.
	MaxPageTokenKeyBytes = 4096
	// DefaultPageTokenTTLMS is how long a next link is accepted after the page that
	// gave it (one hour).
	DefaultPageTokenTTLMS = 3600000
	// MinPageTokenTTLMS and MaxPageTokenTTLMS bound federation.page_token_ttl_ms: a
	// second, and a day.
	MinPageTokenTTLMS = 1000
	MaxPageTokenTTLMS = 86400000
)

// Federation is the [federation] table: how the federated data plane speaks FHIR.
type Federation struct {
	// StrictFHIR (strict_fhir) leaves meta.federation out of every Bundle, so that each
	// answer is plain valid R4; the same records stay in Bundle.meta.extension.
	// Default false: meta.federation is the product's documented contract.
	StrictFHIR bool `toml:"strict_fhir"`
	// PageTokenKeyFile (page_token_key_file) is a file whose bytes (at least 32, at
	// most 4096; surrounding whitespace is trimmed) authenticate the continuation
	// tokens of next links. Every replica of a gateway must read the same key to
	// accept each other's links (the operator mounts one Secret per Gateway). Unset,
	// a process makes a random key of its own and logs that it did.
	PageTokenKeyFile string `toml:"page_token_key_file"`
	// PageTokenTTLMS (page_token_ttl_ms) is how long a next link is accepted after the
	// page that gave it, in milliseconds; default 3600000 (an hour), from 1000 to
	// 86400000. Past it the link is refused as expired (docs/data-plane.md).
	PageTokenTTLMS int64 `toml:"page_token_ttl_ms"`
	// DefaultCount (default_count) is the page size without _count; default 20, from
	// 1 to max_count.
	DefaultCount int `toml:"default_count"`
	// MaxCount (max_count) is the largest page a _count gets; default and at most
	// 1000.
	MaxCount int `toml:"max_count"`
	// CapabilityTTLMS (capability_ttl_ms) is how long GET {base}/fhir/metadata reuses
	// the CapabilityStatement made from the members' own, in milliseconds; default
	// 60000, 0 asks the members every time, at most 86400000.
	CapabilityTTLMS int64 `toml:"capability_ttl_ms"`
}

func defaultFederation() Federation {
	return Federation{DefaultCount: DefaultCount, MaxCount: DefaultMaxCount, CapabilityTTLMS: DefaultCapabilityTTLMS, PageTokenTTLMS: DefaultPageTokenTTLMS}
}

// ReadPageTokenKey reads the key of federation.page_token_key_file (through ReadFile),
// trimmed, and checks its length. The error is a *FileError naming the key.
func ReadPageTokenKey(file string) ([]byte, error) {
	const key = "federation.page_token_key_file"
	data, err := ReadFile(key, file, MaxPageTokenKeyBytes)
	if err != nil {
		return nil, err
	}
	k := bytes.TrimSpace(data)
	if len(k) < MinPageTokenKeyBytes {
		return nil, &FileError{Key: key, Err: fmt.Errorf("%s holds %d bytes, fewer than %d", file, len(k), MinPageTokenKeyBytes)}
	}
	return k, nil
}

// validate returns the [federation] table's problems, each naming its key.
// CapabilityTTL is federation.capability_ttl_ms as a duration (0: the members are
// asked every time).
func (f Federation) CapabilityTTL() time.Duration { return ms(f.CapabilityTTLMS) }

// PageTokenTTL is federation.page_token_ttl_ms as a duration, the default when unset
// (a Config assembled in code has no defaults applied).
func (f Federation) PageTokenTTL() time.Duration {
	if f.PageTokenTTLMS <= 0 {
		return ms(DefaultPageTokenTTLMS)
	}
	return ms(f.PageTokenTTLMS)
}

func (f Federation) validate(opts Options) []Problem {
	var ps []Problem
	add := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: "federation." + key, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case f.MaxCount < 1 || f.MaxCount > MaxCountLimit:
		add("max_count", "%d is not from 1 to %d", f.MaxCount, MaxCountLimit)
	case f.DefaultCount < 1 || f.DefaultCount > f.MaxCount:
		add("default_count", "%d is not from 1 to federation.max_count (%d)", f.DefaultCount, f.MaxCount)
	}
	if f.PageTokenKeyFile != "" && !opts.SkipFiles {
		if _, err := ReadPageTokenKey(f.PageTokenKeyFile); err != nil {
			ps = append(ps, fileProblem("federation.page_token_key_file", err))
		}
	}
	return ps
}
