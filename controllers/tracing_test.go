package controllers

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type fixedReconciler struct {
	res ctrl.Result
	err error
}

func (f fixedReconciler) Reconcile(context.Context, ctrl.Request) (ctrl.Result, error) {
	return f.res, f.err
}

// TestAReconcileIsOneSpanNamingTheGatewayAndItsOutcome: the span's name, its
// attributes (which Gateway, the result, the requeue, the error's class), and nothing
// else: an error's text, which may quote the spec, stays out of the span.
func TestAReconcileIsOneSpanNamingTheGatewayAndItsOutcome(t *testing.T) {
	secret := "endpoint = 'https://token@collector.example'"
	cases := []struct {
		name   string
		inner  fixedReconciler
		want   map[string]string
		status codes.Code
	}{
		{"done", fixedReconciler{}, map[string]string{"ferrofed.reconcile.result": "done"}, codes.Unset},
		{"requeued after", fixedReconciler{res: ctrl.Result{RequeueAfter: 1500 * time.Millisecond}},
			map[string]string{"ferrofed.reconcile.result": "requeue", "ferrofed.reconcile.requeue_after_ms": "1500"}, codes.Unset},
		{"a conflict", fixedReconciler{err: apierrors.NewConflict(schema.GroupResource{Resource: "gateways"}, "edge", errors.New(secret))},
			map[string]string{"ferrofed.reconcile.result": "error", "error.type": "Conflict"}, codes.Error},
		{"an error of its own", fixedReconciler{err: fmt.Errorf("render: %s", secret)},
			map[string]string{"ferrofed.reconcile.result": "error", "error.type": "other"}, codes.Error},
		{"a deadline", fixedReconciler{err: fmt.Errorf("apply: %w", context.DeadlineExceeded)},
			map[string]string{"ferrofed.reconcile.result": "error", "error.type": "DeadlineExceeded"}, codes.Error},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			r := traced(tc.inner, tp)
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "clinical", Name: "edge"}}
			if _, err := r.Reconcile(context.Background(), req); !errors.Is(err, tc.inner.err) {
				t.Fatalf("the wrapper changed the error: %v", err)
			}
			spans := exp.GetSpans()
			if len(spans) != 1 || spans[0].Name != SpanReconcileGateway {
				t.Fatalf("spans = %v, want one %q", spans, SpanReconcileGateway)
			}
			got := map[string]string{}
			for _, kv := range spans[0].Attributes {
				got[string(kv.Key)] = kv.Value.String()
			}
			want := map[string]string{"k8s.namespace.name": "clinical", "ferrofed.gateway.name": "edge"}
			for k, v := range tc.want {
				want[k] = v
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("attributes %v, want %v", got, want)
			}
			if s := spans[0].Status; s.Code != tc.status || (s.Description != "" && s.Description != got["error.type"]) {
				t.Errorf("status %+v, want %v with the class alone", s, tc.status)
			}
			if len(spans[0].Events) != 0 {
				t.Errorf("events %v, want none (an error's text stays out)", spans[0].Events)
			}
		})
	}
}

func TestWithoutATracerProviderTheReconcilerIsItself(t *testing.T) {
	inner := fixedReconciler{}
	if r := traced(inner, nil); r != reconcile.Reconciler(inner) {
		t.Errorf("traced(r, nil) = %T, want r itself", r)
	}
}
