package brokertest

import (
	"bytes"
	"fmt"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

func completeTests() []testCase {
	return []testCase{
		{"WithoutRetentionDeletes", func(e *env) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			wantNoErr(e, "WriteResult", e.b.WriteResult(e.ctx, l.Ref(), []byte("result")))
			e.complete(l.Ref())
			e.wantGone("default", m.ID)
			e.fetchNone("default")
			e.advance(time.Hour)
			if ls := e.expired("default"); len(ls) != 0 {
				e.Fatalf("ExpiredLeases after Complete = %v, want none", leaseIDs(ls))
			}
		}},
		{"WithRetentionKeeps", func(e *env) {
			m := e.newMsg("default")
			m.Retention = 24 * time.Hour
			e.enqueue(m)
			l := e.fetchID("default", m.ID)
			e.advance(3 * time.Second)
			wantNoErr(e, "WriteResult", e.b.WriteResult(e.ctx, l.Ref(), []byte("the result")))
			e.advance(2 * time.Second)
			e.complete(l.Ref())
			ti := e.wantState("default", m.ID, base.StateCompleted)
			wantSameMsg(e, "completed task", ti.Message, m)
			if string(ti.Result) != "the result" {
				e.Fatalf("Result = %q, want %q", ti.Result, "the result")
			}
			wantTime(e, "CompletedAt", ti.CompletedAt, Epoch.Add(5*time.Second))
			wantTime(e, "LeaseDeadline of a completed task", ti.LeaseDeadline, time.Time{})
			wantTime(e, "NextProcessAt of a completed task", ti.NextProcessAt, time.Time{})
			e.fetchNone("default")
			e.advance(time.Hour)
			if ls := e.expired("default"); len(ls) != 0 {
				e.Fatalf("ExpiredLeases after Complete = %v, want none", leaseIDs(ls))
			}
		}},
		{"WithRetentionNoResult", func(e *env) {
			m := e.newMsg("default")
			m.Retention = time.Hour
			e.enqueue(m)
			e.complete(e.fetchID("default", m.ID).Ref())
			ti := e.wantState("default", m.ID, base.StateCompleted)
			if len(ti.Result) != 0 {
				e.Fatalf("Result of a task that wrote none = %q, want empty", ti.Result)
			}
			wantTime(e, "CompletedAt", ti.CompletedAt, Epoch)
		}},
		{"KeepsRetriedAndLastErr", func(e *env) {
			m := e.newMsg("default")
			m.Retention = time.Hour
			e.enqueue(m)
			e.retry(e.fetchID("default", m.ID).Ref(), 0, "first try failed")
			e.forward("default")
			e.complete(e.fetchID("default", m.ID).Ref())
			ti := e.wantState("default", m.ID, base.StateCompleted)
			wantBookkeeping(e, "completed task", ti.Message, 1, "first try failed", Epoch)
		}},
		{"Batch", func(e *env) {
			refs := addAndFetch(e, 3)
			errs := e.b.Complete(e.ctx, refs)
			if len(errs) != 3 {
				e.Fatalf("Complete of 3 leases returned %d results", len(errs))
			}
			for i, err := range errs {
				wantNoErr(e, "Complete entry "+refs[i].ID, err)
				e.wantGone("default", refs[i].ID)
			}
		}},
		{"BatchWithStaleToken", func(e *env) {
			var refs []broker.LeaseRef
			for range 3 {
				m := e.newMsg("default")
				m.Retention = time.Hour
				e.enqueue(m)
			}
			for _, l := range e.fetchN("default", 3) {
				refs = append(refs, l.Ref())
			}
			good := refs[1]
			stale := good
			stale.Token = "not-" + good.Token
			errs := e.b.Complete(e.ctx, []broker.LeaseRef{refs[0], stale, refs[2]})
			if len(errs) != 3 {
				e.Fatalf("Complete of 3 leases returned %d results", len(errs))
			}
			wantNoErr(e, "Complete entry 0", errs[0])
			wantErrIs(e, "Complete entry 1 (stale token)", errs[1], base.ErrLeaseLost)
			wantNoErr(e, "Complete entry 2", errs[2])
			e.wantState("default", refs[0].ID, base.StateCompleted)
			e.wantState("default", refs[2].ID, base.StateCompleted)
			ti := e.wantState("default", good.ID, base.StateActive)
			wantTime(e, "LeaseDeadline of the task with the stale entry", ti.LeaseDeadline, Epoch.Add(leaseFor))
			e.complete(good)
			e.wantState("default", good.ID, base.StateCompleted)
		}},
		{"BatchWithStaleAndRepeatedLeases", func(e *env) {
			// Tasks deleted on success, a stale entry between them and a
			// lease given twice: the repeat completes nothing.
			refs := addAndFetch(e, 4)
			stale := refs[1]
			stale.Token = "not-" + stale.Token
			batch := []broker.LeaseRef{refs[0], stale, refs[2], refs[0], refs[3], refs[2]}
			errs := e.b.Complete(e.ctx, batch)
			if len(errs) != len(batch) {
				e.Fatalf("Complete of %d leases returned %d results", len(batch), len(errs))
			}
			for i, err := range errs {
				if i == 1 || i == 3 || i == 5 {
					wantErrIs(e, fmt.Sprintf("Complete entry %d", i), err, base.ErrLeaseLost)
					continue
				}
				wantNoErr(e, fmt.Sprintf("Complete entry %d", i), err)
				e.wantGone("default", batch[i].ID)
			}
			e.wantState("default", refs[1].ID, base.StateActive)
			e.complete(refs[1])
			e.wantGone("default", refs[1].ID)
		}},
		{"BatchAcrossQueues", func(e *env) {
			var refs []broker.LeaseRef
			for _, q := range []string{"a", "b", "a", "c", "b"} {
				m := e.newMsg(q)
				m.Retention = time.Hour
				e.enqueue(m)
				refs = append(refs, e.fetchID(q, m.ID).Ref())
			}
			stale := refs[2]
			stale.Token = "stale"
			batch := []broker.LeaseRef{refs[0], refs[1], stale, refs[3], refs[4], {Queue: "d", ID: "missing", Token: "t"}}
			errs := e.b.Complete(e.ctx, batch)
			if len(errs) != len(batch) {
				e.Fatalf("Complete of %d leases returned %d results", len(batch), len(errs))
			}
			for i, err := range errs {
				if i == 2 || i == 5 {
					wantErrIs(e, fmt.Sprintf("Complete entry %d", i), err, base.ErrLeaseLost)
					continue
				}
				wantNoErr(e, fmt.Sprintf("Complete entry %d", i), err)
				e.wantState(batch[i].Queue, batch[i].ID, base.StateCompleted)
			}
			e.wantState("a", refs[2].ID, base.StateActive)
		}},
		{"EmptyBatch", func(e *env) {
			if errs := e.b.Complete(e.ctx, nil); len(errs) != 0 {
				e.Fatalf("Complete of no lease returned %v", errs)
			}
		}},
		{"Twice", func(e *env) {
			m := e.newMsg("default")
			m.Retention = time.Hour
			e.enqueue(m)
			l := e.fetchID("default", m.ID)
			e.complete(l.Ref())
			e.advance(time.Second)
			wantErrIs(e, "second Complete", e.completeErr(l.Ref()), base.ErrLeaseLost)
			wantTime(e, "CompletedAt after the second Complete", e.info("default", m.ID).CompletedAt, Epoch)
		}},
		{"NotActive", func(e *env) {
			for _, s := range []base.TaskState{base.StatePending, base.StateScheduled, base.StateRetry, base.StateArchived, base.StateCompleted, base.StateAggregating} {
				q := s.String()
				m, _ := e.inState(q, s)
				err := e.completeErr(broker.LeaseRef{Queue: q, ID: m.ID, Token: "made-up"})
				wantErrIs(e, "Complete of a "+q+" task", err, base.ErrLeaseLost)
				e.wantState(q, m.ID, s)
			}
		}},
		{"MissingTask", func(e *env) {
			err := e.completeErr(broker.LeaseRef{Queue: "default", ID: "no-such-task", Token: "t"})
			wantErrIs(e, "Complete of a missing task", err, base.ErrLeaseLost)
			e.wantGone("default", "no-such-task")
		}},
		{"WriteResultOverwrites", func(e *env) {
			m := e.newMsg("default")
			m.Retention = time.Hour
			e.enqueue(m)
			l := e.fetchID("default", m.ID)
			wantNoErr(e, "first WriteResult", e.b.WriteResult(e.ctx, l.Ref(), []byte("first, longer result")))
			second := []byte{0, 1, 2, 0xff, 'x'}
			wantNoErr(e, "second WriteResult", e.b.WriteResult(e.ctx, l.Ref(), second))
			e.complete(l.Ref())
			if ti := e.info("default", m.ID); !bytes.Equal(ti.Result, second) {
				e.Fatalf("Result = %q, want %q", ti.Result, second)
			}
		}},
		{"WriteResultStaleToken", func(e *env) {
			m := e.newMsg("default")
			m.Retention = time.Hour
			e.enqueue(m)
			l := e.fetchID("default", m.ID)
			stale := l.Ref()
			stale.Token = "stale"
			wantErrIs(e, "WriteResult with a stale token", e.b.WriteResult(e.ctx, stale, []byte("bad")), base.ErrLeaseLost)
			e.complete(l.Ref())
			if ti := e.info("default", m.ID); len(ti.Result) != 0 {
				e.Fatalf("Result = %q, want none: a stale WriteResult was stored", ti.Result)
			}
		}},
		{"WriteResultNotActive", func(e *env) {
			for _, s := range []base.TaskState{base.StatePending, base.StateCompleted} {
				q := s.String()
				m, _ := e.inState(q, s)
				err := e.b.WriteResult(e.ctx, broker.LeaseRef{Queue: q, ID: m.ID, Token: "made-up"}, []byte("x"))
				wantErrIs(e, "WriteResult to a "+q+" task", err, base.ErrLeaseLost)
				if ti := e.wantState(q, m.ID, s); len(ti.Result) != 0 {
					e.Fatalf("Result of the %v task = %q, want none", s, ti.Result)
				}
			}
			err := e.b.WriteResult(e.ctx, broker.LeaseRef{Queue: "default", ID: "missing", Token: "t"}, []byte("x"))
			wantErrIs(e, "WriteResult to a missing task", err, base.ErrLeaseLost)
			e.wantGone("default", "missing")
		}},
	}
}

// addAndFetch adds n tasks to the default queue and fetches them: their
// leases' references, in fetch order.
func addAndFetch(e *env, n int) []broker.LeaseRef {
	e.Helper()
	for range n {
		e.add("default")
	}
	var refs []broker.LeaseRef
	for _, l := range e.fetchN("default", n) {
		refs = append(refs, l.Ref())
	}
	return refs
}
