package server

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// reloading is a surface that prepares a reload (or refuses it) and records what it
// applied.
type reloading struct {
	surface
	refuse  error
	applied []*config.Config
}

func (r *reloading) PrepareReload(cfg *config.Config) (func(), error) {
	if r.refuse != nil {
		return nil, r.refuse
	}
	return func() { r.applied = append(r.applied, cfg) }, nil
}

// TestAReloadIsAllOrNothing: when one surface refuses the reloaded configuration, no
// surface applies it and the server keeps its own settings (the request timeout
// among them); the log says the reload was refused and why. Once every surface
// prepares it, every part applies and the log says so.
func TestAReloadIsAllOrNothing(t *testing.T) {
	logs := &logSink{}
	first := &reloading{surface: newTestSurface()}
	second := &reloading{surface: emptyRoutes{&testSurface{name: "issuers"}},
		refuse: errors.New("auth.issuers[0].jwks_file: the JWKS holds no public signing key")}
	s, err := New(parse(t, "[server]\nrequest_timeout_ms = 5000\n[health]\ncheck_timeout_ms = 200\n"), logs.logger(), withSurfaces(first, second))
	if err != nil {
		t.Fatal(err)
	}
	before := s.Config()
	next := parse(t, "[server]\nrequest_timeout_ms = 300\n[health]\ncheck_timeout_ms = 50\n")

	if _, err := s.Reload(next); err == nil {
		t.Fatal("a reload a surface refused was accepted")
	}
	if s.Config() != before || time.Duration(s.requestTimeoutNow.Load()) != 5*time.Second {
		t.Fatalf("the server applied part of a refused reload: request timeout %s", time.Duration(s.requestTimeoutNow.Load()))
	}
	if len(first.applied) != 0 {
		t.Fatal("a surface applied a reload another surface refused")
	}
	if logs.find("Reload refused: surface issuers: auth.issuers[0].jwks_file", "kept the running configuration") == "" {
		t.Fatalf("no refusal naming the reason: %v", logs.lines)
	}
	if logs.find("Reloaded configuration") != "" {
		t.Fatalf("a refused reload was logged as applied: %v", logs.lines)
	}

	second.refuse = nil
	if _, err := s.Reload(next); err != nil {
		t.Fatal(err)
	}
	if s.Config() != next || time.Duration(s.requestTimeoutNow.Load()) != 300*time.Millisecond {
		t.Fatalf("the server did not apply the reload: request timeout %s", time.Duration(s.requestTimeoutNow.Load()))
	}
	if !slices.Equal(first.applied, []*config.Config{next}) || !slices.Equal(second.applied, []*config.Config{next}) {
		t.Fatal("not every surface applied the reload")
	}
	if logs.find("Reloaded configuration: applied", "test", "issuers", "300ms") == "" {
		t.Fatalf("the applied reload is not logged with its parts: %v", logs.lines)
	}
}
