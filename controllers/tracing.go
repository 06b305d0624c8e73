package controllers

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The operator's own spans (docs/tracing.md, "The operator's own spans"): one per
// reconcile of a Gateway, when `ferrofed operator` has a --tracing-endpoint.
const (
	// SpanReconcileGateway names the span of one reconcile of a Gateway.
	SpanReconcileGateway = "reconcile Gateway"
	// TracerScope is the instrumentation scope of the operator's spans.
	TracerScope = "github.com/ferrofed/ferrofed/controllers"
)

// The attributes of a reconcile's span: which Gateway, and how the reconcile ended;
// never anything of its spec, its configuration or the objects it owns.
const (
	AttrNamespace    = attribute.Key("k8s.namespace.name")
	AttrGateway      = attribute.Key("ferrofed.gateway.name")
	AttrResult       = attribute.Key("ferrofed.reconcile.result")
	AttrRequeueAfter = attribute.Key("ferrofed.reconcile.requeue_after_ms")
	AttrErrorClass   = attribute.Key("error.type")
)

// Values of AttrResult.
const (
	ResultDone    = "done"
	ResultRequeue = "requeue"
	ResultError   = "error"
)

// tracedReconciler wraps a reconciler with a span per reconcile.
type tracedReconciler struct {
	inner  reconcile.Reconciler
	tracer trace.Tracer
}

// traced is r with a span per reconcile, or r itself without a tracer provider.
func traced(r reconcile.Reconciler, tp trace.TracerProvider) reconcile.Reconciler {
	if tp == nil {
		return r
	}
	return &tracedReconciler{inner: r, tracer: tp.Tracer(TracerScope)}
}

func (t *tracedReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx, span := t.tracer.Start(ctx, SpanReconcileGateway, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrNamespace.String(req.Namespace), AttrGateway.String(req.Name)))
	defer span.End()
	res, err := t.inner.Reconcile(ctx, req)
	span.SetAttributes(ReconcileAttributes(res, err)...)
	if err != nil {
		// The class only: an error's text may quote the spec or the configuration.
		span.SetStatus(codes.Error, ErrorClass(err))
	}
	return res, err
}

// ReconcileAttributes are the attributes of a reconcile that returned res and err.
func ReconcileAttributes(res ctrl.Result, err error) []attribute.KeyValue {
	switch {
	case err != nil:
		return []attribute.KeyValue{AttrResult.String(ResultError), AttrErrorClass.String(ErrorClass(err))}
	case res.RequeueAfter > 0:
		return []attribute.KeyValue{AttrResult.String(ResultRequeue), AttrRequeueAfter.Int64(res.RequeueAfter.Milliseconds())}
	case res.Requeue: //nolint:staticcheck // Requeue is deprecated, still honoured by controller-runtime
		return []attribute.KeyValue{AttrResult.String(ResultRequeue)}
	}
	return []attribute.KeyValue{AttrResult.String(ResultDone)}
}

// ErrorClass is a reconcile error's class, from the apiserver's status reason
// ("Conflict", "Forbidden", "Timeout", ...), "Canceled" or "DeadlineExceeded", or
// "other": a fixed vocabulary, never the error's text.
func ErrorClass(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "Canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	}
	if r := apierrors.ReasonForError(err); r != "" && r != "Unknown" {
		return string(r)
	}
	return "other"
}
