// Package dependencies is the gateway's dependency tracker: the last passively observed
// state of every member endpoint (and, as bindings arrive, of every configured service),
// the JSON body of {base}/operator/dependencies and the ferrofed_dependency_state metric.
//
// The tracker never asks anything itself. Every request the gateway sends to a member
// for a client reports what it saw through Observe; a request that never left the
// gateway reports nothing. The report holds ids and states only: it is read by
// monitoring, and a URL, an address or a member's body must never leak through it.
package dependencies

import "net/http"

// State is the last observed state of one dependency.
type State string

// The states of the report. Degraded is set by bindings (a directory whose change was
// refused, an audit spool that waits); members are only ever up, down or failing.
const (
	// Up: the dependency answered below 500, whatever the request's validity.
	Up State = "up"
	// Down: no answer: refused, reset, or past the budget.
	Down State = "down"
	// Failing: the dependency answered 5xx.
	Failing State = "failing"
	// Degraded: the dependency answered but the gateway could not use what it said.
	Degraded State = "degraded"
	// Unknown: never observed since the gateway started (or since the id appeared).
	Unknown State = "unknown"
)

// States lists every state, in the order the metric exports them.
var States = []State{Up, Down, Failing, Degraded, Unknown}

// FromHTTP is the state one exchange observed: answered is false when no status line
// came back, or when the answer broke off (refused, reset, past the budget). The
// state reads the dependency's reachability and health, never whether the request was
// valid: a 400 or a 404 is up.
func FromHTTP(answered bool, status int) State {
	switch {
	case !answered:
		return Down
	case status >= http.StatusInternalServerError:
		return Failing
	default:
		return Up
	}
}
