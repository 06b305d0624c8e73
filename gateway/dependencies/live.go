package dependencies

import "maps"

// SetServiceFunc makes name a live key of the report: its state is f's answer at each
// Report (and each scrape of the metric), not the last observation. A binding whose
// state is a property of something it holds, rather than of its last exchange, uses
// it: the audit spool is read at each report request (docs/audit-spool.md). f must be
// cheap and must not call back into the tracker. It replaces any recorded state of
// the same name; RemoveService drops it.
func (t *Tracker) SetServiceFunc(name string, f func() State) {
	t.SetServiceFaultFunc(name, func() (State, string) { return f(), "" })
}

// SetServiceFaultFunc is SetServiceFunc for a key that also has a fault class when it
// is not up: f's fault, when not empty, is reported as "<name>_fault" (the audit
// spool that cannot store: docs/audit-spool.md, "When the spool cannot store").
func (t *Tracker) SetServiceFaultFunc(name string, f func() (State, string)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live == nil {
		t.live = map[string]func() (State, string){}
	}
	t.live[name] = f
	delete(t.services, name)
	delete(t.faults, name)
}

// liveState is one live key's answer.
type liveState struct {
	state State
	fault string
}

// liveStates evaluates the live keys outside the tracker's lock, so that a slow
// reader of one binding never holds up the members' observations.
func (t *Tracker) liveStates() map[string]liveState {
	t.mu.RLock()
	fs := maps.Clone(t.live)
	t.mu.RUnlock()
	if len(fs) == 0 {
		return nil
	}
	out := make(map[string]liveState, len(fs))
	for name, f := range fs {
		s, fault := f()
		out[name] = liveState{state: s, fault: fault}
	}
	return out
}
