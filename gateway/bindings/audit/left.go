package audit

import (
	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// closedSpool is what a destination's spool held when drain step 4 (or the hand-over)
// closed it, and what this run delivered from it.
type closedSpool struct {
	snap      spool.Snapshot
	delivered int64
}

// delivered is how many records a run delivered: the watermark moved over them since
// Open, and they are not among the records this run put into quarantine.
func delivered(s spool.Snapshot, quarantinedAtOpen int) int64 {
	quarantined := max(0, s.Quarantined-quarantinedAtOpen)
	return max(0, int64(s.Passed)-int64(quarantined))
}

// spoolLeft is what a spool still holds that was never delivered, as the drain's and
// the hand-over's messages report it (docs/audit-spool.md, "Hand-over"): the records
// above its watermark and the quarantine's entries, and their bytes on disk.
func spoolLeft(destination string, s spool.Snapshot) lifecycle.SpoolLeft {
	l := lifecycle.SpoolLeft{
		Destination: destination,
		Records:     int64(s.Pending) + int64(s.Quarantined),
		Bytes:       s.PendingBytes + s.QuarantineBytes,
	}
	if l.Records > 0 && l.Bytes == 0 {
		l.Bytes = 1 // never "records in no bytes": the reader refuses it
	}
	return l
}

// SpoolsLeft is what each destination's spool held when drain step 4 closed it, in
// the trail's order (repository, then feed), for the drain's termination message; a
// spool not closed (never opened, or its stop abandoned) is left out.
func (t *Trail) SpoolsLeft() []lifecycle.SpoolLeft {
	var out []lifecycle.SpoolLeft
	for _, d := range t.dests {
		if c := d.left.Load(); c != nil {
			out = append(out, spoolLeft(d.short, c.snap))
		}
	}
	return out
}
