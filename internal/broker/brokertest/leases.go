package brokertest

import (
	"slices"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

func leaseTests() []testCase {
	cases := []testCase{
		{"ExpiredLeasesListsOnlyExpired", func(e *env) {
			a, b := e.add("default"), e.add("default")
			la := e.fetchID("default", a.ID)
			e.advance(20 * time.Second)
			e.fetchID("default", b.ID)
			if ls := e.expired("default"); len(ls) != 0 {
				e.Fatalf("ExpiredLeases before any deadline = %v, want none", leaseIDs(ls))
			}
			e.advance(15 * time.Second) // a's lease ran out 5s ago, b's has 15s left
			ls := e.expired("default")
			wantIDs(e, "ExpiredLeases", leaseIDs(ls), msgIDs(a))
			wantSameMsg(e, "expired lease message", ls[0].Msg, a)
			wantTime(e, "expired lease Deadline", ls[0].Deadline, la.Deadline)
			if ls[0].Token == "" {
				e.Fatal("expired lease has an empty token")
			}
			// Listing changes nothing.
			e.wantState("default", a.ID, base.StateActive)
			wantIDs(e, "ExpiredLeases again", leaseIDs(e.expired("default")), msgIDs(a))
		}},
		{"ExpiredLeasesLimitAndQueue", func(e *env) {
			for range 5 {
				e.add("a")
			}
			e.add("b")
			e.fetchN("a", 5)
			e.fetchN("b", 5)
			e.advance(leaseFor + time.Second)
			ls, err := e.b.ExpiredLeases(e.ctx, "a", 2)
			wantNoErr(e, "ExpiredLeases", err)
			if len(ls) != 2 {
				e.Fatalf("ExpiredLeases limit 2: got %d leases", len(ls))
			}
			for _, l := range ls {
				if l.Msg.Queue != "a" {
					e.Fatalf("ExpiredLeases of queue a returned a task of queue %q", l.Msg.Queue)
				}
			}
			if n := len(e.expired("a")); n != 5 {
				e.Fatalf("ExpiredLeases of queue a: got %d leases, want 5", n)
			}
			if n := len(e.expired("b")); n != 1 {
				e.Fatalf("ExpiredLeases of queue b: got %d leases, want 1", n)
			}
			if n := len(e.expired("c")); n != 0 {
				e.Fatalf("ExpiredLeases of unknown queue c: got %d leases, want 0", n)
			}
		}},
		{"RecoverWithRetry", func(e *env) {
			m := e.add("default")
			e.fetchID("default", m.ID)
			e.advance(leaseFor + time.Second)
			ls := e.expired("default")
			wantIDs(e, "ExpiredLeases", leaseIDs(ls), msgIDs(m))
			err := e.b.Retry(e.ctx, broker.RetryParams{Lease: ls[0].Ref(), Delay: 10 * time.Second, ErrMsg: "worker lost", IsFailure: true, RequireExpired: true})
			wantNoErr(e, "Retry with RequireExpired of an expired lease", err)
			ti := e.wantState("default", m.ID, base.StateRetry)
			wantBookkeeping(e, "recovered task", ti.Message, 1, "worker lost", e.now())
			wantTime(e, "NextProcessAt of the recovered task", ti.NextProcessAt, e.now().Add(10*time.Second))
			if ls := e.expired("default"); len(ls) != 0 {
				e.Fatalf("ExpiredLeases after recovery = %v, want none", leaseIDs(ls))
			}
		}},
		{"RecoverWithArchive", func(e *env) {
			m := e.add("default")
			e.fetchID("default", m.ID)
			e.advance(leaseFor + time.Second)
			ls := e.expired("default")
			wantIDs(e, "ExpiredLeases", leaseIDs(ls), msgIDs(m))
			err := e.b.Archive(e.ctx, broker.ArchiveParams{Lease: ls[0].Ref(), ErrMsg: "worker lost", RequireExpired: true})
			wantNoErr(e, "Archive with RequireExpired of an expired lease", err)
			ti := e.wantState("default", m.ID, base.StateArchived)
			wantBookkeeping(e, "recovered task", ti.Message, 0, "worker lost", e.now())
			if ls := e.expired("default"); len(ls) != 0 {
				e.Fatalf("ExpiredLeases after recovery = %v, want none", leaseIDs(ls))
			}
		}},
		{"RetryRequireExpiredOnLiveLease", func(e *env) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			e.advance(leaseFor - time.Second)
			err := e.b.Retry(e.ctx, broker.RetryParams{Lease: l.Ref(), Delay: time.Second, ErrMsg: "x", IsFailure: true, RequireExpired: true})
			wantErrIs(e, "Retry with RequireExpired of a live lease", err, base.ErrLeaseLost)
			wantUntouchedActive(e, m, l)
		}},
		{"ArchiveRequireExpiredOnLiveLease", func(e *env) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			e.advance(leaseFor - time.Second)
			err := e.b.Archive(e.ctx, broker.ArchiveParams{Lease: l.Ref(), ErrMsg: "x", RequireExpired: true})
			wantErrIs(e, "Archive with RequireExpired of a live lease", err, base.ErrLeaseLost)
			wantUntouchedActive(e, m, l)
		}},
		{"ExtendMovesDeadline", func(e *env) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			e.advance(20 * time.Second)
			lost, err := e.b.ExtendLeases(e.ctx, "default", []broker.LeaseRef{l.Ref()}, time.Minute)
			wantNoErr(e, "ExtendLeases", err)
			if len(lost) != 0 {
				e.Fatalf("ExtendLeases reported %v lost, want none", lost)
			}
			want := Epoch.Add(20*time.Second + time.Minute)
			ti := e.wantState("default", m.ID, base.StateActive)
			wantTime(e, "LeaseDeadline after ExtendLeases", ti.LeaseDeadline, want)
			e.advance(30 * time.Second) // past the first deadline, before the new one
			if ls := e.expired("default"); len(ls) != 0 {
				e.Fatalf("ExpiredLeases after ExtendLeases = %v, want none", leaseIDs(ls))
			}
			err = e.b.Retry(e.ctx, broker.RetryParams{Lease: l.Ref(), Delay: time.Second, ErrMsg: "x", RequireExpired: true})
			wantErrIs(e, "Retry with RequireExpired of an extended lease", err, base.ErrLeaseLost)
			e.advance(31 * time.Second) // past the new deadline
			wantIDs(e, "ExpiredLeases past the new deadline", leaseIDs(e.expired("default")), msgIDs(m))
			e.complete(l.Ref())
		}},
		{"ExtendReportsLost", func(e *env) {
			for range 4 {
				m := e.newMsg("default")
				m.Retention = time.Hour
				e.enqueue(m)
			}
			ls := e.fetchN("default", 4)
			e.complete(ls[1].Ref())
			e.retry(ls[2].Ref(), time.Hour, "x")
			stale := ls[3].Ref()
			stale.Token = "stale"
			refs := []broker.LeaseRef{
				ls[0].Ref(), ls[1].Ref(), ls[2].Ref(), stale,
				{Queue: "default", ID: "missing", Token: "t"},
			}
			e.advance(10 * time.Second)
			lost, err := e.b.ExtendLeases(e.ctx, "default", refs, time.Minute)
			wantNoErr(e, "ExtendLeases", err)
			slices.Sort(lost)
			want := []string{ls[1].Msg.ID, ls[2].Msg.ID, ls[3].Msg.ID, "missing"}
			slices.Sort(want)
			wantIDs(e, "lost leases", lost, want)
			wantTime(e, "LeaseDeadline of the extended lease", e.info("default", ls[0].Msg.ID).LeaseDeadline, e.now().Add(time.Minute))
			wantTime(e, "LeaseDeadline of the lease with a stale entry", e.info("default", ls[3].Msg.ID).LeaseDeadline, Epoch.Add(leaseFor))
			e.wantState("default", ls[1].Msg.ID, base.StateCompleted)
			e.wantState("default", ls[2].Msg.ID, base.StateRetry)
			e.wantGone("default", "missing")
		}},
		{"ExpiredAtDeadline", func(e *env) {
			// A lease runs out at its deadline: at that very instant it is
			// expired, cannot be extended, and can be recovered.
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			e.advance(leaseFor - time.Millisecond)
			if ls := e.expired("default"); len(ls) != 0 {
				e.Fatalf("ExpiredLeases 1ms before the deadline = %v, want none", leaseIDs(ls))
			}
			e.advance(time.Millisecond)
			wantIDs(e, "ExpiredLeases at the deadline", leaseIDs(e.expired("default")), msgIDs(m))
			lost, err := e.b.ExtendLeases(e.ctx, "default", []broker.LeaseRef{l.Ref()}, time.Minute)
			wantNoErr(e, "ExtendLeases", err)
			wantIDs(e, "lost leases of ExtendLeases at the deadline", lost, msgIDs(m))
			wantIDs(e, "recovered", e.recoverAll("default", time.Minute), msgIDs(m))
		}},
		{"ExtendExpiredLeaseIsLost", func(e *env) {
			// An expired lease may be being recovered: ExtendLeases does
			// not revive it, it reports it lost and leaves it to the
			// Recoverer.
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			e.advance(leaseFor + time.Second)
			lost, err := e.b.ExtendLeases(e.ctx, "default", []broker.LeaseRef{l.Ref()}, time.Minute)
			wantNoErr(e, "ExtendLeases", err)
			wantIDs(e, "lost leases of ExtendLeases after the deadline", lost, msgIDs(m))
			ti := e.wantState("default", m.ID, base.StateActive)
			wantTime(e, "LeaseDeadline after a refused extension", ti.LeaseDeadline, l.Deadline)
			wantIDs(e, "ExpiredLeases", leaseIDs(e.expired("default")), msgIDs(m))
			wantIDs(e, "recovered", e.recoverAll("default", time.Minute), msgIDs(m))
		}},
		{"ExtendNothing", func(e *env) {
			lost, err := e.b.ExtendLeases(e.ctx, "default", nil, time.Minute)
			wantNoErr(e, "ExtendLeases of no lease", err)
			if len(lost) != 0 {
				e.Fatalf("ExtendLeases of no lease reported %v lost", lost)
			}
		}},
		{"OldTokenWhileRecovered", func(e *env) {
			// The worker's lease ran out and the Recoverer sent the task to
			// retry: every write the worker still tries must fail.
			m := e.newMsg("default")
			m.Retention = time.Hour
			e.enqueue(m)
			old := e.fetchID("default", m.ID).Ref()
			e.advance(leaseFor + time.Second)
			wantIDs(e, "recovered", e.recoverAll("default", time.Hour), msgIDs(m))
			before := e.wantState("default", m.ID, base.StateRetry)
			for _, op := range oldTokenOps {
				op.check(e, old)
				after := e.wantState("default", m.ID, base.StateRetry)
				wantBookkeeping(e, "after "+op.name+" with the old token", after.Message, before.Message.Retried, before.Message.LastErr, before.Message.LastFailedAt)
				wantTime(e, "NextProcessAt after "+op.name+" with the old token", after.NextProcessAt, before.NextProcessAt)
				if len(after.Result) != 0 {
					e.Fatalf("Result = %q after %s with the old token, want none", after.Result, op.name)
				}
			}
			e.fetchNone("default")
		}},
	}
	for _, op := range oldTokenOps {
		cases = append(cases, testCase{"OldTokenAfterRefetch" + op.name, func(e *env) { testOldTokenAfterRefetch(e, op) }})
		cases = append(cases, testCase{"OldTokenOfABatchAfterRefetch" + op.name, func(e *env) { testOldTokenOfABatchAfterRefetch(e, op) }})
	}
	return append(cases, batchLeaseTests()...)
}

// batchLeaseTests check the leases of one Fetch of several tasks, which a
// backend may keep together (rdb's lease groups): each lease still ends,
// expires and is extended alone.
func batchLeaseTests() []testCase {
	return []testCase{
		{"CompleteABatchInSeveralCalls", func(e *env) {
			var want []string
			for range 10 {
				want = append(want, e.add("default").ID)
			}
			ls := e.fetchN("default", 10)
			wantIDs(e, "fetched", sorted(leaseIDs(ls)), sorted(want))
			for _, part := range [][]*broker.Lease{ls[:3], ls[3:4], ls[4:9], ls[9:]} {
				var refs []broker.LeaseRef
				for _, l := range part {
					refs = append(refs, l.Ref())
				}
				for i, err := range e.b.Complete(e.ctx, refs) {
					wantNoErr(e, "Complete "+refs[i].ID, err)
				}
				e.checkInvariants()
			}
			e.advance(leaseFor + time.Second)
			if ls := e.expired("default"); len(ls) != 0 {
				e.Fatalf("ExpiredLeases after every task completed = %v, want none", leaseIDs(ls))
			}
		}},
		{"ExtendOneLeaseOfABatch", func(e *env) {
			// A pull worker extends one task of a batch: the others keep
			// their deadline and expire at it, the extended one later.
			for range 3 {
				e.add("default")
			}
			ls := e.fetchN("default", 3)
			if len(ls) != 3 {
				e.Fatalf("Fetch = %d leases, want 3", len(ls))
			}
			e.advance(20 * time.Second)
			lost, err := e.b.ExtendLeases(e.ctx, "default", []broker.LeaseRef{ls[1].Ref()}, time.Minute)
			wantNoErr(e, "ExtendLeases of one lease", err)
			if len(lost) != 0 {
				e.Fatalf("ExtendLeases reported %v lost, want none", lost)
			}
			wantTime(e, "LeaseDeadline of the extended task", e.wantState("default", ls[1].Msg.ID, base.StateActive).LeaseDeadline, Epoch.Add(20*time.Second+time.Minute))
			for _, l := range []*broker.Lease{ls[0], ls[2]} {
				wantTime(e, "LeaseDeadline of another task of the batch", e.wantState("default", l.Msg.ID, base.StateActive).LeaseDeadline, l.Deadline)
			}
			e.advance(leaseFor - 20*time.Second + time.Second) // past the batch's deadline
			wantIDs(e, "recovered at the batch's deadline", sorted(e.recoverAll("default", time.Hour)), sorted([]string{ls[0].Msg.ID, ls[2].Msg.ID}))
			e.wantState("default", ls[1].Msg.ID, base.StateActive)
			// Extended again (a heartbeat naming it alone), then it runs
			// out too.
			lost, err = e.b.ExtendLeases(e.ctx, "default", []broker.LeaseRef{ls[1].Ref()}, time.Minute)
			wantNoErr(e, "ExtendLeases of the extended lease", err)
			if len(lost) != 0 {
				e.Fatalf("ExtendLeases reported %v lost, want none", lost)
			}
			e.advance(time.Minute - time.Second)
			if ls := e.expired("default"); len(ls) != 0 {
				e.Fatalf("ExpiredLeases before the extended deadline = %v, want none", leaseIDs(ls))
			}
			e.advance(2 * time.Second)
			wantIDs(e, "recovered at the extended deadline", e.recoverAll("default", time.Hour), msgIDs(ls[1].Msg))
			wantErrIs(e, "Complete of the recovered task", e.completeErr(ls[1].Ref()), base.ErrLeaseLost)
		}},
		{"ExtendEveryLeaseOfABatch", func(e *env) {
			for range 4 {
				e.add("default")
			}
			ls := e.fetchN("default", 4)
			e.complete(ls[3].Ref())
			e.advance(20 * time.Second)
			refs := []broker.LeaseRef{ls[0].Ref(), ls[1].Ref(), ls[2].Ref()}
			lost, err := e.b.ExtendLeases(e.ctx, "default", refs, time.Minute)
			wantNoErr(e, "ExtendLeases", err)
			if len(lost) != 0 {
				e.Fatalf("ExtendLeases reported %v lost, want none", lost)
			}
			for _, l := range ls[:3] {
				wantTime(e, "LeaseDeadline after ExtendLeases", e.wantState("default", l.Msg.ID, base.StateActive).LeaseDeadline, Epoch.Add(20*time.Second+time.Minute))
			}
			e.advance(time.Minute - time.Second)
			if ls := e.expired("default"); len(ls) != 0 {
				e.Fatalf("ExpiredLeases before the extended deadline = %v, want none", leaseIDs(ls))
			}
			e.complete(ls[0].Ref())
			e.advance(2 * time.Second)
			wantIDs(e, "recovered at the extended deadline", sorted(e.recoverAll("default", time.Hour)), sorted([]string{ls[1].Msg.ID, ls[2].Msg.ID}))
		}},
		{"ExpiredLeasesOfABatchPastTheLimit", func(e *env) {
			// A batch larger than ExpiredLeases' limit is recovered over
			// several calls, each task once.
			var want []string
			for range 7 {
				want = append(want, e.add("default").ID)
			}
			e.fetchN("default", 7)
			e.advance(leaseFor + time.Second)
			var got []string
			for range 4 {
				ls, err := e.b.ExpiredLeases(e.ctx, "default", 3)
				wantNoErr(e, "ExpiredLeases", err)
				if len(ls) > 3 {
					e.Fatalf("ExpiredLeases limit 3 = %d leases", len(ls))
				}
				for _, l := range ls {
					err := e.b.Retry(e.ctx, broker.RetryParams{Lease: l.Ref(), Delay: time.Hour, ErrMsg: "lease expired", IsFailure: true, RequireExpired: true})
					wantNoErr(e, "Retry (RequireExpired) of "+l.Msg.ID, err)
					got = append(got, l.Msg.ID)
				}
			}
			wantIDs(e, "recovered over several calls", sorted(got), sorted(want))
		}},
	}
}

// testOldTokenOfABatchAfterRefetch is testOldTokenAfterRefetch for tasks
// fetched three in one Fetch, all recovered, one fetched again alone, the
// others still waiting: op with the token of the first Fetch is refused
// for it and, once they are fetched again too, for the others.
func testOldTokenOfABatchAfterRefetch(e *env, op oldTokenOp) {
	var ids []string
	for range 3 {
		m := e.newMsg("default")
		m.Retention = time.Hour
		e.enqueue(m)
		ids = append(ids, m.ID)
	}
	old := e.fetchN("default", 3)
	if len(old) != 3 {
		e.Fatalf("Fetch = %d leases, want 3", len(old))
	}
	e.advance(leaseFor + time.Second)
	wantIDs(e, "recovered", sorted(e.recoverAll("default", 5*time.Second)), sorted(ids))
	e.advance(5 * time.Second)
	e.wantForward(e.forward("default"), 3, false, 0)
	cur := e.fetchOne("default")
	oldOf := func(id string) broker.LeaseRef {
		for _, l := range old {
			if l.Msg.ID == id {
				return l.Ref()
			}
		}
		e.Fatalf("task %s was not in the first fetch", id)
		return broker.LeaseRef{}
	}
	op.check(e, oldOf(cur.Msg.ID))
	ti := e.wantState("default", cur.Msg.ID, base.StateActive)
	wantTime(e, "LeaseDeadline of the current lease", ti.LeaseDeadline, cur.Deadline)
	rest := e.fetchN("default", 2)
	for _, l := range rest {
		op.check(e, oldOf(l.Msg.ID))
	}
	e.complete(cur.Ref())
	for _, l := range rest {
		e.complete(l.Ref())
	}
}

// sorted returns ids sorted, for comparing sets of IDs.
func sorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// wantUntouchedActive fails unless the task m is still active under lease l
// with no failure recorded, and then completes it with l.
func wantUntouchedActive(e *env, m *base.TaskMessage, l *broker.Lease) {
	e.Helper()
	ti := e.wantState("default", m.ID, base.StateActive)
	wantTime(e, "LeaseDeadline", ti.LeaseDeadline, l.Deadline)
	wantBookkeeping(e, "active task", ti.Message, 0, "", time.Time{})
	if ls := e.expired("default"); len(ls) != 0 {
		e.Fatalf("ExpiredLeases = %v, want none", leaseIDs(ls))
	}
	e.complete(l.Ref())
}

// oldTokenOp is a write a worker makes with its lease token; check makes it
// with old and fails unless it is refused.
type oldTokenOp struct {
	name  string
	check func(e *env, old broker.LeaseRef)
}

var oldTokenOps = []oldTokenOp{
	{"Complete", func(e *env, old broker.LeaseRef) {
		wantErrIs(e, "Complete with the old token", e.completeErr(old), base.ErrLeaseLost)
	}},
	{"Retry", func(e *env, old broker.LeaseRef) {
		err := e.b.Retry(e.ctx, broker.RetryParams{Lease: old, Delay: time.Second, ErrMsg: "old worker", IsFailure: true})
		wantErrIs(e, "Retry with the old token", err, base.ErrLeaseLost)
	}},
	{"Archive", func(e *env, old broker.LeaseRef) {
		err := e.b.Archive(e.ctx, broker.ArchiveParams{Lease: old, ErrMsg: "old worker"})
		wantErrIs(e, "Archive with the old token", err, base.ErrLeaseLost)
	}},
	{"Requeue", func(e *env, old broker.LeaseRef) {
		wantErrIs(e, "Requeue with the old token", e.b.Requeue(e.ctx, old), base.ErrLeaseLost)
	}},
	{"WriteResult", func(e *env, old broker.LeaseRef) {
		wantErrIs(e, "WriteResult with the old token", e.b.WriteResult(e.ctx, old, []byte("old worker")), base.ErrLeaseLost)
	}},
	{"ExtendLeases", func(e *env, old broker.LeaseRef) {
		lost, err := e.b.ExtendLeases(e.ctx, old.Queue, []broker.LeaseRef{old}, time.Hour)
		wantNoErr(e, "ExtendLeases with the old token", err)
		wantIDs(e, "lost leases of ExtendLeases with the old token", lost, []string{old.ID})
	}},
}

// testOldTokenAfterRefetch lets a worker's lease run out, recovers the task
// and lets a second worker fetch it, then checks that op with the first
// worker's token is refused and leaves the second worker's lease, result
// and task untouched.
func testOldTokenAfterRefetch(e *env, op oldTokenOp) {
	m := e.newMsg("default")
	m.Retention = time.Hour
	e.enqueue(m)
	old := e.fetchID("default", m.ID)
	e.advance(leaseFor + time.Second)
	wantIDs(e, "recovered", e.recoverAll("default", 5*time.Second), msgIDs(m))
	e.advance(5 * time.Second)
	e.wantForward(e.forward("default"), 1, false, 0)
	cur := e.fetchID("default", m.ID)
	if cur.Token == old.Token {
		e.Fatalf("the second fetch reused the token %q", old.Token)
	}
	wantNoErr(e, "WriteResult of the current worker", e.b.WriteResult(e.ctx, cur.Ref(), []byte("current")))
	e.advance(time.Second)

	op.check(e, old.Ref())

	ti := e.wantState("default", m.ID, base.StateActive)
	wantTime(e, "LeaseDeadline of the current lease", ti.LeaseDeadline, cur.Deadline)
	wantBookkeeping(e, "task", ti.Message, 1, "lease expired", Epoch.Add(leaseFor+time.Second))
	e.fetchNone("default")
	e.complete(cur.Ref())
	ti = e.wantState("default", m.ID, base.StateCompleted)
	if string(ti.Result) != "current" {
		e.Fatalf("Result = %q, want %q", ti.Result, "current")
	}
}
