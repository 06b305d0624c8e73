package assemble

import (
	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/gateway/bindings/mcsd"
	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/server"
	"github.com/ferrofed/ferrofed/gateway/tracing"
)

// Option changes what New builds beyond what a configuration file can say. serve and
// `config check` pass none; the tests of a whole gateway (test/gatewaytest) pass what
// they must inject into the production wiring: a recorder that refuses, a spool file
// system that fails, a shorter delivery interval, a count of cache invalidations, a
// member transport of a benchmark's own.
type Option func(*options)

type options struct {
	recorder   bindings.Recorder
	audit      []func(*audit.Options)
	invalidate []func()
	directory  []func(*mcsd.Options)
	federation []func(*federation.Options)
	server     []server.Option
	exporter   tracing.Exporter
}

// WithSpanExporter exports the spans of [tracing] through e instead of OTLP/HTTP (an
// in-memory exporter); without [tracing] nothing is traced either way.
func WithSpanExporter(e tracing.Exporter) Option { return func(o *options) { o.exporter = e } }

// WithRecorder records every access and exchange through r instead of the audit
// trail, which is still built when [audit] is present but records nothing of the others'.
func WithRecorder(r bindings.Recorder) Option { return func(o *options) { o.recorder = r } }

// WithAuditOptions changes the audit trail's options once New filled them in.
func WithAuditOptions(f func(*audit.Options)) Option {
	return func(o *options) { o.audit = append(o.audit, f) }
}

// WithInvalidate calls f, after the patient flow's own, each time the identity feed
// clears the flow's caches.
func WithInvalidate(f func()) Option {
	return func(o *options) { o.invalidate = append(o.invalidate, f) }
}

// WithServerOptions passes opts to server.New after the parts' registrations.
func WithServerOptions(opts ...server.Option) Option {
	return func(o *options) { o.server = append(o.server, opts...) }
}

// WithDirectoryOptions changes the mCSD directory's options once New filled them in
// (limits of a test's own).
func WithDirectoryOptions(f func(*mcsd.Options)) Option {
	return func(o *options) { o.directory = append(o.directory, f) }
}

// WithFederationOptions changes the federation surface's options once New filled them
// in (a member transport of a benchmark's own: one that counts its dials, or answers
// off the network).
func WithFederationOptions(f func(*federation.Options)) Option {
	return func(o *options) { o.federation = append(o.federation, f) }
}
