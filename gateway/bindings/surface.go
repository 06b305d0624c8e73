package bindings

import (
	"context"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/health"
)

// Surface is how a binding plugs into the gateway's server: the methods of
// server.Surface (that package is not imported here; main hands these over).
type Surface interface {
	RegisterDataPlane(g *gin.RouterGroup)
	RegisterOperator(g *gin.RouterGroup)
	Checks() []health.Check
	Stop(ctx context.Context) error
	Name() string
}

// Process is a binding's long-running part, started with the gateway. Stop is given
// the bindings budget of drain step 4 as its context's deadline; it must stop
// within it and return once it has stopped.
type Process interface {
	Stop(ctx context.Context) error
}

// ProcessSurface is the Surface of one binding's process: no routes, no readiness
// check, named for the binding. Its Stop returns when the process's Stop returned,
// not when the context ends, so that a process that overran the budget is abandoned
// by the server by its own name (the drain's termination message lists it).
type ProcessSurface struct {
	name string
	proc Process
	// StopReportFunc, when set, gives the key/value pairs the log line of drain step
	// 4 carries for this binding once it stopped (the server's StopReporter).
	StopReportFunc func() []any
}

// NewProcessSurface names proc's surface.
func NewProcessSurface(name string, proc Process) *ProcessSurface {
	return &ProcessSurface{name: name, proc: proc}
}

// Name is the binding's name, as the drain's log and termination message spell it.
func (s *ProcessSurface) Name() string { return s.name }

// RegisterDataPlane registers nothing.
func (s *ProcessSurface) RegisterDataPlane(*gin.RouterGroup) {}

// RegisterOperator registers nothing.
func (s *ProcessSurface) RegisterOperator(*gin.RouterGroup) {}

// Checks adds no readiness check: a binding's outage shows in the dependency report,
// never as an unready gateway.
func (s *ProcessSurface) Checks() []health.Check { return nil }

// Stop stops the process; see the type's comment for when it returns.
func (s *ProcessSurface) Stop(ctx context.Context) error { return s.proc.Stop(ctx) }

// StopReport is what drain step 4's log line says of this binding.
func (s *ProcessSurface) StopReport() []any {
	if s.StopReportFunc == nil {
		return nil
	}
	return s.StopReportFunc()
}
