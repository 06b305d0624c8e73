package server

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

type reportingSurface struct {
	emptyRoutes
	pairs []any
}

func (s reportingSurface) StopReport() []any { return s.pairs }

// What a binding leaves behind at exit is in the log line of drain step 4, after
// its own Stop returned.
func TestStepFourLogsWhatTheBindingsLeft(t *testing.T) {
	b := newTestSurface()
	b.name = "audit_repository"
	stopped := false
	b.stop = func(context.Context) error { stopped = true; return nil }
	logs := &logSink{}
	r := start(t, "bindings_drain_timeout_ms = 500\n", logs.logger(),
		withSurfaces(reportingSurface{emptyRoutes: emptyRoutes{b}, pairs: []any{"audit_repository_undelivered", 3}}))
	r.cancel()
	if <-r.done; r.err != nil {
		t.Fatal(r.err)
	}
	if !stopped {
		t.Fatal("the binding was not stopped")
	}
	if line := logs.find("Drain step finished", `"signal"="BindingsStopped"`, `"audit_repository_undelivered"=3`); line == "" {
		t.Fatalf("step 4's line does not carry the binding's report: %v", logs.lines)
	}
}

type spoolSurface struct {
	emptyRoutes
	spools []lifecycle.SpoolLeft
}

func (s spoolSurface) AuditSpools() []lifecycle.SpoolLeft { return s.spools }

// What the audit spools held when step 4 closed them is in the drain's termination
// message, as the part's AuditSpools hook said it, asked after its Stop returned; a
// drain without such a part writes no "audit".
func TestTheTerminationMessageSaysWhatTheSpoolsHeld(t *testing.T) {
	for _, c := range []struct {
		name   string
		spools []lifecycle.SpoolLeft
	}{
		{"two spools with records left", []lifecycle.SpoolLeft{{Destination: "repository", Records: 5, Bytes: 4321}, {Destination: "feed", Records: 0, Bytes: 0}}},
		{"no audit part", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "termination-log")
			b := newTestSurface()
			b.name = "audit_repository"
			stopped := false
			b.stop = func(context.Context) error { stopped = true; return nil }
			var opts []Option
			if c.spools != nil {
				opts = append(opts, withSurfaces(spoolSurface{emptyRoutes: emptyRoutes{b}, spools: c.spools}))
			}
			r := start(t, fmt.Sprintf("termination_message_path = %q\n", path), logr.Discard(), opts...)
			r.terminationLog = path
			r.cancel()
			if <-r.done; r.err != nil {
				t.Fatal(r.err)
			}
			if c.spools != nil && !stopped {
				t.Fatal("the part was not stopped")
			}
			if m := r.terminationMessage(t); !slices.Equal(m.Audit, c.spools) {
				t.Fatalf("audit %+v, want %+v", m.Audit, c.spools)
			}
		})
	}
}
