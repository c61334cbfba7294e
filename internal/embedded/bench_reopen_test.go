//go:build unix

package embedded

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// BenchmarkReopenAfterCrash is the time Open takes on a data directory as
// a crash leaves it: 1,000,000 pending tasks in the data file and the log
// holding ten records (1,000 enqueues) after its checkpoint. Each
// iteration opens a fresh copy (the copy is not timed). cpu-ms/op is the
// CPU time (user + system) the process spent in Open, the figure to read
// on a shared machine, where the wall time follows the load. Run with:
//
//	go test ./internal/embedded -run XXX -bench ReopenAfterCrash -benchtime 5x
func BenchmarkReopenAfterCrash(b *testing.B) {
	const n, logged = 1_000_000, 1_000
	dir := filepath.Join(b.TempDir(), "src")
	ctx := b.Context()
	enqueue := func(br *Broker, from, to int) {
		ps := make([]broker.EnqueueParams, 0, 1000)
		for i := from; i < to; i += len(ps) {
			ps = ps[:0]
			for j := i; j < min(to, i+100); j++ {
				ps = append(ps, broker.EnqueueParams{Msg: &base.TaskMessage{ID: fmt.Sprintf("r%07d", j), Type: "bench", Queue: "default", Payload: payload100, MaxRetry: 3}})
			}
			for _, err := range br.EnqueueBatch(ctx, ps) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	br, err := Open(ctx, dir, Options{Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	enqueue(br, 0, n)
	if err := br.Close(); err != nil {
		b.Fatal(err)
	}
	br, err = Open(ctx, dir, Options{Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	br.mu.Lock()
	br.ckptHold = true
	br.mu.Unlock()
	enqueue(br, n, n+logged)
	img := filepath.Join(b.TempDir(), "img")
	if got := crashCopy(b, br, img); got == 0 {
		b.Fatal("the crash copy's log holds no record after its checkpoint")
	}
	if err := br.Close(); err != nil {
		b.Fatal(err)
	}
	work := filepath.Join(b.TempDir(), "work")
	var cpu time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		copyDir(b, img, work)
		syncFiles(b, work) // Open's own fsync must not flush the copy
		before := cpuTime(b)
		b.StartTimer()
		c, err := Open(ctx, work, Options{Logger: discardLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += cpuTime(b) - before
		if _, err := c.GetTaskInfo(ctx, "default", fmt.Sprintf("r%07d", n+logged-1)); err != nil {
			b.Fatalf("the last logged enqueue: %v", err)
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// syncFiles flushes the data file and the log files of dir to disk.
func syncFiles(b *testing.B, dir string) {
	for _, name := range append([]string{DataFileName}, WALFileNames[:]...) {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			b.Fatal(err)
		}
		err = f.Sync()
		_ = f.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime returns the CPU time (user + system) this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
