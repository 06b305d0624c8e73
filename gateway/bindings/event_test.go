package bindings

import (
	"errors"
	"net/http"
	"testing"
)

// The AuditEvent.outcome of each kind of exchange, and the failure the client gets.
func TestAnExchangesOutcomeAndFailure(t *testing.T) {
	cases := []struct {
		name    string
		ex      Exchange
		outcome string
		status  int
	}{
		{"an answer", Exchange{Sent: true, Answered: true, Status: 200}, "0", http.StatusBadGateway},
		{"a 4xx", Exchange{Sent: true, Answered: true, Status: 403}, "4", http.StatusBadGateway},
		{"an answer past the cap", Exchange{Sent: true, Answered: true, Status: 200, TooLarge: true}, "4", http.StatusBadGateway},
		{"a 5xx", Exchange{Sent: true, Answered: true, Status: 503}, "8", http.StatusBadGateway},
		{"no answer", Exchange{Sent: true, Err: errors.New("reset")}, "8", http.StatusBadGateway},
		{"past the budget", Exchange{Sent: true, Expired: true, Err: errors.New("deadline")}, "8", http.StatusGatewayTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.ex.AuditOutcome(); got != tc.outcome {
				t.Errorf("AuditOutcome = %q, want %q", got, tc.outcome)
			}
			if f := tc.ex.FailureOf("resolver", "answered badly"); f.Status != tc.status || f.Code == "" || f.Diagnostics == "" {
				t.Errorf("FailureOf = %+v, want status %d", f, tc.status)
			}
		})
	}
	if _, err := (QueryEvent{Key: "resolver"}).Event(); err == nil {
		t.Error("an event without its query was built")
	}
	if _, err := (QueryEvent{Query: []byte("q")}).Event(); err == nil {
		t.Error("an event without its binding was built")
	}
}
