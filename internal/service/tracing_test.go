package service_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A caller's trace context, as an instrumented client sends it.
const (
	callerTrace      = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan       = "00f067aa0ba902b7"
	callerParent     = "00-" + callerTrace + "-" + callerSpan + "-01"
	callerTraceState = "congo=t61rcWkgMzE"
)

// callerHeader is the trace context of an enqueue request.
var callerHeader = http.Header{"Traceparent": {callerParent}, "Tracestate": {callerTraceState}}

// waitSpans waits until exp holds n ended spans (they end on other
// goroutines than the ones the test waits on).
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, n int) tracetest.SpanStubs {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		spans := exp.GetSpans()
		if len(spans) >= n {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spans ended within 10s, want %d: %v", len(spans), n, spans)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// spanOf returns the one span of kind named name.
func spanOf(t *testing.T, spans tracetest.SpanStubs, kind trace.SpanKind, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if s.SpanKind == kind && s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %v spans named %q, want 1; spans: %v", len(found), kind, name, spans)
	}
	return found[0]
}

// TestTracingEndToEnd enqueues over HTTP with a caller's traceparent into
// a real htq serve that exports to memory: the URL task's request reaches
// a real loopback target carrying the caller's trace, the spans are the
// enqueue (producer, child of the caller's span), the attempt (consumer,
// child of the enqueue) and the request (HTTP client, child of the
// attempt, whose ID the target sees as its parent), and a pull worker's
// fetch answers a typed task with the trace context of its enqueue.
func TestTracingEndToEnd(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		cfg := testConfig(t, broker)
		cfg.TracerProvider = tp
		svc := startService(t, cfg)
		c := newClient(t, svc.URL(), testToken)
		tg := newTarget(t)

		var out enqueued
		if status, body := c.callHeader(callerHeader, "POST", "/v1/queues/hooks/tasks", urlTask(tg.URL+"/hook", nil), &out); status != http.StatusCreated {
			t.Fatalf("enqueue: %d %s", status, body)
		}
		h := tg.next(t, 10*time.Second)
		spans := waitSpans(t, exp, 3)
		send := spanOf(t, spans, trace.SpanKindProducer, "send hooks")
		process := spanOf(t, spans, trace.SpanKindConsumer, "process hooks")
		dispatch := spanOf(t, spans, trace.SpanKindClient, "POST")
		for _, s := range []tracetest.SpanStub{send, process, dispatch} {
			if s.SpanContext.TraceID().String() != callerTrace {
				t.Errorf("span %q is in trace %s, want the caller's %s", s.Name, s.SpanContext.TraceID(), callerTrace)
			}
		}
		if send.Parent.SpanID().String() != callerSpan || !send.Parent.IsRemote() {
			t.Errorf("enqueue span's parent %s, want the caller's span %s", send.Parent.SpanID(), callerSpan)
		}
		if process.Parent.SpanID() != send.SpanContext.SpanID() || dispatch.Parent.SpanID() != process.SpanContext.SpanID() {
			t.Errorf("parents: attempt under %s (enqueue %s), request under %s (attempt %s)",
				process.Parent.SpanID(), send.SpanContext.SpanID(), dispatch.Parent.SpanID(), process.SpanContext.SpanID())
		}
		want := "00-" + callerTrace + "-" + dispatch.SpanContext.SpanID().String() + "-01"
		if got := h.header.Get("Traceparent"); got != want {
			t.Errorf("the target got traceparent %q, want %q (the request span's)", got, want)
		}
		if got := h.header.Get("Tracestate"); got != callerTraceState {
			t.Errorf("the target got tracestate %q, want the caller's %q", got, callerTraceState)
		}
		for _, kv := range process.Attributes {
			if kv.Key == "messaging.message.id" && kv.Value.AsString() != out.ID {
				t.Errorf("attempt span of task %s, want %s", kv.Value.AsString(), out.ID)
			}
		}

		// A pull worker gets the trace context of the typed task's enqueue.
		exp.Reset()
		c.createQueue("jobs", "pull", nil)
		if status, body := c.callHeader(callerHeader, "POST", "/v1/queues/jobs/tasks", map[string]any{"type": "job"}, nil); status != http.StatusCreated {
			t.Fatalf("enqueue a typed task: %d %s", status, body)
		}
		var fetched struct {
			Tasks []struct {
				Headers map[string]string `json:"headers"`
			} `json:"tasks"`
		}
		c.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"jobs"}, "wait_s": 5}, &fetched)
		send = spanOf(t, waitSpans(t, exp, 1), trace.SpanKindProducer, "send jobs")
		if len(fetched.Tasks) != 1 {
			t.Fatalf("fetched %d tasks, want 1", len(fetched.Tasks))
		}
		wantHeaders := map[string]string{"traceparent": "00-" + callerTrace + "-" + send.SpanContext.SpanID().String() + "-01", "tracestate": callerTraceState}
		if got := fetched.Tasks[0].Headers; len(got) != 2 || got["traceparent"] != wantHeaders["traceparent"] || got["tracestate"] != wantHeaders["tracestate"] {
			t.Errorf("fetched headers %v, want %v", got, wantHeaders)
		}
	})
}

// TestTracingPassThrough runs htq serve without a tracer provider (no
// spans): a caller's trace context still reaches the target unchanged,
// and a request without one sends none.
func TestTracingPassThrough(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		tg := newTarget(t)
		if status, body := c.callHeader(callerHeader, "POST", "/v1/queues/hooks/tasks", urlTask(tg.URL, nil), nil); status != http.StatusCreated {
			t.Fatalf("enqueue: %d %s", status, body)
		}
		h := tg.next(t, 10*time.Second)
		if got := h.header.Get("Traceparent"); got != callerParent {
			t.Errorf("traceparent %q, want the caller's %q", got, callerParent)
		}
		c.enqueue("hooks", urlTask(tg.URL, nil))
		if got := tg.next(t, 10*time.Second).header.Values("Traceparent"); len(got) != 0 {
			t.Errorf("a task enqueued without a trace sent traceparent %q", got)
		}
	})
}
