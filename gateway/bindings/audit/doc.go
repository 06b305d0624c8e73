// Package audit is the gateway's audit trail (docs/audit-spool.md): one BALP
// AuditEvent (FHIR R4) per access of the data plane, built by Event, a pure function,
// and stored by Trail.Record before the access is made.
//
// With [audit] destination = "log" each event is one structured log line and the
// dependency report has no audit key. With "repository" each event is appended to a
// crash-safe spool (package spool) and delivered from it by a loop (package deliver)
// to the audit record repository (report key audit_repository) and, with [audit.feed],
// to the FHIR Feed repository as well (audit_feed), each from a spool of its own:
// <audit.spool_dir>/repository and <audit.feed.spool_dir>/feed.
//
// # Guarantees
//
//   - Record returns only once the event is stored: synced to every spool, or
//     written to the log. No answer of the data plane leaves the gateway before its
//     event is stored. A federated search stores its event while the members are
//     asked (it costs the longer of the two, not their sum); a routed request, whose
//     answer is streamed, stores it before the member is asked. A request whose
//     event could not be stored answers 503 with an OperationOutcome under
//     on_failure = "refuse" (the default), with nothing of the members' answers in
//     it; under "serve" it is served and the failure logged.
//   - An event is delivered at least once; after a crash, those in flight are
//     delivered again with the same event id tag (meta.tag, EventIDSystem).
//   - Nothing undelivered is deleted: drain step 4 stops delivery, syncs and closes
//     the spools within server.bindings_drain_timeout_ms, and counts what is left in
//     its log line and in ferrofed_audit_undelivered_at_exit{destination}.
//
// # States (read from the spool at each report request)
//
//	unknown    nothing spooled since start, or no delivery came back yet
//	up         the last delivery succeeded and nothing waits
//	degraded   a failed delivery is retried, a record older than one delivery
//	           interval (5 s) waits or was left by a previous run, or anything sits
//	           in quarantine
//
// # Operator routes (operator token with its issuer's operator_scope)
//
//	GET    {base}/operator/audit/quarantine                        ids and reasons, never bodies
//	POST   {base}/operator/audit/quarantine/{destination}/{id}/retry  spool the record again
//	DELETE {base}/operator/audit/quarantine/{destination}/{id}        drop it for good
//
// with {destination} repository or feed.
package audit
