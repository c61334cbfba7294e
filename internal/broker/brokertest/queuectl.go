package brokertest

import (
	"slices"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

func queueControlTests() []testCase {
	return []testCase{
		adminCase("PauseStopsFetch", func(e *adminEnv) {
			q := uniqueQueue("pause")
			m := e.add(q)
			wantNoErr(e, "PauseQueue", e.a.PauseQueue(e.ctx, q))
			wantNoErr(e, "PauseQueue again", e.a.PauseQueue(e.ctx, q))
			e.fetchNone(q)
			if st := e.stats(q); !st.Paused || st.Pending != 1 {
				e.Fatalf("paused queue: Paused %v, Pending %d", st.Paused, st.Pending)
			}
			// A paused queue still takes tasks and forwards them.
			e.add(q)
			e.schedule(q, time.Minute)
			e.advance(time.Minute)
			e.wantForward(e.forward(q), 1, false, 0)
			e.fetchNone(q)
			ch := e.subscribe()
			wantNoErr(e, "UnpauseQueue", e.a.UnpauseQueue(e.ctx, q))
			e.waitEvent(ch, broker.EventReady, q)
			if e.stats(q).Paused {
				e.Fatal("queue still paused after UnpauseQueue")
			}
			if got := e.drain(q); len(got) != 3 || got[0] != m.ID {
				e.Fatalf("fetched after unpausing: %v", got)
			}
			wantNoErr(e, "UnpauseQueue of a queue not paused", e.a.UnpauseQueue(e.ctx, q))
		}),
		adminCase("PauseBeforeAnyTask", func(e *adminEnv) {
			wantNoErr(e, "PauseQueue of a new queue", e.a.PauseQueue(e.ctx, "fresh"))
			if !slices.Contains(e.queues(), "fresh") {
				e.Fatalf("Queues after pausing a new queue: %v", e.queues())
			}
			m := e.add("fresh")
			e.fetchNone("fresh")
			wantNoErr(e, "UnpauseQueue", e.a.UnpauseQueue(e.ctx, "fresh"))
			e.fetchID("fresh", m.ID)
		}),
		adminCase("PauseIsPerQueue", func(e *adminEnv) {
			a, b := e.add("a"), e.add("b")
			wantNoErr(e, "PauseQueue a", e.a.PauseQueue(e.ctx, "a"))
			e.fetchNone("a")
			e.fetchID("b", b.ID)
			wantNoErr(e, "UnpauseQueue a", e.a.UnpauseQueue(e.ctx, "a"))
			e.fetchID("a", a.ID)
		}),
		adminCase("DeleteEmptyQueue", func(e *adminEnv) {
			_, l := e.inState("q", base.StateActive)
			e.complete(l.Ref())
			wantNoErr(e, "SetQueueSettings", e.a.SetQueueSettings(e.ctx, "q", broker.QueueSettings{MaxConcurrency: 1}))
			wantNoErr(e, "PauseQueue", e.a.PauseQueue(e.ctx, "q"))
			wantNoErr(e, "DeleteQueue of a queue without tasks", e.a.DeleteQueue(e.ctx, "q", false))
			if qs := e.queues(); slices.Contains(qs, "q") {
				e.Fatalf("Queues after DeleteQueue: %v", qs)
			}
			_, err := e.a.QueueStats(e.ctx, "q")
			wantErrIs(e, "QueueStats of a deleted queue", err, base.ErrQueueNotFound)
			// Enqueued into again, it starts afresh: no counters, settings
			// or pause.
			m := e.add("q")
			st := e.stats("q")
			if st.ProcessedTotal != 0 || st.Processed != 0 || st.Paused || st.Settings != (broker.QueueSettings{}) || st.Pending != 1 {
				e.Fatalf("QueueStats of a queue deleted and used again: %+v", st)
			}
			e.fetchID("q", m.ID)
		}),
		adminCase("DeleteRefusesTasks", func(e *adminEnv) {
			for _, s := range []base.TaskState{base.StatePending, base.StateScheduled, base.StateRetry, base.StateArchived, base.StateCompleted, base.StateAggregating} {
				q := "q-" + s.String()
				m, _ := e.inState(q, s)
				wantErrIs(e, "DeleteQueue of a queue with a "+s.String()+" task", e.a.DeleteQueue(e.ctx, q, false), base.ErrQueueNotEmpty)
				e.wantState(q, m.ID, s)
				if !slices.Contains(e.queues(), q) {
					e.Fatalf("queue %s no longer listed after a refused DeleteQueue", q)
				}
			}
		}),
		adminCase("DeleteForced", func(e *adminEnv) {
			var ms []*base.TaskMessage
			for _, s := range []base.TaskState{base.StateRetry, base.StateArchived, base.StateCompleted, base.StatePending, base.StateScheduled, base.StateAggregating} {
				m, _ := e.inState("q", s)
				ms = append(ms, m)
			}
			u := e.newMsg("q")
			u.UniqueKey, u.UniqueTTL = "u", time.Hour
			e.enqueue(u)
			ms = append(ms, u)
			e.add("other")
			wantNoErr(e, "DeleteQueue forced", e.a.DeleteQueue(e.ctx, "q", true))
			for _, m := range ms {
				e.wantGone("q", m.ID)
			}
			wantIDs(e, "Queues", e.queues(), []string{"other"})
			_, err := e.a.QueueStats(e.ctx, "q")
			wantErrIs(e, "QueueStats of a deleted queue", err, base.ErrQueueNotFound)
			groups, err := e.a.ListGroups(e.ctx, "q")
			if err != nil || len(groups) != 0 {
				e.Fatalf("ListGroups of a deleted queue: %v, %v", groups, err)
			}
			// Its lock went with it; the other queue is untouched.
			u2 := e.newMsg("q")
			u2.UniqueKey, u2.UniqueTTL = "u", time.Hour
			e.enqueue(u2)
			e.wantCounts("other", counts{Pending: 1})
		}),
		adminCase("DeleteForcedRefusesActive", func(e *adminEnv) {
			_, l := e.inState("q", base.StateActive)
			p, _ := e.inState("q", base.StatePending)
			wantErrIs(e, "DeleteQueue forced of a queue with an active task", e.a.DeleteQueue(e.ctx, "q", true), base.ErrQueueNotEmpty)
			e.wantState("q", p.ID, base.StatePending)
			if st := e.stats("q"); st.Paused || st.Active != 1 || st.Pending != 1 {
				e.Fatalf("queue after a refused DeleteQueue: %+v", st)
			}
			e.complete(l.Ref())
			wantNoErr(e, "DeleteQueue forced once nothing is active", e.a.DeleteQueue(e.ctx, "q", true))
			e.wantGone("q", p.ID)
		}),
		adminCase("DeleteManyTasks", func(e *adminEnv) {
			const n = 2300
			ps := make([]broker.EnqueueParams, n)
			for i := range ps {
				ps[i] = broker.EnqueueParams{Msg: e.newMsg("q")}
				if i%2 == 1 {
					ps[i].ProcessAt = e.now().Add(time.Hour)
				}
			}
			for i, err := range e.b.EnqueueBatch(e.ctx, ps) {
				wantNoErr(e, "EnqueueBatch", err)
				_ = i
			}
			wantNoErr(e, "DeleteQueue forced", e.a.DeleteQueue(e.ctx, "q", true))
			e.wantGone("q", ps[0].Msg.ID)
			e.wantGone("q", ps[n-1].Msg.ID)
			if qs := e.queues(); len(qs) != 0 {
				e.Fatalf("Queues: %v", qs)
			}
		}),
		adminCase("DeleteUnknown", func(e *adminEnv) {
			wantErrIs(e, "DeleteQueue of an unknown queue", e.a.DeleteQueue(e.ctx, "nope", false), base.ErrQueueNotFound)
			wantErrIs(e, "DeleteQueue forced of an unknown queue", e.a.DeleteQueue(e.ctx, "nope", true), base.ErrQueueNotFound)
		}),
	}
}
