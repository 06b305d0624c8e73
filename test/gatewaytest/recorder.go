package gatewaytest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Recorder is the audit trail of the tests that inject one where a binding takes a
// recorder: it keeps every event, or refuses every one while Fail is set, as a full
// spool does.
type Recorder struct {
	Fail   atomic.Bool
	mu     sync.Mutex
	events [][]byte
}

// Record keeps ev, or refuses it while Fail is set.
func (r *Recorder) Record(_ context.Context, ev []byte) error {
	if r.Fail.Load() {
		return errors.New("audit record not stored: spool full")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	return nil
}

// Events are the events kept so far.
func (r *Recorder) Events() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Count is how many events kept so far hold substr.
func (r *Recorder) Count(substr string) int {
	n := 0
	for _, e := range r.Events() {
		if strings.Contains(string(e), substr) {
			n++
		}
	}
	return n
}
