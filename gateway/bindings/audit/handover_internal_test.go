package audit

import (
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

func TestHandOverOutcome(t *testing.T) {
	for _, c := range []struct {
		name                 string
		closeFailed          bool
		pending, quarantined int
		outcome              string
		exit                 int
	}{
		{"nothing left", false, 0, 0, lifecycle.HandOverEmpty, ExitEmpty},
		{"records left", false, 3, 0, lifecycle.HandOverTimeout, ExitTimeout},
		{"records and quarantine left", false, 3, 1, lifecycle.HandOverTimeout, ExitTimeout},
		{"only quarantine left", false, 0, 2, lifecycle.HandOverFailed, ExitQuarantine},
		{"cursor not written, nothing left", true, 0, 0, lifecycle.HandOverFailed, ExitFailed},
		{"cursor not written, records left", true, 5, 1, lifecycle.HandOverFailed, ExitFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			outcome, exit := handOverOutcome(c.closeFailed, c.pending, c.quarantined)
			if outcome != c.outcome || exit != c.exit {
				t.Fatalf("got %s, exit %d; want %s, exit %d", outcome, exit, c.outcome, c.exit)
			}
		})
	}
}

func TestValidateHandOverTimeout(t *testing.T) {
	for d, ok := range map[string]bool{"999ms": false, "1s": true, "10m": true, "24h": true, "24h1s": false, "-1s": false} {
		v, err := time.ParseDuration(d)
		if err != nil {
			t.Fatal(err)
		}
		if got := ValidateHandOverTimeout(v) == nil; got != ok {
			t.Errorf("%s: valid %v, want %v", d, got, ok)
		}
	}
}
