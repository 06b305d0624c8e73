package spool

import "github.com/ferrofed/ferrofed/gateway/dependencies"

// Snapshot is the spool as the dependency report reads it.
type Snapshot struct {
	// EverSpooled: a record was stored since Open, or Open found records or
	// quarantine entries.
	EverSpooled bool
	// LastDeliveryOK: the delivery loop's last delivery succeeded.
	LastDeliveryOK bool
	// Retrying: a failed delivery is being retried.
	Retrying bool
	// Waiting counts the records undelivered for longer than one delivery interval,
	// and those left by a previous run.
	Waiting int
	// Quarantined counts the quarantine's entries.
	Quarantined int
	// Pending counts the records above the watermark (handed out or not).
	Pending int
	// Bytes is the size of the segment files on disk, each in whole 4 KiB blocks.
	Bytes int64
	// Footprint is what the spool takes on disk, as its cap counts it: Bytes,
	// QuarantineBytes and MetaBytes.
	Footprint int64
	// PendingBytes is the bytes on disk (headers included) of the Pending records.
	PendingBytes int64
	// QuarantineBytes is what the quarantine's files take on disk, each rounded up to
	// whole 4 KiB blocks.
	QuarantineBytes int64
	// Fault is FaultFull or FaultStorage while the spool cannot store: since an append
	// failed so, until one is stored (or, when full, until delivered segments are
	// removed); "" otherwise.
	Fault string
	// Passed counts the records the watermark moved over since Open: delivered, or
	// quarantined by the delivery loop.
	Passed uint64
}

// Snapshot reads the spool's state now.
func (s *Spool) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	cutoff := s.opts.Now().Add(-s.opts.WaitAfter)
	waiting := s.leftover
	for _, t := range s.times {
		if !t.at.Before(cutoff) {
			break
		}
		waiting++
	}
	return Snapshot{
		EverSpooled:     s.everSpooled || s.report.Pending > 0 || s.quarantined > 0,
		LastDeliveryOK:  s.lastDeliveryOK,
		Retrying:        s.retrying,
		Waiting:         waiting,
		Quarantined:     s.quarantined,
		Pending:         s.leftover + len(s.times),
		Bytes:           s.diskBytes,
		Footprint:       s.footprintLocked(),
		PendingBytes:    s.pendingBytes,
		QuarantineBytes: s.quarantineSize,
		Passed:          s.ackedCount,
		Fault:           s.fault,
	}
}

// State is the rule of the audit_repository and audit_feed keys (docs/audit-spool.md):
// failing while the spool cannot store (Fault says why); degraded while anything sits in quarantine, while a failed delivery is retried and
// while a record waits; else unknown until something was spooled and delivered; up
// when the last delivery succeeded.
func State(s Snapshot) dependencies.State {
	switch {
	case s.Fault != "":
		return dependencies.Failing
	case s.Quarantined > 0, s.Retrying, s.Waiting > 0:
		return dependencies.Degraded
	case !s.EverSpooled:
		return dependencies.Unknown
	case s.LastDeliveryOK:
		return dependencies.Up
	default:
		// Spooled, nothing waits yet, no delivery has come back: not yet observed.
		return dependencies.Unknown
	}
}
