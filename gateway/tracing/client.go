package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Client starts a client span named name (SpanMemberCall, SpanBindingPrefix + a
// binding's key) under ctx's span, with the attributes of attrs the allow-list takes
// (the others are dropped here, and would be by the exporter's filter). Without a
// span in ctx (no [tracing], or a process that made none) it returns ctx and a span
// that records nothing, allocating nothing. The caller ends the span.
func Client(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.SpanContext().IsValid() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(scope).Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(keep(attrs)...))
}

// Root starts a client span named name as the root of a trace of its own, from tp: a
// binding's exchange that no request made (the mCSD directory's refresh, the audit
// delivery, the PMIR subscription). With tp nil it returns ctx and a span that records
// nothing.
func Root(ctx context.Context, tp trace.TracerProvider, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if tp == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tp.Tracer(scope).Start(ctx, name, trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(keep(attrs)...))
}

// Internal starts an internal span named name under ctx's span (a step that costs
// time: the audit spool's append), as Client does: nothing without a span in ctx.
func Internal(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(scope).Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(keep(attrs)...))
}

// Event adds the allow-listed event name to ctx's span when it records (the
// page-token, merge and identity steps), with at most a count.
func Event(ctx context.Context, name string, attrs ...attribute.KeyValue) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || !allowedEvents[name] {
		return
	}
	span.AddEvent(name, trace.WithAttributes(keep(attrs)...))
}

// Inject sets traceparent (and tracestate) of ctx's span on h, so that the member's or
// the service's own trace joins the gateway's; it sets nothing without a span, and
// never baggage.
func Inject(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagator.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// Active reports whether ctx carries a span (sampled or not) a client span would be
// made under: a caller tests it before it builds the span's attributes, so that
// without [tracing] it allocates nothing.
func Active(ctx context.Context) bool { return trace.SpanContextFromContext(ctx).IsValid() }

// Recording reports whether ctx's span records (so that a caller computes the
// attributes of a child span only when they are kept).
func Recording(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }
