package embedded

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// The cost of the pending index on the hot path (docs/performance.md,
// "Inspector on 1,000,000 tasks"). Run with:
//
//	go test ./internal/embedded -run XXX -bench Pending -count 5

var payload100 = []byte("0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789")

// BenchmarkPendingChurn is the in-memory cost of a task passing through a
// queue that holds a backlog of pending tasks: Enqueue one, Fetch one (the
// oldest), Complete it, on a mem: Broker so that no disk is involved.
func BenchmarkPendingChurn(b *testing.B) {
	for _, backlog := range []int{0, 1_000, 1_000_000} {
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
	for _, backlog := range []int{1_000, 1_000_000} {
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
