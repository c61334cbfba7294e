package brokertest

import (
	"errors"
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
			// The two leases may share a token (one per Fetch), and
			// still fence apart: each completes with its own ID.
			for _, err := range e.b.Complete(e.ctx, []broker.LeaseRef{ls[0].Ref(), ls[1].Ref()}) {
				if err != nil {
					e.Errorf("Complete of a lease of the fetch: %v", err)
				}
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
			// The leases of one Fetch may share a token; no two Fetches
			// do, and a token fences only the tasks its Fetch leased.
			for range 10 {
				e.add("default")
			}
			a := e.fetchN("default", 5)
			b := e.fetchN("default", 5)
			for _, x := range a {
				for _, y := range b {
					if x.Token == y.Token {
						e.Fatalf("tasks %s and %s of two fetches got the same lease token %q", x.Msg.ID, y.Msg.ID, x.Token)
					}
				}
			}
			swapped := a[0].Ref()
			swapped.Token = b[0].Token
			other := b[1].Ref()
			other.Token = a[1].Token
			for i, err := range e.b.Complete(e.ctx, []broker.LeaseRef{swapped, other}) {
				if !errors.Is(err, base.ErrLeaseLost) {
					e.Errorf("Complete %d with the other fetch's token: %v, want ErrLeaseLost", i, err)
				}
			}
			var refs []broker.LeaseRef
			for _, l := range append(a, b...) {
				refs = append(refs, l.Ref())
			}
			for i, err := range e.b.Complete(e.ctx, refs) {
				wantNoErr(e, "Complete "+refs[i].ID, err)
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
		{"MessagesIntactInOneFetch", func(e *env) {
			// Messages of any bytes, fetched together: a backend that
			// answers a batch as one string (rdb's fetch.lua) must neither
			// mistake their bytes for its separators nor let one task's
			// payload reach into another's. Twice: a small batch, and one
			// with a 1 MB payload.
			for _, big := range []bool{false, true} {
				var all []byte
				for b := range 256 {
					all = append(all, byte(b))
				}
				payloads := [][]byte{nil, {}, {0}, []byte("\x00\n\x00"), all, []byte("plain")}
				if big {
					mb := make([]byte, 1<<20)
					for i := range mb {
						mb[i] = byte(i * 7)
					}
					payloads = append(payloads, mb)
				}
				var want []*base.TaskMessage
				for i, p := range payloads {
					m := e.newMsg("default")
					m.Payload = p
					if i == 3 {
						m.Headers = map[string]string{"traceparent": "00-ab-01", "a": ""}
						m.UniqueKey, m.UniqueTTL = "u/"+m.ID, time.Hour
					}
					if i == 4 {
						m.ID = "tâche \u2603 " + m.ID
						m.Priority = 3
					}
					e.enqueue(m)
					want = append(want, m)
				}
				ls := e.fetchN("default", 100)
				if len(ls) != len(want) {
					e.Fatalf("Fetch = %d leases, want %d", len(ls), len(want))
				}
				byID := map[string]*broker.Lease{}
				for _, l := range ls {
					byID[l.Msg.ID] = l
				}
				for _, m := range want {
					l := byID[m.ID]
					if l == nil {
						e.Fatalf("task %q not fetched", m.ID)
					}
					if !l.Msg.SameEnqueue(m) || len(l.Msg.Headers) != len(m.Headers) {
						e.Errorf("task %q fetched as %+v, want %+v", m.ID, l.Msg, m)
					}
					for k, v := range m.Headers {
						if l.Msg.Headers[k] != v {
							e.Errorf("task %q: header %q = %q, want %q", m.ID, k, l.Msg.Headers[k], v)
						}
					}
				}
				// A handler may write its payload and append to it: the
				// others stay as they were.
				for _, l := range ls {
					if len(l.Msg.Payload) > 0 {
						l.Msg.Payload[0] ^= 0xff
					}
					l.Msg.Payload = append(l.Msg.Payload, "tail"...)
				}
				for _, m := range want {
					p := byID[m.ID].Msg.Payload
					got := p[:len(p)-4]
					if len(got) > 0 {
						got = append([]byte{got[0] ^ 0xff}, got[1:]...)
					}
					if string(got) != string(m.Payload) || string(p[len(p)-4:]) != "tail" {
						e.Errorf("task %q: payload changed by the other tasks' writes", m.ID)
					}
				}
				for _, l := range ls {
					e.complete(l.Ref())
				}
			}
		}},
	}
}
