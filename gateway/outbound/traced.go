package outbound

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

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
}

// RoundTrip sends r under a client span, which ends with the answer's head (its
// status) or the error.
func (t *Traced) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	var attrs []attribute.KeyValue
	if t.Attributes != nil && tracing.Recording(ctx) {
		attrs = t.Attributes(r)
	}
	ctx, span := tracing.Client(ctx, t.Name, attrs...)
	if !span.SpanContext().IsValid() {
		return t.Base.RoundTrip(r)
	}
	defer span.End()
	r = r.Clone(ctx)
	r.Header.Del("Baggage")
	tracing.Inject(ctx, r.Header)
	res, err := t.Base.RoundTrip(r)
	if err != nil {
		span.SetStatus(codes.Error, "")
		return nil, err
	}
	span.SetAttributes(tracing.AttrStatusCode.Int(res.StatusCode))
	if res.StatusCode >= 500 {
		span.SetStatus(codes.Error, "")
	}
	return res, nil
}
