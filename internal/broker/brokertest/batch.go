package brokertest

import (
	"fmt"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// wantBatchErrs fails unless errs, the answer of an EnqueueBatch, has one
// entry per want: nil where want is nil, else an error wrapping it.
func wantBatchErrs(e *env, errs []error, want ...error) {
	e.Helper()
	if len(errs) != len(want) {
		e.Fatalf("EnqueueBatch of %d tasks returned %d results", len(want), len(errs))
	}
	for i, w := range want {
		what := fmt.Sprintf("EnqueueBatch entry %d", i)
		if w == nil {
			wantNoErr(e, what, errs[i])
		} else {
			wantErrIs(e, what, errs[i], w)
		}
	}
}

func batchTests() []testCase {
	return []testCase{
		{"Mixed", func(e *env) {
			existing := e.add("default")
			locked := e.uniqueMsg("default", "locked", time.Hour)
			e.enqueue(locked)

			pending := e.newMsg("default")
			scheduled := e.newMsg("default")
			grouped := e.newMsg("default")
			grouped.GroupKey = "g"
			badType := e.newMsg("default")
			badType.Type = ""
			conflict := e.newMsg("default")
			conflict.ID = existing.ID
			dup := e.uniqueMsg("default", "locked", time.Hour)
			tooBig := e.newMsg("default")
			tooBig.Payload = make([]byte, base.MaxPayloadSize+1)
			badQueue := e.newMsg("bad:queue")
			otherQueue := e.newMsg("other")

			ps := []broker.EnqueueParams{
				{Msg: pending},
				{Msg: badType},
				{Msg: scheduled, ProcessAt: e.now().Add(time.Minute)},
				{Msg: conflict},
				{Msg: dup},
				{Msg: grouped},
				{Msg: tooBig},
				{Msg: badQueue},
				{Msg: otherQueue},
			}
			wantBatchErrs(e, e.b.EnqueueBatch(e.ctx, ps),
				nil, base.ErrInvalidArgument, nil, base.ErrTaskIDConflict, base.ErrDuplicateTask, nil, base.ErrPayloadTooLarge, base.ErrInvalidArgument, nil)
			e.wantState("default", pending.ID, base.StatePending)
			ti := e.wantState("default", scheduled.ID, base.StateScheduled)
			wantTime(e, "NextProcessAt of the scheduled entry", ti.NextProcessAt, Epoch.Add(time.Minute))
			e.wantState("default", grouped.ID, base.StateAggregating)
			e.wantState("other", otherQueue.ID, base.StatePending)
			wantSameMsg(e, "task whose ID the batch reused", e.info("default", existing.ID).Message, existing)
			e.wantGone("default", badType.ID)
			e.wantGone("default", dup.ID)
			e.wantGone("default", tooBig.ID)
			wantIDs(e, "Queues", e.queues(), []string{"default", "other"})
			wantIDs(e, "pending tasks", e.drain("default"), msgIDs(existing, locked, pending))
		}},
		{"RetentionAmongPlainTasks", func(e *env) {
			// Tasks that differ only by a retention sit between plain
			// ones and ones with a due time: each keeps its own.
			plain, kept, scheduled, kept2 := e.newMsg("default"), e.newMsg("default"), e.newMsg("default"), e.newMsg("default")
			kept.Retention = time.Hour
			scheduled.Retention = 2 * time.Hour
			kept2.Retention = 3 * time.Hour
			ps := []broker.EnqueueParams{{Msg: plain}, {Msg: kept}, {Msg: scheduled, ProcessAt: e.now().Add(time.Minute)}, {Msg: kept2}}
			wantBatchErrs(e, e.b.EnqueueBatch(e.ctx, ps), nil, nil, nil, nil)
			for _, m := range []*base.TaskMessage{plain, kept, kept2} {
				e.wantState("default", m.ID, base.StatePending)
			}
			e.wantState("default", scheduled.ID, base.StateScheduled)
			for _, m := range []*base.TaskMessage{plain, kept, kept2} {
				e.complete(e.fetchID("default", m.ID).Ref())
			}
			e.wantGone("default", plain.ID)
			for _, m := range []*base.TaskMessage{kept, kept2} {
				if got := e.wantState("default", m.ID, base.StateCompleted).Message.Retention; got != m.Retention {
					e.Errorf("task %s: Retention %v after completion, want %v", m.ID, got, m.Retention)
				}
			}
		}},
		{"InterleavedQueues", func(e *env) {
			taken := e.add("b")
			type entry struct {
				m    *base.TaskMessage
				want error
			}
			var entries []entry
			for i, q := range []string{"a", "b", "c", "a", "b", "c", "a"} {
				m := e.newMsg(q)
				var want error
				switch i {
				case 1:
					m.ID = taken.ID
					want = base.ErrTaskIDConflict
				case 2:
					m.MaxRetry = -1
					want = base.ErrInvalidArgument
				case 3, 6:
					m.UniqueKey, m.UniqueTTL = "k", time.Hour
					if i == 6 {
						want = base.ErrDuplicateTask
					}
				}
				entries = append(entries, entry{m, want})
			}
			ps := make([]broker.EnqueueParams, len(entries))
			for i, en := range entries {
				ps[i] = broker.EnqueueParams{Msg: en.m}
			}
			errs := e.b.EnqueueBatch(e.ctx, ps)
			if len(errs) != len(ps) {
				e.Fatalf("EnqueueBatch of %d tasks returned %d results", len(ps), len(errs))
			}
			for i, en := range entries {
				what := fmt.Sprintf("EnqueueBatch entry %d (queue %s)", i, en.m.Queue)
				if en.want == nil {
					wantNoErr(e, what, errs[i])
					wantSameMsg(e, what, e.info(en.m.Queue, en.m.ID).Message, en.m)
				} else {
					wantErrIs(e, what, errs[i], en.want)
				}
			}
			wantIDs(e, "pending tasks of a", e.drain("a"), msgIDs(entries[0].m, entries[3].m))
			wantIDs(e, "pending tasks of b", e.drain("b"), msgIDs(taken, entries[4].m))
			wantIDs(e, "pending tasks of c", e.drain("c"), msgIDs(entries[5].m))
			wantIDs(e, "Queues", e.queues(), []string{"a", "b", "c"})
		}},
		{"Empty", func(e *env) {
			if errs := e.b.EnqueueBatch(e.ctx, nil); len(errs) != 0 {
				e.Fatalf("EnqueueBatch of no task returned %v", errs)
			}
		}},
		{"KeepsOrder", func(e *env) {
			var ps []broker.EnqueueParams
			var want []string
			for range 250 {
				m := e.newMsg("default")
				ps = append(ps, broker.EnqueueParams{Msg: m})
				want = append(want, m.ID)
			}
			for i, err := range e.b.EnqueueBatch(e.ctx, ps) {
				wantNoErr(e, fmt.Sprintf("EnqueueBatch entry %d", i), err)
			}
			wantIDs(e, "fetch order", e.drain("default"), want)
		}},
		{"SameIDTwice", func(e *env) {
			a := e.newMsg("default")
			b := *a
			b.Payload = []byte("second")
			errs := e.b.EnqueueBatch(e.ctx, []broker.EnqueueParams{{Msg: a}, {Msg: &b}})
			if len(errs) != 2 {
				e.Fatalf("EnqueueBatch of 2 tasks returned %d results", len(errs))
			}
			wantNoErr(e, "EnqueueBatch entry 0", errs[0])
			wantErrIs(e, "EnqueueBatch entry 1", errs[1], base.ErrTaskIDConflict)
			wantSameMsg(e, "stored task", e.info("default", a.ID).Message, a)
			wantIDs(e, "pending tasks", e.drain("default"), msgIDs(a))
		}},
		{"SameUniqueKeyTwice", func(e *env) {
			a := e.uniqueMsg("default", "k", time.Hour)
			b := e.uniqueMsg("default", "k", time.Hour)
			errs := e.b.EnqueueBatch(e.ctx, []broker.EnqueueParams{{Msg: a}, {Msg: b}})
			if len(errs) != 2 {
				e.Fatalf("EnqueueBatch of 2 tasks returned %d results", len(errs))
			}
			wantNoErr(e, "EnqueueBatch entry 0", errs[0])
			wantErrIs(e, "EnqueueBatch entry 1", errs[1], base.ErrDuplicateTask)
			e.wantGone("default", b.ID)
			wantIDs(e, "pending tasks", e.drain("default"), msgIDs(a))
		}},
	}
}
