package brokertest

import (
	"time"

	"github.com/htqueue/htq/internal/base"
)

func forwardTests() []testCase {
	return []testCase{
		{"Empty", func(e *env) {
			e.wantForward(e.forward("default"), 0, false, 0)
		}},
		{"NothingDue", func(e *env) {
			m := e.schedule("default", time.Minute)
			e.wantForward(e.forward("default"), 0, true, time.Minute)
			e.advance(20 * time.Second)
			e.wantForward(e.forward("default"), 0, true, 40*time.Second)
			e.wantState("default", m.ID, base.StateScheduled)
		}},
		{"MovesDueScheduled", func(e *env) {
			m := e.schedule("default", time.Minute)
			e.advance(time.Minute)
			e.wantForward(e.forward("default"), 1, false, 0)
			ti := e.wantState("default", m.ID, base.StatePending)
			wantSameMsg(e, "forwarded task", ti.Message, m)
			wantTime(e, "NextProcessAt of the forwarded task", ti.NextProcessAt, e.now())
			l := e.fetchID("default", m.ID)
			wantSameMsg(e, "fetched task", l.Msg, m)
		}},
		{"DueAtExactTime", func(e *env) {
			m := e.schedule("default", 10*time.Second)
			e.advance(10*time.Second - time.Millisecond)
			e.wantForward(e.forward("default"), 0, true, time.Millisecond)
			e.advance(time.Millisecond)
			e.wantForward(e.forward("default"), 1, false, 0)
			e.fetchID("default", m.ID)
		}},
		{"DueOrder", func(e *env) {
			// A retry task due at +20s between scheduled tasks due at +10s
			// and +30s, enqueued in another order.
			r := e.add("default")
			e.retry(e.fetchID("default", r.ID).Ref(), 20*time.Second, "x")
			s30 := e.schedule("default", 30*time.Second)
			s10 := e.schedule("default", 10*time.Second)
			s40 := e.schedule("default", 40*time.Second)
			e.advance(35 * time.Second)
			e.wantForward(e.forward("default"), 3, true, 5*time.Second)
			wantIDs(e, "fetch order after Forward", e.drain("default"), msgIDs(s10, r, s30))
			e.wantState("default", s40.ID, base.StateScheduled)
		}},
		{"LeavesNotYetDue", func(e *env) {
			a := e.schedule("default", 10*time.Second)
			b := e.schedule("default", 20*time.Second)
			e.advance(15 * time.Second)
			e.wantForward(e.forward("default"), 1, true, 5*time.Second)
			e.wantState("default", a.ID, base.StatePending)
			ti := e.wantState("default", b.ID, base.StateScheduled)
			wantTime(e, "NextProcessAt of the task not yet due", ti.NextProcessAt, Epoch.Add(20*time.Second))
			e.wantForward(e.forward("default"), 0, true, 5*time.Second)
			e.advance(5 * time.Second)
			e.wantForward(e.forward("default"), 1, false, 0)
			wantIDs(e, "pending tasks", e.drain("default"), msgIDs(a, b))
		}},
		{"NextInCountsRetry", func(e *env) {
			e.schedule("default", time.Hour)
			r := e.add("default")
			e.retry(e.fetchID("default", r.ID).Ref(), 90*time.Second, "x")
			e.wantForward(e.forward("default"), 0, true, 90*time.Second)
		}},
		{"Limit", func(e *env) {
			var due []string
			for i := 1; i <= 5; i++ {
				due = append(due, e.schedule("default", time.Duration(i)*time.Second).ID)
			}
			e.schedule("default", 100*time.Second)
			e.advance(10 * time.Second)
			e.wantForward(e.forwardN("default", 2), 2, true, 0)
			e.wantForward(e.forwardN("default", 2), 2, true, 0)
			e.wantForward(e.forwardN("default", 2), 1, true, 90*time.Second)
			wantIDs(e, "fetch order", e.drain("default"), due)
		}},
		{"AfterPending", func(e *env) {
			// Forwarded tasks queue up behind tasks already pending.
			s := e.schedule("default", time.Second)
			p := e.add("default")
			e.advance(time.Second)
			e.wantForward(e.forward("default"), 1, false, 0)
			wantIDs(e, "fetch order", e.drain("default"), msgIDs(p, s))
		}},
		{"QueuesAreSeparate", func(e *env) {
			a := e.schedule("a", time.Second)
			e.schedule("b", time.Second)
			e.advance(time.Second)
			e.wantForward(e.forward("a"), 1, false, 0)
			wantIDs(e, "pending tasks of a", e.drain("a"), msgIDs(a))
			e.fetchNone("b")
			e.wantForward(e.forward("b"), 1, false, 0)
		}},
	}
}

func retentionTests() []testCase {
	complete := func(e *env, retention time.Duration) *base.TaskMessage {
		e.Helper()
		m := e.newMsg("default")
		m.Retention = retention
		e.enqueue(m)
		e.complete(e.fetchID("default", m.ID).Ref())
		return m
	}
	deleteExpired := func(e *env, limit int) int {
		e.Helper()
		n, err := e.b.DeleteExpiredCompleted(e.ctx, "default", limit)
		wantNoErr(e, "DeleteExpiredCompleted", err)
		return n
	}
	return []testCase{
		{"DeletesOnlyExpired", func(e *env) {
			a := complete(e, 10*time.Second)
			b := complete(e, 20*time.Second)
			c := complete(e, 30*time.Second)
			if n := deleteExpired(e, 100); n != 0 {
				e.Fatalf("DeleteExpiredCompleted before any retention ran out deleted %d", n)
			}
			e.advance(15 * time.Second)
			if n := deleteExpired(e, 100); n != 1 {
				e.Fatalf("DeleteExpiredCompleted deleted %d tasks, want 1", n)
			}
			e.wantGone("default", a.ID)
			e.wantState("default", b.ID, base.StateCompleted)
			e.wantState("default", c.ID, base.StateCompleted)
			e.advance(10 * time.Second)
			if n := deleteExpired(e, 100); n != 1 {
				e.Fatalf("DeleteExpiredCompleted deleted %d tasks, want 1", n)
			}
			e.wantGone("default", b.ID)
			e.wantState("default", c.ID, base.StateCompleted)
		}},
		{"RetentionCountsFromCompletion", func(e *env) {
			m := e.newMsg("default")
			m.Retention = 10 * time.Second
			e.enqueue(m)
			l := e.fetchID("default", m.ID)
			e.advance(20 * time.Second) // longer than the retention, before completion
			e.complete(l.Ref())
			e.advance(5 * time.Second)
			if n := deleteExpired(e, 100); n != 0 {
				e.Fatalf("DeleteExpiredCompleted deleted %d tasks 5s into a 10s retention", n)
			}
			e.advance(6 * time.Second)
			if n := deleteExpired(e, 100); n != 1 {
				e.Fatalf("DeleteExpiredCompleted deleted %d tasks, want 1", n)
			}
			e.wantGone("default", m.ID)
		}},
		{"ExpiresAtExactRetention", func(e *env) {
			m := complete(e, 10*time.Second)
			e.advance(10*time.Second - time.Millisecond)
			if n := deleteExpired(e, 100); n != 0 {
				e.Fatalf("DeleteExpiredCompleted 1ms before the end of the retention deleted %d", n)
			}
			e.advance(time.Millisecond)
			if n := deleteExpired(e, 100); n != 1 {
				e.Fatalf("DeleteExpiredCompleted at the end of the retention deleted %d, want 1", n)
			}
			e.wantGone("default", m.ID)
		}},
		{"Limit", func(e *env) {
			var ids []string
			for range 5 {
				ids = append(ids, complete(e, time.Second).ID)
			}
			e.advance(2 * time.Second)
			for _, want := range []int{2, 2, 1, 0} {
				if n := deleteExpired(e, 2); n != want {
					e.Fatalf("DeleteExpiredCompleted limit 2 deleted %d, want %d", n, want)
				}
			}
			for _, id := range ids {
				e.wantGone("default", id)
			}
		}},
		{"OtherStatesUntouched", func(e *env) {
			var ms []*base.TaskMessage
			var states []base.TaskState
			for _, s := range allStates {
				if s == base.StateCompleted {
					continue
				}
				m, _ := e.inState(s.String(), s)
				ms, states = append(ms, m), append(states, s)
			}
			e.advance(30 * 24 * time.Hour)
			for i, m := range ms {
				n, err := e.b.DeleteExpiredCompleted(e.ctx, m.Queue, 100)
				wantNoErr(e, "DeleteExpiredCompleted", err)
				if n != 0 {
					e.Fatalf("DeleteExpiredCompleted of queue %s deleted %d tasks, want 0", m.Queue, n)
				}
				e.wantState(m.Queue, m.ID, states[i])
			}
		}},
	}
}
