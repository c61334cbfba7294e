package brokertest

import (
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

func fetchTests() []testCase {
	return []testCase{
		{"FIFO", func(e *env) {
			var want []string
			for range 7 {
				want = append(want, e.add("default").ID)
			}
			var got []string
			for range 7 {
				got = append(got, e.fetchOne("default").Msg.ID)
			}
			wantIDs(e, "fetch order, one at a time", got, want)
			e.fetchNone("default")
		}},
		{"TokenNamesServer", func(e *env) {
			e.add("default")
			e.add("default")
			ls, err := e.b.Fetch(e.ctx, broker.FetchParams{Queue: "default", Max: 2, LeaseDuration: leaseFor, ServerID: "worker/7"})
			if err != nil || len(ls) != 2 {
				e.Fatalf("Fetch = %d leases, %v; want 2", len(ls), err)
			}
			for _, l := range ls {
				if got := broker.ServerOfToken(l.Token); got != "worker/7" {
					e.Errorf("ServerOfToken(%q) = %q, want the fetching server worker/7", l.Token, got)
				}
			}
			if ls[0].Token == ls[1].Token {
				e.Errorf("two leases share the token %q", ls[0].Token)
			}
		}},
		{"FIFOInOneFetch", func(e *env) {
			var want []string
			for range 5 {
				want = append(want, e.add("default").ID)
			}
			wantIDs(e, "fetch order of one Fetch", leaseIDs(e.fetchN("default", 10)), want)
		}},
		{"MaxRespected", func(e *env) {
			var want []string
			for range 5 {
				want = append(want, e.add("default").ID)
			}
			var got []string
			for _, n := range []int{2, 2, 1} {
				ls := e.fetchN("default", 2)
				if len(ls) != n {
					e.Fatalf("Fetch max 2: got %d tasks, want %d", len(ls), n)
				}
				got = append(got, leaseIDs(ls)...)
			}
			wantIDs(e, "fetched tasks", got, want)
			e.fetchNone("default")
		}},
		{"EmptyQueue", func(e *env) {
			ls, err := e.b.Fetch(e.ctx, broker.FetchParams{Queue: "nothing-here", Max: 10, LeaseDuration: leaseFor})
			wantNoErr(e, "Fetch of an unknown queue", err)
			if len(ls) != 0 {
				e.Fatalf("Fetch of an unknown queue returned %d tasks", len(ls))
			}
		}},
		{"LeaseDeadline", func(e *env) {
			m := e.add("default")
			e.advance(7 * time.Second)
			const d = 45 * time.Second
			ls, err := e.b.Fetch(e.ctx, broker.FetchParams{Queue: "default", Max: 1, LeaseDuration: d, ServerID: "s1"})
			wantNoErr(e, "Fetch", err)
			if len(ls) != 1 {
				e.Fatalf("Fetch: got %d tasks, want 1", len(ls))
			}
			l := ls[0]
			if l.Token == "" {
				e.Fatal("lease token is empty")
			}
			want := Epoch.Add(7*time.Second + d)
			wantTime(e, "Lease.Deadline", l.Deadline, want)
			wantSameMsg(e, "fetched message", l.Msg, m)
			ti := e.wantState("default", m.ID, base.StateActive)
			wantTime(e, "GetTaskInfo LeaseDeadline", ti.LeaseDeadline, want)
			wantTime(e, "NextProcessAt of an active task", ti.NextProcessAt, time.Time{})
			wantTime(e, "CompletedAt of an active task", ti.CompletedAt, time.Time{})
			if ref := l.Ref(); ref.Queue != "default" || ref.ID != m.ID || ref.Token != l.Token {
				e.Fatalf("Lease.Ref() = %+v", ref)
			}
		}},
		{"DistinctTokens", func(e *env) {
			for range 10 {
				e.add("default")
			}
			ls := e.fetchN("default", 5)
			ls = append(ls, e.fetchN("default", 5)...)
			seen := map[string]string{}
			for _, l := range ls {
				if other, ok := seen[l.Token]; ok {
					e.Fatalf("tasks %s and %s got the same lease token %q", other, l.Msg.ID, l.Token)
				}
				seen[l.Token] = l.Msg.ID
			}
		}},
		{"FreshTokenEachFetch", func(e *env) {
			m := e.add("default")
			l1 := e.fetchID("default", m.ID)
			wantNoErr(e, "Requeue", e.b.Requeue(e.ctx, l1.Ref()))
			l2 := e.fetchID("default", m.ID)
			if l1.Token == l2.Token {
				e.Fatalf("the second fetch of %s reused the token %q", m.ID, l1.Token)
			}
		}},
		{"QueuesAreSeparate", func(e *env) {
			a := e.add("a")
			b := e.add("b")
			wantIDs(e, "tasks of queue a", e.drain("a"), msgIDs(a))
			wantIDs(e, "tasks of queue b", e.drain("b"), msgIDs(b))
		}},
		{"SkipsScheduledRetryArchivedCompletedAggregating", func(e *env) {
			for _, s := range []base.TaskState{base.StateScheduled, base.StateRetry, base.StateArchived, base.StateCompleted, base.StateAggregating} {
				e.inState("default", s)
			}
			e.fetchNone("default")
		}},
		{"ActiveNotFetchedAgain", func(e *env) {
			m := e.add("default")
			e.fetchID("default", m.ID)
			e.fetchNone("default")
			e.advance(time.Hour) // the lease ran out, but only recovery makes it fetchable
			e.fetchNone("default")
		}},
	}
}
