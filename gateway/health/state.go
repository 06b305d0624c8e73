package health

import (
	"sync/atomic"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// State is the process phase, read on every data-plane request by the readiness gate:
// it is one atomic integer so that the gate costs a load and nothing else.
type State struct {
	phase atomic.Int32
	// open is set the first time every check passed and never cleared: the gate's bit.
	// It is apart from the phase because a drain that starts while booting must not
	// open the data plane of a process that never was ready.
	open atomic.Bool
	// onChange, when set, is called after every phase change (metrics, logs).
	onChange func(lifecycle.Phase)
}

const (
	phaseBooting int32 = iota
	phaseServing
	phaseDraining
)

var phases = [...]lifecycle.Phase{lifecycle.PhaseBooting, lifecycle.PhaseServing, lifecycle.PhaseDraining}

// NewState starts in phase booting. onChange may be nil.
func NewState(onChange func(lifecycle.Phase)) *State {
	return &State{onChange: onChange}
}

// Phase is the current phase.
func (s *State) Phase() lifecycle.Phase { return phases[s.phase.Load()] }

// Booting reports whether the phase is booting.
func (s *State) Booting() bool { return s.phase.Load() == phaseBooting }

// Open reports whether the process has been fully ready once. It is the gate's whole
// question: the data plane is closed only before the first time every check passed,
// and during the drain of a process that was ready it serves normally (step 1 of the
// timeline in gateway/lifecycle/doc.go, from T0 to T0+d).
func (s *State) Open() bool { return s.open.Load() }

// Draining reports whether the drain has begun.
func (s *State) Draining() bool { return s.phase.Load() == phaseDraining }

// MarkServing moves booting to serving; it reports whether this call did it. It never
// leaves draining: a drain is not undone by a passing probe.
func (s *State) MarkServing() bool {
	// A load first: every ready probe calls this, and a compare-and-swap writes the
	// shared word (and its cache line) even when it fails.
	if s.phase.Load() == phaseBooting && s.phase.CompareAndSwap(phaseBooting, phaseServing) {
		s.open.Store(true)
		s.changed()
		return true
	}
	return false
}

// StartDraining moves any phase to draining; it reports whether this call did it.
func (s *State) StartDraining() bool {
	if s.phase.Swap(phaseDraining) != phaseDraining {
		s.changed()
		return true
	}
	return false
}

func (s *State) changed() {
	if s.onChange != nil {
		s.onChange(s.Phase())
	}
}
