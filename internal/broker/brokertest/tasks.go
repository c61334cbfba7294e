package brokertest

import (
	"time"

	"github.com/htqueue/htq/internal/base"
)

func taskTests() []testCase {
	cases := []testCase{
		{"InfoActive", func(e *env) {
			m := e.add("default")
			e.advance(time.Second)
			l := e.fetchID("default", m.ID)
			ti := e.wantState("default", m.ID, base.StateActive)
			wantSameMsg(e, "active task", ti.Message, m)
			wantTime(e, "LeaseDeadline", ti.LeaseDeadline, Epoch.Add(time.Second+leaseFor))
			wantTime(e, "LeaseDeadline", ti.LeaseDeadline, l.Deadline)
			wantTime(e, "NextProcessAt", ti.NextProcessAt, time.Time{})
			wantTime(e, "CompletedAt", ti.CompletedAt, time.Time{})
		}},
		{"InfoPending", func(e *env) {
			m := e.add("default")
			ti := e.wantState("default", m.ID, base.StatePending)
			wantTime(e, "NextProcessAt", ti.NextProcessAt, e.now())
			// A pending task is due now, whenever now is.
			e.advance(time.Hour)
			ti = e.wantState("default", m.ID, base.StatePending)
			wantTime(e, "NextProcessAt an hour later", ti.NextProcessAt, e.now())
			wantTime(e, "LeaseDeadline", ti.LeaseDeadline, time.Time{})
			wantTime(e, "CompletedAt", ti.CompletedAt, time.Time{})
		}},
		{"InfoScheduled", func(e *env) {
			at := Epoch.Add(36 * time.Hour)
			m := e.newMsg("default")
			e.enqueueAt(m, at)
			ti := e.wantState("default", m.ID, base.StateScheduled)
			wantSameMsg(e, "scheduled task", ti.Message, m)
			wantTime(e, "NextProcessAt", ti.NextProcessAt, at)
			wantTime(e, "LeaseDeadline", ti.LeaseDeadline, time.Time{})
			wantTime(e, "CompletedAt", ti.CompletedAt, time.Time{})
		}},
		{"InfoRetry", func(e *env) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			e.advance(2 * time.Second)
			e.retry(l.Ref(), 45*time.Second, "oops")
			ti := e.wantState("default", m.ID, base.StateRetry)
			wantTime(e, "NextProcessAt", ti.NextProcessAt, Epoch.Add(47*time.Second))
			wantTime(e, "LeaseDeadline", ti.LeaseDeadline, time.Time{})
			wantTime(e, "CompletedAt", ti.CompletedAt, time.Time{})
			wantBookkeeping(e, "retry task", ti.Message, 1, "oops", Epoch.Add(2*time.Second))
		}},
		{"InfoArchived", func(e *env) {
			m, _ := e.inState("default", base.StateArchived)
			ti := e.wantState("default", m.ID, base.StateArchived)
			wantSameMsg(e, "archived task", ti.Message, m)
			wantTime(e, "NextProcessAt", ti.NextProcessAt, time.Time{})
			wantTime(e, "LeaseDeadline", ti.LeaseDeadline, time.Time{})
			wantTime(e, "CompletedAt", ti.CompletedAt, time.Time{})
		}},
		{"InfoCompleted", func(e *env) {
			m := e.newMsg("default")
			m.Retention = time.Hour
			e.enqueue(m)
			l := e.fetchID("default", m.ID)
			wantNoErr(e, "WriteResult", e.b.WriteResult(e.ctx, l.Ref(), []byte("42")))
			e.advance(9 * time.Second)
			e.complete(l.Ref())
			e.advance(time.Minute)
			ti := e.wantState("default", m.ID, base.StateCompleted)
			wantSameMsg(e, "completed task", ti.Message, m)
			wantTime(e, "CompletedAt", ti.CompletedAt, Epoch.Add(9*time.Second))
			wantTime(e, "NextProcessAt", ti.NextProcessAt, time.Time{})
			wantTime(e, "LeaseDeadline", ti.LeaseDeadline, time.Time{})
			if string(ti.Result) != "42" {
				e.Fatalf("Result = %q, want %q", ti.Result, "42")
			}
		}},
		{"InfoAggregating", func(e *env) {
			m, _ := e.inState("default", base.StateAggregating)
			ti := e.wantState("default", m.ID, base.StateAggregating)
			wantSameMsg(e, "aggregating task", ti.Message, m)
			wantTime(e, "NextProcessAt", ti.NextProcessAt, time.Time{})
			wantTime(e, "LeaseDeadline", ti.LeaseDeadline, time.Time{})
		}},
		{"InfoNotFound", func(e *env) {
			m := e.add("default")
			e.wantGone("default", "no-such-id")
			e.wantGone("other", m.ID)
			e.wantGone("never-used", "x")
		}},
		{"DeleteActive", func(e *env) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			err := e.b.DeleteTask(e.ctx, "default", m.ID)
			wantErrIs(e, "DeleteTask of an active task", err, base.ErrWrongState)
			ti := e.wantState("default", m.ID, base.StateActive)
			wantTime(e, "LeaseDeadline", ti.LeaseDeadline, l.Deadline)
			e.complete(l.Ref())
		}},
		{"DeleteMissing", func(e *env) {
			e.add("default")
			wantErrIs(e, "DeleteTask of a missing task", e.b.DeleteTask(e.ctx, "default", "no-such-id"), base.ErrTaskNotFound)
			wantErrIs(e, "DeleteTask in an unknown queue", e.b.DeleteTask(e.ctx, "never-used", "x"), base.ErrTaskNotFound)
		}},
		{"QueuesSorted", func(e *env) {
			for _, q := range []string{"zeta", "alpha", "mid", "Beta", "alpha"} {
				e.add(q)
			}
			e.schedule("scheduled-only", time.Hour)
			wantIDs(e, "Queues", e.queues(), []string{"Beta", "alpha", "mid", "scheduled-only", "zeta"})
		}},
		{"QueuesKeepsEmptiedQueue", func(e *env) {
			e.complete(e.fetchOne(e.add("once").Queue).Ref())
			wantIDs(e, "Queues", e.queues(), []string{"once"})
		}},
	}
	for _, s := range allStates {
		if s == base.StateActive {
			continue
		}
		cases = append(cases, testCase{"Delete" + capitalize(s.String()), func(e *env) { testDelete(e, s) }})
	}
	return cases
}

// testDelete deletes a task in state and checks that it is gone from
// everywhere: GetTaskInfo, Fetch, Forward and DeleteExpiredCompleted.
func testDelete(e *env, state base.TaskState) {
	const q = "default"
	m, _ := e.inState(q, state)
	other := e.newMsg(q)
	other.Retention = time.Hour
	e.enqueueAt(other, e.now().Add(2*time.Hour)) // a neighbour that must survive

	wantNoErr(e, "DeleteTask of a "+state.String()+" task", e.b.DeleteTask(e.ctx, q, m.ID))
	e.wantGone(q, m.ID)
	wantErrIs(e, "second DeleteTask", e.b.DeleteTask(e.ctx, q, m.ID), base.ErrTaskNotFound)
	e.fetchNone(q)
	e.advance(90 * time.Minute) // retry and scheduled tasks of inState were due in 1h, retention 1h
	e.wantForward(e.forward(q), 0, true, 30*time.Minute)
	e.fetchNone(q)
	n, err := e.b.DeleteExpiredCompleted(e.ctx, q, 100)
	wantNoErr(e, "DeleteExpiredCompleted", err)
	if n != 0 {
		e.Fatalf("DeleteExpiredCompleted deleted %d tasks after DeleteTask, want 0", n)
	}
	e.wantState(q, other.ID, base.StateScheduled)

	// The ID is free again.
	again := e.newMsg(q)
	again.ID = m.ID
	e.enqueue(again)
	wantIDs(e, "pending tasks", e.drain(q), []string{m.ID})
}

func serverTests() []testCase {
	info := func(e *env) *base.ServerInfo {
		return &base.ServerInfo{
			ID:          "host-1:4242:abc",
			Host:        "host-1",
			PID:         4242,
			Concurrency: 10,
			Queues:      map[string]int{"critical": 6, "default": 3, "low": 1},
			Started:     e.now(),
			Status:      "active",
		}
	}
	return []testCase{
		{"WriteRenewClear", func(e *env) {
			si := info(e)
			wantNoErr(e, "WriteServerState", e.b.WriteServerState(e.ctx, si, time.Minute))
			m := e.add("default")
			e.fetchID("default", m.ID)
			si.ActiveTasks = []base.ActiveTask{{ID: m.ID, Queue: "default", Type: m.Type, Started: e.now()}}
			e.advance(30 * time.Second)
			wantNoErr(e, "WriteServerState (renewal)", e.b.WriteServerState(e.ctx, si, time.Minute))
			wantNoErr(e, "ClearServerState", e.b.ClearServerState(e.ctx, si.ID))
			// The presence record is not task data.
			e.wantState("default", m.ID, base.StateActive)
		}},
		{"ClearUnknown", func(e *env) {
			wantNoErr(e, "ClearServerState of an unknown server", e.b.ClearServerState(e.ctx, "never-written"))
		}},
		{"ManyServers", func(e *env) {
			for _, id := range []string{"s1", "s2", "s3"} {
				si := info(e)
				si.ID = id
				wantNoErr(e, "WriteServerState "+id, e.b.WriteServerState(e.ctx, si, time.Minute))
			}
			e.advance(2 * time.Minute) // the records expire; writing again must work
			for _, id := range []string{"s1", "s2", "s3"} {
				si := info(e)
				si.ID = id
				wantNoErr(e, "WriteServerState "+id+" after expiry", e.b.WriteServerState(e.ctx, si, time.Minute))
				wantNoErr(e, "ClearServerState "+id, e.b.ClearServerState(e.ctx, id))
			}
			if qs := e.queues(); len(qs) != 0 {
				e.Fatalf("Queues after writing server states = %v, want none", qs)
			}
		}},
	}
}
