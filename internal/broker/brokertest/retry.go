package brokertest

import (
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

func retryTests() []testCase {
	return []testCase{
		{"MovesToRetry", func(e *env) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			e.advance(4 * time.Second)
			e.retry(l.Ref(), 30*time.Second, "connection refused")
			failedAt := Epoch.Add(4 * time.Second)
			ti := e.wantState("default", m.ID, base.StateRetry)
			wantSameMsg(e, "retry task", ti.Message, m)
			wantBookkeeping(e, "retry task", ti.Message, 1, "connection refused", failedAt)
			wantTime(e, "NextProcessAt of a retry task", ti.NextProcessAt, failedAt.Add(30*time.Second))
			wantTime(e, "LeaseDeadline of a retry task", ti.LeaseDeadline, time.Time{})
		}},
		{"NotFetchableUntilForwarded", func(e *env) {
			m := e.add("default")
			e.retry(e.fetchID("default", m.ID).Ref(), 30*time.Second, "boom")
			e.fetchNone("default")
			e.advance(29 * time.Second)
			e.wantForward(e.forward("default"), 0, true, time.Second)
			e.fetchNone("default")
			e.advance(time.Second)
			e.fetchNone("default") // due, but only Forward makes it pending
			e.wantForward(e.forward("default"), 1, false, 0)
			ti := e.wantState("default", m.ID, base.StatePending)
			wantBookkeeping(e, "forwarded retry task", ti.Message, 1, "boom", Epoch)
			l := e.fetchID("default", m.ID)
			wantSameMsg(e, "refetched message", l.Msg, m)
			wantBookkeeping(e, "refetched message", l.Msg, 1, "boom", Epoch)
		}},
		{"CountsEveryRetry", func(e *env) {
			m := e.add("default")
			for i := 1; i <= 3; i++ {
				l := e.fetchID("default", m.ID)
				e.advance(time.Second)
				e.retry(l.Ref(), time.Minute, "failure")
				wantBookkeeping(e, "after retry", e.info("default", m.ID).Message, i, "failure", e.now())
				e.advance(time.Minute)
				e.wantForward(e.forward("default"), 1, false, 0)
			}
		}},
		{"NotFailureKeepsRetried", func(e *env) {
			// An error that is not a failure does not use up a retry, but
			// is still recorded.
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			e.advance(time.Second)
			err := e.b.Retry(e.ctx, broker.RetryParams{Lease: l.Ref(), Delay: time.Minute, ErrMsg: "rate limited", IsFailure: false})
			wantNoErr(e, "Retry", err)
			ti := e.wantState("default", m.ID, base.StateRetry)
			wantBookkeeping(e, "retry task", ti.Message, 0, "rate limited", Epoch.Add(time.Second))
			wantTime(e, "NextProcessAt", ti.NextProcessAt, Epoch.Add(time.Second+time.Minute))
			e.advance(time.Minute)
			e.wantForward(e.forward("default"), 1, false, 0)
			l = e.fetchID("default", m.ID)
			e.retry(l.Ref(), time.Minute, "real failure")
			wantBookkeeping(e, "retry task", e.info("default", m.ID).Message, 1, "real failure", e.now())
		}},
		{"ZeroDelayDueAtOnce", func(e *env) {
			m := e.add("default")
			e.retry(e.fetchID("default", m.ID).Ref(), 0, "again")
			ti := e.wantState("default", m.ID, base.StateRetry)
			wantTime(e, "NextProcessAt", ti.NextProcessAt, Epoch)
			e.wantForward(e.forward("default"), 1, false, 0)
			e.fetchID("default", m.ID)
		}},
		{"EndsLease", func(e *env) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			e.retry(l.Ref(), time.Hour, "boom")
			wantErrIs(e, "Complete after Retry", e.completeErr(l.Ref()), base.ErrLeaseLost)
			err := e.b.Retry(e.ctx, broker.RetryParams{Lease: l.Ref(), Delay: time.Second, ErrMsg: "again", IsFailure: true})
			wantErrIs(e, "second Retry", err, base.ErrLeaseLost)
			e.advance(2 * leaseFor)
			if ls := e.expired("default"); len(ls) != 0 {
				e.Fatalf("ExpiredLeases after Retry = %v, want none", leaseIDs(ls))
			}
			ti := e.wantState("default", m.ID, base.StateRetry)
			wantBookkeeping(e, "retry task", ti.Message, 1, "boom", Epoch)
		}},
		{"StaleToken", func(e *env) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			stale := l.Ref()
			stale.Token = "stale"
			err := e.b.Retry(e.ctx, broker.RetryParams{Lease: stale, Delay: time.Second, ErrMsg: "x", IsFailure: true})
			wantErrIs(e, "Retry with a stale token", err, base.ErrLeaseLost)
			ti := e.wantState("default", m.ID, base.StateActive)
			wantBookkeeping(e, "active task", ti.Message, 0, "", time.Time{})
			e.complete(l.Ref())
		}},
		{"NotActive", func(e *env) {
			for _, s := range []base.TaskState{base.StatePending, base.StateScheduled, base.StateRetry, base.StateArchived, base.StateCompleted, base.StateAggregating} {
				q := s.String()
				m, _ := e.inState(q, s)
				before := e.info(q, m.ID)
				err := e.b.Retry(e.ctx, broker.RetryParams{Lease: broker.LeaseRef{Queue: q, ID: m.ID, Token: "made-up"}, Delay: time.Second, ErrMsg: "x", IsFailure: true})
				wantErrIs(e, "Retry of a "+q+" task", err, base.ErrLeaseLost)
				after := e.wantState(q, m.ID, s)
				wantBookkeeping(e, q+" task", after.Message, before.Message.Retried, before.Message.LastErr, before.Message.LastFailedAt)
			}
			err := e.b.Retry(e.ctx, broker.RetryParams{Lease: broker.LeaseRef{Queue: "default", ID: "missing", Token: "t"}, ErrMsg: "x"})
			wantErrIs(e, "Retry of a missing task", err, base.ErrLeaseLost)
			e.wantGone("default", "missing")
		}},
	}
}

func archiveTests() []testCase {
	return []testCase{
		{"MovesToArchived", func(e *env) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			e.advance(3 * time.Second)
			e.archive(l.Ref(), "bad payload")
			ti := e.wantState("default", m.ID, base.StateArchived)
			wantSameMsg(e, "archived task", ti.Message, m)
			wantBookkeeping(e, "archived task", ti.Message, 0, "bad payload", Epoch.Add(3*time.Second))
			wantTime(e, "NextProcessAt of an archived task", ti.NextProcessAt, time.Time{})
			wantTime(e, "LeaseDeadline of an archived task", ti.LeaseDeadline, time.Time{})
			wantTime(e, "CompletedAt of an archived task", ti.CompletedAt, time.Time{})
		}},
		{"KeepsRetried", func(e *env) {
			m := e.add("default")
			e.retry(e.fetchID("default", m.ID).Ref(), time.Second, "first")
			e.advance(time.Second)
			e.forward("default")
			e.retry(e.fetchID("default", m.ID).Ref(), time.Second, "second")
			e.advance(time.Second)
			e.forward("default")
			l := e.fetchID("default", m.ID)
			e.advance(time.Second)
			e.archive(l.Ref(), "third")
			ti := e.wantState("default", m.ID, base.StateArchived)
			wantBookkeeping(e, "archived task", ti.Message, 2, "third", Epoch.Add(3*time.Second))
		}},
		{"StaysArchived", func(e *env) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			e.archive(l.Ref(), "fatal")
			e.fetchNone("default")
			e.advance(30 * 24 * time.Hour)
			e.wantForward(e.forward("default"), 0, false, 0)
			e.fetchNone("default")
			n, err := e.b.DeleteExpiredCompleted(e.ctx, "default", 100)
			wantNoErr(e, "DeleteExpiredCompleted", err)
			if n != 0 {
				e.Fatalf("DeleteExpiredCompleted deleted %d tasks, want 0", n)
			}
			if ls := e.expired("default"); len(ls) != 0 {
				e.Fatalf("ExpiredLeases after Archive = %v, want none", leaseIDs(ls))
			}
			e.wantState("default", m.ID, base.StateArchived)
			wantErrIs(e, "Complete after Archive", e.completeErr(l.Ref()), base.ErrLeaseLost)
		}},
		{"StaleToken", func(e *env) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			stale := l.Ref()
			stale.Token = "stale"
			err := e.b.Archive(e.ctx, broker.ArchiveParams{Lease: stale, ErrMsg: "x"})
			wantErrIs(e, "Archive with a stale token", err, base.ErrLeaseLost)
			ti := e.wantState("default", m.ID, base.StateActive)
			wantBookkeeping(e, "active task", ti.Message, 0, "", time.Time{})
			e.complete(l.Ref())
		}},
		{"NotActive", func(e *env) {
			for _, s := range []base.TaskState{base.StatePending, base.StateScheduled, base.StateRetry, base.StateArchived, base.StateCompleted, base.StateAggregating} {
				q := s.String()
				m, _ := e.inState(q, s)
				before := e.info(q, m.ID)
				err := e.b.Archive(e.ctx, broker.ArchiveParams{Lease: broker.LeaseRef{Queue: q, ID: m.ID, Token: "made-up"}, ErrMsg: "x"})
				wantErrIs(e, "Archive of a "+q+" task", err, base.ErrLeaseLost)
				after := e.wantState(q, m.ID, s)
				wantBookkeeping(e, q+" task", after.Message, before.Message.Retried, before.Message.LastErr, before.Message.LastFailedAt)
			}
		}},
	}
}

func requeueTests() []testCase {
	return []testCase{
		{"ToHead", func(e *env) {
			a, b, c := e.add("default"), e.add("default"), e.add("default")
			l := e.fetchID("default", a.ID)
			wantNoErr(e, "Requeue", e.b.Requeue(e.ctx, l.Ref()))
			ti := e.wantState("default", a.ID, base.StatePending)
			wantTime(e, "LeaseDeadline of a requeued task", ti.LeaseDeadline, time.Time{})
			wantIDs(e, "fetch order after Requeue", e.drain("default"), msgIDs(a, b, c))
		}},
		{"AheadOfOlderTasks", func(e *env) {
			a, b := e.add("default"), e.add("default")
			e.fetchID("default", a.ID)
			lb := e.fetchID("default", b.ID)
			c := e.add("default")
			wantNoErr(e, "Requeue", e.b.Requeue(e.ctx, lb.Ref()))
			wantIDs(e, "fetch order after Requeue", e.drain("default"), msgIDs(b, c))
		}},
		{"KeepsRetried", func(e *env) {
			m := e.add("default")
			e.advance(time.Second)
			e.retry(e.fetchID("default", m.ID).Ref(), 0, "once")
			e.forward("default")
			l := e.fetchID("default", m.ID)
			e.advance(time.Second)
			wantNoErr(e, "Requeue", e.b.Requeue(e.ctx, l.Ref()))
			ti := e.wantState("default", m.ID, base.StatePending)
			wantSameMsg(e, "requeued task", ti.Message, m)
			wantBookkeeping(e, "requeued task", ti.Message, 1, "once", Epoch.Add(time.Second))
			l = e.fetchID("default", m.ID)
			wantBookkeeping(e, "refetched task", l.Msg, 1, "once", Epoch.Add(time.Second))
		}},
		{"EndsLease", func(e *env) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			wantNoErr(e, "Requeue", e.b.Requeue(e.ctx, l.Ref()))
			wantErrIs(e, "Complete after Requeue", e.completeErr(l.Ref()), base.ErrLeaseLost)
			wantErrIs(e, "second Requeue", e.b.Requeue(e.ctx, l.Ref()), base.ErrLeaseLost)
			e.advance(2 * leaseFor)
			if ls := e.expired("default"); len(ls) != 0 {
				e.Fatalf("ExpiredLeases after Requeue = %v, want none", leaseIDs(ls))
			}
			e.wantState("default", m.ID, base.StatePending)
			wantIDs(e, "pending tasks", e.drain("default"), msgIDs(m))
		}},
		{"StaleToken", func(e *env) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			stale := l.Ref()
			stale.Token = "stale"
			wantErrIs(e, "Requeue with a stale token", e.b.Requeue(e.ctx, stale), base.ErrLeaseLost)
			ti := e.wantState("default", m.ID, base.StateActive)
			wantTime(e, "LeaseDeadline", ti.LeaseDeadline, Epoch.Add(leaseFor))
			e.fetchNone("default")
			e.complete(l.Ref())
		}},
		{"NotActive", func(e *env) {
			for _, s := range []base.TaskState{base.StatePending, base.StateScheduled, base.StateRetry, base.StateArchived, base.StateCompleted, base.StateAggregating} {
				q := s.String()
				m, _ := e.inState(q, s)
				err := e.b.Requeue(e.ctx, broker.LeaseRef{Queue: q, ID: m.ID, Token: "made-up"})
				wantErrIs(e, "Requeue of a "+q+" task", err, base.ErrLeaseLost)
				e.wantState(q, m.ID, s)
			}
			if s := base.StatePending.String(); len(e.drain(s)) != 1 {
				e.Fatal("Requeue of a pending task changed the pending list")
			}
		}},
	}
}
