// Package binding is what every binding of the gateway is built from (docs/bindings.md):
// an outbound client with its own budget, a cap on what it reads and no redirects,
// credentials from files, the binding's state rule applied to the dependency tracker
// from each exchange, the metrics of its exchanges, and a Surface that stops the
// binding's long-running process in drain step 4.
//
// A binding is off unless its table is present; its report key is then absent. Each
// binding is a package of its own under gateway/bindings/ (audit first) and imports
// this one; this one knows no binding.
//
// # Metrics
//
//	ferrofed_binding_requests_total{binding,outcome}   counter; outcome is success (2xx),
//	                                                   redirect (3xx, never followed),
//	                                                   client_error (4xx), server_error (5xx)
//	                                                   or no_answer (refused, reset, past the budget)
//	ferrofed_binding_request_duration_seconds{binding} histogram, until the answer's headers
//
// # Drain step 4
//
// A binding with a process hands the server one Surface per process, named for the
// binding's report key ("audit_repository"). Its Stop returns when the process has
// stopped, whatever its context says: a process still stopping when
// server.bindings_drain_timeout_ms ran out is then the server's to abandon, with a
// warning naming it, and its name is in the drain's termination message (abandoned).
package bindings
