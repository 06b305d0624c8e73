package double

import (
	"testing"
	"time"
)

// Eventually polls cond every 10 ms until it holds, and fails t naming what when it
// still does not after 15 s: a bound on a wait, not a claim about timing. detail, when
// given, is added to the failure (the last value seen). Every gateway test waits
// through it.
func Eventually(t testing.TB, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	poll(t, 15*time.Second, 10*time.Millisecond, what, cond, detail)
}

// EventuallyWithin is Eventually bounded by within instead of 15 s, for the waits on
// a control plane or a node (a rollout, a webhook's certificate); it polls a
// hundred-and-twentieth of within apart, from 10 ms to 1 s, so that a long wait does
// not load the API server it watches.
func EventuallyWithin(t testing.TB, within time.Duration, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	poll(t, within, min(max(within/120, 10*time.Millisecond), time.Second), what, cond, detail)
}

func poll(t testing.TB, within, every time.Duration, what string, cond func() bool, detail []func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			extra := ""
			for _, d := range detail {
				extra += " " + d()
			}
			t.Fatalf("never: %s (within %s)%s", what, within, extra)
		}
		time.Sleep(every)
	}
}
