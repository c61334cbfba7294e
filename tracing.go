package htq

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/htqueue/htq/internal/base"
)

// TracerName is the name of the OpenTelemetry tracer (the
// instrumentation scope) of htq's spans.
const TracerName = "github.com/htqueue/htq"

// Attributes of htq's spans besides OpenTelemetry's messaging ones.
const (
	// AttrTaskType is the task's type.
	AttrTaskType = attribute.Key("htq.task.type")
	// AttrAttempt is the attempt's number, from 1.
	AttrAttempt = attribute.Key("htq.task.attempt")
	// AttrOutcome is what became of the task after the attempt:
	// "success", "retry", "archived", "lease_lost" (the outcome was not
	// written: the worker no longer held the task) or "requeued" (the
	// server shut down and sent it back to pending).
	AttrOutcome = attribute.Key("htq.task.outcome")
)

// Span names: OpenTelemetry's messaging operation names.
const (
	spanEnqueue = "send"
	spanProcess = "process"
)

// msgSystem is the messaging.system of htq's spans.
var msgSystem = semconv.MessagingSystemKey.String("htq")

// tracing is how a Client or a Server traces: the tracer of its spans and
// the propagator that writes the enqueuer's trace context into a task's
// headers and reads it back for the handler. With OpenTelemetry's global
// defaults and nothing set by the application, both are no-ops.
type tracing struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// newTracing returns the tracing of tp and prop, or of otel's global
// provider and propagator for a nil one (they delegate to what the
// application sets later with otel.SetTracerProvider and
// otel.SetTextMapPropagator).
func newTracing(tp trace.TracerProvider, prop propagation.TextMapPropagator) tracing {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	return tracing{tracer: tp.Tracer(TracerName), prop: prop}
}

// startEnqueue starts the producer span of an enqueue into queue ("" for
// a batch into several queues) of n tasks.
func (tr tracing) startEnqueue(ctx context.Context, queue string, n int) (context.Context, trace.Span) {
	ctx, span := tr.tracer.Start(ctx, spanEnqueue, trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		if queue != "" {
			span.SetName(spanEnqueue + " " + queue)
			span.SetAttributes(semconv.MessagingDestinationName(queue))
		}
		span.SetAttributes(msgSystem, semconv.MessagingOperationTypeSend, semconv.MessagingOperationName(spanEnqueue))
		if n > 1 {
			span.SetAttributes(semconv.MessagingBatchMessageCount(n))
		}
	}
	return ctx, span
}

// endSpan ends span, marking it failed when err is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// headers returns the trace context of ctx as the propagator writes it,
// as task headers: nil when it writes nothing (no trace, or tracing off).
// A propagator's output that task headers cannot carry (see
// base.ValidateHeaders) is dropped, but for traceparent and tracestate
// when they alone pass: tracing never fails an enqueue.
func (tr tracing) headers(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() && len(tr.prop.Fields()) == 0 {
		return nil
	}
	c := propagation.MapCarrier{}
	tr.prop.Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	h := make(map[string]string, len(c))
	for k, v := range c {
		h[strings.ToLower(k)] = v
	}
	if base.ValidateHeaders(h) == nil {
		return h
	}
	w3c := map[string]string{}
	for _, k := range []string{"traceparent", "tracestate"} {
		if v, ok := h[k]; ok {
			w3c[k] = v
		}
	}
	if len(w3c) > 0 && base.ValidateHeaders(w3c) == nil {
		return w3c
	}
	return nil
}

// startAttempt starts the consumer span of one attempt of msg, a child of
// the trace context its headers carry (when they carry one).
func (tr tracing) startAttempt(ctx context.Context, msg *base.TaskMessage) (context.Context, trace.Span) {
	if msg.Headers != nil {
		ctx = tr.prop.Extract(ctx, propagation.MapCarrier(msg.Headers))
	}
	ctx, span := tr.tracer.Start(ctx, spanProcess, trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetName(spanProcess + " " + msg.Queue)
		span.SetAttributes(msgSystem, semconv.MessagingOperationTypeProcess, semconv.MessagingOperationName(spanProcess),
			semconv.MessagingDestinationName(msg.Queue), semconv.MessagingMessageID(msg.ID),
			AttrTaskType.String(msg.Type), AttrAttempt.Int(msg.Retried+1))
	}
	return ctx, span
}

// endAttempt ends an attempt's span with its outcome and, for a failed
// attempt, its error.
func endAttempt(span trace.Span, outcome string, err error) {
	if span.IsRecording() {
		span.SetAttributes(AttrOutcome.String(outcome))
	}
	endSpan(span, err)
}
