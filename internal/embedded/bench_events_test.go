package embedded

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/broker/brokerbench"
)

// BenchmarkEventLog measures what the in-memory event log costs a task's
// whole life (enqueued, started, succeeded) on the in-memory store, where
// no disk write hides it: one op is one task. Run with:
//
//	go test ./internal/embedded -run XXX -bench EventLog -count 5
func BenchmarkEventLog(b *testing.B) {
	for _, batch := range []int{1, 16} {
		for _, size := range []int{-1, 0} {
			name := "log=on"
			if size < 0 {
				name = "log=off"
			}
			b.Run(fmt.Sprintf("batch=%d/%s", batch, name), func(b *testing.B) {
				br, err := OpenMemory(Options{EventLogSize: size})
				if err != nil {
					b.Fatal(err)
				}
				defer br.Close()
				ctx := context.Background()
				msgs := make([]*base.TaskMessage, b.N)
				for i := range msgs {
					msgs[i] = &base.TaskMessage{ID: fmt.Sprint("t", i), Type: "bench", Payload: make([]byte, 100), Queue: "bench", MaxRetry: 25, Timeout: time.Minute}
				}
				b.ReportAllocs()
				cpu := processCPU()
				b.ResetTimer()
				for _, m := range msgs {
					if err := br.Enqueue(ctx, broker.EnqueueParams{Msg: m}); err != nil {
						b.Fatal(err)
					}
				}
				brokerbench.Drain(ctx, b, br, "bench", batch, b.N)
				b.StopTimer()
				// CPU time, not wall time: on a shared machine it depends
				// far less on what else runs.
				b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU is the CPU time (user + system) this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLogEvent measures one append to a queue's log (a task's life
// makes three), the whole cost the log adds to an operation.
func BenchmarkLogEvent(b *testing.B) {
	br, err := OpenMemory(Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	now := time.Now()
	b.ReportAllocs()
	br.mu.Lock()
	defer br.mu.Unlock()
	for i := 0; b.Loop(); i++ {
		br.logEvent("bench", broker.LogStarted, "task-id", base.StateActive, "", now.Add(time.Duration(i)*time.Microsecond))
	}
}
