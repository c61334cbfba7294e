package dispatch

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestDispatchTracing dispatches under a parent span to a loopback target
// that answers 200, then 503: each dispatch is an HTTP client span, child
// of the parent, whose context the request carries as traceparent (over
// the task's own traceparent header), with the method, the URL without
// its query, the status and, for the 503, error.type and an error status.
func TestDispatchTracing(t *testing.T) {
	got := make(chan http.Header, 2)
	status := http.StatusOK
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.WriteHeader(status)
	})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	d := newDispatcher(t, Config{Allow: loopback, TracerProvider: tp, Propagator: propagation.TraceContext{}})

	ctx, parent := tp.Tracer("test").Start(context.Background(), "attempt")
	defer parent.End()
	req := Request{TaskID: "t1", Queue: "q", URL: tg.URL + "/hook?token=secret", Method: "POST",
		Header: http.Header{"Traceparent": {"00-11111111111111111111111111111111-2222222222222222-01"}}}
	for i, want := range []int{http.StatusOK, http.StatusServiceUnavailable} {
		status = want
		_, err := d.Dispatch(ctx, req)
		if (err != nil) != (want != http.StatusOK) {
			t.Fatalf("dispatch %d: %v", i, err)
		}
		h := <-got
		spans := rec.Ended()
		if len(spans) != i+1 {
			t.Fatalf("%d spans ended after dispatch %d", len(spans), i+1)
		}
		s := spans[i]
		wantTP := "00-" + parent.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"
		if tp := h.Get("Traceparent"); tp != wantTP {
			t.Errorf("dispatch %d: traceparent %q, want %q (the client span's)", i+1, tp, wantTP)
		}
		if s.SpanKind() != trace.SpanKindClient || s.Name() != "POST" || s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("dispatch %d: span %q kind %v parent %s, want a client span \"POST\" under the attempt", i+1, s.Name(), s.SpanKind(), s.Parent().SpanID())
		}
		a := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			a[kv.Key] = kv.Value
		}
		if u := a["url.full"].AsString(); strings.Contains(u, "secret") || !strings.HasSuffix(u, "/hook") {
			t.Errorf("url.full %q: want the URL without its query", u)
		}
		if a["http.request.method"].AsString() != "POST" || a["http.response.status_code"].AsInt64() != int64(want) || a["htq.task.id"].AsString() != "t1" {
			t.Errorf("dispatch %d: attributes %v", i+1, a)
		}
		if status == http.StatusServiceUnavailable {
			if a["error.type"].AsString() != "503" || s.Status().Code != codes.Error {
				t.Errorf("a 503: error.type %q status %v, want 503 and an error", a["error.type"].AsString(), s.Status())
			}
		} else if s.Status().Code != codes.Unset || a["error.type"].Emit() != "" {
			t.Errorf("a 200: status %v error.type %q, want neither", s.Status(), a["error.type"].Emit())
		}
	}
}

// TestDispatchNoTrace checks that a dispatch outside any trace sends the
// task's own traceparent unchanged (and none when it has none).
func TestDispatchNoTrace(t *testing.T) {
	got := make(chan http.Header, 1)
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() })
	d := newDispatcher(t, Config{Allow: loopback, Propagator: propagation.TraceContext{}})
	own := "00-11111111111111111111111111111111-2222222222222222-01"
	for _, h := range []http.Header{{"Traceparent": {own}}, nil} {
		if _, err := d.Dispatch(context.Background(), Request{TaskID: "t1", Queue: "q", URL: tg.URL, Header: h}); err != nil {
			t.Fatal(err)
		}
		if tp := (<-got).Get("Traceparent"); tp != h.Get("Traceparent") {
			t.Errorf("traceparent %q, want %q", tp, h.Get("Traceparent"))
		}
	}
}
