package brokertest

import (
	"fmt"
	"slices"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// The suite pins down of broker.EventLog, besides its doc comment:
//   - Each state change logs exactly one event, with the storage clock's
//     time; a pause of a paused queue and a resume of a queue that is not
//     paused log nothing, nor do refused calls.
//   - IDs increase within a queue; reading after the last cursor returns
//     nothing until something happens.
//   - A log keeps at least the events of the last
//     broker.DefaultEventLogSize calls that logged any (a backend may keep
//     somewhat more, and may log the events of one call as one entry);
//     reading after a cursor older than what it keeps reports the queue in
//     Truncated and goes on from the oldest kept.
//   - A queue that never logged anything reads as empty, and CursorEnd of
//     it resolves to a cursor after which its first event is read.

// logged is one expected event: what the suite checks of a LogEvent.
type logged struct {
	kind  broker.LogKind
	id    string
	state base.TaskState
	err   string
	at    time.Time
}

func (l logged) String() string {
	return fmt.Sprintf("%s %s (%v) %q at %v", l.kind, l.id, l.state, l.err, l.at.Format(time.TimeOnly))
}

// readLog reads queue's log after cursor (up to limit events) and fails
// the test on error.
func (e *env) readLog(queue, cursor string, limit int) *broker.EventBatch {
	e.Helper()
	b, err := e.b.ReadEvents(e.ctx, broker.ReadEventsParams{Cursors: map[string]string{queue: cursor}, Limit: limit})
	if err != nil {
		e.Fatalf("ReadEvents %s after %q: %v", queue, cursor, err)
	}
	if _, ok := b.Cursors[queue]; !ok {
		e.Fatalf("ReadEvents %s: no cursor for the queue in %v", queue, b.Cursors)
	}
	return b
}

// wantLog fails unless evs are the expected events of queue, in order,
// with increasing IDs.
func (e *env) wantLog(queue string, evs []broker.LogEvent, want []logged) {
	e.Helper()
	var got []logged
	for i, ev := range evs {
		if ev.Queue != queue {
			e.Errorf("event %d %s is of queue %q, want %q", i, ev.ID, ev.Queue, queue)
		}
		if _, _, _, err := broker.ParseEventID(ev.ID); err != nil {
			e.Fatalf("event %d: %v", i, err)
		}
		if i > 0 && broker.CompareEventIDs(evs[i-1].ID, ev.ID) >= 0 {
			e.Errorf("event IDs %s then %s do not increase", evs[i-1].ID, ev.ID)
		}
		got = append(got, logged{ev.Kind, ev.TaskID, ev.State, ev.Error, ev.Time.UTC()})
	}
	for i := range want {
		want[i].at = want[i].at.UTC()
	}
	if !slices.Equal(got, want) {
		e.Fatalf("event log of %s:\n got %v\nwant %v", queue, got, want)
	}
}

func eventLogTests() []testCase {
	return []testCase{
		adminCase("Lifecycle", func(e *adminEnv) {
			t0 := e.now()
			m1 := e.add("default")
			m2 := e.schedule("default", time.Hour)
			m3 := e.newMsg("default")
			m3.GroupKey = "g"
			e.enqueue(m3)
			e.advance(time.Second)
			l := e.fetchID("default", m1.ID)
			e.retry(l.Ref(), 10*time.Second, "boom")
			e.advance(10 * time.Second)
			t1 := e.now()
			e.wantForward(e.forward("default"), 1, true, time.Hour-11*time.Second)
			l = e.fetchID("default", m1.ID)
			e.complete(l.Ref())
			wantNoErr(e, "RunTask", e.a.RunTask(e.ctx, "default", m2.ID))
			e.advance(time.Second)
			t2 := e.now()
			l = e.fetchID("default", m2.ID)
			e.archive(l.Ref(), "dead")
			wantNoErr(e, "ArchiveTask", e.a.ArchiveTask(e.ctx, "default", m3.ID))
			wantNoErr(e, "ArchiveTask of an archived task", e.a.ArchiveTask(e.ctx, "default", m3.ID))
			wantNoErr(e, "DeleteTask", e.b.DeleteTask(e.ctx, "default", m3.ID))
			wantErrIs(e, "RunTask of a deleted task", e.a.RunTask(e.ctx, "default", m3.ID), base.ErrTaskNotFound)
			wantNoErr(e, "PauseQueue", e.a.PauseQueue(e.ctx, "default"))
			wantNoErr(e, "PauseQueue again", e.a.PauseQueue(e.ctx, "default"))
			wantNoErr(e, "UnpauseQueue", e.a.UnpauseQueue(e.ctx, "default"))
			wantNoErr(e, "UnpauseQueue again", e.a.UnpauseQueue(e.ctx, "default"))
			m4 := e.add("default")
			l = e.fetchID("default", m4.ID)
			wantNoErr(e, "Requeue", e.b.Requeue(e.ctx, l.Ref()))

			b := e.readLog("default", broker.CursorStart, 100)
			e.wantLog("default", b.Events, []logged{
				{broker.LogEnqueued, m1.ID, base.StatePending, "", t0},
				{broker.LogEnqueued, m2.ID, base.StateScheduled, "", t0},
				{broker.LogEnqueued, m3.ID, base.StateAggregating, "", t0},
				{broker.LogStarted, m1.ID, base.StateActive, "", t0.Add(time.Second)},
				{broker.LogFailed, m1.ID, base.StateRetry, "boom", t0.Add(time.Second)},
				{broker.LogRetried, m1.ID, base.StatePending, "", t1},
				{broker.LogStarted, m1.ID, base.StateActive, "", t1},
				{broker.LogSucceeded, m1.ID, 0, "", t1},
				{broker.LogRetried, m2.ID, base.StatePending, "", t1},
				{broker.LogStarted, m2.ID, base.StateActive, "", t2},
				{broker.LogFailed, m2.ID, base.StateArchived, "dead", t2},
				{broker.LogArchived, m3.ID, base.StateArchived, "", t2},
				{broker.LogDeleted, m3.ID, 0, "", t2},
				{broker.LogPaused, "", 0, "", t2},
				{broker.LogResumed, "", 0, "", t2},
				{broker.LogEnqueued, m4.ID, base.StatePending, "", t2},
				{broker.LogStarted, m4.ID, base.StateActive, "", t2},
				{broker.LogRetried, m4.ID, base.StatePending, "", t2},
			})
			if len(b.Truncated) != 0 || b.Cursors["default"] != b.Events[len(b.Events)-1].ID {
				e.Fatalf("ReadEvents: Truncated %v, cursor %q; want none and the last event's ID", b.Truncated, b.Cursors["default"])
			}
			if b := e.readLog("default", b.Cursors["default"], 100); len(b.Events) != 0 {
				e.Fatalf("ReadEvents after the last event: %d events", len(b.Events))
			}
		}),
		adminCase("Succeeded", func(e *adminEnv) {
			m := e.newMsg("default")
			m.Retention = time.Hour
			e.enqueue(m)
			c := e.readLog("default", broker.CursorEnd, 10).Cursors["default"]
			e.complete(e.fetchID("default", m.ID).Ref())
			e.wantLog("default", e.readLog("default", c, 10).Events, []logged{
				{broker.LogStarted, m.ID, base.StateActive, "", e.now()},
				{broker.LogSucceeded, m.ID, base.StateCompleted, "", e.now()},
			})
		}),
		adminCase("RecoveredLease", func(e *adminEnv) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			c := e.readLog("default", broker.CursorEnd, 10).Cursors["default"]
			e.advance(leaseFor)
			wantNoErr(e, "Retry of an expired lease", e.b.Retry(e.ctx, broker.RetryParams{Lease: l.Ref(), Delay: time.Minute, ErrMsg: "lease expired", IsFailure: true, RequireExpired: true}))
			e.wantLog("default", e.readLog("default", c, 10).Events, []logged{{broker.LogFailed, m.ID, base.StateRetry, "lease expired", e.now()}})
		}),
		adminCase("Cursors", func(e *adminEnv) {
			b := e.readLog("default", broker.CursorEnd, 10)
			if len(b.Events) != 0 || len(b.Truncated) != 0 {
				e.Fatalf("CursorEnd of a queue with no log: %+v", b)
			}
			m1, m2, m3 := e.add("default"), e.add("default"), e.add("default")
			e.add("other")
			b = e.readLog("default", b.Cursors["default"], 2)
			e.wantLog("default", b.Events, []logged{
				{broker.LogEnqueued, m1.ID, base.StatePending, "", e.now()},
				{broker.LogEnqueued, m2.ID, base.StatePending, "", e.now()},
			})
			b = e.readLog("default", b.Cursors["default"], 2)
			e.wantLog("default", b.Events, []logged{{broker.LogEnqueued, m3.ID, base.StatePending, "", e.now()}})
			end := e.readLog("default", broker.CursorEnd, 10)
			if len(end.Events) != 0 || end.Cursors["default"] != b.Cursors["default"] {
				e.Fatalf("CursorEnd: %d events, cursor %q; want none and %q", len(end.Events), end.Cursors["default"], b.Cursors["default"])
			}
			// Several queues in one read.
			both, err := e.b.ReadEvents(e.ctx, broker.ReadEventsParams{Cursors: map[string]string{"default": broker.CursorStart, "other": broker.CursorStart, "nope": broker.CursorStart}, Limit: 10})
			wantNoErr(e, "ReadEvents of three queues", err)
			per := map[string]int{}
			for _, ev := range both.Events {
				per[ev.Queue]++
			}
			if per["default"] != 3 || per["other"] != 1 || len(per) != 2 || len(both.Cursors) != 3 {
				e.Fatalf("ReadEvents of three queues: events by queue %v, cursors %v", per, both.Cursors)
			}
		}),
		adminCase("BulkAndBatch", func(e *adminEnv) {
			s1, s2 := e.schedule("default", time.Hour), e.schedule("default", time.Hour)
			dup := e.newMsg("default")
			dup.ID = s1.ID
			fresh := e.newMsg("default")
			errs := e.b.EnqueueBatch(e.ctx, []broker.EnqueueParams{{Msg: dup}, {Msg: fresh}})
			wantErrIs(e, "EnqueueBatch of a taken ID", errs[0], base.ErrTaskIDConflict)
			wantNoErr(e, "EnqueueBatch", errs[1])
			if n, err := e.a.RunAll(e.ctx, "default", base.StateScheduled, ""); err != nil || n != 2 {
				e.Fatalf("RunAll = %d, %v; want 2", n, err)
			}
			if n, err := e.a.ArchiveAll(e.ctx, "default", base.StatePending, ""); err != nil || n != 3 {
				e.Fatalf("ArchiveAll = %d, %v; want 3", n, err)
			}
			if n, err := e.a.DeleteAll(e.ctx, "default", base.StateArchived, ""); err != nil || n != 3 {
				e.Fatalf("DeleteAll = %d, %v; want 3", n, err)
			}
			evs := e.readLog("default", broker.CursorStart, 100).Events
			if len(evs) != 11 {
				e.Fatalf("%d events, want 11: %v", len(evs), evs)
			}
			e.wantLog("default", evs[:3], []logged{
				{broker.LogEnqueued, s1.ID, base.StateScheduled, "", e.now()},
				{broker.LogEnqueued, s2.ID, base.StateScheduled, "", e.now()},
				{broker.LogEnqueued, fresh.ID, base.StatePending, "", e.now()},
			})
			// The order within a bulk operation is the backend's.
			for i, want := range []struct {
				kind  broker.LogKind
				state base.TaskState
				ids   []string
			}{
				{broker.LogRetried, base.StatePending, []string{s1.ID, s2.ID}},
				{broker.LogArchived, base.StateArchived, []string{s1.ID, s2.ID, fresh.ID}},
				{broker.LogDeleted, 0, []string{s1.ID, s2.ID, fresh.ID}},
			} {
				start := 3 + []int{0, 2, 5}[i]
				var ids []string
				for _, ev := range evs[start : start+len(want.ids)] {
					if ev.Kind != want.kind || ev.State != want.state {
						e.Fatalf("event %v, want %s (%v)", ev, want.kind, want.state)
					}
					ids = append(ids, ev.TaskID)
				}
				slices.Sort(ids)
				wantIDs(e, string(want.kind)+" events", ids, want.ids)
			}
		}),
		adminCase("Aggregation", func(e *adminEnv) {
			e.group("default", "g", 2)
			a := e.take(broker.TakeGroupParams{Queue: "default", Group: "g", MaxSize: 2, Lease: time.Minute})
			if a == nil {
				e.Fatal("TakeGroup: the group is not ready")
			}
			c := e.readLog("default", broker.CursorEnd, 10).Cursors["default"]
			m := e.newMsg("default")
			wantNoErr(e, "FinishAggregation", e.a.FinishAggregation(e.ctx, a, m))
			e.wantLog("default", e.readLog("default", c, 10).Events, []logged{{broker.LogEnqueued, m.ID, base.StatePending, "", e.now()}})
		}),
		adminCase("Truncated", func(e *adminEnv) {
			// One call per event: a backend may log the events of one call
			// as one entry, and keep a number of entries.
			n := broker.DefaultEventLogSize + broker.DefaultEventLogSize/4
			ps := make([]broker.EnqueueParams, 0, n)
			for range n {
				ps = append(ps, broker.EnqueueParams{Msg: e.newMsg("default")})
				e.enqueue(ps[len(ps)-1].Msg)
			}
			all := e.readLog("default", broker.CursorStart, broker.MaxEventReadLimit)
			if len(all.Events) < broker.DefaultEventLogSize || len(all.Events) >= n || len(all.Truncated) != 0 {
				e.Fatalf("after %d events the log keeps %d (truncated %v); want at least %d and fewer than %d",
					n, len(all.Events), all.Truncated, broker.DefaultEventLogSize, n)
			}
			first := all.Events[0]
			if first.TaskID == ps[0].Msg.ID {
				e.Fatalf("the first event is still kept")
			}
			// The first events are gone; reading after one of them says so.
			b := e.readLog("default", "1-0", 5)
			if !slices.Equal(b.Truncated, []string{"default"}) || len(b.Events) != 5 || b.Events[0].ID != first.ID {
				e.Fatalf("ReadEvents after a dropped event: truncated %v, %d events from %v; want [default], 5 from %s",
					b.Truncated, len(b.Events), b.Events, first.ID)
			}
			b = e.readLog("default", first.ID, 5)
			if len(b.Truncated) != 0 || len(b.Events) != 5 || b.Events[0].ID != all.Events[1].ID {
				e.Fatalf("ReadEvents after the oldest event kept: truncated %v, events %v", b.Truncated, b.Events)
			}
		}),
		adminCase("DeleteQueue", func(e *adminEnv) {
			e.add("default")
			wantNoErr(e, "DeleteQueue", e.a.DeleteQueue(e.ctx, "default", true))
			if b := e.readLog("default", broker.CursorStart, 10); len(b.Events) != 0 {
				e.Fatalf("the log of a deleted queue holds %v", b.Events)
			}
		}),
		adminCase("Wait", func(e *adminEnv) {
			q := uniqueQueue("wait")
			c := e.readLog(q, broker.CursorEnd, 10).Cursors[q]
			// Nothing comes: the read answers empty after the wait.
			b, err := e.b.ReadEvents(e.ctx, broker.ReadEventsParams{Cursors: map[string]string{q: c}, Limit: 10, Wait: 50 * time.Millisecond})
			if err != nil || len(b.Events) != 0 {
				e.Fatalf("ReadEvents with nothing to read: %v, %v", b, err)
			}
			done := make(chan *broker.EventBatch, 1)
			go func() {
				b, err := e.b.ReadEvents(e.ctx, broker.ReadEventsParams{Cursors: map[string]string{q: c}, Limit: 10, Wait: eventTimeout})
				if err != nil {
					e.Errorf("ReadEvents waiting: %v", err)
				}
				done <- b
			}()
			// The event may come before the read waits: it must be read
			// either way.
			m := e.add(q)
			select {
			case b := <-done:
				if b == nil || len(b.Events) != 1 || b.Events[0].TaskID != m.ID {
					e.Fatalf("ReadEvents woken by an enqueue returned %+v", b)
				}
			case <-time.After(eventTimeout):
				e.Fatalf("ReadEvents did not return within %v of an enqueue", eventTimeout)
			}
		}),
		adminCase("Validation", func(e *adminEnv) {
			for name, p := range map[string]broker.ReadEventsParams{
				"Limit 0":         {Cursors: map[string]string{"default": ""}, Limit: 0},
				"Limit too large": {Cursors: map[string]string{"default": ""}, Limit: broker.MaxEventReadLimit + 1},
				"negative Wait":   {Cursors: map[string]string{"default": ""}, Limit: 1, Wait: -time.Second},
				"bad queue name":  {Cursors: map[string]string{"a:b": ""}, Limit: 1},
				"bad cursor":      {Cursors: map[string]string{"default": "last"}, Limit: 1},
			} {
				_, err := e.b.ReadEvents(e.ctx, p)
				wantErrIs(e, "ReadEvents with "+name, err, base.ErrInvalidArgument)
			}
		}),
	}
}
