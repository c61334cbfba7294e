package embedded

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// BenchmarkEnqueue is the store's own work for one durable Enqueue as htq
// serve makes it for a /v1 URL task due in an hour (docs/performance.md,
// "htq serve"): 32 goroutines on their own tasks, each call waiting for
// its group commit, on a store in a temporary directory (a real disk:
// every commit is a log write and an fdatasync, the checkpoints bbolt
// transactions). Besides allocs/op it reports the process's CPU per call
// (cpu-µs/op, user + system: the committer's and checkpointer's work
// included) and the tasks a commit carried (tasks/commit). Run with:
//
//	go test ./internal/embedded -run XXX -bench Enqueue -benchmem
func BenchmarkEnqueue(b *testing.B) {
	// A URL task's payload as htq serve stores it (about 170 bytes).
	payload := []byte(`{"url":"http://127.0.0.1:1/x","method":"POST","body":"{}","headers":{"Content-Type":"application/json"},"timeout":30000000000,"signing":false,"` + strings.Repeat("p", 20) + `":1}`)
	br, err := Open(context.Background(), b.TempDir(), Options{Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	commits0, _ := br.CommitStats()
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			m := &base.TaskMessage{ID: fmt.Sprintf("t%09d", next.Add(1)), Type: "url", Queue: "v1q", Payload: payload, MaxRetry: 25, Timeout: 30 * time.Second}
			if err := br.Enqueue(ctx, broker.EnqueueParams{Msg: m, ProcessAt: time.Now().Add(time.Hour)}); err != nil {
				panic(err)
			}
		}
	})
	b.StopTimer()
	commits, _ := br.CommitStats()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	if n := commits - commits0; n > 0 {
		b.ReportMetric(float64(b.N)/float64(n), "tasks/commit")
	}
}

// BenchmarkLogAppend is the cost of one group commit alone: a log record
// holding one task record, written with one pwrite and synced with one
// fdatasync, by one goroutine, as the committer does. cpu-µs/op is the
// process's CPU per commit (the kernel's part of the write and sync
// included): divided by BenchmarkEnqueue's tasks/commit, the share of a
// durable enqueue that the commit is.
func BenchmarkLogAppend(b *testing.B) {
	w, err := openWAL(b.TempDir(), newSalt(), 0, walPrealloc)
	if err != nil {
		b.Fatal(err)
	}
	defer w.close()
	bt := newBatch()
	bt.tasks[1] = make([]byte, 220)
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	for range b.N {
		if w.off > walPrealloc-4096 {
			w.off = 0 // write the file again from its start, as the committer does after a checkpoint
		}
		if err := w.append(bt); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
}
