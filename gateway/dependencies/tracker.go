package dependencies

import (
	"encoding/json"
	"maps"
	"slices"
	"sync"
)

// Tracker holds the last observed state of each member endpoint and service. It is
// safe for concurrent use; observations are cheap (one mutex, no allocation) because
// every member call of every client request makes one.
type Tracker struct {
	mu        sync.RWMutex
	endpoints map[string]State
	services  map[string]State
	faults    map[string]string
	// live are the keys whose state is read when the report is (live.go).
	live map[string]func() (State, string)
}

// NewTracker returns a tracker that knows the given member endpoint ids, all unknown.
func NewTracker(endpointIDs ...string) *Tracker {
	t := &Tracker{endpoints: map[string]State{}, services: map[string]State{}, faults: map[string]string{}}
	t.SetEndpoints(endpointIDs)
	return t
}

// SetEndpoints replaces the set of member endpoints, as a registry reload does: an id
// kept keeps its state, a new id is unknown, a removed id leaves the report.
func (t *Tracker) SetEndpoints(ids []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	next := make(map[string]State, len(ids))
	for _, id := range ids {
		if s, ok := t.endpoints[id]; ok {
			next[id] = s
		} else {
			next[id] = Unknown
		}
	}
	t.endpoints = next
}

// ObserveEndpoint records what one request to a member endpoint saw, and returns the
// state it replaced (changed is false when the state stayed, or the id is unknown). An
// id the tracker does not know (a member removed by a reload while its request ran) is
// ignored, so a late answer never resurrects it.
func (t *Tracker) ObserveEndpoint(id string, s State) (prev State, changed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev, ok := t.endpoints[id]
	if !ok {
		return "", false
	}
	t.endpoints[id] = s
	return prev, prev != s
}

// Endpoint returns the state of one member endpoint; ok is false for an unknown id.
func (t *Tracker) Endpoint(id string) (s State, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s, ok = t.endpoints[id]
	return s, ok
}

// SetService records the state of a configured binding under its report key
// ("resolver", "consent", "directory", ...). fault, when not empty, is reported beside
// it as "<name>_fault" (a class such as "registry-invalid", never a URL or a member).
func (t *Tracker) SetService(name string, s State, fault string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.services[name] = s
	if fault == "" {
		delete(t.faults, name)
	} else {
		t.faults[name] = fault
	}
}

// RemoveService drops a binding that is no longer configured from the report.
func (t *Tracker) RemoveService(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.services, name)
	delete(t.faults, name)
	delete(t.live, name)
}

// AnyEndpointUp reports whether at least one member endpoint was last seen up: the
// optional `members` readiness check (health.member_ready_check).
func (t *Tracker) AnyEndpointUp() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, s := range t.endpoints {
		if s == Up {
			return true
		}
	}
	return false
}

// Report is a snapshot of the tracker.
func (t *Tracker) Report() Report {
	live := t.liveStates()
	t.mu.RLock()
	defer t.mu.RUnlock()
	r := Report{Endpoints: maps.Clone(t.endpoints), Services: maps.Clone(t.services), Faults: maps.Clone(t.faults)}
	for name, l := range live {
		if _, ok := t.live[name]; !ok { // removed meanwhile
			continue
		}
		if r.Services == nil {
			r.Services = map[string]State{}
		}
		r.Services[name] = l.state
		if l.fault != "" {
			if r.Faults == nil {
				r.Faults = map[string]string{}
			}
			r.Faults[name] = l.fault
		}
	}
	return r
}

// Report is the body of {base}/operator/dependencies: ids and states only.
type Report struct {
	// Endpoints maps each member endpoint id to its state.
	Endpoints map[string]State
	// Services maps each configured binding's report key to its state.
	Services map[string]State
	// Faults maps a binding's report key to the class of its fault.
	Faults map[string]string
}

// MarshalJSON writes the report in the shape of
// docs/bindings.md#the-dependency-report: "endpoints" as an object, each binding as a
// top-level key, each fault as "<binding>_fault". Keys are sorted (by encoding/json
// for maps, explicitly here for the top level) so bodies are stable.
func (r Report) MarshalJSON() ([]byte, error) {
	top := make(map[string]any, 1+len(r.Services)+len(r.Faults))
	endpoints := r.Endpoints
	if endpoints == nil {
		endpoints = map[string]State{}
	}
	top["endpoints"] = endpoints
	for _, name := range slices.Sorted(maps.Keys(r.Services)) {
		top[name] = r.Services[name]
	}
	for _, name := range slices.Sorted(maps.Keys(r.Faults)) {
		top[name+"_fault"] = r.Faults[name]
	}
	return json.Marshal(top)
}
