package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// Drained records the drain as a span and pushes every span still queued: the
// server calls it after drain step 4 and the termination message, alongside the
// metrics push and bounded as it is (ctx's deadline). The span "drain" starts when
// SIGTERM came (start) and lasts m.Drain; its four children are the steps of the
// termination message, with its outcome, cut connections and abandoned bindings as
// attributes. Spans that could not be pushed are logged, and counted dropped.
func (t *Tracing) Drained(ctx context.Context, start time.Time, m lifecycle.TerminationMessage) {
	t.drainSpan(start, m)
	begin := time.Now()
	left, _ := t.queue.close(ctx)
	took := time.Since(begin).String()
	if left > 0 {
		t.log.Error(context.Cause(ctx), "Could not push the last spans before exit: dropped them", "spans", left, "took", took)
		return
	}
	t.log.Info("Pushed the last spans", "took", took)
}

// drainSpan makes the drain's span and its steps' children, from their durations.
func (t *Tracing) drainSpan(start time.Time, m lifecycle.TerminationMessage) {
	abandoned := append([]string(nil), m.Abandoned...)
	ctx, span := t.tracer.Start(context.Background(), SpanDrain, trace.WithNewRoot(), trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
			AttrDrainOutcome.String(m.Outcome),
			AttrDrainCutConnections.Int(m.CutConnections),
			AttrDrainAbandoned.StringSlice(abandoned)))
	at := start
	for _, step := range []struct {
		name string
		took time.Duration
		kv   []attribute.KeyValue
	}{
		{SpanDrainDelay, m.Steps.DrainDelay, nil},
		{SpanDrainListenerClosed, m.Steps.ListenerClosed, nil},
		{SpanDrainInFlight, m.Steps.InFlight, []attribute.KeyValue{AttrDrainOutcome.String(m.Outcome), AttrDrainCutConnections.Int(m.CutConnections)}},
		{SpanDrainBindings, m.Steps.Bindings, []attribute.KeyValue{AttrDrainAbandoned.StringSlice(abandoned)}},
	} {
		_, s := t.tracer.Start(ctx, step.name, trace.WithTimestamp(at), trace.WithAttributes(step.kv...))
		at = at.Add(step.took)
		s.End(trace.WithTimestamp(at))
	}
	if m.Outcome != lifecycle.DrainCompleted || len(abandoned) > 0 {
		span.SetStatus(codes.Error, "")
	}
	span.End(trace.WithTimestamp(start.Add(m.Drain)))
}
