package brokertest

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// take runs TakeGroup and fails the test on error.
func (e *adminEnv) take(p broker.TakeGroupParams) *broker.Aggregation {
	e.Helper()
	a, err := e.a.TakeGroup(e.ctx, p)
	if err != nil {
		e.Fatalf("TakeGroup %+v: %v", p, err)
	}
	if a != nil && (a.Queue != p.Queue || a.Group != p.Group || a.SetID == "" || a.Token == "" || len(a.Msgs) == 0) {
		e.Fatalf("TakeGroup %+v returned %+v", p, a)
	}
	return a
}

// groups returns ListGroups of q and fails the test on error.
func (e *adminEnv) groups(q string) []broker.GroupStats {
	e.Helper()
	gs, err := e.a.ListGroups(e.ctx, q)
	if err != nil {
		e.Fatalf("ListGroups %s: %v", q, err)
	}
	return gs
}

func aggIDs(a *broker.Aggregation) []string { return msgIDs(a.Msgs...) }

func groupTests() []testCase {
	params := func(maxSize int, maxDelay, grace time.Duration) broker.TakeGroupParams {
		return broker.TakeGroupParams{Queue: "default", Group: "g", MaxSize: maxSize, MaxDelay: maxDelay, GracePeriod: grace, Lease: time.Minute}
	}
	return []testCase{
		adminCase("ListGroups", func(e *adminEnv) {
			e.group("default", "b", 2)
			e.group("default", "a", 3)
			e.group("other", "c", 1)
			e.add("default")
			want := []broker.GroupStats{{Group: "a", Size: 3}, {Group: "b", Size: 2}}
			if got := e.groups("default"); !slices.Equal(got, want) {
				e.Fatalf("ListGroups = %v, want %v", got, want)
			}
			if got := e.groups("nope"); len(got) != 0 {
				e.Fatalf("ListGroups of an unknown queue = %v", got)
			}
			if st := e.stats("default"); st.Groups != 2 || st.Aggregating != 5 {
				e.Fatalf("QueueStats: Groups %d, Aggregating %d; want 2, 5", st.Groups, st.Aggregating)
			}
		}),
		adminCase("MaxSize", func(e *adminEnv) {
			ms := e.group("default", "g", 5)
			p := params(3, 0, time.Hour)
			a := e.take(p)
			if a == nil {
				e.Fatal("TakeGroup of a group of 5 with MaxSize 3: not ready")
			}
			wantIDs(e, "taken tasks", aggIDs(a), msgIDs(ms[:3]...))
			for i, m := range a.Msgs {
				wantSameMsg(e, "taken task", m, ms[i])
			}
			if got := e.groups("default"); len(got) != 1 || got[0].Size != 2 {
				e.Fatalf("ListGroups after taking 3 of 5: %v", got)
			}
			wantIDs(e, "left in the group", e.listIDs("default", base.StateAggregating, "g"), msgIDs(ms[3:]...))
			// Taken tasks stay aggregating and cannot be run or archived.
			e.wantState("default", ms[0].ID, base.StateAggregating)
			wantErrIs(e, "RunTask of a taken task", e.a.RunTask(e.ctx, "default", ms[0].ID), base.ErrWrongState)
			wantErrIs(e, "ArchiveTask of a taken task", e.a.ArchiveTask(e.ctx, "default", ms[0].ID), base.ErrWrongState)
			// Two left: not ready by size, nor by grace.
			if a := e.take(p); a != nil {
				e.Fatalf("TakeGroup of 2 with MaxSize 3: took %v", aggIDs(a))
			}
		}),
		adminCase("GracePeriod", func(e *adminEnv) {
			ms := e.group("default", "g", 2) // one second apart
			p := params(10, 0, time.Minute)
			if a := e.take(p); a != nil {
				e.Fatalf("TakeGroup at once: took %v", aggIDs(a))
			}
			e.advance(time.Minute - time.Millisecond)
			if a := e.take(p); a != nil {
				e.Fatalf("TakeGroup 1ms before the grace period: took %v", aggIDs(a))
			}
			e.advance(time.Millisecond)
			a := e.take(p)
			if a == nil {
				e.Fatal("TakeGroup when the newest task waited the grace period: not ready")
			}
			wantIDs(e, "taken tasks", aggIDs(a), msgIDs(ms...))
			if got := e.groups("default"); len(got) != 0 {
				e.Fatalf("ListGroups after taking the whole group: %v", got)
			}
			if a := e.take(p); a != nil {
				e.Fatalf("TakeGroup of an empty group: %v", aggIDs(a))
			}
		}),
		adminCase("MaxDelay", func(e *adminEnv) {
			first := e.group("default", "g", 1)[0]
			e.advance(40 * time.Second)
			e.group("default", "g", 1)
			p := params(10, 80*time.Second, time.Minute)
			e.advance(39 * time.Second)
			if a := e.take(p); a != nil {
				e.Fatalf("TakeGroup 79s after the first task: took %v", aggIDs(a))
			}
			e.advance(time.Second)
			a := e.take(p)
			if a == nil || len(a.Msgs) != 2 || a.Msgs[0].ID != first.ID {
				e.Fatalf("TakeGroup 80s after the first task: %v", a)
			}
		}),
		adminCase("ZeroGracePeriod", func(e *adminEnv) {
			e.group("default", "g", 1)
			if a := e.take(params(10, 0, 0)); a == nil {
				e.Fatal("TakeGroup with no grace period: not ready")
			}
		}),
		adminCase("Invalid", func(e *adminEnv) {
			e.group("default", "g", 1)
			for _, p := range []broker.TakeGroupParams{
				{Queue: "default", Group: "g", MaxSize: 0, Lease: time.Minute},
				{Queue: "default", Group: "g", MaxSize: 1, Lease: 0},
				{Queue: "default", Group: "g", MaxSize: 1, GracePeriod: -time.Second, Lease: time.Minute},
				{Queue: "default", Group: "", MaxSize: 1, Lease: time.Minute},
			} {
				_, err := e.a.TakeGroup(e.ctx, p)
				wantErrIs(e, fmt.Sprintf("TakeGroup %+v", p), err, base.ErrInvalidArgument)
			}
			if got := e.groups("default"); len(got) != 1 || got[0].Size != 1 {
				e.Fatalf("ListGroups after refused takes: %v", got)
			}
		}),
		adminCase("ConcurrentTakers", func(e *adminEnv) {
			const n = 300
			ps := make([]broker.EnqueueParams, n)
			for i := range ps {
				m := e.newMsg("default")
				m.GroupKey = "g"
				ps[i] = broker.EnqueueParams{Msg: m}
			}
			for _, err := range e.b.EnqueueBatch(e.ctx, ps) {
				wantNoErr(e, "EnqueueBatch", err)
			}
			var mu sync.Mutex
			seen := map[string]int{}
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						a, err := e.a.TakeGroup(e.ctx, params(7, 0, 0))
						if err != nil {
							e.Errorf("TakeGroup: %v", err)
							return
						}
						if a == nil {
							return
						}
						mu.Lock()
						for _, m := range a.Msgs {
							seen[m.ID]++
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if len(seen) != n {
				e.Fatalf("4 takers took %d distinct tasks of %d", len(seen), n)
			}
			for id, k := range seen {
				if k != 1 {
					e.Fatalf("task %s was taken %d times", id, k)
				}
			}
		}),
		adminCase("Finish", func(e *adminEnv) {
			ms := e.group("default", "g", 3)
			e.group("default", "other", 1)
			a := e.take(params(3, 0, time.Hour))
			agg := e.newMsg("default")
			agg.Retention = time.Hour
			wantNoErr(e, "FinishAggregation", e.a.FinishAggregation(e.ctx, a, agg))
			for _, m := range ms {
				e.wantGone("default", m.ID)
			}
			e.wantState("default", agg.ID, base.StatePending)
			if st := e.stats("default"); st.Aggregating != 1 || st.Pending != 1 {
				e.Fatalf("QueueStats after FinishAggregation: Aggregating %d, Pending %d; want 1, 1", st.Aggregating, st.Pending)
			}
			l := e.fetchID("default", agg.ID)
			wantSameMsg(e, "aggregated task", l.Msg, agg)
			// The set is gone: finishing again loses.
			err := e.a.FinishAggregation(e.ctx, a, e.newMsg("default"))
			wantErrIs(e, "FinishAggregation of a finished set", err, base.ErrLeaseLost)
		}),
		adminCase("FinishWakes", func(e *adminEnv) {
			q := uniqueQueue("finish-wakes")
			e.group(q, "g", 2)
			a := e.take(broker.TakeGroupParams{Queue: q, Group: "g", MaxSize: 2, GracePeriod: time.Hour, Lease: time.Minute})
			ch := e.subscribe()
			wantNoErr(e, "FinishAggregation", e.a.FinishAggregation(e.ctx, a, e.newMsg(q)))
			e.waitEvent(ch, broker.EventReady, q)
		}),
		adminCase("FinishRefused", func(e *adminEnv) {
			ms := e.group("default", "g", 2)
			a := e.take(params(2, 0, time.Hour))
			stale := *a
			stale.Token = "not-the-token"
			agg := e.newMsg("default")
			wantErrIs(e, "FinishAggregation with another token", e.a.FinishAggregation(e.ctx, &stale, agg), base.ErrLeaseLost)
			other := e.newMsg("other")
			wantErrIs(e, "FinishAggregation into another queue", e.a.FinishAggregation(e.ctx, a, other), base.ErrInvalidArgument)
			grouped := e.newMsg("default")
			grouped.GroupKey = "g"
			wantErrIs(e, "FinishAggregation of a task with a group", e.a.FinishAggregation(e.ctx, a, grouped), base.ErrInvalidArgument)
			taken := e.newMsg("default")
			taken.ID = ms[0].ID
			wantErrIs(e, "FinishAggregation with a taken ID", e.a.FinishAggregation(e.ctx, a, taken), base.ErrTaskIDConflict)
			e.wantGone("default", agg.ID)
			for _, m := range ms {
				e.wantState("default", m.ID, base.StateAggregating)
			}
			wantNoErr(e, "FinishAggregation with the right token", e.a.FinishAggregation(e.ctx, a, agg))
		}),
		adminCase("Reclaim", func(e *adminEnv) {
			ms := e.group("default", "g", 4)
			a := e.take(params(3, 0, time.Hour))
			n, err := e.a.ReclaimAggregations(e.ctx, "default")
			if err != nil || n != 0 {
				e.Fatalf("ReclaimAggregations while the lease holds: %d, %v", n, err)
			}
			e.advance(time.Minute - time.Millisecond)
			if n, err := e.a.ReclaimAggregations(e.ctx, "default"); err != nil || n != 0 {
				e.Fatalf("ReclaimAggregations 1ms before the lease runs out: %d, %v", n, err)
			}
			e.advance(time.Millisecond)
			n, err = e.a.ReclaimAggregations(e.ctx, "default")
			if err != nil || n != 3 {
				e.Fatalf("ReclaimAggregations after the lease ran out: %d, %v; want 3", n, err)
			}
			// The tasks are back in their group, in their old order.
			wantIDs(e, "group after reclaiming", e.listIDs("default", base.StateAggregating, "g"), msgIDs(ms...))
			err = e.a.FinishAggregation(e.ctx, a, e.newMsg("default"))
			wantErrIs(e, "FinishAggregation of a reclaimed set", err, base.ErrLeaseLost)
			for _, m := range ms {
				e.wantState("default", m.ID, base.StateAggregating)
			}
			// And can be taken again.
			b := e.take(params(3, 0, time.Hour))
			if b == nil {
				e.Fatal("TakeGroup after reclaiming: not ready")
			}
			wantIDs(e, "taken again", aggIDs(b), msgIDs(ms[:3]...))
			if n, err := e.a.ReclaimAggregations(e.ctx, "nope"); err != nil || n != 0 {
				e.Fatalf("ReclaimAggregations of an unknown queue: %d, %v", n, err)
			}
		}),
		adminCase("DeleteTakenGroupTasks", func(e *adminEnv) {
			// DeleteQueue with force deletes taken tasks too.
			ms := e.group("default", "g", 2)
			e.take(params(2, 0, time.Hour))
			wantNoErr(e, "DeleteQueue", e.a.DeleteQueue(e.ctx, "default", true))
			for _, m := range ms {
				e.wantGone("default", m.ID)
			}
			if n, err := e.a.ReclaimAggregations(e.ctx, "default"); err != nil || n != 0 {
				e.Fatalf("ReclaimAggregations after DeleteQueue: %d, %v", n, err)
			}
		}),
	}
}
