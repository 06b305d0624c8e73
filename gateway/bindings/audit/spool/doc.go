// Package spool is the audit trail's crash-safe queue: every AuditEvent the gateway
// emits for an audited destination is written here, and made durable, before the
// exchange it records counts as audited; a delivery loop (package deliver) takes the
// records out, oldest first, and acknowledges them once the repository has them. In
// clinical software a lost audit record is a compliance failure, so the spool is
// built to lose nothing on a crash, a power loss or a full disk, and to open whatever
// it finds in its folder.
//
// # On disk
//
// One spool is one directory (<spool_dir>/<destination>):
//
//	seg-<first seq, 16 hex digits>.log   segments, records appended
//	cursor                               the durable watermark
//	quarantine/<seq>.json                a record the repository refused for good
//	quarantine/<seq>.reason.json         why (status, issue codes, attempts, time)
//	quarantine/corrupt-<segment>-<offset>.bin   damaged bytes found at open, raw
//	quarantine/oversize-<segment>        a segment file too large to be one of ours
//
// A record is a 20-byte header and the payload (the AuditEvent JSON), little-endian:
// magic F3 A5, version 1, flags 0, the payload length (u32), a CRC-32C (Castagnoli)
// over the seq and the payload (u32), the seq (u64). Seqs grow by one per record and
// never repeat; a gap is possible (records of a failed sync are never reused). A
// segment is created preallocated: SegmentBytes of zeros, written and synced, its
// directory entry synced, before its first record; records are written over the
// zeros from the start, so that a group's fdatasync changes no metadata (no size, no
// block allocation: on ext4 no journal commit). Zeros where a record header would
// start are the segment's end. A segment is closed once the next record would take
// it past SegmentBytes; each Open starts a new one for its appends, so a segment left
// by an earlier run is only read.
//
// The cursor is one line, "ferrofed-spool-cursor 1 <watermark> <crc32c>": every record
// at or below the watermark has been delivered or quarantined.
//
// # Guarantees
//
//   - Append returns only after the fdatasync that covers its record has returned
//     (and, for a new segment, after the directory's fsync that makes its name
//     durable). One writer goroutine does all writing; the appends that queue while a
//     sync runs share the next one (group commit): an Append adds its record to the
//     group being formed under a mutex, and the writer answers a whole group by
//     closing one channel once its sync returned. The records of a synced group stay
//     in memory (up to 4 MiB) for the reader, which reads the file only for what it
//     did not keep (a backlog, or what an earlier run left).
//   - A failed write or sync poisons the segment: the spool cuts it back to its last
//     synced length where it can, closes it, and fails the appends of that group with
//     ErrStorage; the next append opens a new segment. A record whose Append failed
//     may still be delivered (its bytes may have reached the disk), never the reverse.
//   - The cap (MaxBytes: the segment files on disk, each SegmentBytes from its
//     creation, the quarantine's files, each in whole 4 KiB blocks, and MetaBytes for
//     the cursor and folders) refuses with ErrFull a record that needs a new segment
//     the cap has no room for, and seals the segment being written so that it is
//     removed once delivered; nothing already spooled is ever dropped to make room.
//   - Delivery is at-least-once. The watermark moves over records acknowledged in
//     order; acknowledgements past a gap wait in memory. The cursor is written to a
//     tmp file, synced, renamed and its directory synced, and only then are the
//     segments wholly below it unlinked; Open removes a segment it finds below the
//     cursor and does not miss one that is gone. The cursor is written lazily, not at
//     every Ack: by the Ack that brings the records acknowledged since the last write
//     to CursorEvery (default 256), by one after which a segment is wholly delivered
//     (so that it is unlinked at once), CursorInterval (default 1 s) after an Ack that
//     left it behind, by a quarantine, and at Close. After a crash everything above
//     the durable watermark is delivered again: the records that were in flight (the
//     delivery loop's InFlight × BatchEntries, at most 100) and fewer than
//     CursorEvery already acknowledged — none acknowledged more than CursorInterval
//     before the crash, once the timer had its turn. Each AuditEvent carries a stable
//     event id (deliver.EventIDSystem) so that a repository can tell them apart.
//   - Open never fails on content. Zeros to the end of a segment are its unused
//     preallocated rest (not reported), and a segment of zeros only holds nothing. A
//     torn tail of the last segment holding records (a short record, or a bad one
//     with nothing good after it) is cut: such a record was never
//     acknowledged, since acknowledgement waits for the sync. A bad record anywhere
//     else is copied raw to quarantine and the scan goes on at the next valid header.
//     Unknown files and directories are left alone, except a directory named cursor
//     and a file named quarantine, which are moved aside; an unreadable cursor counts as
//     none (everything found is delivered again), a huge length field is caught before
//     anything is read, an over-large segment file is moved into quarantine whole.
//     Report says what Open found.
//   - A record the repository will never accept is written to quarantine (body and
//     reason, each by tmp+fsync+rename) before it counts as done. List shows ids and
//     reasons, never bodies; Retry appends the body again (same bytes, same event
//     id), Drop removes it.
//   - Close syncs and closes the segment being written within its context's deadline
//     and deletes nothing.
//
// All file access goes through FS, so that tests run the spool on a file system that
// forgets what was never synced (test/crashfs).
//
// # State
//
// The dependency report's audit_repository and audit_feed keys are State(Snapshot()),
// read at each report request (docs/audit-spool.md): degraded while anything sits in
// quarantine, while a failed delivery is being retried, and while a record waits (it
// is older than one delivery interval, WaitAfter, or was left by a previous run; a
// record merely enqueued does not wait); otherwise unknown until something was
// spooled and a delivery came back, and up once the last delivery succeeded.
package spool
