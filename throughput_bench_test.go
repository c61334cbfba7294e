package htq

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/redistest"
)

// The benchmarks of this file measure the whole path of a task through
// the public API, per task: Enqueue, and a Server processing tasks
// enqueued beforehand. Besides the wall time they report cpu-ns/op, the
// CPU (user and system) this process spent per task, which a loaded
// machine disturbs less. They use nothing but the API that every version
// of htq has, so that the same file runs on two versions in one session.

// cpuNanos is the CPU time this process has used.
func cpuNanos(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// benchStorage opens the storage of a benchmark: "mem" (the embedded store
// in memory), "file" (the embedded store on disk, in a temporary
// directory) or "redis" (a private redis-server).
func benchStorage(b *testing.B, kind string) *Storage {
	url := "mem:"
	switch kind {
	case "redis":
		url = redistest.URL(b)
	case "file":
		url = "file:" + b.TempDir()
	}
	st, err := Open(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

func BenchmarkEnqueue(b *testing.B) {
	for _, kind := range []string{"mem", "redis"} {
		b.Run(kind, func(b *testing.B) { benchEnqueue(b, NewClient(benchStorage(b, kind))) })
	}
}

// benchEnqueue enqueues one task per op with c.
func benchEnqueue(b *testing.B, c *Client) {
	ctx := context.Background()
	payload := make([]byte, 100)
	b.ReportAllocs()
	cpu := cpuNanos(b)
	for b.Loop() {
		if _, err := c.EnqueueContext(ctx, NewTask("bench:noop", payload)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuNanos(b)-cpu)/float64(b.N), "cpu-ns/op")
}

func BenchmarkProcess(b *testing.B) {
	for _, kind := range []string{"mem", "file", "redis"} {
		b.Run(kind, func(b *testing.B) { benchProcess(b, benchStorage(b, kind), ClientOptions{}, Config{}) })
	}
}

// benchProcess enqueues b.N tasks with a client of copts, then times a
// Server with cfg (and 8 workers) processing them all.
func benchProcess(b *testing.B, st *Storage, copts ClientOptions, cfg Config) {
	ctx := context.Background()
	c := NewClientWithOptions(st, copts)
	payload := make([]byte, 100)
	tasks := make([]*Task, 0, 1000)
	for left := b.N; left > 0; left -= len(tasks) {
		tasks = tasks[:0]
		for range min(left, 1000) {
			tasks = append(tasks, NewTask("bench:noop", payload))
		}
		if _, err := c.EnqueueBatch(ctx, tasks); err != nil {
			b.Fatal(err)
		}
	}
	var done atomic.Int64
	all := make(chan struct{})
	h := HandlerFunc(func(context.Context, *Task) error {
		if done.Add(1) == int64(b.N) {
			close(all)
		}
		return nil
	})
	cfg.Concurrency = 8
	cfg.Logger = quietConfig(Config{}).Logger
	srv := NewServer(st, cfg)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuNanos(b)
	if err := srv.Start(h); err != nil {
		b.Fatal(err)
	}
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d tasks processed in 5 min", done.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuNanos(b)-cpu)/float64(b.N), "cpu-ns/op")
	srv.Shutdown()
}
