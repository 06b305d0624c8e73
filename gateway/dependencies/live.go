package dependencies

import "maps"

// SetServiceFunc makes name a live key of the report: its state is f's answer at each
// Report (and each scrape of the metric), not the last observation. A binding whose
// state is a property of something it holds, rather than of its last exchange, uses
// it: the audit spool is read at each report request (docs/audit-spool.md). f must be
// cheap and must not call back into the tracker. It replaces any recorded state of
// the same name; RemoveService drops it.
func (t *Tracker) SetServiceFunc(name string, f func() State) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live == nil {
		t.live = map[string]func() State{}
	}
	t.live[name] = f
	delete(t.services, name)
	delete(t.faults, name)
}

// liveStates evaluates the live keys outside the tracker's lock, so that a slow
// reader of one binding never holds up the members' observations.
func (t *Tracker) liveStates() map[string]State {
	t.mu.RLock()
	fs := maps.Clone(t.live)
	t.mu.RUnlock()
	if len(fs) == 0 {
		return nil
	}
	out := make(map[string]State, len(fs))
	for name, f := range fs {
		out[name] = f()
	}
	return out
}
