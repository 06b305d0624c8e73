package outbound

import (
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
