// Package brokerbench holds the benchmarks of the broker.Broker interface
// that every backend runs from its own test file, as it runs the
// conformance suite of package brokertest. They measure the management
// operations on big queues (issue 4: on a queue of 1,000,000 tasks, a page
// of 100 in ≤ 20 ms and QueueStats in ≤ 5 ms):
//
//	var big = brokerbench.NewBigQueues(1_000_000, func(testing.TB) (broker.Broker, error) {
//		return mybackend.Open(context.Background(), dir, mybackend.Options{})
//	})
//
//	func BenchmarkListTasks1M(b *testing.B)  { brokerbench.ListTasks(b, big) }
//	func BenchmarkQueueStats1M(b *testing.B) { brokerbench.QueueStats(b, big) }
//
// and the backend's TestMain calls big.Close after m.Run.
//
// The first benchmark fills the storage, once per test binary (tens of
// seconds for a million tasks): queue "big" with size pending tasks and
// queue "bigs" with size scheduled ones, due an hour later, one millisecond
// apart, 100-byte payloads, through EnqueueBatch.
package brokerbench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// The queues of BigQueues: one in each kind of index a page is read from
// (pending is a list on Redis, scheduled a sorted set).
const (
	pendingQueue   = "big"
	scheduledQueue = "bigs"
)

// payload is the payload of every task of the big queues.
var payload = []byte("0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789")

// Opener opens a broker over the storage of the big queues. Every call
// opens the same storage, so that a broker finds the tasks an earlier one
// wrote. The broker outlives tb (BigQueues closes it), so the opener must
// not close it with tb.Cleanup; tb is there for test helpers that need one.
type Opener func(tb testing.TB) (broker.Broker, error)

// BigQueues is the storage of the big queues, shared by the benchmarks of
// one test binary, and the broker they read it through. Benchmarks run one
// at a time, and so do its methods.
type BigQueues struct {
	size     int
	open     Opener
	br       broker.Broker
	reopened bool
}

// NewBigQueues returns big queues of size tasks each over the storage that
// open opens. Nothing is opened or filled before a benchmark needs it.
func NewBigQueues(size int, open Opener) *BigQueues {
	return &BigQueues{size: size, open: open}
}

// Close closes the broker the benchmarks used, if they opened one. Call it
// from TestMain after m.Run, before looking for leaked goroutines.
func (q *BigQueues) Close() error {
	if q.br == nil {
		return nil
	}
	err := q.br.Close()
	q.br = nil
	return err
}

// broker returns the open broker, opening the storage the first time, and
// fills each queue that does not hold its size tasks: the first time, or
// again when a test emptied the storage since.
func (q *BigQueues) broker(b *testing.B) broker.Broker {
	b.Helper()
	if q.br == nil {
		br, err := q.open(b)
		if err != nil {
			b.Fatalf("open: %v", err)
		}
		q.br = br
	}
	ctx := context.Background()
	for _, c := range []struct {
		queue string
		due   time.Duration
	}{{pendingQueue, 0}, {scheduledQueue, time.Hour}} {
		st, err := q.br.QueueStats(ctx, c.queue)
		if err == nil && st.Pending+st.Scheduled == q.size {
			continue
		}
		if err != nil && !errors.Is(err, base.ErrQueueNotFound) {
			b.Fatalf("QueueStats %s: %v", c.queue, err)
		}
		start := time.Now()
		if err := fill(ctx, q.br, c.queue, q.size, c.due); err != nil {
			b.Fatalf("fill %s: %v", c.queue, err)
		}
		b.Logf("filled %s with %d tasks in %v", c.queue, q.size, time.Since(start).Round(time.Millisecond))
	}
	return q.br
}

// reopenedBroker returns the broker after closing it and opening the
// storage again, the first time it is asked; later calls return that
// broker.
func (q *BigQueues) reopenedBroker(b *testing.B) broker.Broker {
	b.Helper()
	br := q.broker(b)
	if q.reopened {
		return br
	}
	if err := q.Close(); err != nil {
		b.Fatalf("Close: %v", err)
	}
	start := time.Now()
	br, err := q.open(b)
	if err != nil {
		b.Fatalf("reopen: %v", err)
	}
	q.br, q.reopened = br, true
	b.Logf("reopened %d tasks in %v", 2*q.size, time.Since(start).Round(time.Millisecond))
	return br
}

// fill replaces queue with size tasks due after due (pending when 0), one
// millisecond apart, from four goroutines sending batches of 1,000.
func fill(ctx context.Context, br broker.Broker, queue string, size int, due time.Duration) error {
	if err := br.DeleteQueue(ctx, queue, true); err != nil && !errors.Is(err, base.ErrQueueNotFound) {
		return err
	}
	now, err := br.Now(ctx)
	if err != nil {
		return err
	}
	const workers, batch = 4, 1000
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			ps := make([]broker.EnqueueParams, 0, batch)
			for i := w * batch; i < size; i += workers * batch {
				ps = ps[:0]
				for j := i; j < i+batch && j < size; j++ {
					m := &base.TaskMessage{ID: fmt.Sprintf("t%07d", j), Type: "bench", Queue: queue, Payload: payload, MaxRetry: 3}
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
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ListTasks lists one page of 100 tasks of each big queue at its start,
// middle and end, in sub-benchmarks named pending/first … scheduled/last.
// It reports ms/op beside ns/op.
func ListTasks(b *testing.B, q *BigQueues) {
	listTasks(b, q.broker(b), q.size)
}

// ListTasksReopened is ListTasks after closing the broker and opening the
// storage again (once per test binary), for a backend that rebuilds its
// indexes at open: it lists the rebuilt indexes, where ListTasks lists
// them as they grew through Enqueue when it ran first.
func ListTasksReopened(b *testing.B, q *BigQueues) {
	listTasks(b, q.reopenedBroker(b), q.size)
}

func listTasks(b *testing.B, br broker.Broker, size int) {
	for _, c := range []struct {
		name  string
		queue string
		state base.TaskState
	}{{"pending", pendingQueue, base.StatePending}, {"scheduled", scheduledQueue, base.StateScheduled}} {
		for _, at := range []struct {
			name   string
			offset int
		}{{"first", 0}, {"middle", size / 2}, {"last", size - 100}} {
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
				reportMillis(b)
			})
		}
	}
}

// QueueStats reads the stats of the big pending queue. It reports ms/op
// beside ns/op.
func QueueStats(b *testing.B, q *BigQueues) {
	br := q.broker(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		st, err := br.QueueStats(ctx, pendingQueue)
		if err != nil {
			b.Fatal(err)
		}
		if st.Pending != q.size {
			b.Fatalf("Pending = %d, want %d", st.Pending, q.size)
		}
	}
	reportMillis(b)
}

// reportMillis reports the time per op in milliseconds, the unit of the
// issue's goals.
func reportMillis(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/op")
}

// Drain fetches and completes n pending tasks of queue in batches of up to
// batch, as a busy Server does with a no-op handler (one Fetch, then one
// Complete of what it gave). It fails b when the queue runs dry first or a
// call fails.
func Drain(ctx context.Context, b *testing.B, br broker.Broker, queue string, batch, n int) {
	b.Helper()
	refs := make([]broker.LeaseRef, 0, batch)
	for done := 0; done < n; {
		ls, err := br.Fetch(ctx, broker.FetchParams{Queue: queue, Max: batch, LeaseDuration: time.Minute, ServerID: "bench"})
		if err != nil || len(ls) == 0 {
			b.Fatalf("Fetch after %d of %d tasks: %d, %v", done, n, len(ls), err)
		}
		refs = refs[:0]
		for _, l := range ls {
			refs = append(refs, l.Ref())
		}
		for _, err := range br.Complete(ctx, refs) {
			if err != nil {
				b.Fatal(err)
			}
		}
		done += len(ls)
	}
}
