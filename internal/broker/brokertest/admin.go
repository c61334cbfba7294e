package brokertest

import (
	"errors"
	"fmt"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// The areas of broker.Admin are in admin.go, list.go, taskops.go (task
// and bulk operations), queuectl.go, settings.go, presence.go, groups.go
// and scheduler.go. Besides the doc comments of broker.Admin, they pin
// down:
//   - QueueStats and History fail with base.ErrQueueNotFound for a queue
//     that was never enqueued into, paused or given settings, or that was
//     deleted; ListTasks of such a queue is empty. DeleteQueue of it fails
//     with base.ErrQueueNotFound too.
//   - PauseQueue and SetQueueSettings make the queue known (Queues lists
//     it); DeleteQueue removes it from Queues, with its counters, settings
//     and pause, so a queue enqueued into again starts afresh.
//   - UnpauseQueue of a queue that has pending tasks sends an EventReady;
//     unpausing a queue that is not paused is not an error.
//   - RunTask and RunAll refuse pending, active and completed tasks;
//     ArchiveTask and ArchiveAll refuse active and completed tasks; all of
//     them refuse a task that TakeGroup took (base.ErrWrongState), whose
//     state stays aggregating until FinishAggregation deletes it.
//     ArchiveAll of archived tasks changes nothing and reports 0.
//   - OldestPending of a task made pending by RunTask, RunAll, Requeue or
//     forwarding is when that happened; of an enqueued task, its enqueue
//     or, where a backend does not record it per task (Redis), the time
//     QueueStats first saw it as the oldest, which then stays.
//   - History(days) with days < 1 fails with base.ErrInvalidArgument; its
//     dates are midnights UTC, today (of the storage clock) first.
//   - Fetch of a queue whose settings allow no task now, and that has
//     pending tasks, fails with a *broker.ThrottledError (errors.As) whose
//     RetryIn is positive; for a rate limit it is exactly the time until
//     the next token (rounded up to a millisecond). A rate limit's bucket
//     starts full (RateBurst tokens, 1 when RateBurst is 0). Lease.Duration
//     is the lease granted.
//   - TakeGroup needs MaxSize ≥ 1 and a positive Lease; a zero MaxDelay
//     means no such condition and a zero GracePeriod makes any non-empty
//     group ready. Conditions are reached when the clock shows them.
//   - FinishAggregation with a token that is not the set's fails with
//     base.ErrLeaseLost and changes nothing; its message must be for the
//     set's queue and have no group (base.ErrInvalidArgument).
//   - ClaimTick's claim expires when the clock reaches tick claim + ttl.
//   - ListServers and ListSchedulerEntries leave out records whose ttl has
//     run out on the storage clock.

// adminEnv is an env with the broker's management half at hand.
type adminEnv struct {
	*env
	a broker.Admin
}

// adminCase returns a leaf subtest of a management area.
func adminCase(name string, fn func(e *adminEnv)) testCase {
	return testCase{name, func(e *env) {
		fn(&adminEnv{env: e, a: e.b})
	}}
}

// stats returns QueueStats of q and fails the test on error.
func (e *adminEnv) stats(q string) *broker.QueueStats {
	e.Helper()
	st, err := e.a.QueueStats(e.ctx, q)
	if err != nil {
		e.Fatalf("QueueStats %s: %v", q, err)
	}
	if st == nil {
		e.Fatalf("QueueStats %s returned nil", q)
	}
	return st
}

// counts are the sizes of QueueStats.
type counts struct {
	Pending, Active, Scheduled, Retry, Archived, Completed, Aggregating int
}

func countsOf(st *broker.QueueStats) counts {
	return counts{st.Pending, st.Active, st.Scheduled, st.Retry, st.Archived, st.Completed, st.Aggregating}
}

// wantCounts fails unless the sizes of q are want.
func (e *adminEnv) wantCounts(q string, want counts) {
	e.Helper()
	if got := countsOf(e.stats(q)); got != want {
		e.Fatalf("QueueStats %s sizes:\n got %+v\nwant %+v", q, got, want)
	}
}

// list returns a page of ListTasks and fails the test on error.
func (e *adminEnv) list(q string, state base.TaskState, group string, offset, limit int) []*base.TaskInfo {
	e.Helper()
	tis, err := e.a.ListTasks(e.ctx, broker.ListParams{Queue: q, State: state, Group: group, Offset: offset, Limit: limit})
	if err != nil {
		e.Fatalf("ListTasks %s %v offset %d limit %d: %v", q, state, offset, limit, err)
	}
	for _, ti := range tis {
		if ti == nil || ti.Message == nil {
			e.Fatalf("ListTasks %s %v returned a nil task", q, state)
		}
		if ti.State != state {
			e.Fatalf("ListTasks %s %v returned task %s in state %v", q, state, ti.Message.ID, ti.State)
		}
		if ti.Message.Queue != q {
			e.Fatalf("ListTasks %s %v returned task %s of queue %q", q, state, ti.Message.ID, ti.Message.Queue)
		}
	}
	return tis
}

// listIDs returns the IDs of every task of q in state (of group), by pages
// of 3.
func (e *adminEnv) listIDs(q string, state base.TaskState, group string) []string {
	e.Helper()
	var ids []string
	for off := 0; ; off += 3 {
		page := e.list(q, state, group, off, 3)
		ids = append(ids, infoIDs(page)...)
		if len(page) < 3 {
			return ids
		}
	}
}

func infoIDs(tis []*base.TaskInfo) []string {
	ids := make([]string, len(tis))
	for i, ti := range tis {
		ids[i] = ti.Message.ID
	}
	return ids
}

// group enqueues n tasks into group g of q, one second apart, and returns
// them oldest first.
func (e *adminEnv) group(q, g string, n int) []*base.TaskMessage {
	e.Helper()
	ms := make([]*base.TaskMessage, n)
	for i := range ms {
		if i > 0 {
			e.advance(time.Second)
		}
		m := e.newMsg(q)
		m.GroupKey = g
		e.enqueue(m)
		ms[i] = m
	}
	return ms
}

// midnight returns the start of t's day in UTC.
func midnight(t time.Time) time.Time {
	return t.UTC().Truncate(24 * time.Hour)
}

func statsTests() []testCase {
	return []testCase{
		adminCase("EveryState", func(e *adminEnv) {
			q := "default"
			e.inState(q, base.StateActive)
			e.inState(q, base.StateRetry)
			e.inState(q, base.StateArchived)
			e.inState(q, base.StateCompleted)
			e.inState(q, base.StatePending)
			e.inState(q, base.StatePending)
			e.inState(q, base.StateScheduled)
			e.inState(q, base.StateAggregating)
			e.inState(q, base.StateAggregating)
			e.group(q, "g2", 1)
			st := e.stats(q)
			want := counts{Pending: 2, Active: 1, Scheduled: 1, Retry: 1, Archived: 1, Completed: 1, Aggregating: 3}
			if got := countsOf(st); got != want {
				e.Fatalf("sizes:\n got %+v\nwant %+v", got, want)
			}
			if st.Queue != q || st.Groups != 2 || st.Paused {
				e.Fatalf("Queue %q, Groups %d, Paused %v; want %q, 2, false", st.Queue, st.Groups, st.Paused, q)
			}
			// Complete, Retry (a failure) and Archive each finish an attempt.
			if st.Processed != 3 || st.Failed != 2 || st.ProcessedTotal != 3 || st.FailedTotal != 2 {
				e.Fatalf("counters: Processed %d, Failed %d, totals %d, %d; want 3, 2, 3, 2",
					st.Processed, st.Failed, st.ProcessedTotal, st.FailedTotal)
			}
			wantTime(e, "Now", st.Now, e.now())
			if st.MemoryBytes == 0 || st.MemoryBytes < -1 {
				e.Fatalf("MemoryBytes = %d, want -1 or a positive size", st.MemoryBytes)
			}
			if st.Settings != (broker.QueueSettings{}) {
				e.Fatalf("Settings of a queue never given any = %+v", st.Settings)
			}
		}),
		adminCase("CountersByDay", func(e *adminEnv) {
			q := "default"
			_, l := e.inState(q, base.StateActive)
			e.complete(l.Ref())
			e.advance(24 * time.Hour)
			e.add(q)
			e.add(q)
			ls := e.fetchN(q, 2)
			wantNoErr(e, "Retry (not a failure)", e.b.Retry(e.ctx, broker.RetryParams{Lease: ls[0].Ref(), Delay: time.Hour, ErrMsg: "later"}))
			e.archive(ls[1].Ref(), "bad")
			st := e.stats(q)
			if st.Processed != 2 || st.Failed != 1 || st.ProcessedTotal != 3 || st.FailedTotal != 1 {
				e.Fatalf("counters: Processed %d, Failed %d, totals %d, %d; want 2, 1, 3, 1",
					st.Processed, st.Failed, st.ProcessedTotal, st.FailedTotal)
			}
			days, err := e.a.History(e.ctx, q, 3)
			wantNoErr(e, "History", err)
			want := []broker.DailyStats{
				{Date: midnight(e.now()), Processed: 2, Failed: 1},
				{Date: midnight(e.now()).Add(-24 * time.Hour), Processed: 1},
				{Date: midnight(e.now()).Add(-48 * time.Hour)},
			}
			if len(days) != len(want) {
				e.Fatalf("History 3 days: %d entries", len(days))
			}
			for i := range want {
				if !days[i].Date.Equal(want[i].Date) || days[i].Processed != want[i].Processed || days[i].Failed != want[i].Failed {
					e.Fatalf("History day %d = %v %d/%d, want %v %d/%d", i, fmtTime(days[i].Date), days[i].Processed,
						days[i].Failed, fmtTime(want[i].Date), want[i].Processed, want[i].Failed)
				}
			}
			// A new day starts at midnight UTC.
			e.advance(midnight(e.now()).Add(24 * time.Hour).Sub(e.now()))
			if st := e.stats(q); st.Processed != 0 || st.Failed != 0 || st.ProcessedTotal != 3 {
				e.Fatalf("at midnight: Processed %d, Failed %d, total %d; want 0, 0, 3", st.Processed, st.Failed, st.ProcessedTotal)
			}
			_, err = e.a.History(e.ctx, q, 0)
			wantErrIs(e, "History of 0 days", err, base.ErrInvalidArgument)
		}),
		adminCase("OldestPending", func(e *adminEnv) {
			q := "default"
			// A task made pending by forwarding, RunTask or Requeue became
			// pending then.
			a := e.schedule(q, time.Minute)
			e.schedule(q, 2*time.Minute)
			e.advance(time.Minute)
			e.wantForward(e.forward(q), 1, true, time.Minute)
			e.advance(5 * time.Second)
			wantTime(e, "OldestPending of a forwarded task", e.stats(q).OldestPending, Epoch.Add(time.Minute))
			e.advance(55 * time.Second)
			e.forward(q)
			l := e.fetchID(q, a.ID)
			wantTime(e, "OldestPending after the oldest was fetched", e.stats(q).OldestPending, Epoch.Add(2*time.Minute))
			e.advance(time.Second)
			wantNoErr(e, "Requeue", e.b.Requeue(e.ctx, l.Ref()))
			wantTime(e, "OldestPending of a requeued task", e.stats(q).OldestPending, e.now())
			e.drain(q)
			wantTime(e, "OldestPending of a drained queue", e.stats(q).OldestPending, time.Time{})
			r, _ := e.inState(q, base.StateRetry)
			e.advance(time.Second)
			wantNoErr(e, "RunTask", e.a.RunTask(e.ctx, q, r.ID))
			e.advance(time.Second)
			wantTime(e, "OldestPending of a task RunTask made pending", e.stats(q).OldestPending, e.now().Add(-time.Second))
			e.drain(q)
			// An enqueued task became pending when it was enqueued. A
			// backend may not record it for each task (Redis does not, to
			// keep Enqueue lean): then it is the time QueueStats first saw
			// the task as the oldest, and it stays so.
			enqueued := e.now()
			e.add(q)
			e.advance(5 * time.Second)
			e.add(q)
			e.advance(5 * time.Second)
			first := e.stats(q).OldestPending
			if first.Before(enqueued) || first.After(e.now()) {
				e.Fatalf("OldestPending of an enqueued task = %v, want between its enqueue at %v and now %v",
					fmtTime(first), fmtTime(enqueued), fmtTime(e.now()))
			}
			e.advance(time.Minute)
			wantTime(e, "OldestPending read again", e.stats(q).OldestPending, first)
		}),
		adminCase("UnknownQueue", func(e *adminEnv) {
			_, err := e.a.QueueStats(e.ctx, "nope")
			wantErrIs(e, "QueueStats of an unknown queue", err, base.ErrQueueNotFound)
			_, err = e.a.History(e.ctx, "nope", 7)
			wantErrIs(e, "History of an unknown queue", err, base.ErrQueueNotFound)
			if tis := e.list("nope", base.StatePending, "", 0, 10); len(tis) != 0 {
				e.Fatalf("ListTasks of an unknown queue: %v", infoIDs(tis))
			}
		}),
		adminCase("PausedOrSetQueueExists", func(e *adminEnv) {
			wantNoErr(e, "PauseQueue", e.a.PauseQueue(e.ctx, "paused"))
			s := broker.QueueSettings{MaxConcurrency: 2}
			wantNoErr(e, "SetQueueSettings", e.a.SetQueueSettings(e.ctx, "set", s))
			wantIDs(e, "Queues", e.queues(), []string{"paused", "set"})
			if st := e.stats("paused"); !st.Paused || countsOf(st) != (counts{}) {
				e.Fatalf("QueueStats of a paused empty queue: %+v", st)
			}
			if st := e.stats("set"); st.Settings != s || st.Paused {
				e.Fatalf("QueueStats of a queue with settings: %+v", st)
			}
			days, err := e.a.History(e.ctx, "paused", 2)
			wantNoErr(e, "History of a paused empty queue", err)
			if len(days) != 2 || days[0].Processed != 0 || days[1].Failed != 0 {
				e.Fatalf("History of a paused empty queue: %+v", days)
			}
		}),
		adminCase("Validation", func(e *adminEnv) {
			const bad = "a:b"
			ctx := e.ctx
			calls := map[string]func() error{
				"QueueStats": func() error { _, err := e.a.QueueStats(ctx, bad); return err },
				"History":    func() error { _, err := e.a.History(ctx, bad, 1); return err },
				"ListTasks": func() error {
					_, err := e.a.ListTasks(ctx, broker.ListParams{Queue: bad, State: base.StatePending, Limit: 1})
					return err
				},
				"RunTask":          func() error { return e.a.RunTask(ctx, bad, "x") },
				"ArchiveTask":      func() error { return e.a.ArchiveTask(ctx, bad, "x") },
				"DeleteAll":        func() error { _, err := e.a.DeleteAll(ctx, bad, base.StatePending, ""); return err },
				"RunAll":           func() error { _, err := e.a.RunAll(ctx, bad, base.StateRetry, ""); return err },
				"ArchiveAll":       func() error { _, err := e.a.ArchiveAll(ctx, bad, base.StatePending, ""); return err },
				"PauseQueue":       func() error { return e.a.PauseQueue(ctx, bad) },
				"UnpauseQueue":     func() error { return e.a.UnpauseQueue(ctx, bad) },
				"DeleteQueue":      func() error { return e.a.DeleteQueue(ctx, bad, true) },
				"SetQueueSettings": func() error { return e.a.SetQueueSettings(ctx, bad, broker.QueueSettings{}) },
				"WatchTask":        func() error { _, err := e.a.WatchTask(ctx, bad, "x"); return err },
				"ListGroups":       func() error { _, err := e.a.ListGroups(ctx, bad); return err },
				"TakeGroup": func() error {
					_, err := e.a.TakeGroup(ctx, broker.TakeGroupParams{Queue: bad, Group: "g", MaxSize: 1, Lease: time.Minute})
					return err
				},
				"ReclaimAggregations": func() error { _, err := e.a.ReclaimAggregations(ctx, bad); return err },
			}
			for name, call := range calls {
				wantErrIs(e, fmt.Sprintf("%s of queue %q", name, bad), call(), base.ErrInvalidArgument)
			}
			if qs := e.queues(); len(qs) != 0 {
				e.Fatalf("Queues after calls with a bad name: %v", qs)
			}
		}),
	}
}

// isThrottled reports whether err is a *broker.ThrottledError and returns it.
func isThrottled(err error) (*broker.ThrottledError, bool) {
	var th *broker.ThrottledError
	ok := errors.As(err, &th)
	return th, ok
}
