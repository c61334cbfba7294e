package htq

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
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

	// Two workers park for lack of tasks; a batch wakes one of them.
	parked := make(chan *activeTask, 2)
	for range 2 {
		go func() { parked <- p.nextTask() }()
	}
	waitIdle := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) { // polls the workers' state
			p.waitMu.Lock()
			idle := p.idle
			p.waitMu.Unlock()
			if idle == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d workers idle, want %d", idle, n)
			}
		}
	}
	waitIdle(2)
	p.hand([]*activeTask{leased("big-1"), leased("small-1")})
	// The worker woken takes big-1 and wakes the other for small-1.
	got := []string{id(recv(t, parked, 10*time.Second, "first worker")), id(recv(t, parked, 10*time.Second, "second worker"))}
	if !(got[0] == "big-1" && got[1] == "small-1" || got[0] == "small-1" && got[1] == "big-1") {
		t.Fatalf("the two workers took %v, want big-1 and small-1", got)
	}

	// A worker that runs takes the oldest, whichever was woken.
	p.hand([]*activeTask{leased("a")})
	p.hand([]*activeTask{leased("b")})
	if got := id(p.nextTask()); got != "a" {
		t.Fatalf("the worker that ran first took %s, want a (the oldest leased)", got)
	}
	if got := id(p.nextTask()); got != "b" {
		t.Fatalf("the next worker took %s, want b", got)
	}

	// A queue that never empties: 1,000 tasks through it, at most 3
	// waiting at once, come out in order, and its array stays small.
	handed, taken := 0, 0
	for taken < 1000 {
		for handed < 1000 && handed-taken < 3 {
			p.hand([]*activeTask{leased(fmt.Sprint(handed))})
			handed++
		}
		if got, want := id(p.nextTask()), fmt.Sprint(taken); got != want {
			t.Fatalf("task %d taken: %s, want %s", taken, got, want)
		}
		taken++
		if n := cap(p.waiting); n > 256 {
			t.Fatalf("the waiting queue's array grew to %d entries with at most 3 tasks waiting", n)
		}
	}
	if n := p.nwaiting.Load(); n != 0 || len(p.waiting) != p.next {
		t.Fatalf("after the last take: %d counted waiting, %d tasks waiting", n, len(p.waiting)-p.next)
	}
}

// TestProcessorWakesAWorkerPerBlockedTask checks the chain of wake-ups:
// with handlers that block until every worker has a task, one batch
// starts all of them, each woken by the one before.
func TestProcessorWakesAWorkerPerBlockedTask(t *testing.T) {
	const n = 8
	p := newProcessor(processorParams{logger: quietConfig(Config{}).Logger, clock: clockwork.NewFakeClock(),
		queues: newQueueSet(map[string]int{"default": 1}, false), concurrency: n})
	var started sync.WaitGroup
	started.Add(n)
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	for range n {
		go func() {
			if p.nextTask() != nil {
				started.Done()
				<-all // blocks like a handler waiting on I/O
			}
		}()
	}
	ats := make([]*activeTask, n)
	for i := range ats {
		ats[i] = &activeTask{lease: &broker.Lease{Msg: &base.TaskMessage{ID: fmt.Sprint(i), Queue: "default"}}}
	}
	p.hand(ats)
	select {
	case <-all:
	case <-time.After(10 * time.Second): // a bound on a lost wake-up, not a speed check
		p.waitMu.Lock()
		defer p.waitMu.Unlock()
		t.Fatalf("not every worker started: %d tasks waiting, %d workers idle", len(p.waiting)-p.next, p.idle)
	}
	p.closeReady()
}

func TestAhead(t *testing.T) {
	for _, c := range []struct{ concurrency, want int }{
		{1, 8}, {4, 32}, {8, 64}, {10, 80}, {16, 128}, {50, 128}, {128, 128}, {200, 200},
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
	check("quick handlers, idle workers", 64, 90, 1)
	proc.fetching.Add(1)
	check("quick handlers, a fetch on its way", 64, 90, 40)
	check("quick handlers, a fetch on its way, max 8", 8, 90, 8)
	proc.fetching.Add(-1)
	proc.nwaiting.Add(1) // a leased task waits for a worker
	check("quick handlers, a task waiting", 64, 90, 40)
	proc.handlerTime.Store(int64(10 * time.Millisecond))
	check("slow handlers, a task waiting", 64, 10, 1)
}
