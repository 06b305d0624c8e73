package federation

import "github.com/ferrofed/ferrofed/gateway/calllimit"

// What the tests of package federation_test read of a running surface that no answer
// shows.

// Limiter is the member-call limiter in force: patient_test.go fills its queue, and
// reads how many calls a search holds of it.
func (s *Surface) Limiter() *calllimit.Limiter { return s.lim.Load() }
