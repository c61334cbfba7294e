package brokertest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

func concurrencyTests() []testCase {
	return []testCase{
		{"FetchersGetEachTaskOnce", testConcurrentFetchers},
		{"EnqueuersLoseNothing", testConcurrentEnqueuers},
		{"SameIDOneWins", func(e *env) {
			const n = 20
			errs := make([]error, n)
			msgs := make([]*base.TaskMessage, n)
			var wg sync.WaitGroup
			for i := range n {
				msgs[i] = &base.TaskMessage{ID: "the-id", Type: "t", Payload: fmt.Appendf(nil, "from %d", i), Queue: "default"}
				wg.Go(func() { errs[i] = e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: msgs[i]}) })
			}
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner >= 0:
					e.Fatalf("two enqueues of ID the-id succeeded (%d and %d)", winner, i)
				case err == nil:
					winner = i
				default:
					wantErrIs(e, fmt.Sprintf("enqueue %d of ID the-id", i), err, base.ErrTaskIDConflict)
				}
			}
			if winner < 0 {
				e.Fatal("no enqueue of ID the-id succeeded")
			}
			wantSameMsg(e, "stored task", e.info("default", "the-id").Message, msgs[winner])
			wantIDs(e, "pending tasks", e.drain("default"), []string{"the-id"})
		}},
		{"SameUniqueKeyOneWins", func(e *env) {
			const n = 20
			errs := make([]error, n)
			msgs := make([]*base.TaskMessage, n)
			var wg sync.WaitGroup
			for i := range n {
				msgs[i] = e.uniqueMsg("default", "k", time.Hour)
				wg.Go(func() { errs[i] = e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: msgs[i]}) })
			}
			wg.Wait()
			var won []string
			for i, err := range errs {
				if err == nil {
					won = append(won, msgs[i].ID)
					continue
				}
				wantErrIs(e, fmt.Sprintf("enqueue %d with unique key k", i), err, base.ErrDuplicateTask)
			}
			if len(won) != 1 {
				e.Fatalf("%d enqueues with unique key k succeeded (%v), want exactly 1", len(won), won)
			}
			wantIDs(e, "pending tasks", e.drain("default"), won)
		}},
		{"CompleteRacesRecovery", testCompleteRacesRecovery},
	}
}

// testConcurrentFetchers has many goroutines fetch and complete thousands
// of tasks at once: each task must go to exactly one of them, none lost.
func testConcurrentFetchers(e *env) {
	const total, fetchers = 3000, 16
	want := make(map[string]bool, total)
	var ps []broker.EnqueueParams
	for range total {
		m := e.newMsg("default")
		want[m.ID] = true
		ps = append(ps, broker.EnqueueParams{Msg: m})
	}
	for start := 0; start < total; start += 500 {
		for i, err := range e.b.EnqueueBatch(e.ctx, ps[start:start+500]) {
			wantNoErr(e, fmt.Sprintf("EnqueueBatch entry %d", start+i), err)
		}
	}

	got := make([][]string, fetchers)
	var wg sync.WaitGroup
	for g := range fetchers {
		wg.Go(func() {
			max := 1 + g%7
			for {
				ls, err := e.b.Fetch(e.ctx, broker.FetchParams{Queue: "default", Max: max, LeaseDuration: leaseFor, ServerID: fmt.Sprint("server-", g)})
				if err != nil {
					e.Errorf("fetcher %d: Fetch: %v", g, err)
					return
				}
				if len(ls) == 0 {
					return
				}
				if len(ls) > max {
					e.Errorf("fetcher %d: Fetch max %d returned %d tasks", g, max, len(ls))
				}
				refs := make([]broker.LeaseRef, len(ls))
				for i, l := range ls {
					got[g] = append(got[g], l.Msg.ID)
					refs[i] = l.Ref()
				}
				for i, err := range e.b.Complete(e.ctx, refs) {
					if err != nil {
						e.Errorf("fetcher %d: Complete %s: %v", g, refs[i].ID, err)
					}
				}
			}
		})
	}
	wg.Wait()
	if e.Failed() {
		e.FailNow()
	}

	seen := make(map[string]int, total)
	for g, ids := range got {
		for _, id := range ids {
			if other, dup := seen[id]; dup {
				e.Fatalf("task %s was fetched by fetcher %d and fetcher %d", id, other, g)
			}
			if !want[id] {
				e.Fatalf("fetcher %d got task %s that was never enqueued", g, id)
			}
			seen[id] = g
		}
	}
	if len(seen) != total {
		e.Fatalf("fetchers got %d distinct tasks, want %d", len(seen), total)
	}
	e.fetchNone("default")
	e.advance(2 * leaseFor)
	if ls := e.expired("default"); len(ls) != 0 {
		e.Fatalf("%d tasks are still active after every task was completed", len(ls))
	}
}

// testConcurrentEnqueuers has many goroutines enqueue at once: every task
// is stored, and each producer's tasks are fetched in the order it
// enqueued them.
func testConcurrentEnqueuers(e *env) {
	const producers, each = 16, 100
	ids := make([][]string, producers)
	var wg sync.WaitGroup
	for p := range producers {
		for i := range each {
			ids[p] = append(ids[p], fmt.Sprintf("p%02d-%03d", p, i))
		}
		wg.Go(func() {
			for _, id := range ids[p] {
				m := &base.TaskMessage{ID: id, Type: "t", Queue: "default", Payload: []byte(id)}
				if err := e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: m}); err != nil {
					e.Errorf("producer %d: Enqueue %s: %v", p, id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if e.Failed() {
		e.FailNow()
	}
	got := e.drain("default")
	if len(got) != producers*each {
		e.Fatalf("fetched %d tasks, want %d", len(got), producers*each)
	}
	next := make(map[string]int) // producer prefix → index of its next task
	for _, id := range got {
		var p, i int
		if _, err := fmt.Sscanf(id, "p%02d-%03d", &p, &i); err != nil || p < 0 || p >= producers {
			e.Fatalf("fetched unexpected task %q", id)
		}
		if want := ids[p][next[id[:3]]]; id != want {
			e.Fatalf("producer %d's tasks out of order: got %s, want %s next", p, id, want)
		}
		next[id[:3]]++
	}
}

// testCompleteRacesRecovery races workers completing their tasks against
// the Recoverer retrying the same tasks after their leases ran out: for
// each task exactly one of them must win, and the task must end in the
// winner's state.
func testCompleteRacesRecovery(e *env) {
	const n = 200
	for range n {
		e.add("default")
	}
	var leases []*broker.Lease
	for len(leases) < n {
		ls := e.fetchN("default", 50)
		if len(ls) == 0 {
			e.Fatalf("fetched %d tasks, want %d", len(leases), n)
		}
		leases = append(leases, ls...)
	}
	e.advance(leaseFor + time.Second)

	completed := make([]bool, n)
	recovered := make(map[string]bool)
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() {
		for i, l := range leases {
			err := e.b.Complete(e.ctx, []broker.LeaseRef{l.Ref()})[0]
			switch {
			case err == nil:
				completed[i] = true
			case !errors.Is(err, base.ErrLeaseLost):
				e.Errorf("Complete %s: %v", l.Msg.ID, err)
			}
		}
	})
	wg.Go(func() {
		attempted := make(map[string]bool)
		for {
			ls, err := e.b.ExpiredLeases(e.ctx, "default", n)
			if err != nil {
				e.Errorf("ExpiredLeases: %v", err)
				return
			}
			if len(ls) == 0 {
				return
			}
			progress := false
			for _, l := range ls {
				if attempted[l.Msg.ID] {
					continue
				}
				attempted[l.Msg.ID] = true
				progress = true
				err := e.b.Retry(e.ctx, broker.RetryParams{Lease: l.Ref(), Delay: time.Hour, ErrMsg: "lease expired", IsFailure: true, RequireExpired: true})
				switch {
				case err == nil:
					mu.Lock()
					recovered[l.Msg.ID] = true
					mu.Unlock()
				case errors.Is(err, base.ErrLeaseLost):
					// The worker got there first.
				default:
					e.Errorf("Retry (RequireExpired) %s: %v", l.Msg.ID, err)
					return
				}
			}
			if !progress {
				e.Errorf("ExpiredLeases keeps listing tasks that were already recovered or completed: %v", leaseIDs(ls))
				return
			}
		}
	})
	wg.Wait()
	if e.Failed() {
		e.FailNow()
	}
	for i, l := range leases {
		id := l.Msg.ID
		switch {
		case completed[i] && recovered[id]:
			e.Fatalf("task %s was both completed by its worker and recovered", id)
		case completed[i]:
			e.wantGone("default", id)
		case recovered[id]:
			ti := e.wantState("default", id, base.StateRetry)
			wantBookkeeping(e, "recovered task", ti.Message, 1, "lease expired", e.now())
		default:
			e.Fatalf("task %s was neither completed nor recovered", id)
		}
	}
}
