package htq

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/htqueue/htq/internal/base"
)

// The cost of tracing when it is on: every span sampled and recorded by
// the SDK, with no exporter (what an exporter costs is its own business),
// and the trace context written into and read from every task. Compare
// with BenchmarkEnqueue and BenchmarkProcess, where tracing is off.

func benchTracer(b *testing.B) *sdktrace.TracerProvider {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

func BenchmarkEnqueueTraced(b *testing.B) {
	for _, kind := range []string{"mem", "redis"} {
		b.Run(kind, func(b *testing.B) {
			benchEnqueue(b, NewClientWithOptions(benchStorage(b, kind),
				ClientOptions{TracerProvider: benchTracer(b), Propagator: propagation.TraceContext{}}))
		})
	}
}

func BenchmarkProcessTraced(b *testing.B) {
	for _, kind := range []string{"mem", "redis"} {
		b.Run(kind, func(b *testing.B) {
			tp := benchTracer(b)
			benchProcess(b, benchStorage(b, kind), ClientOptions{TracerProvider: tp, Propagator: propagation.TraceContext{}},
				Config{TracerProvider: tp, Propagator: propagation.TraceContext{}})
		})
	}
}

// BenchmarkTracingOff measures what tracing adds to an enqueue and to an
// attempt when it is off (no provider given or set): the calls the Client
// and the processor make, alone, so that the figure is not lost in the
// noise of a whole enqueue or attempt.
func BenchmarkTracingOff(b *testing.B) {
	tr := newTracing(nil, nil)
	msg := &base.TaskMessage{ID: "id", Type: "t", Queue: "default"}
	ctx := context.Background()
	b.Run("enqueue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx, span := tr.startEnqueue(ctx, "default", 1)
			msg.Headers = tr.headers(ctx)
			endSpan(span, nil)
		}
	})
	b.Run("attempt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, span := tr.startAttempt(ctx, msg)
			endAttempt(span, "success", nil)
		}
	})
}
