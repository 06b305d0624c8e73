package outbound

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ferrofed/ferrofed/gateway/tracing"
)

// Traced is the round tripper the member calls and the bindings trace their
// exchanges with (gateway/tracing, docs/tracing.md): each request sent under a span
// gets a client span named Name and carries its traceparent (and tracestate, never
// baggage: a baggage header the request had is removed), so that the member's or the
// service's own trace joins the gateway's. Without a span in the request's context
// (no [tracing]) the request goes out as it came, at no cost.
type Traced struct {
	// Base sends the request.
	Base http.RoundTripper
	// Name is the span's name: tracing.SpanMemberCall, or tracing.SpanBindingPrefix
	// and the binding's report key.
	Name string
	// Attributes, when set, are the span's attributes for r (the member's id, the
	// binding's key): the allow-list drops any other.
	Attributes func(r *http.Request) []attribute.KeyValue
	// Outcome, when set, is the attribute of the exchange's outcome, from whether an
	// answer came back and its status (a binding's ferrofed.binding.outcome).
	Outcome func(answered bool, status int) attribute.KeyValue
	// Root, when set, is the provider a request sent without a span in its context
	// starts a trace of its own from (a binding's exchange no request made: the
	// directory's refresh, the audit delivery); nil leaves such a request untraced.
	Root trace.TracerProvider
}

// RoundTrip sends r under a client span, which ends with the answer's head (its
// status) or the error.
func (t *Traced) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	root := t.Root != nil && !trace.SpanContextFromContext(ctx).IsValid()
	var attrs []attribute.KeyValue
	if t.Attributes != nil && (root || tracing.Recording(ctx)) {
		attrs = t.Attributes(r)
	}
	var span trace.Span
	if root {
		ctx, span = tracing.Root(ctx, t.Root, t.Name, attrs...)
	} else {
		ctx, span = tracing.Client(ctx, t.Name, attrs...)
	}
	if !span.SpanContext().IsValid() {
		return t.Base.RoundTrip(r)
	}
	defer span.End()
	r = r.Clone(ctx)
	r.Header.Del("Baggage")
	tracing.Inject(ctx, r.Header)
	res, err := t.Base.RoundTrip(r)
	if err != nil {
		if t.Outcome != nil {
			span.SetAttributes(t.Outcome(false, 0))
		}
		span.SetStatus(codes.Error, "")
		return nil, err
	}
	span.SetAttributes(tracing.AttrStatusCode.Int(res.StatusCode))
	if t.Outcome != nil {
		span.SetAttributes(t.Outcome(true, res.StatusCode))
	}
	if res.ContentLength >= 0 {
		span.SetAttributes(tracing.AttrBodySize.Int64(res.ContentLength))
	}
	if res.StatusCode >= 500 {
		span.SetStatus(codes.Error, "")
	}
	return res, nil
}

// MemberSpan starts a member call's client span "member call" under ctx's span, with
// the member's id, never its URL (docs/tracing.md). Without a span in ctx (no
// [tracing]) it returns ctx and a span that records nothing, allocating nothing. The
// caller sends the span's traceparent (tracing.Inject) and ends it with EndMemberSpan.
func MemberSpan(ctx context.Context, id string) (context.Context, trace.Span) {
	if !tracing.Active(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracing.Client(ctx, tracing.SpanMemberCall, tracing.AttrMemberID.String(id))
}

// MemberSpanOn is MemberSpan for a request built already (a routed call, whose
// headers are the client's): under a span, out is sent with its context, and the
// client's traceparent, tracestate and baggage are replaced by the span's
// traceparent (and tracestate); without one, out goes as it came.
func MemberSpanOn(out *http.Request, id string) trace.Span {
	ctx, span := MemberSpan(out.Context(), id)
	if !span.SpanContext().IsValid() {
		return span
	}
	*out = *out.WithContext(ctx)
	for _, h := range []string{"Baggage", "Traceparent", "Tracestate"} {
		out.Header.Del(h)
	}
	tracing.Inject(ctx, out.Header)
	return span
}

// EndMemberSpan ends a member call's span with the call's outcome (Classify: as
// meta.federation names it), its status, and size, the bytes read or announced (< 0:
// unknown); an outcome other than OK is an error status. It does nothing to a span
// that does not record.
func EndMemberSpan(span trace.Span, call Call, size int64) {
	if !span.IsRecording() {
		return
	}
	outcome, _, _ := Classify(call)
	span.SetAttributes(tracing.AttrMemberOutcome.String(string(outcome)))
	if call.Status != 0 {
		span.SetAttributes(tracing.AttrStatusCode.Int(call.Status))
	}
	if size >= 0 {
		span.SetAttributes(tracing.AttrBodySize.Int64(size))
	}
	if outcome != OK {
		span.SetStatus(codes.Error, "")
	}
	span.End()
}
