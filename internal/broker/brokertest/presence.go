package brokertest

import (
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// waitTaskEvent waits in real time for an event of kind for task id (and
// queue, for EventDone), skipping others.
func (e *adminEnv) waitTaskEvent(ch <-chan broker.Event, kind broker.EventKind, queue, id string) {
	e.Helper()
	timer := time.NewTimer(eventTimeout)
	defer timer.Stop()
	var seen []broker.Event
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				e.Fatalf("event channel closed while waiting for event kind %d of task %q (seen %v)", kind, id, seen)
			}
			if ev.Kind == kind && ev.TaskID == id && ev.Queue == queue {
				return
			}
			seen = append(seen, ev)
		case <-timer.C:
			e.Fatalf("no event kind %d for task %q of queue %q within %v (seen %v)", kind, id, queue, eventTimeout, seen)
		}
	}
}

func presenceTests() []testCase {
	return []testCase{
		adminCase("ListServers", func(e *adminEnv) {
			s1 := &base.ServerInfo{ID: "s1", Host: "h1", PID: 11, Concurrency: 4, Queues: map[string]int{"default": 1},
				Started: e.now(), Status: "active",
				ActiveTasks: []base.ActiveTask{{ID: "t1", Queue: "default", Type: "x", Started: e.now()}}}
			s2 := &base.ServerInfo{ID: "s2", Host: "h2", PID: 22, Concurrency: 8, Queues: map[string]int{"a": 2, "b": 1},
				StrictPriority: true, Started: e.now(), Status: "active"}
			wantNoErr(e, "WriteServerState s2", e.b.WriteServerState(e.ctx, s2, 2*time.Minute))
			wantNoErr(e, "WriteServerState s1", e.b.WriteServerState(e.ctx, s1, time.Minute))
			list, err := e.a.ListServers(e.ctx)
			wantNoErr(e, "ListServers", err)
			if len(list) != 2 || list[0].ID != "s1" || list[1].ID != "s2" {
				e.Fatalf("ListServers = %v, want s1, s2", serverIDs(list))
			}
			got := list[0]
			if got.Host != "h1" || got.PID != 11 || got.Concurrency != 4 || got.Queues["default"] != 1 || got.Status != "active" ||
				!got.Started.Equal(s1.Started) || len(got.ActiveTasks) != 1 || got.ActiveTasks[0].ID != "t1" ||
				!got.ActiveTasks[0].Started.Equal(s1.Started) {
				e.Fatalf("ListServers s1 = %+v, want %+v", got, s1)
			}
			if !list[1].StrictPriority || list[1].Queues["a"] != 2 {
				e.Fatalf("ListServers s2 = %+v", list[1])
			}
			// A record is gone once its ttl ran out on the storage clock.
			e.advance(time.Minute)
			list, err = e.a.ListServers(e.ctx)
			wantNoErr(e, "ListServers", err)
			if len(list) != 1 || list[0].ID != "s2" {
				e.Fatalf("ListServers after s1's ttl = %v, want s2", serverIDs(list))
			}
			// Renewing keeps it; clearing removes it.
			wantNoErr(e, "WriteServerState s2", e.b.WriteServerState(e.ctx, s2, 2*time.Minute))
			e.advance(90 * time.Second)
			if list, _ := e.a.ListServers(e.ctx); len(list) != 1 {
				e.Fatalf("ListServers after a renewal = %v, want s2", serverIDs(list))
			}
			wantNoErr(e, "ClearServerState", e.b.ClearServerState(e.ctx, "s2"))
			if list, _ := e.a.ListServers(e.ctx); len(list) != 0 {
				e.Fatalf("ListServers after ClearServerState = %v", serverIDs(list))
			}
		}),
		adminCase("CancelProcessing", func(e *adminEnv) {
			ch := e.subscribe()
			id := uniqueQueue("task") // unique across concurrent runs
			wantNoErr(e, "CancelProcessing", e.a.CancelProcessing(e.ctx, id))
			e.waitTaskEvent(ch, broker.EventCancel, "", id)
			wantErrIs(e, "CancelProcessing of an empty ID", e.a.CancelProcessing(e.ctx, ""), base.ErrInvalidArgument)
		}),
		adminCase("WatchComplete", func(e *adminEnv) {
			q := uniqueQueue("watch")
			ch := e.subscribe()
			m := e.add(q)
			ti, err := e.a.WatchTask(e.ctx, q, m.ID)
			wantNoErr(e, "WatchTask", err)
			if ti.State != base.StatePending {
				e.Fatalf("WatchTask of a pending task: state %v", ti.State)
			}
			wantSameMsg(e, "WatchTask", ti.Message, m)
			l := e.fetchID(q, m.ID)
			wantNoErr(e, "WriteResult", e.b.WriteResult(e.ctx, l.Ref(), []byte("ok")))
			e.complete(l.Ref())
			e.waitTaskEvent(ch, broker.EventDone, q, m.ID)
			// Kept for WatchGrace although it has no retention.
			ti = e.wantState(q, m.ID, base.StateCompleted)
			if string(ti.Result) != "ok" {
				e.Fatalf("Result of a watched task = %q", ti.Result)
			}
			e.advance(broker.WatchGrace - time.Millisecond)
			if n, err := e.b.DeleteExpiredCompleted(e.ctx, q, 10); err != nil || n != 0 {
				e.Fatalf("DeleteExpiredCompleted before WatchGrace: %d, %v", n, err)
			}
			e.advance(time.Millisecond)
			if n, err := e.b.DeleteExpiredCompleted(e.ctx, q, 10); err != nil || n != 1 {
				e.Fatalf("DeleteExpiredCompleted after WatchGrace: %d, %v", n, err)
			}
		}),
		adminCase("WatchActive", func(e *adminEnv) {
			q := uniqueQueue("watch-active")
			ch := e.subscribe()
			m := e.newMsg(q)
			m.Retention = time.Hour
			e.enqueue(m)
			l := e.fetchID(q, m.ID)
			ti, err := e.a.WatchTask(e.ctx, q, m.ID)
			wantNoErr(e, "WatchTask", err)
			if ti.State != base.StateActive {
				e.Fatalf("WatchTask of an active task: state %v", ti.State)
			}
			wantTime(e, "LeaseDeadline", ti.LeaseDeadline, l.Deadline)
			e.complete(l.Ref())
			e.waitTaskEvent(ch, broker.EventDone, q, m.ID)
			// Its own retention is kept.
			e.advance(time.Hour - time.Millisecond)
			if n, err := e.b.DeleteExpiredCompleted(e.ctx, q, 10); err != nil || n != 0 {
				e.Fatalf("DeleteExpiredCompleted before the retention: %d, %v", n, err)
			}
		}),
		adminCase("WatchArchive", func(e *adminEnv) {
			q := uniqueQueue("watch-archive")
			ch := e.subscribe()
			m := e.schedule(q, time.Minute)
			ti, err := e.a.WatchTask(e.ctx, q, m.ID)
			wantNoErr(e, "WatchTask", err)
			if ti.State != base.StateScheduled {
				e.Fatalf("WatchTask of a scheduled task: state %v", ti.State)
			}
			wantTime(e, "NextProcessAt", ti.NextProcessAt, Epoch.Add(time.Minute))
			e.advance(time.Minute)
			e.forward(q)
			l := e.fetchID(q, m.ID)
			e.retry(l.Ref(), 0, "first")
			e.forward(q)
			l = e.fetchID(q, m.ID)
			e.archive(l.Ref(), "last")
			e.waitTaskEvent(ch, broker.EventDone, q, m.ID)
			e.wantState(q, m.ID, base.StateArchived)
		}),
		adminCase("WatchFinished", func(e *adminEnv) {
			m, _ := e.inState("default", base.StateCompleted)
			ti, err := e.a.WatchTask(e.ctx, "default", m.ID)
			wantNoErr(e, "WatchTask of a completed task", err)
			if ti.State != base.StateCompleted {
				e.Fatalf("WatchTask of a completed task: state %v", ti.State)
			}
			a, _ := e.inState("default", base.StateArchived)
			ti, err = e.a.WatchTask(e.ctx, "default", a.ID)
			wantNoErr(e, "WatchTask of an archived task", err)
			if ti.State != base.StateArchived || ti.Message.LastErr != "failed for good" {
				e.Fatalf("WatchTask of an archived task: state %v, LastErr %q", ti.State, ti.Message.LastErr)
			}
			_, err = e.a.WatchTask(e.ctx, "default", "nope")
			wantErrIs(e, "WatchTask of a missing task", err, base.ErrTaskNotFound)
		}),
		adminCase("UnwatchedNotKept", func(e *adminEnv) {
			// Watching one task keeps only that one.
			a, b := e.add("default"), e.add("default")
			_, err := e.a.WatchTask(e.ctx, "default", a.ID)
			wantNoErr(e, "WatchTask", err)
			ls := e.fetchN("default", 2)
			e.complete(ls[0].Ref())
			e.complete(ls[1].Ref())
			e.wantState("default", a.ID, base.StateCompleted)
			e.wantGone("default", b.ID)
		}),
	}
}

func serverIDs(list []*base.ServerInfo) []string {
	ids := make([]string, len(list))
	for i, s := range list {
		ids[i] = s.ID
	}
	return ids
}
