package bindings

import "context"

// Stopper is one named process of a binding, stopped in drain step 4: the
// composition root registers it with the server under Name, the binding's report
// key, as the drain's log and termination message spell it. Stop is given the
// bindings budget as its context's deadline; it returns when the process stopped, not
// when the context ends, so that a process that overran the budget is abandoned by
// the server by its own name.
type Stopper struct {
	Name string
	Stop func(ctx context.Context) error
	// Report, when set, gives the key/value pairs the log line of drain step 4
	// carries for this process once it stopped.
	Report func() []any
}
