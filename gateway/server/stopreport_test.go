package server

import (
	"context"
	"testing"
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
