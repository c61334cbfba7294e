package dispatch

import (
	"context"
	"errors"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the name of the OpenTelemetry tracer of the dispatch
// spans.
const TracerName = "github.com/htqueue/htq/dispatch"

// attrTaskID names the task a dispatch span is for.
const attrTaskID = attribute.Key("htq.task.id")

// startSpan starts the HTTP client span of one dispatch, named after the
// method as OpenTelemetry's HTTP conventions name client spans. The URL
// attribute leaves out the query and user information, which may hold
// credentials (as the errors do, see logURL).
func (d *Dispatcher) startSpan(ctx context.Context, method string, u *url.URL, taskID string) (context.Context, trace.Span) {
	ctx, span := d.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		port, _ := strconv.Atoi(portOf(u))
		span.SetAttributes(semconv.HTTPRequestMethodKey.String(method), semconv.URLFull(logURL(u)),
			semconv.ServerAddress(u.Hostname()), semconv.ServerPort(port), attrTaskID.String(taskID))
	}
	return ctx, span
}

// endSpan records the answer's status and, for a dispatch that did not
// succeed, the error's kind as error.type: the status code, "timeout",
// "network", "target_not_allowed", "canceled" or "invalid_request".
func endSpan(span trace.Span, res *Result, err error) {
	if span.IsRecording() {
		if res != nil {
			span.SetAttributes(semconv.HTTPResponseStatusCode(res.Status))
		}
		if err != nil {
			span.SetAttributes(semconv.ErrorTypeKey.String(errorType(res, err)))
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// errorType classifies err for the error.type attribute.
func errorType(res *Result, err error) string {
	var se *StatusError
	switch {
	case errors.As(err, &se):
		return strconv.Itoa(se.Status)
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrTargetNotAllowed):
		return "target_not_allowed"
	case errors.Is(err, ErrNetwork):
		return "network"
	case errors.Is(err, ErrInvalidRequest):
		return "invalid_request"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	if res != nil {
		return strconv.Itoa(res.Status)
	}
	return "other"
}
