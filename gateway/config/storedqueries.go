package config

import (
	"fmt"
	"os"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// Defaults and limits of [stored_queries] (docs/bindings.md, "Stored queries").
const (
	// DefaultDriftIntervalMS is how often the members' copies are checked (5 minutes).
	DefaultDriftIntervalMS = 300000
	// MinDriftIntervalMS bounds stored_queries.drift_interval_ms from below (1 s): every
	// check asks every supporting member once per stored query.
	MinDriftIntervalMS = 1000
	// MaxDriftIntervalMS bounds it from above (one day).
	MaxDriftIntervalMS = 86400000
)

// StoredQueries is the [stored_queries] table: named query templates (FHIR
// OperationDefinition, kind query) kept in a directory every replica reads,
// distributed to the members that support them and checked for drift.
type StoredQueries struct {
	// Dir (dir) is the store: one <id>.json OperationDefinition per stored query.
	// Required; it must exist and be a directory. Every replica of a gateway reads the
	// same one (on Kubernetes the operator mounts the StoredQuery resources' ConfigMap
	// there, read-only: uploads then answer 409 naming the resource to apply).
	Dir string `toml:"dir"`
	// DriftIntervalMS (drift_interval_ms) is how often every supporting member's copy
	// of every stored query is checked, in milliseconds; default 300000, from 1000 to
	// 86400000.
	DriftIntervalMS int64 `toml:"drift_interval_ms"`
}

// DriftInterval is stored_queries.drift_interval_ms as a duration, the default when
// unset.
func (s *StoredQueries) DriftInterval() time.Duration {
	if s == nil || s.DriftIntervalMS == 0 {
		return ms(DefaultDriftIntervalMS)
	}
	return ms(s.DriftIntervalMS)
}

func (s *StoredQueries) applyDefaults() {
	if s != nil && s.DriftIntervalMS == 0 {
		s.DriftIntervalMS = DefaultDriftIntervalMS
	}
}

// validate returns the problems of [stored_queries], each naming its key.
func (s *StoredQueries) validate(opts Options) []Problem {
	if s == nil {
		return nil
	}
	var ps []Problem
	add := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: "stored_queries." + key, Message: fmt.Sprintf(format, args...)})
	}
	if msg := msProblem("stored_queries.drift_interval_ms", s.DriftIntervalMS); msg != "" {
		add("drift_interval_ms", "%s", msg)
	}
	switch {
	case s.Dir == "":
		add("dir", "is required: the directory every replica reads the stored queries from")
	case opts.SkipFiles:
	default:
		if fi, err := os.Stat(s.Dir); err != nil {
			add("dir", "%s cannot be read: %v", s.Dir, err)
		} else if !fi.IsDir() {
			add("dir", "%s is not a directory", s.Dir)
		}
	}
	return ps
}

// HasStoredQueries reports whether a ferrofed.toml has a [stored_queries] table: the
// operator then mounts the Gateway's StoredQuery ConfigMap and renders its directory as
// stored_queries.dir. A document that is not TOML has none (Render and Parse report it).
func HasStoredQueries(doc []byte) bool {
	var d struct {
		StoredQueries *struct{} `toml:"stored_queries"`
	}
	return toml.Unmarshal(doc, &d) == nil && d.StoredQueries != nil
}
