package double_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ferrofed/ferrofed/test/double"
)

// fatalTB records a Fatalf instead of failing the test that runs it.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls wait on a fatalTB in its own goroutine (Fatalf ends it) and returns what
// it failed with, "" when it returned.
func run(t *testing.T, wait func(testing.TB)) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait(f)
	}()
	<-done
	return f.msg
}

func TestEventuallyWithinWaitsForTheConditionAndGivesUpAtItsBound(t *testing.T) {
	n := 0
	if msg := run(t, func(tb testing.TB) {
		double.EventuallyWithin(tb, time.Minute, "the third poll", func() bool { n++; return n == 3 })
	}); msg != "" || n != 3 {
		t.Fatalf("a condition true at the third poll: failed %q after %d polls", msg, n)
	}
	calls := 0
	msg := run(t, func(tb testing.TB) {
		double.EventuallyWithin(tb, 50*time.Millisecond, "never true", func() bool { calls++; return false },
			func() string { return "last seen: x" })
	})
	if !strings.Contains(msg, "never: never true (within 50ms) last seen: x") || calls < 2 {
		t.Fatalf("a condition never true: failed %q after %d polls", msg, calls)
	}
}
