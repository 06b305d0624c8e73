package outbound

import (
	"testing"

	"github.com/ferrofed/ferrofed/gateway/dependencies"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		name    string
		call    Call
		outcome Outcome
		state   dependencies.State
		record  bool
	}{
		{"a 200 is ok and up", Call{Status: 200}, OK, dependencies.Up, true},
		{"a 400 is a node-error and up", Call{Status: 400}, NodeError, dependencies.Up, true},
		{"a 404 is a node-error and up", Call{Status: 404}, NodeError, dependencies.Up, true},
		{"a 500 is a node-error and failing", Call{Status: 500}, NodeError, dependencies.Failing, true},
		{"a 503 is a node-error and failing", Call{Status: 503}, NodeError, dependencies.Failing, true},
		{"a redirect is a node-error and up", Call{Status: 302}, NodeError, dependencies.Up, true},
		{"a 200 with an unusable body is a node-error and up", Call{Status: 200, Unusable: true}, NodeError, dependencies.Up, true},
		{"a refused connection is unreachable and down", Call{Broken: true}, Unreachable, dependencies.Down, true},
		{"a body reset after its status is unreachable and down", Call{Status: 200, Broken: true}, Unreachable, dependencies.Down, true},
		{"no answer within the budget is a timeout and down", Call{Broken: true, Expired: true}, Timeout, dependencies.Down, true},
		{"a body still arriving at the budget is a timeout and down", Call{Status: 200, Broken: true, Expired: true}, Timeout, dependencies.Down, true},
		{"a client that went away records nothing", Call{Broken: true, ClientGone: true}, Cancelled, "", false},
		{"a client's own deadline is the budget", Call{Broken: true, ClientGone: true, Expired: true}, Timeout, dependencies.Down, true},
		{"a request whose budget was gone before it was sent records nothing", Call{Broken: true, Expired: true, NotSent: true}, Timeout, "", false},
		{"a request that could not be sent records nothing", Call{Broken: true, NotSent: true}, Unreachable, "", false},
		{"an answer that beat the client's leaving still counts", Call{Status: 500, ClientGone: true}, NodeError, dependencies.Failing, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, s, r := Classify(c.call)
			if o != c.outcome || s != c.state || r != c.record {
				t.Fatalf("Classify(%+v) = %s, %q, %v; want %s, %q, %v", c.call, o, s, r, c.outcome, c.state, c.record)
			}
		})
	}
}
