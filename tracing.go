package htq

import (
	"context"
	"reflect"
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
	// given is set when the application gave the provider (spans are
	// then always started; see spansOff).
	given bool
	// spanOnly is set when prop writes nothing unless the context holds
	// a valid span context (W3C Trace Context alone, htq serve's
	// default): an enqueue with no trace then needs no carrier.
	spanOnly bool
	// The options of the two kinds of spans, made once.
	producer, consumer []trace.SpanStartOption
}

// newTracing returns the tracing of tp and prop, or of otel's global
// provider and propagator for a nil one (they delegate to what the
// application sets later with otel.SetTracerProvider and
// otel.SetTextMapPropagator).
func newTracing(tp trace.TracerProvider, prop propagation.TextMapPropagator) tracing {
	given := tp != nil
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	return tracing{tracer: tp.Tracer(TracerName), prop: prop, given: given,
		spanOnly: spanOnly(prop),
		producer: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)},
		consumer: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}}
}

// spansOff reports whether the spans would be no-ops: no provider was
// given and OpenTelemetry's global provider is still the placeholder it
// is until the application sets one. A no-op span still costs a few
// allocations, which an Enqueue and an attempt then skip; the trace
// context they pass on is the same (the one ctx holds). Should a later
// OpenTelemetry make its placeholder of another package, spans are
// started as with any provider: correct, only not free.
func (tr tracing) spansOff() bool {
	if tr.given {
		return false
	}
	t := reflect.TypeOf(otel.GetTracerProvider())
	return t != nil && t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global"
}

// noSpan is the span of an operation whose spans are off.
var noSpan = trace.SpanFromContext(context.Background())

// startEnqueue starts the producer span of an enqueue into queue ("" for
// a batch into several queues) of n tasks.
func (tr tracing) startEnqueue(ctx context.Context, queue string, n int) (context.Context, trace.Span) {
	if tr.spansOff() {
		return ctx, noSpan
	}
	ctx, span := tr.tracer.Start(ctx, spanEnqueue, tr.producer...)
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
	if !trace.SpanContextFromContext(ctx).IsValid() && (tr.spanOnly || len(tr.prop.Fields()) == 0) {
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

// spanOnly reports whether prop is known to write nothing for a context
// with no valid span context: OpenTelemetry's W3C Trace Context
// propagator. Any other (Baggage, a composite, the global delegate, one
// of the application's) may write from other values of the context, and
// is asked.
func spanOnly(prop propagation.TextMapPropagator) bool {
	switch prop.(type) {
	case propagation.TraceContext, *propagation.TraceContext:
		return true
	}
	return false
}

// startAttempt starts the consumer span of one attempt of msg, a child of
// the trace context its headers carry (when they carry one).
func (tr tracing) startAttempt(ctx context.Context, msg *base.TaskMessage) (context.Context, trace.Span) {
	if msg.Headers != nil {
		ctx = tr.prop.Extract(ctx, propagation.MapCarrier(msg.Headers))
	}
	if tr.spansOff() {
		return ctx, noSpan
	}
	ctx, span := tr.tracer.Start(ctx, spanProcess, tr.consumer...)
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
