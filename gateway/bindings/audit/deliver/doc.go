// Package deliver takes an audit spool's records out, oldest first, and sends them to
// an IHE audit record repository over RESTful ATNA (ITI-20): FHIR create
// `POST [base]/AuditEvent` (application/fhir+json), or Bundles of type batch to
// `POST [base]` (at most 50 entries and 1 MiB of records), each entry answered with
// its own response.status. A batch that is not full waits up to Linger after its
// first record for more (the trail sets 50 ms), so that under load exchanges are
// fewer and fuller; every record waiting is already stored.
//
// Each answer is classified (Classify, docs/audit-spool.md): a 2xx is delivered and
// acknowledged to the spool; a 4xx other than 401, 403, 408 and 429 is a refusal no
// retry changes, and the record goes to the spool's quarantine with the status, the
// OperationOutcome's issue codes, the attempts and the time; 401 and 403 are a
// credential fault, retried and never quarantined; 5xx, 408, 429, a 3xx (redirects are
// never followed), a timeout and a refused connection are retried with a capped
// exponential backoff and full jitter (1 s doubling to 60 s by default), or after a
// Retry-After (seconds or HTTP-date, bounded by RetryAfterMax) when the answer carries
// one. A batch refused as a whole with such a 4xx (413 among them) is sent again one
// record at a time, so that one bad record cannot quarantine its neighbours.
//
// At most InFlight deliveries are under way. A delivery's slot is freed only when it
// and every delivery before it are done, so the records delivered and not yet
// acknowledged never exceed InFlight batches; with those the spool's lazy cursor adds
// fewer than its CursorEvery acknowledged records: that is what a crash can deliver
// twice. The stable event id tag (EventIDSystem, stamped by StampEventID
// before a record is spooled) lets the repository or its readers drop those
// duplicates.
package deliver
