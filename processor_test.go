package htq

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/jonboulle/clockwork"
)

// TestProcessorHandsTasksInLeaseOrder checks the processor's hand-off from
// the fetch loops to the workers: a worker takes the oldest leased task
// when it runs, not when it was woken, so a worker woken for a task but
// not yet running (its thread off the CPU) holds none, and the tasks start
// in the order they were leased — the order fair sharing and priorities
// chose. The queue of waiting tasks does not grow while it never empties.
func TestProcessorHandsTasksInLeaseOrder(t *testing.T) {
	p := newProcessor(processorParams{logger: quietConfig(Config{}).Logger, clock: clockwork.NewFakeClock(),
		queues: newQueueSet(map[string]int{"default": 1}, false), concurrency: 4})
	leased := func(id string) *activeTask {
		return &activeTask{lease: &broker.Lease{Msg: &base.TaskMessage{ID: id, Queue: "default"}}}
	}
	id := func(at *activeTask) string { return at.lease.Msg.ID }

	p.hand(leased("big-1"))
	p.hand(leased("small-1"))
	<-p.ready // a worker is woken for big-1 but does not run yet
	<-p.ready // another is woken and runs first: it starts the oldest
	if got := id(p.take()); got != "big-1" {
		t.Fatalf("the worker that ran first took %s, want big-1 (the oldest leased)", got)
	}
	if got := id(p.take()); got != "small-1" {
		t.Fatalf("the late worker took %s, want small-1", got)
	}

	// A queue that never empties: 1,000 tasks through it, at most 3
	// waiting at once, come out in order, and its array stays small.
	handed, taken := 0, 0
	for taken < 1000 {
		for handed < 1000 && handed-taken < 3 {
			p.hand(leased(fmt.Sprint(handed)))
			handed++
		}
		<-p.ready
		if got, want := id(p.take()), fmt.Sprint(taken); got != want {
			t.Fatalf("task %d taken: %s, want %s", taken, got, want)
		}
		taken++
		if n := cap(p.waiting); n > 256 {
			t.Fatalf("the waiting queue's array grew to %d entries with at most 3 tasks waiting", n)
		}
	}
	if len(p.ready) != 0 || len(p.waiting) != p.next {
		t.Fatalf("after the last take: %d tokens, %d tasks waiting", len(p.ready), len(p.waiting)-p.next)
	}
}

func TestAhead(t *testing.T) {
	for _, c := range []struct{ concurrency, want int }{
		{1, 8}, {4, 32}, {8, 64}, {10, 64}, {50, 64}, {64, 64}, {100, 100},
	} {
		if got := ahead(c.concurrency); got != c.want {
			t.Errorf("ahead(%d) = %d, want %d", c.concurrency, got, c.want)
		}
	}
}

// TestLeaseLimits checks when a fetch waits for a larger batch: only while
// handlers are quick and workers have tasks waiting or another fetch is on
// its way; never with slow handlers, which lease no more than they run.
func TestLeaseLimits(t *testing.T) {
	proc := newProcessor(processorParams{broker: nil, logger: slog.New(slog.DiscardHandler), clock: clockwork.NewFakeClock(),
		queues: newQueueSet(map[string]int{"default": 1}, false), concurrency: 10,
		leaseDuration: time.Minute, baseContext: context.Background, serverID: "s"})
	check := func(what string, max int, wantLimit, wantWant int64) {
		t.Helper()
		if limit, want := proc.leaseLimits(max); limit != wantLimit || want != wantWant {
			t.Errorf("%s: leaseLimits(%d) = %d, %d; want %d, %d", what, max, limit, want, wantLimit, wantWant)
		}
	}
	check("slow handlers (the start)", 64, 10, 1)
	proc.handlerTime.Store(int64(time.Millisecond))
	check("quick handlers, idle workers", 64, 74, 1)
	proc.fetching.Add(1)
	check("quick handlers, a fetch on its way", 64, 74, 32)
	check("quick handlers, a fetch on its way, max 8", 8, 74, 8)
	proc.fetching.Add(-1)
	proc.ready <- struct{}{} // a leased task waits for a worker
	check("quick handlers, a task waiting", 64, 74, 32)
	proc.handlerTime.Store(int64(10 * time.Millisecond))
	check("slow handlers, a task waiting", 64, 10, 1)
	<-proc.ready
}
