package htq

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/redistest"
)

// bothBackends runs fn on an empty Redis database and on an embedded
// store in a temporary directory.
func bothBackends(t *testing.T, fn func(t *testing.T, st *Storage)) {
	for _, b := range []struct{ name, url string }{{"redis", ""}, {"embedded", "file:"}} {
		t.Run(b.name, func(t *testing.T) {
			url := b.url + t.TempDir()
			if b.url == "" {
				url = redistest.URL(t)
			}
			st, err := Open(url)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { st.Close() })
			fn(t, st)
		})
	}
}

// attrs returns a span's attributes by key.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestTracing enqueues under an application span and runs the task with a
// handler that fails once: the handler's ctx continues the enqueuer's
// trace, and the spans are the enqueue (producer, child of the
// application's span) and one per attempt (consumer, child of the
// enqueue) with the task's ID, type, queue, attempt and outcome.
func TestTracing(t *testing.T) {
	bothBackends(t, func(t *testing.T, st *Storage) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		prop := propagation.TraceContext{}

		type seen struct {
			sc      trace.SpanContext
			attempt int
		}
		ran := make(chan seen, 2)
		startServer(t, st, quietConfig(Config{TracerProvider: tp, Propagator: prop,
			RetryDelayFunc: func(int, error, *Task) time.Duration { return 0 }}),
			HandlerFunc(func(ctx context.Context, task *Task) error {
				n, _ := GetRetryCount(ctx)
				ran <- seen{trace.SpanContextFromContext(ctx), n + 1}
				if n == 0 {
					return errors.New("first attempt fails")
				}
				return nil
			}))

		ctx, app := tp.Tracer("app").Start(context.Background(), "app")
		c := NewClientWithOptions(st, ClientOptions{TracerProvider: tp, Propagator: prop})
		info, err := c.EnqueueContext(ctx, NewTask("traced:task", []byte("p")))
		app.End()
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 2; i++ {
			s := recv(t, ran, 10*time.Second, "an attempt")
			if s.sc.TraceID() != app.SpanContext().TraceID() {
				t.Errorf("attempt %d runs in trace %s, want the enqueuer's %s", s.attempt, s.sc.TraceID(), app.SpanContext().TraceID())
			}
		}
		waitFor(t, 5*time.Second, "two ended attempt spans", func() bool { return len(rec.Ended()) >= 4 })

		var send sdktrace.ReadOnlySpan
		var process []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			switch s.SpanKind() {
			case trace.SpanKindProducer:
				send = s
			case trace.SpanKindConsumer:
				process = append(process, s)
			}
		}
		if send == nil || send.Name() != "send default" || send.Parent().SpanID() != app.SpanContext().SpanID() {
			t.Fatalf("enqueue span %v: want \"send default\", a child of the application's span", send)
		}
		if a := attrs(send); a["messaging.message.id"].AsString() != info.ID || a["messaging.system"].AsString() != "htq" ||
			a[AttrTaskType].AsString() != "traced:task" || a["messaging.destination.name"].AsString() != "default" {
			t.Errorf("enqueue span attributes %v", a)
		}
		if len(process) != 2 {
			t.Fatalf("%d attempt spans, want 2", len(process))
		}
		// The second attempt may end first: the first one's span ends
		// after its outcome is written, when the retry may already run.
		slices.SortFunc(process, func(a, b sdktrace.ReadOnlySpan) int {
			return int(attrs(a)[AttrAttempt].AsInt64() - attrs(b)[AttrAttempt].AsInt64())
		})
		for i, s := range process {
			a := attrs(s)
			wantOutcome, wantStatus := "retry", codes.Error
			if i == 1 {
				wantOutcome, wantStatus = "success", codes.Unset
			}
			if s.Name() != "process default" || s.Parent().SpanID() != send.SpanContext().SpanID() ||
				s.SpanContext().TraceID() != app.SpanContext().TraceID() {
				t.Errorf("attempt span %d: %q with parent %s, want \"process default\" under the enqueue span %s",
					i+1, s.Name(), s.Parent().SpanID(), send.SpanContext().SpanID())
			}
			if a["messaging.message.id"].AsString() != info.ID || a[AttrTaskType].AsString() != "traced:task" ||
				a["messaging.destination.name"].AsString() != "default" || a[AttrAttempt].AsInt64() != int64(i+1) ||
				a[AttrOutcome].AsString() != wantOutcome || s.Status().Code != wantStatus {
				t.Errorf("attempt span %d: attributes %v status %v, want attempt %d outcome %s status %v",
					i+1, a, s.Status(), i+1, wantOutcome, wantStatus)
			}
		}
	})
}

// TestTracingOff checks that with OpenTelemetry's defaults (no provider
// or propagator set) a task carries no headers, so that tracing costs no
// storage, and that a task enqueued with no trace carries none either.
func TestTracingOff(t *testing.T) {
	bothBackends(t, func(t *testing.T, st *Storage) {
		ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}))
		off, err := NewClient(st).EnqueueContext(ctx, NewTask("t", nil))
		if err != nil {
			t.Fatal(err)
		}
		noTrace, err := NewClientWithOptions(st, ClientOptions{Propagator: propagation.TraceContext{}}).
			EnqueueContext(context.Background(), NewTask("t", nil))
		if err != nil {
			t.Fatal(err)
		}
		on, err := NewClientWithOptions(st, ClientOptions{Propagator: propagation.TraceContext{}}).EnqueueContext(ctx, NewTask("t", nil))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			what string
			id   string
			want bool
		}{{"tracing off", off.ID, false}, {"no trace", noTrace.ID, false}, {"a remote parent passed on", on.ID, true}} {
			ti, err := brokerOf(st).GetTaskInfo(context.Background(), "default", c.id)
			if err != nil {
				t.Fatal(err)
			}
			if got := ti.Message.Headers != nil; got != c.want {
				t.Errorf("%s: stored headers %v, want some: %v", c.what, ti.Message.Headers, c.want)
			}
		}
	})
}

// TestTracingOffAllocatesNothing checks that with tracing off (no provider
// given or set) an enqueue's and an attempt's tracing calls allocate
// nothing: the spans are skipped (see spansOff), not started as no-ops.
func TestTracingOffAllocatesNothing(t *testing.T) {
	tr := newTracing(nil, nil)
	if !tr.spansOff() {
		t.Fatal("spans are on with no provider given or set: OpenTelemetry's global placeholder was not recognized")
	}
	msg := &base.TaskMessage{ID: "id", Type: "t", Queue: "default"}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		c, span := tr.startEnqueue(ctx, "default", 1)
		msg.Headers = tr.headers(c)
		endSpan(span, nil)
		_, span = tr.startAttempt(ctx, msg)
		endAttempt(span, "success", nil)
	}); n != 0 {
		t.Errorf("%v allocations per enqueue and attempt with tracing off, want 0", n)
	}
	if newTracing(noop.NewTracerProvider(), nil).spansOff() {
		t.Error("spans are off with a provider given")
	}
}

// TestTraceContextNoTraceAllocatesNothing checks that with the W3C Trace
// Context propagator (htq serve's default) an enqueue whose context holds
// no trace builds no carrier, and that one whose context holds a trace
// still gets its traceparent.
func TestTraceContextNoTraceAllocatesNothing(t *testing.T) {
	for _, prop := range []propagation.TextMapPropagator{propagation.TraceContext{}, &propagation.TraceContext{}} {
		tr := newTracing(nil, prop)
		ctx := context.Background()
		var h map[string]string
		if n := testing.AllocsPerRun(100, func() { h = tr.headers(ctx) }); n != 0 || h != nil {
			t.Errorf("%T, no trace: %v allocations and headers %v, want 0 and none", prop, n, h)
		}
		traced := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}))
		if got := tr.headers(traced)["traceparent"]; got != "00-01000000000000000000000000000000-0200000000000000-01" {
			t.Errorf("%T, a trace: traceparent %q", prop, got)
		}
	}
	// A propagator that writes without a span is still asked.
	bag, err := baggage.Parse("k=v")
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracing(nil, propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if got := tr.headers(baggage.ContextWithBaggage(context.Background(), bag))["baggage"]; got != "k=v" {
		t.Errorf("composite with Baggage, no trace: baggage header %q, want k=v", got)
	}
}
