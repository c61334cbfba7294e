package embedded

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// The management operations on a queue of 1,000,000 tasks (issue 4: a
// page of 100 in ≤ 20 ms, QueueStats in ≤ 5 ms), as in
// internal/rdb/bench_admin_test.go. Run with:
//
//	go test ./internal/embedded -run XXX -bench 1M -count 5
//
// The first benchmark fills a file store once per test binary: queue "big"
// with 1,000,000 pending tasks and queue "bigs" with 1,000,000 scheduled
// ones, 100-byte payloads, through EnqueueBatch. The store stays open until
// the binary ends (TestMain closes it). BenchmarkListTasks1M lists the
// indexes as they grew through Enqueue; BenchmarkListTasks1MReopened closes
// and reopens the store first, so it lists the indexes rebuilt at open.

const bigQueueSize = 1_000_000

var big struct {
	once     sync.Once
	dir      string
	b        *Broker
	reopened bool
	err      error
}

var payload100 = []byte("0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789")

// bigBroker returns the file Broker holding the big queues, filling it the
// first time.
func bigBroker(b *testing.B) *Broker {
	b.Helper()
	big.once.Do(func() {
		big.dir, big.err = os.MkdirTemp("", "htq-bench-")
		if big.err != nil {
			return
		}
		big.b, big.err = Open(context.Background(), big.dir, Options{Logger: discardLogger()})
		if big.err != nil {
			return
		}
		for _, q := range []struct {
			name string
			due  time.Duration
		}{{"big", 0}, {"bigs", time.Hour}} {
			start := time.Now()
			if big.err = fillBig(big.b, q.name, q.due); big.err != nil {
				return
			}
			b.Logf("filled %s with %d tasks in %v", q.name, bigQueueSize, time.Since(start).Round(time.Millisecond))
		}
	})
	if big.err != nil {
		b.Fatal(big.err)
	}
	return big.b
}

// closeBig closes and removes the big store, if a benchmark made one.
func closeBig() {
	if big.b != nil {
		_ = big.b.Close()
	}
	if big.dir != "" {
		_ = os.RemoveAll(big.dir)
	}
}

// fillBig enqueues bigQueueSize tasks into q, due after due, with four
// goroutines sending batches of 1,000.
func fillBig(br *Broker, q string, due time.Duration) error {
	ctx := context.Background()
	now := time.Now()
	const workers, batch = 4, 1000
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps := make([]broker.EnqueueParams, 0, batch)
			for i := w * batch; i < bigQueueSize; i += workers * batch {
				ps = ps[:0]
				for j := i; j < i+batch && j < bigQueueSize; j++ {
					m := &base.TaskMessage{ID: fmt.Sprintf("t%07d", j), Type: "bench", Queue: q, Payload: payload100, MaxRetry: 3}
					p := broker.EnqueueParams{Msg: m}
					if due > 0 {
						p.ProcessAt = now.Add(due + time.Duration(j)*time.Millisecond)
					}
					ps = append(ps, p)
				}
				for _, err := range br.EnqueueBatch(ctx, ps) {
					if err != nil {
						errs[w] = err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkListTasks1M lists one page of 100 tasks of a queue of 1,000,000,
// at its start, middle and end.
func BenchmarkListTasks1M(b *testing.B) {
	benchListTasks(b, bigBroker(b))
}

// BenchmarkListTasks1MReopened is BenchmarkListTasks1M on the indexes that
// Open rebuilt.
func BenchmarkListTasks1MReopened(b *testing.B) {
	br := bigBroker(b)
	if !big.reopened {
		if err := br.Close(); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		big.b, big.err = Open(context.Background(), big.dir, Options{Logger: discardLogger()})
		if big.err != nil {
			b.Fatal(big.err)
		}
		b.Logf("reopened %d tasks in %v", 2*bigQueueSize, time.Since(start).Round(time.Millisecond))
		big.reopened = true
		br = big.b
	}
	benchListTasks(b, br)
}

func benchListTasks(b *testing.B, br *Broker) {
	for _, c := range []struct {
		name  string
		queue string
		state base.TaskState
	}{{"pending", "big", base.StatePending}, {"scheduled", "bigs", base.StateScheduled}} {
		for _, at := range []struct {
			name   string
			offset int
		}{{"first", 0}, {"middle", bigQueueSize / 2}, {"last", bigQueueSize - 100}} {
			b.Run(c.name+"/"+at.name, func(b *testing.B) {
				ctx := context.Background()
				p := broker.ListParams{Queue: c.queue, State: c.state, Offset: at.offset, Limit: 100}
				b.ReportAllocs()
				for b.Loop() {
					tis, err := br.ListTasks(ctx, p)
					if err != nil {
						b.Fatal(err)
					}
					if len(tis) != 100 {
						b.Fatalf("page of %d tasks", len(tis))
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/op")
			})
		}
	}
}

// BenchmarkQueueStats1M reads the stats of a queue of 1,000,000 pending
// tasks.
func BenchmarkQueueStats1M(b *testing.B) {
	br := bigBroker(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		st, err := br.QueueStats(ctx, "big")
		if err != nil {
			b.Fatal(err)
		}
		if st.Pending != bigQueueSize {
			b.Fatalf("Pending = %d", st.Pending)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/op")
}

// BenchmarkPendingChurn is the in-memory cost of a task passing through a
// queue that holds a backlog of pending tasks: Enqueue one, Fetch one (the
// oldest), Complete it, on a mem: Broker so that no disk is involved.
func BenchmarkPendingChurn(b *testing.B) {
	for _, backlog := range []int{0, 1_000, bigQueueSize} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			br, err := OpenMemory(Options{Logger: discardLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			ctx := context.Background()
			ps := make([]broker.EnqueueParams, 0, 1000)
			for i := 0; i < backlog; i += len(ps) {
				ps = ps[:0]
				for j := i; j < min(backlog, i+1000); j++ {
					ps = append(ps, broker.EnqueueParams{Msg: &base.TaskMessage{ID: fmt.Sprintf("b%07d", j), Type: "bench", Queue: "churn", Payload: payload100, MaxRetry: 3}})
				}
				for _, err := range br.EnqueueBatch(ctx, ps) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			ids := make([]string, b.N)
			for i := range ids {
				ids[i] = fmt.Sprintf("c%09d", i)
			}
			fp := broker.FetchParams{Queue: "churn", ServerID: "bench", Max: 1, LeaseDuration: time.Minute}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				m := &base.TaskMessage{ID: ids[i], Type: "bench", Queue: "churn", Payload: payload100, MaxRetry: 3}
				if err := br.Enqueue(ctx, broker.EnqueueParams{Msg: m}); err != nil {
					b.Fatal(err)
				}
				ls, err := br.Fetch(ctx, fp)
				if err != nil || len(ls) != 1 {
					b.Fatalf("Fetch: %d leases, %v", len(ls), err)
				}
				if errs := br.Complete(ctx, []broker.LeaseRef{ls[0].Ref()}); errs[0] != nil {
					b.Fatal(errs[0])
				}
			}
		})
	}
}

// BenchmarkPendingList is the pending structure alone under FIFO churn: one
// task joins at the back (Enqueue) and the first leaves (Fetch) per op, with
// backlog tasks waiting; a requeue (to the front) and its fetch every 16th.
func BenchmarkPendingList(b *testing.B) {
	for _, backlog := range []int{1_000, bigQueueSize} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			tasks := make([]task, backlog+1)
			l := &pendingList{}
			seq := uint64(0)
			for i := range backlog {
				seq++
				tasks[i].seq = seq
				l.pushBack(&tasks[i])
			}
			x := &tasks[backlog]
			b.ResetTimer()
			for i := range b.N {
				seq++
				x.seq = seq
				l.pushBack(x)
				x = l.popFront()
				if i%16 == 0 {
					l.pushFront(x)
					x = l.popFront()
				}
			}
		})
	}
}
