package brokertest

import (
	"fmt"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

func listTests() []testCase {
	return []testCase{
		adminCase("PendingPages", func(e *adminEnv) {
			var want []string
			for range 7 {
				want = append(want, e.add("default").ID)
				e.advance(time.Second)
			}
			e.add("other")
			for _, p := range []struct{ off, lim, from, to int }{{0, 3, 0, 3}, {3, 3, 3, 6}, {6, 3, 6, 7}, {7, 3, 7, 7}, {2, 1, 2, 3}, {0, 100, 0, 7}} {
				got := e.list("default", base.StatePending, "", p.off, p.lim)
				wantIDs(e, fmt.Sprintf("pending offset %d limit %d", p.off, p.lim), infoIDs(got), want[p.from:p.to])
			}
			ti := e.list("default", base.StatePending, "", 0, 1)[0]
			wantTime(e, "NextProcessAt of a pending task", ti.NextProcessAt, e.now())
			m := e.info("default", want[0]).Message
			wantSameMsg(e, "listed pending task", ti.Message, m)
			// Fetched tasks leave the listing; requeued ones come first.
			l := e.fetchID("default", want[0])
			e.fetchID("default", want[1])
			wantIDs(e, "pending after two fetches", e.listIDs("default", base.StatePending, ""), want[2:])
			wantNoErr(e, "Requeue", e.b.Requeue(e.ctx, l.Ref()))
			wantIDs(e, "pending after a requeue", e.listIDs("default", base.StatePending, ""), append([]string{want[0]}, want[2:]...))
		}),
		adminCase("ActiveByLeaseDeadline", func(e *adminEnv) {
			var want []string
			var deadlines []time.Time
			for range 4 {
				e.add("default")
			}
			for i, d := range []time.Duration{time.Hour, 2 * time.Hour, 30 * time.Minute, 90 * time.Minute} {
				ls, err := e.b.Fetch(e.ctx, broker.FetchParams{Queue: "default", Max: 1, LeaseDuration: d, ServerID: "s"})
				wantNoErr(e, "Fetch", err)
				if len(ls) != 1 {
					e.Fatalf("Fetch %d: %d tasks", i, len(ls))
				}
				want = append(want, ls[0].Msg.ID)
				deadlines = append(deadlines, ls[0].Deadline)
			}
			order := []int{2, 0, 3, 1}
			got := e.list("default", base.StateActive, "", 0, 10)
			if len(got) != 4 {
				e.Fatalf("active: %v", infoIDs(got))
			}
			for i, j := range order {
				if got[i].Message.ID != want[j] {
					e.Fatalf("active in lease order: got %v", infoIDs(got))
				}
				wantTime(e, "LeaseDeadline", got[i].LeaseDeadline, deadlines[j])
			}
			wantIDs(e, "active page 2", infoIDs(e.list("default", base.StateActive, "", 2, 2)), []string{want[3], want[1]})
		}),
		adminCase("ScheduledByDue", func(e *adminEnv) {
			c := e.schedule("default", 3*time.Hour)
			a := e.schedule("default", time.Hour)
			b := e.schedule("default", 2*time.Hour)
			got := e.list("default", base.StateScheduled, "", 0, 10)
			wantIDs(e, "scheduled", infoIDs(got), msgIDs(a, b, c))
			wantTime(e, "NextProcessAt", got[0].NextProcessAt, Epoch.Add(time.Hour))
			wantSameMsg(e, "listed scheduled task", got[2].Message, c)
			wantIDs(e, "scheduled offset 1", infoIDs(e.list("default", base.StateScheduled, "", 1, 1)), msgIDs(b))
		}),
		adminCase("RetryByDue", func(e *adminEnv) {
			var ms []*base.TaskMessage
			for range 3 {
				ms = append(ms, e.add("default"))
			}
			ls := e.fetchN("default", 3)
			for i, d := range []time.Duration{3 * time.Hour, time.Hour, 2 * time.Hour} {
				e.retry(ls[i].Ref(), d, fmt.Sprint("err", i))
			}
			got := e.list("default", base.StateRetry, "", 0, 10)
			wantIDs(e, "retry", infoIDs(got), msgIDs(ms[1], ms[2], ms[0]))
			wantTime(e, "NextProcessAt", got[0].NextProcessAt, Epoch.Add(time.Hour))
			wantBookkeeping(e, "listed retry task", got[0].Message, 1, "err1", Epoch)
		}),
		adminCase("ArchivedNewestFirst", func(e *adminEnv) {
			var ids []string
			for range 3 {
				m, _ := e.inState("default", base.StateArchived)
				ids = append(ids, m.ID)
				e.advance(time.Second)
			}
			got := e.list("default", base.StateArchived, "", 0, 10)
			wantIDs(e, "archived", infoIDs(got), []string{ids[2], ids[1], ids[0]})
			if got[0].Message.LastErr != "failed for good" {
				e.Fatalf("LastErr of a listed archived task = %q", got[0].Message.LastErr)
			}
			wantIDs(e, "archived offset 2", infoIDs(e.list("default", base.StateArchived, "", 2, 5)), ids[:1])
		}),
		adminCase("CompletedByRetentionEnd", func(e *adminEnv) {
			var ids []string
			for i, r := range []time.Duration{3 * time.Hour, time.Hour, 2 * time.Hour} {
				m := e.newMsg("default")
				m.Retention = r
				e.enqueue(m)
				l := e.fetchID("default", m.ID)
				wantNoErr(e, "WriteResult", e.b.WriteResult(e.ctx, l.Ref(), fmt.Appendf(nil, "r%d", i)))
				e.complete(l.Ref())
				ids = append(ids, m.ID)
			}
			got := e.list("default", base.StateCompleted, "", 0, 10)
			wantIDs(e, "completed", infoIDs(got), []string{ids[1], ids[2], ids[0]})
			wantTime(e, "CompletedAt", got[0].CompletedAt, Epoch)
			if string(got[0].Result) != "r1" {
				e.Fatalf("Result of a listed completed task = %q, want r1", got[0].Result)
			}
		}),
		adminCase("AggregatingByGroup", func(e *adminEnv) {
			g1 := e.group("default", "g1", 4)
			g2 := e.group("default", "g2", 2)
			wantIDs(e, "group g1", e.listIDs("default", base.StateAggregating, "g1"), msgIDs(g1...))
			wantIDs(e, "group g2", e.listIDs("default", base.StateAggregating, "g2"), msgIDs(g2...))
			wantIDs(e, "group g1 offset 1 limit 2", infoIDs(e.list("default", base.StateAggregating, "g1", 1, 2)), msgIDs(g1[1:3]...))
			if got := e.list("default", base.StateAggregating, "nope", 0, 10); len(got) != 0 {
				e.Fatalf("unknown group: %v", infoIDs(got))
			}
			wantSameMsg(e, "listed aggregating task", e.list("default", base.StateAggregating, "g2", 0, 1)[0].Message, g2[0])
			_, err := e.a.ListTasks(e.ctx, broker.ListParams{Queue: "default", State: base.StateAggregating, Limit: 10})
			wantErrIs(e, "ListTasks of aggregating tasks without a group", err, base.ErrInvalidArgument)
		}),
		adminCase("ManyPages", func(e *adminEnv) {
			var want []string
			for range 25 {
				want = append(want, e.add("default").ID)
			}
			var got []string
			for off := 0; off < 30; off += 10 {
				got = append(got, infoIDs(e.list("default", base.StatePending, "", off, 10))...)
			}
			wantIDs(e, "25 pending tasks in pages of 10", got, want)
		}),
		adminCase("BadParams", func(e *adminEnv) {
			e.add("default")
			for _, p := range []broker.ListParams{
				{Queue: "default", State: base.StatePending, Limit: 0},
				{Queue: "default", State: base.StatePending, Offset: -1, Limit: 1},
				{Queue: "default", State: 0, Limit: 1},
				{Queue: "default", State: 99, Limit: 1},
			} {
				_, err := e.a.ListTasks(e.ctx, p)
				wantErrIs(e, fmt.Sprintf("ListTasks %+v", p), err, base.ErrInvalidArgument)
			}
		}),
	}
}
