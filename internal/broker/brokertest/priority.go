package brokertest

import (
	"fmt"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// The priorities of base.TaskMessage: a pending task of a higher Priority
// is fetched before any of a lower one; within one priority, tasks come in
// the order they became pending (Requeue puts a task at the head of its
// priority). The suite pins down besides:
//   - ListTasks of pending tasks lists them in fetch order: the highest
//     priority first, then priority 0, then (priority-0) tasks with a
//     fair-sharing key by key in byte order, each key's oldest first.
//   - A task keeps its priority through every state: a retry, a scheduled
//     task coming due, a task run or requeued goes back to its own level.

// addPrio enqueues a new pending task of queue with priority p.
func (e *env) addPrio(queue string, p int) *base.TaskMessage {
	e.Helper()
	m := e.newMsg(queue)
	m.Priority = p
	e.enqueue(m)
	return m
}

func priorityTests() []testCase {
	return []testCase{
		{"StrictBetweenLevelsFIFOWithin", func(e *env) {
			byPrio := map[int][]string{}
			for _, p := range []int{0, 3, 9, 3, 0, 9, 1, 0, 3} {
				m := e.addPrio("default", p)
				byPrio[p] = append(byPrio[p], m.ID)
			}
			var want []string
			for p := base.MaxPriority; p >= 0; p-- {
				want = append(want, byPrio[p]...)
			}
			var got []string
			for range want {
				got = append(got, e.fetchOne("default").Msg.ID)
			}
			wantIDs(e, "fetch order one at a time", got, want)
			e.fetchNone("default")
		}},
		{"OneFetchAcrossLevels", func(e *env) {
			low := e.addPrio("default", 0)
			mid := e.addPrio("default", 4)
			high := e.addPrio("default", 8)
			mid2 := e.addPrio("default", 4)
			ls := e.fetchN("default", 3)
			wantIDs(e, "one Fetch of 3", leaseIDs(ls), []string{high.ID, mid.ID, mid2.ID})
			for _, l := range ls {
				if l.Msg.ID == high.ID && l.Msg.Priority != 8 {
					e.Fatalf("fetched message has Priority %d, want 8", l.Msg.Priority)
				}
			}
			e.fetchID("default", low.ID)
		}},
		{"LaterHigherFirst", func(e *env) {
			a := e.addPrio("default", 2)
			b := e.addPrio("default", 0)
			e.fetchID("default", a.ID)
			// A task of a higher priority enqueued later still goes first.
			c := e.addPrio("default", 1)
			d := e.addPrio("default", 7)
			wantIDs(e, "fetch order", e.drain("default"), []string{d.ID, c.ID, b.ID})
		}},
		{"PriorityKeptInEveryState", func(e *env) {
			m := e.newMsg("default")
			m.Priority = 6
			m.Retention = time.Hour
			e.enqueue(m)
			wantSameMsg(e, "pending", e.wantState("default", m.ID, base.StatePending).Message, m)
			l := e.fetchID("default", m.ID)
			wantSameMsg(e, "fetched", l.Msg, m)
			e.retry(l.Ref(), time.Minute, "boom")
			wantSameMsg(e, "retry", e.wantState("default", m.ID, base.StateRetry).Message, m)
			e.advance(time.Minute)
			e.wantForward(e.forward("default"), 1, false, 0)
			l = e.fetchID("default", m.ID)
			e.complete(l.Ref())
			wantSameMsg(e, "completed", e.wantState("default", m.ID, base.StateCompleted).Message, m)
		}},
		{"RetryBackToItsLevel", func(e *env) {
			a := e.addPrio("default", 5)
			l := e.fetchID("default", a.ID)
			low := e.addPrio("default", 0)
			five := e.addPrio("default", 5)
			e.retry(l.Ref(), time.Second, "failed")
			e.advance(time.Second)
			e.wantForward(e.forward("default"), 1, false, 0)
			nine := e.addPrio("default", 9)
			// The retried task is due after five became pending: it goes
			// to the back of level 5, still before level 0.
			wantIDs(e, "fetch order", e.drain("default"), []string{nine.ID, five.ID, a.ID, low.ID})
		}},
		{"ScheduledComesDueIntoItsLevel", func(e *env) {
			m := e.newMsg("default")
			m.Priority = 3
			e.enqueueAt(m, e.now().Add(time.Minute))
			zero := e.addPrio("default", 0)
			three := e.addPrio("default", 3)
			e.advance(time.Minute)
			e.wantForward(e.forward("default"), 1, false, 0)
			wantIDs(e, "fetch order", e.drain("default"), []string{three.ID, m.ID, zero.ID})
		}},
		{"RequeueToHeadOfItsLevel", func(e *env) {
			a := e.addPrio("default", 4)
			b := e.addPrio("default", 4)
			zero := e.addPrio("default", 0)
			l := e.fetchID("default", a.ID)
			high := e.addPrio("default", 9)
			wantNoErr(e, "Requeue", e.b.Requeue(e.ctx, l.Ref()))
			wantIDs(e, "fetch order", e.drain("default"), []string{high.ID, a.ID, b.ID, zero.ID})
		}},
		{"RecoveredLeaseBackToItsLevel", func(e *env) {
			a := e.addPrio("default", 2)
			e.fetchID("default", a.ID)
			zero := e.addPrio("default", 0)
			e.advance(leaseFor)
			wantIDs(e, "recovered", e.recoverAll("default", 0), []string{a.ID})
			e.wantForward(e.forward("default"), 1, false, 0)
			wantIDs(e, "fetch order", e.drain("default"), []string{a.ID, zero.ID})
		}},
		{"Batch", func(e *env) {
			var ps []broker.EnqueueParams
			var ms []*base.TaskMessage
			for _, p := range []int{0, 2, 9, 2} {
				m := e.newMsg("default")
				m.Priority = p
				ms = append(ms, m)
				ps = append(ps, broker.EnqueueParams{Msg: m})
			}
			for i, err := range e.b.EnqueueBatch(e.ctx, ps) {
				wantNoErr(e, fmt.Sprintf("EnqueueBatch task %d", i), err)
			}
			wantIDs(e, "fetch order", e.drain("default"), msgIDs(ms[2], ms[1], ms[3], ms[0]))
		}},
		{"RepeatWithOtherPriorityConflicts", func(e *env) {
			m := e.addPrio("default", 3)
			again := same(m)
			wantNoErr(e, "the same Enqueue again", e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: again}))
			other := same(m)
			other.Priority = 4
			wantErrIs(e, "Enqueue of the ID with another priority", e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: other}), base.ErrTaskIDConflict)
			e.fetchID("default", m.ID)
			e.fetchNone("default")
		}},
		{"Invalid", func(e *env) {
			for _, p := range []int{-1, base.MaxPriority + 1, 100} {
				m := e.newMsg("default")
				m.Priority = p
				wantErrIs(e, fmt.Sprintf("Enqueue with priority %d", p), e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: m}), base.ErrInvalidArgument)
			}
			m := e.newMsg("default")
			m.Priority, m.Key = 1, "tenant"
			wantErrIs(e, "Enqueue with a priority and a key", e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: m}), base.ErrInvalidArgument)
			if qs := e.queues(); len(qs) != 0 {
				e.Fatalf("Queues after refused enqueues: %v", qs)
			}
		}},
		{"ReadyEvent", func(e *env) {
			q := uniqueQueue("prio-ready")
			ch := e.subscribe()
			m := e.newMsg(q)
			m.Priority = 5
			e.enqueue(m)
			e.waitEvent(ch, broker.EventReady, q)
		}},
		adminCase("StatsAndList", func(e *adminEnv) {
			seven := e.addPrio("default", 7)
			e.advance(time.Second)
			zero := e.addPrio("default", 0)
			one := e.addPrio("default", 1)
			seven2 := e.addPrio("default", 7)
			st := e.stats("default")
			if st.Pending != 4 {
				e.Fatalf("Pending = %d, want 4", st.Pending)
			}
			wantTime(e, "OldestPending", st.OldestPending, Epoch)
			wantIDs(e, "ListTasks pending", e.listIDs("default", base.StatePending, ""), msgIDs(seven, seven2, one, zero))
			page := e.list("default", base.StatePending, "", 1, 2)
			wantIDs(e, "ListTasks pending offset 1 limit 2", infoIDs(page), msgIDs(seven2, one))
			if page[0].Message.Priority != 7 {
				e.Fatalf("listed Priority %d, want 7", page[0].Message.Priority)
			}
			e.fetchID("default", seven.ID)
			if st := e.stats("default"); st.Pending != 3 || st.Active != 1 {
				e.Fatalf("after one fetch: Pending %d, Active %d", st.Pending, st.Active)
			}
		}),
		adminCase("TaskOps", func(e *adminEnv) {
			a := e.addPrio("default", 2)
			b := e.addPrio("default", 2)
			c := e.addPrio("default", 6)
			wantNoErr(e, "DeleteTask", e.b.DeleteTask(e.ctx, "default", b.ID))
			wantNoErr(e, "ArchiveTask", e.a.ArchiveTask(e.ctx, "default", c.ID))
			e.wantCounts("default", counts{Pending: 1, Archived: 1})
			zero := e.addPrio("default", 0)
			wantNoErr(e, "RunTask", e.a.RunTask(e.ctx, "default", c.ID))
			wantIDs(e, "fetch order", e.drain("default"), msgIDs(c, a, zero))
		}),
		adminCase("BulkOps", func(e *adminEnv) {
			for _, p := range []int{0, 1, 5, 5, 9} {
				e.addPrio("default", p)
			}
			n, err := e.a.ArchiveAll(e.ctx, "default", base.StatePending, "")
			wantNoErr(e, "ArchiveAll pending", err)
			if n != 5 {
				e.Fatalf("ArchiveAll pending = %d, want 5", n)
			}
			e.wantCounts("default", counts{Archived: 5})
			e.fetchNone("default")
			n, err = e.a.RunAll(e.ctx, "default", base.StateArchived, "")
			wantNoErr(e, "RunAll archived", err)
			if n != 5 {
				e.Fatalf("RunAll archived = %d, want 5", n)
			}
			var prios []int
			for _, ti := range e.list("default", base.StatePending, "", 0, 10) {
				prios = append(prios, ti.Message.Priority)
			}
			if fmt.Sprint(prios) != "[9 5 5 1 0]" {
				e.Fatalf("priorities of the pending tasks in list order: %v, want [9 5 5 1 0]", prios)
			}
			n, err = e.a.DeleteAll(e.ctx, "default", base.StatePending, "")
			wantNoErr(e, "DeleteAll pending", err)
			if n != 5 {
				e.Fatalf("DeleteAll pending = %d, want 5", n)
			}
			e.wantCounts("default", counts{})
			e.fetchNone("default")
		}),
		adminCase("Settings", func(e *adminEnv) {
			q := uniqueQueue("prio-settings")
			for range 3 {
				e.addPrio(q, 8)
			}
			e.set(q, broker.QueueSettings{MaxConcurrency: 2})
			if got := e.fetchN(q, 10); len(got) != 2 {
				e.Fatalf("Fetch under max concurrency 2: %d tasks", len(got))
			}
			e.wantThrottled(q, 0)
			wantNoErr(e, "PauseQueue", e.a.PauseQueue(e.ctx, q))
			e.set(q, broker.QueueSettings{})
			e.fetchNone(q)
			ch := e.subscribe()
			wantNoErr(e, "UnpauseQueue", e.a.UnpauseQueue(e.ctx, q))
			e.waitEvent(ch, broker.EventReady, q)
			if got := e.fetchN(q, 10); len(got) != 1 {
				e.Fatalf("Fetch after unpausing: %d tasks, want 1", len(got))
			}
		}),
		adminCase("DeleteQueue", func(e *adminEnv) {
			e.addPrio("default", 3)
			e.addPrio("default", 0)
			wantErrIs(e, "DeleteQueue without force", e.a.DeleteQueue(e.ctx, "default", false), base.ErrQueueNotEmpty)
			wantNoErr(e, "DeleteQueue with force", e.a.DeleteQueue(e.ctx, "default", true))
			e.fetchNone("default")
			m := e.addPrio("default", 3)
			e.wantCounts("default", counts{Pending: 1})
			e.fetchID("default", m.ID)
		}),
	}
}
