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
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			extra := ""
			for _, d := range detail {
				extra += " " + d()
			}
			t.Fatalf("never: %s%s", what, extra)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
