package gatewaytest

import (
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// Log keeps a gateway's log lines, for the tests that read what it logged (or that it
// logged no body of a service).
type Log struct {
	mu    sync.Mutex
	lines []string
}

// Logger is a logger writing to l.
func (l *Log) Logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{})
}

// String is every line so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// Find is the first line holding every one of subs, "" for none.
func (l *Log) Find(subs ...string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for _, line := range l.lines {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		return line
	}
	return ""
}
