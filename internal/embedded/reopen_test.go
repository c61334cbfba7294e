package embedded

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// snapshot is everything a reopen must keep, per queue and task ID.
func snapshot(t *testing.T, b *Broker) map[string]string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]string)
	for name, q := range b.queues {
		out[name] = fmt.Sprintf("queue paused=%v pending=%v", q.paused, pendingIDs(q))
		for id, tk := range q.tasks {
			c := *tk
			c.l, c.r, c.n, c.msg = nil, nil, 0, nil
			c.m = *tk.msg
			if c.state == base.StateActive {
				c.at = time.Time{} // the lease ends at reopen
			}
			out[name+"/"+id] = fmt.Sprintf("%+v", c)
		}
	}
	return out
}

// requireSameSnapshot stops the test at step when after (a snapshot of a
// reopened or recovered store) differs from before, naming every key that
// changed or appeared.
func requireSameSnapshot(t *testing.T, step int, before, after map[string]string) {
	t.Helper()
	if reflect.DeepEqual(before, after) {
		return
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("step %d: %s\nbefore %s\nafter  %s", step, k, v, after[k])
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("step %d: %s appeared", step, k)
		}
	}
	t.FailNow()
}

func pendingIDs(q *queue) []string {
	var ids []string
	q.pending.ascending(func(t *task) bool {
		ids = append(ids, t.msg.ID)
		return true
	})
	return ids
}

// TestReopenKeepsEverything runs random operations and, every so often,
// closes and reopens the directory: the state after must equal the state
// before, field by field, pending order included.
func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	clock := clockwork.NewFakeClockAt(time.Date(2031, 3, 14, 15, 9, 26, 0, time.UTC))
	opts := Options{Clock: clock, Logger: discardLogger()}
	b, err := Open(t.Context(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	queues := []string{"a", "b", "c"}
	var leases []*broker.Lease
	n := 0
	for step := range 3000 {
		q := queues[rng.IntN(len(queues))]
		switch r := rng.IntN(100); {
		case r < 35:
			n++
			m := &base.TaskMessage{ID: fmt.Sprintf("t%d", n), Type: "x", Queue: q, Payload: []byte{byte(n)}, MaxRetry: 3}
			switch rng.IntN(3) {
			case 0:
				m.Priority = rng.IntN(base.MaxPriority + 1)
			case 1:
				m.Key = fmt.Sprintf("k%d", rng.IntN(4))
			}
			if rng.IntN(4) == 0 {
				m.UniqueKey, m.UniqueTTL = fmt.Sprintf("u%d", rng.IntN(5)), time.Minute
			}
			if rng.IntN(5) == 0 {
				m.Retention = time.Hour
			}
			if rng.IntN(10) == 0 {
				m.GroupKey = "g"
			}
			var at time.Time
			if rng.IntN(4) == 0 {
				at = clock.Now().Add(time.Duration(rng.IntN(60)) * time.Second)
			}
			_ = b.Enqueue(ctx, broker.EnqueueParams{Msg: m, ProcessAt: at})
		case r < 55:
			ls, err := b.Fetch(ctx, broker.FetchParams{Queue: q, Max: 1 + rng.IntN(3), LeaseDuration: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, ls...)
		case r < 80 && len(leases) > 0:
			i := rng.IntN(len(leases))
			l := leases[i].Ref()
			leases = append(leases[:i], leases[i+1:]...)
			switch rng.IntN(5) {
			case 0:
				_ = b.Retry(ctx, broker.RetryParams{Lease: l, Delay: time.Duration(rng.IntN(30)) * time.Second, ErrMsg: "boom", IsFailure: true})
			case 1:
				_ = b.Archive(ctx, broker.ArchiveParams{Lease: l, ErrMsg: "dead"})
			case 2:
				_ = b.Requeue(ctx, l)
			case 3:
				_ = b.WriteResult(ctx, l, []byte("r"))
				leases = append(leases, &broker.Lease{Msg: &base.TaskMessage{ID: l.ID, Queue: l.Queue}, Token: l.Token})
			default:
				b.Complete(ctx, []broker.LeaseRef{l})
			}
		case r < 90:
			if _, err := b.Forward(ctx, q, 10); err != nil {
				t.Fatal(err)
			}
			if _, err := b.DeleteExpiredCompleted(ctx, q, 10); err != nil {
				t.Fatal(err)
			}
		case r < 95:
			clock.Advance(time.Duration(rng.IntN(20)) * time.Second)
		default:
			_ = b.DeleteTask(ctx, q, fmt.Sprintf("t%d", 1+rng.IntN(n+1)))
		}
		if step%500 == 499 {
			if err := b.CheckInvariants(ctx); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			before := snapshot(t, b)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if b, err = Open(ctx, dir, opts); err != nil {
				t.Fatalf("step %d: reopen: %v", step, err)
			}
			after := snapshot(t, b)
			requireSameSnapshot(t, step, before, after)
			if err := b.CheckInvariants(ctx); err != nil {
				t.Fatalf("step %d after reopen: %v", step, err)
			}
			leases = nil // the reopen expired them
		}
	}
}
