package brokertest

import (
	"fmt"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// everyState creates one task of q in each state (aggregating: group g1)
// and returns them by state.
func (e *adminEnv) everyState(q string) map[base.TaskState]*base.TaskMessage {
	e.Helper()
	out := map[base.TaskState]*base.TaskMessage{}
	for _, s := range []base.TaskState{base.StateActive, base.StateRetry, base.StateArchived, base.StateCompleted,
		base.StatePending, base.StateScheduled, base.StateAggregating} {
		m, _ := e.inState(q, s)
		out[s] = m
	}
	return out
}

// wantStates fails unless each task is in the state it is keyed by.
func (e *adminEnv) wantStates(q string, tasks map[base.TaskState]*base.TaskMessage) {
	e.Helper()
	for s, m := range tasks {
		e.wantState(q, m.ID, s)
	}
}

func taskOpTests() []testCase {
	return []testCase{
		adminCase("RunTask", func(e *adminEnv) {
			for _, s := range []base.TaskState{base.StateScheduled, base.StateRetry, base.StateArchived, base.StateAggregating} {
				q := "q-" + s.String()
				tasks := e.everyState(q)
				m := tasks[s]
				before := e.info(q, m.ID).Message
				e.advance(time.Second)
				wantNoErr(e, "RunTask of a "+s.String()+" task", e.a.RunTask(e.ctx, q, m.ID))
				ti := e.wantState(q, m.ID, base.StatePending)
				wantSameMsg(e, "run task", ti.Message, m)
				wantBookkeeping(e, "run task", ti.Message, before.Retried, before.LastErr, before.LastFailedAt)
				delete(tasks, s)
				e.wantStates(q, tasks)
				// It is fetched after the older pending task.
				wantIDs(e, "fetch order after RunTask", e.drain(q), []string{tasks[base.StatePending].ID, m.ID})
			}
			// Running the only task of a group empties the group.
			m := e.group("grp", "g", 1)[0]
			wantNoErr(e, "RunTask", e.a.RunTask(e.ctx, "grp", m.ID))
			groups, err := e.a.ListGroups(e.ctx, "grp")
			wantNoErr(e, "ListGroups", err)
			if len(groups) != 0 {
				e.Fatalf("ListGroups after its only task ran: %v", groups)
			}
		}),
		adminCase("RunTaskRefused", func(e *adminEnv) {
			tasks := e.everyState("default")
			for _, s := range []base.TaskState{base.StatePending, base.StateActive, base.StateCompleted} {
				err := e.a.RunTask(e.ctx, "default", tasks[s].ID)
				wantErrIs(e, "RunTask of a "+s.String()+" task", err, base.ErrWrongState)
			}
			wantErrIs(e, "RunTask of a missing task", e.a.RunTask(e.ctx, "default", "nope"), base.ErrTaskNotFound)
			wantErrIs(e, "RunTask in another queue", e.a.RunTask(e.ctx, "other", tasks[base.StateRetry].ID), base.ErrTaskNotFound)
			e.wantStates("default", tasks)
		}),
		adminCase("RunTaskWakes", func(e *adminEnv) {
			q := uniqueQueue("run-wakes")
			m := e.schedule(q, time.Hour)
			ch := e.subscribe()
			wantNoErr(e, "RunTask", e.a.RunTask(e.ctx, q, m.ID))
			e.waitEvent(ch, broker.EventReady, q)
		}),
		adminCase("ArchiveTask", func(e *adminEnv) {
			for _, s := range []base.TaskState{base.StatePending, base.StateScheduled, base.StateRetry, base.StateAggregating} {
				q := "q-" + s.String()
				tasks := e.everyState(q)
				m := tasks[s]
				e.advance(time.Second)
				wantNoErr(e, "ArchiveTask of a "+s.String()+" task", e.a.ArchiveTask(e.ctx, q, m.ID))
				ti := e.wantState(q, m.ID, base.StateArchived)
				wantSameMsg(e, "archived task", ti.Message, m)
				delete(tasks, s)
				e.wantStates(q, tasks)
				// Newest first: it was archived after the other one.
				wantIDs(e, "archived", e.listIDs(q, base.StateArchived, ""), []string{m.ID, tasks[base.StateArchived].ID})
				// It can be run again.
				wantNoErr(e, "RunTask of the archived task", e.a.RunTask(e.ctx, q, m.ID))
				want := []string{m.ID}
				if p, ok := tasks[base.StatePending]; ok {
					want = []string{p.ID, m.ID}
				}
				wantIDs(e, "fetch order after archiving and running", e.drain(q), want)
			}
		}),
		adminCase("ArchiveTaskRefused", func(e *adminEnv) {
			tasks := e.everyState("default")
			for _, s := range []base.TaskState{base.StateActive, base.StateCompleted} {
				wantErrIs(e, "ArchiveTask of a "+s.String()+" task", e.a.ArchiveTask(e.ctx, "default", tasks[s].ID), base.ErrWrongState)
			}
			before := e.info("default", tasks[base.StateArchived].ID)
			e.advance(time.Minute)
			wantNoErr(e, "ArchiveTask of an archived task", e.a.ArchiveTask(e.ctx, "default", tasks[base.StateArchived].ID))
			after := e.info("default", tasks[base.StateArchived].ID)
			wantBookkeeping(e, "archived task archived again", after.Message, before.Message.Retried, before.Message.LastErr, before.Message.LastFailedAt)
			wantErrIs(e, "ArchiveTask of a missing task", e.a.ArchiveTask(e.ctx, "default", "nope"), base.ErrTaskNotFound)
			e.wantStates("default", tasks)
		}),
		adminCase("UniqueLockKeptByRunAndArchive", func(e *adminEnv) {
			m := e.newMsg("default")
			m.UniqueKey, m.UniqueTTL = "u", time.Hour
			e.enqueueAt(m, e.now().Add(time.Minute))
			wantNoErr(e, "ArchiveTask", e.a.ArchiveTask(e.ctx, "default", m.ID))
			wantNoErr(e, "RunTask", e.a.RunTask(e.ctx, "default", m.ID))
			dup := e.newMsg("default")
			dup.UniqueKey, dup.UniqueTTL = "u", time.Hour
			err := e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: dup})
			wantErrIs(e, "Enqueue with the lock of a run task", err, base.ErrDuplicateTask)
		}),
	}
}

func bulkTests() []testCase {
	type op struct {
		name string
		fn   func(e *adminEnv, q string, s base.TaskState, g string) (int, error)
		to   base.TaskState // 0: deleted
		ok   []base.TaskState
	}
	ops := []op{
		{"DeleteAll", func(e *adminEnv, q string, s base.TaskState, g string) (int, error) {
			return e.a.DeleteAll(e.ctx, q, s, g)
		}, 0, []base.TaskState{base.StatePending, base.StateScheduled, base.StateRetry, base.StateArchived, base.StateCompleted, base.StateAggregating}},
		{"RunAll", func(e *adminEnv, q string, s base.TaskState, g string) (int, error) {
			return e.a.RunAll(e.ctx, q, s, g)
		}, base.StatePending, []base.TaskState{base.StateScheduled, base.StateRetry, base.StateArchived, base.StateAggregating}},
		{"ArchiveAll", func(e *adminEnv, q string, s base.TaskState, g string) (int, error) {
			return e.a.ArchiveAll(e.ctx, q, s, g)
		}, base.StateArchived, []base.TaskState{base.StatePending, base.StateScheduled, base.StateRetry, base.StateAggregating}},
	}
	var cases []testCase
	for _, o := range ops {
		cases = append(cases, adminCase(o.name, func(e *adminEnv) {
			for _, s := range o.ok {
				q := "q-" + s.String()
				// Three tasks in state s (aggregating: in group g1), one in
				// every other state, and for groups one in group g2 that
				// stays. inState fetches, so pending tasks come last.
				var moved []*base.TaskMessage
				more := func() {
					for range 2 {
						m, _ := e.inState(q, s)
						moved = append(moved, m)
					}
				}
				if s != base.StatePending {
					more()
				}
				others := e.everyState(q)
				moved = append(moved, others[s])
				if s == base.StatePending {
					more()
				}
				delete(others, s)
				var stay *base.TaskMessage
				if s == base.StateAggregating {
					stay = e.group(q, "g2", 1)[0]
				}
				e.advance(time.Second)
				n, err := o.fn(e, q, s, "g1")
				wantNoErr(e, fmt.Sprintf("%s %v", o.name, s), err)
				if n != len(moved) {
					e.Fatalf("%s %v = %d, want %d", o.name, s, n, len(moved))
				}
				for _, m := range moved {
					if o.to == 0 {
						e.wantGone(q, m.ID)
					} else {
						e.wantState(q, m.ID, o.to)
					}
				}
				// Nothing else moved.
				e.wantStates(q, others)
				if stay != nil {
					e.wantState(q, stay.ID, base.StateAggregating)
				}
				if o.to == base.StatePending {
					// The older pending task comes first.
					got := e.drain(q)
					if len(got) != 1+len(moved) || got[0] != others[base.StatePending].ID {
						e.Fatalf("fetch order after %s %v: %v, want %s first and %d in all", o.name, s, got,
							others[base.StatePending].ID, 1+len(moved))
					}
				}
			}
		}))
	}
	cases = append(cases,
		adminCase("Refused", func(e *adminEnv) {
			tasks := e.everyState("default")
			refused := []struct {
				name string
				fn   func() (int, error)
			}{
				{"DeleteAll active", func() (int, error) { return e.a.DeleteAll(e.ctx, "default", base.StateActive, "") }},
				{"RunAll active", func() (int, error) { return e.a.RunAll(e.ctx, "default", base.StateActive, "") }},
				{"ArchiveAll active", func() (int, error) { return e.a.ArchiveAll(e.ctx, "default", base.StateActive, "") }},
				{"RunAll pending", func() (int, error) { return e.a.RunAll(e.ctx, "default", base.StatePending, "") }},
				{"RunAll completed", func() (int, error) { return e.a.RunAll(e.ctx, "default", base.StateCompleted, "") }},
				{"ArchiveAll completed", func() (int, error) { return e.a.ArchiveAll(e.ctx, "default", base.StateCompleted, "") }},
			}
			for _, r := range refused {
				n, err := r.fn()
				wantErrIs(e, r.name, err, base.ErrWrongState)
				if n != 0 {
					e.Fatalf("%s changed %d tasks", r.name, n)
				}
			}
			n, err := e.a.ArchiveAll(e.ctx, "default", base.StateArchived, "")
			if err != nil || n != 0 {
				e.Fatalf("ArchiveAll archived = %d, %v; want 0, nil", n, err)
			}
			for name, fn := range map[string]func() (int, error){
				"DeleteAll":  func() (int, error) { return e.a.DeleteAll(e.ctx, "default", base.StateAggregating, "") },
				"RunAll":     func() (int, error) { return e.a.RunAll(e.ctx, "default", base.StateAggregating, "") },
				"ArchiveAll": func() (int, error) { return e.a.ArchiveAll(e.ctx, "default", base.StateAggregating, "") },
			} {
				_, err := fn()
				wantErrIs(e, name+" aggregating without a group", err, base.ErrInvalidArgument)
			}
			e.wantStates("default", tasks)
		}),
		adminCase("EmptyOrUnknown", func(e *adminEnv) {
			for _, s := range []base.TaskState{base.StatePending, base.StateScheduled, base.StateRetry} {
				n, err := e.a.DeleteAll(e.ctx, "nope", s, "")
				if err != nil || n != 0 {
					e.Fatalf("DeleteAll %v of an unknown queue = %d, %v", s, n, err)
				}
			}
			n, err := e.a.RunAll(e.ctx, "nope", base.StateAggregating, "g")
			if err != nil || n != 0 {
				e.Fatalf("RunAll of an unknown group = %d, %v", n, err)
			}
		}),
		adminCase("ManyBatches", func(e *adminEnv) {
			const n = 2500
			ps := make([]broker.EnqueueParams, n)
			for i := range ps {
				ps[i] = broker.EnqueueParams{Msg: e.newMsg("default")}
			}
			for i, err := range e.b.EnqueueBatch(e.ctx, ps) {
				wantNoErr(e, fmt.Sprint("EnqueueBatch ", i), err)
			}
			got, err := e.a.ArchiveAll(e.ctx, "default", base.StatePending, "")
			if err != nil || got != n {
				e.Fatalf("ArchiveAll of %d pending tasks = %d, %v", n, got, err)
			}
			got, err = e.a.RunAll(e.ctx, "default", base.StateArchived, "")
			if err != nil || got != n {
				e.Fatalf("RunAll of %d archived tasks = %d, %v", n, got, err)
			}
			e.wantCounts("default", counts{Pending: n})
			got, err = e.a.DeleteAll(e.ctx, "default", base.StatePending, "")
			if err != nil || got != n {
				e.Fatalf("DeleteAll of %d pending tasks = %d, %v", n, got, err)
			}
			e.wantCounts("default", counts{})
		}),
		adminCase("DeleteAllReleasesLocks", func(e *adminEnv) {
			for _, s := range []base.TaskState{base.StatePending, base.StateScheduled, base.StateAggregating} {
				m := e.newMsg("default")
				m.UniqueKey, m.UniqueTTL = "u-"+s.String(), time.Hour
				at := time.Time{}
				if s == base.StateScheduled {
					at = e.now().Add(time.Hour)
				}
				if s == base.StateAggregating {
					m.GroupKey = "g"
				}
				e.enqueueAt(m, at)
				n, err := e.a.DeleteAll(e.ctx, "default", s, "g")
				if err != nil || n != 1 {
					e.Fatalf("DeleteAll %v = %d, %v", s, n, err)
				}
				m2 := e.newMsg("default")
				m2.UniqueKey, m2.UniqueTTL = m.UniqueKey, time.Hour
				e.enqueue(m2)
			}
		}),
		adminCase("RunAllWakes", func(e *adminEnv) {
			q := uniqueQueue("runall-wakes")
			e.schedule(q, time.Hour)
			e.schedule(q, 2*time.Hour)
			ch := e.subscribe()
			n, err := e.a.RunAll(e.ctx, q, base.StateScheduled, "")
			if err != nil || n != 2 {
				e.Fatalf("RunAll = %d, %v", n, err)
			}
			e.waitEvent(ch, broker.EventReady, q)
		}),
	)
	return cases
}
