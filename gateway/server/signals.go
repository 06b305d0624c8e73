package server

import (
	"sync"
	"time"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// namedSignal is one drain signal, as k8s.io/apiserver's lifecycle signals are: a
// channel closed the first time the signal fires and never again, so that firing twice
// is harmless and every waiter, early or late, sees the same closed channel.
type namedSignal struct {
	name lifecycle.Signal
	once sync.Once
	ch   chan struct{}
}

func newNamedSignal(name lifecycle.Signal) *namedSignal {
	return &namedSignal{name: name, ch: make(chan struct{})}
}

// signal closes the channel the first time it is called and reports whether this call
// was that first time.
func (s *namedSignal) signal() (first bool) {
	s.once.Do(func() {
		close(s.ch)
		first = true
	})
	return first
}

// signaled is closed once the signal fired.
func (s *namedSignal) signaled() <-chan struct{} { return s.ch }

// drainSignals are one server's drain signals, one per lifecycle.Signal.
type drainSignals struct {
	mu  sync.Mutex
	all map[lifecycle.Signal]*namedSignal
}

func newDrainSignals() *drainSignals {
	d := &drainSignals{all: map[lifecycle.Signal]*namedSignal{}}
	for _, sig := range lifecycle.DrainSignals {
		d.all[sig] = newNamedSignal(sig)
	}
	return d
}

// get returns sig's signal; a name that is not a drain signal gets one too, which never
// fires, so that waiting on it blocks instead of panicking on a nil channel.
func (d *drainSignals) get(sig lifecycle.Signal) *namedSignal {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.all[sig]
	if !ok {
		s = newNamedSignal(sig)
		d.all[sig] = s
	}
	return s
}

// Signaled returns a channel closed when sig has fired.
func (s *Server) Signaled(sig lifecycle.Signal) <-chan struct{} {
	return s.signals.get(sig).signaled()
}

// fire signals sig, then, only the first time, tells the observer and logs the step with
// its duration since the step began. A second fire of the same signal does nothing. It
// returns the time the signal fired (the time the observer got), which is when the next
// step begins.
func (s *Server) fire(sig lifecycle.Signal, since time.Time, keysAndValues ...any) time.Time {
	now := time.Now()
	if !s.signals.get(sig).signal() {
		return now
	}
	if s.observer != nil {
		s.observer(sig, now)
	}
	s.log.Info("Drain step finished", append([]any{"signal", sig, "took", now.Sub(since).String()}, keysAndValues...)...)
	return now
}
