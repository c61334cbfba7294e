package rdb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/redistest"
)

// The management operations on a queue of 1,000,000 tasks (issue 4: a
// page of 100 in ≤ 20 ms, QueueStats in ≤ 5 ms). Run with:
//
//	go test ./internal/rdb -run XXX -bench 1M -count 5
//
// The first benchmark fills a database once per test binary (about 20 s):
// queue "big" with 1,000,000 pending tasks and queue "bigs" with 1,000,000
// scheduled ones, 100-byte payloads, through EnqueueBatch.

const bigQueueSize = 1_000_000

var big struct {
	once sync.Once
	url  string
}

// bigBroker returns a Broker over the database holding the big queues,
// filling it the first time (or again when another test flushed it).
func bigBroker(b *testing.B) *Broker {
	b.Helper()
	big.once.Do(func() { big.url = redistest.URL(b) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	br, err := Open(ctx, big.url, Options{})
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	b.Cleanup(func() { _ = br.Close() })
	for _, q := range []struct {
		name string
		due  time.Duration
	}{{"big", 0}, {"bigs", time.Hour}} {
		st, err := br.QueueStats(ctx, q.name)
		if err == nil && st.Pending+st.Scheduled == bigQueueSize {
			continue
		}
		fillBig(b, br, q.name, q.due)
	}
	return br
}

// fillBig enqueues bigQueueSize tasks into q, due after due, with four
// goroutines sending batches of 1,000.
func fillBig(b *testing.B, br *Broker, q string, due time.Duration) {
	b.Helper()
	ctx := context.Background()
	if err := br.DeleteQueue(ctx, q, true); err != nil && !isNotFound(err) {
		b.Fatalf("DeleteQueue %s: %v", q, err)
	}
	now, err := br.Now(ctx)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	const workers, batch = 4, 1000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps := make([]broker.EnqueueParams, 0, batch)
			for i := w * batch; i < bigQueueSize; i += workers * batch {
				ps = ps[:0]
				for j := i; j < i+batch && j < bigQueueSize; j++ {
					m := msg(q, fmt.Sprintf("t%07d", j))
					m.Payload = payload100
					p := broker.EnqueueParams{Msg: m}
					if due > 0 {
						p.ProcessAt = now.Add(due + time.Duration(j)*time.Millisecond)
					}
					ps = append(ps, p)
				}
				for _, err := range br.EnqueueBatch(ctx, ps) {
					if err != nil {
						b.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	b.Logf("filled %s with %d tasks in %v", q, bigQueueSize, time.Since(start).Round(time.Millisecond))
}

func isNotFound(err error) bool {
	return errors.Is(err, base.ErrQueueNotFound)
}

// BenchmarkListTasks1M lists one page of 100 tasks of a queue of 1,000,000,
// at its start, middle and end (pending is a list, scheduled a zset).
func BenchmarkListTasks1M(b *testing.B) {
	br := bigBroker(b)
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
// tasks (with MEMORY USAGE).
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
