package brokertest

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Fair sharing by key (base.TaskMessage.Key, the lanes of Broker.Fetch's
// doc). The suite pins down besides:
//   - When SetQueueSettings raises or removes KeyMaxConcurrency, the keys
//     it held back that now have room rejoin the rotation, in order of
//     name; when it removes KeyRateLimit, the keys waiting for a token
//     rejoin in order of their due time, then of name.
//   - A key's slot is held from Fetch until its task leaves active
//     (Complete, Retry, Archive, Requeue): a task whose worker died holds
//     it until the Recoverer retries or archives it.
//   - A lane leaves the rotation when it has no task left, whatever took
//     it (Fetch, DeleteTask, ArchiveTask, the bulk operations).
//   - Fetch of a queue whose pending tasks are all held back by their keys'
//     limits fails with a *broker.ThrottledError: RetryIn is the time until
//     the first key's token is due, or a short positive wait when only
//     KeyMaxConcurrency holds them (a task's end sends an EventReady when
//     it lets its key rejoin).

// addKey enqueues a new pending task of queue with fair-sharing key k
// ("" for none) and returns it.
func (e *env) addKey(queue, k string) *base.TaskMessage {
	e.Helper()
	m := e.newMsg(queue)
	m.Key = k
	e.enqueue(m)
	return m
}

// addKeys enqueues n tasks of key k and returns them in order.
func (e *env) addKeys(queue, k string, n int) []*base.TaskMessage {
	e.Helper()
	out := make([]*base.TaskMessage, n)
	for i := range out {
		out[i] = e.addKey(queue, k)
	}
	return out
}

// fetchEach fetches one task at a time until the queue gives none and
// returns their IDs in order.
func (e *env) fetchEach(queue string) []string {
	e.Helper()
	var ids []string
	for {
		ls := e.fetchN(queue, 1)
		if len(ls) == 0 {
			return ids
		}
		ids = append(ids, ls[0].Msg.ID)
	}
}

// keysOf returns the key of each lease, in order.
func keysOf(ls []*broker.Lease) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Msg.Key
	}
	return out
}

func fairTests() []testCase {
	return []testCase{
		{"RoundRobin", func(e *env) {
			a := e.addKeys("default", "a", 6)
			b := e.addKeys("default", "b", 3)
			wantIDs(e, "fetch order", e.fetchEach("default"), msgIDs(a[0], b[0], a[1], b[1], a[2], b[2], a[3], a[4], a[5]))
		}},
		{"RoundRobinInOneFetch", func(e *env) {
			a := e.addKeys("default", "a", 3)
			b := e.addKeys("default", "b", 3)
			c := e.addKey("default", "c")
			ls := e.fetchN("default", 5)
			wantIDs(e, "one Fetch of 5", leaseIDs(ls), msgIDs(a[0], b[0], c, a[1], b[1]))
			wantSameMsg(e, "fetched message", ls[2].Msg, c)
			// The rotation goes on where the last fetch stopped.
			wantIDs(e, "the next fetch", leaseIDs(e.fetchN("default", 5)), msgIDs(a[2], b[2]))
		}},
		{"BatchesKeepTheTurns", func(e *env) {
			// The measure of fair sharing (docs/performance.md), small:
			// one key's tasks enqueued in batches, then another's in one,
			// fetched in batches of several sizes by two handles on the
			// storage (two servers): the keys alternate task by task
			// across the fetches, so the small key's 8 tasks are done
			// after 8 of the big one's.
			var big, small []*base.TaskMessage
			enqueueKeyed := func(k string, n int) []*base.TaskMessage {
				ps := make([]broker.EnqueueParams, n)
				ms := make([]*base.TaskMessage, n)
				for i := range ps {
					ms[i] = e.newMsg("default")
					ms[i].Key = k
					ps[i] = broker.EnqueueParams{Msg: ms[i]}
				}
				wantBatchErrs(e, e.b.EnqueueBatch(e.ctx, ps), make([]error, n)...)
				return ms
			}
			for range 3 {
				big = append(big, enqueueKeyed("big", 10)...)
			}
			small = enqueueKeyed("small", 8)
			servers := []broker.Broker{e.b, e.second()}
			var got []*broker.Lease
			for i := 0; len(got) < len(big)+len(small); i++ {
				ls, err := servers[i%2].Fetch(e.ctx, broker.FetchParams{Queue: "default", Max: 1 + i%5, LeaseDuration: leaseFor, ServerID: fmt.Sprintf("server-%d", i%2)})
				if err != nil || len(ls) == 0 {
					e.Fatalf("fetch %d (max %d): %d leases, %v; %d of %d fetched", i, 1+i%5, len(ls), err, len(got), len(big)+len(small))
				}
				got = append(got, ls...)
			}
			var want []*base.TaskMessage
			for i := range small {
				want = append(want, big[i], small[i])
			}
			want = append(want, big[len(small):]...)
			wantIDs(e, "fetch order", leaseIDs(got), msgIDs(want...))
		}},
		{"JoinAtTheBack", func(e *env) {
			a := e.addKeys("default", "a", 3)
			b := e.addKeys("default", "b", 2)
			e.fetchID("default", a[0].ID)
			// c gets a task after a had its turn: b, a, then c.
			c := e.addKey("default", "c")
			wantIDs(e, "fetch order", e.fetchEach("default"), msgIDs(b[0], a[1], c, b[1], a[2]))
		}},
		{"UnkeyedTasksAreOneLane", func(e *env) {
			u := e.addKeys("default", "", 3)
			a := e.addKeys("default", "a", 3)
			// The lane without a key held tasks when a joined: it joined
			// first.
			wantIDs(e, "fetch order", e.fetchEach("default"), msgIDs(u[0], a[0], u[1], a[1], u[2], a[2]))
			b := e.addKeys("default", "b", 2)
			v := e.addKeys("default", "", 2)
			// Plain tasks enqueued while keys wait join at the next fetch.
			wantIDs(e, "fetch order", e.fetchEach("default"), msgIDs(b[0], v[0], b[1], v[1]))
		}},
		{"PriorityFirst", func(e *env) {
			a := e.addKeys("default", "a", 2)
			u := e.addKey("default", "")
			p := e.addPrio("default", 3)
			wantIDs(e, "fetch order", e.fetchEach("default"), msgIDs(p, a[0], u, a[1]))
		}},
		{"RetryBackIntoItsLane", func(e *env) {
			a := e.addKeys("default", "a", 2)
			b := e.addKeys("default", "b", 2)
			l := e.fetchID("default", a[0].ID)
			e.retry(l.Ref(), time.Second, "failed")
			e.advance(time.Second)
			e.wantForward(e.forward("default"), 1, false, 0)
			wantSameMsg(e, "retried message", e.wantState("default", a[0].ID, base.StatePending).Message, a[0])
			wantIDs(e, "fetch order", e.fetchEach("default"), msgIDs(b[0], a[1], b[1], a[0]))
		}},
		{"RequeueToHeadOfItsLane", func(e *env) {
			a := e.addKeys("default", "a", 2)
			b := e.addKey("default", "b")
			l := e.fetchID("default", a[0].ID)
			wantNoErr(e, "Requeue", e.b.Requeue(e.ctx, l.Ref()))
			wantIDs(e, "fetch order", leaseIDs(e.fetchN("default", 5)), msgIDs(b, a[0], a[1]))
		}},
		{"ScheduledComesDueIntoItsLane", func(e *env) {
			m := e.newMsg("default")
			m.Key = "a"
			e.enqueueAt(m, e.now().Add(time.Minute))
			b := e.addKeys("default", "b", 2)
			e.advance(time.Minute)
			e.wantForward(e.forward("default"), 1, false, 0)
			wantIDs(e, "fetch order", e.fetchEach("default"), msgIDs(b[0], m, b[1]))
		}},
		{"Batch", func(e *env) {
			var ps []broker.EnqueueParams
			var ms []*base.TaskMessage
			for _, k := range []string{"a", "a", "b", "", "b"} {
				m := e.newMsg("default")
				m.Key = k
				ms = append(ms, m)
				ps = append(ps, broker.EnqueueParams{Msg: m})
			}
			for i, err := range e.b.EnqueueBatch(e.ctx, ps) {
				wantNoErr(e, fmt.Sprintf("EnqueueBatch task %d", i), err)
			}
			wantIDs(e, "fetch order", e.fetchEach("default"), msgIDs(ms[0], ms[2], ms[3], ms[1], ms[4]))
		}},
		{"RepeatWithOtherKeyConflicts", func(e *env) {
			m := e.addKey("default", "a")
			wantNoErr(e, "the same Enqueue again", e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: same(m)}))
			other := same(m)
			other.Key = "b"
			wantErrIs(e, "Enqueue of the ID with another key", e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: other}), base.ErrTaskIDConflict)
			e.fetchID("default", m.ID)
			e.fetchNone("default")
		}},
		{"InvalidKey", func(e *env) {
			for _, k := range []string{"a:b", "{x}", "tab\t", string(make([]byte, base.MaxQueueNameLen+1))} {
				m := e.newMsg("default")
				m.Key = k
				wantErrIs(e, fmt.Sprintf("Enqueue with key %q", k), e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: m}), base.ErrInvalidArgument)
			}
			if qs := e.queues(); len(qs) != 0 {
				e.Fatalf("Queues after refused enqueues: %v", qs)
			}
		}},
		{"ReadyEvent", func(e *env) {
			q := uniqueQueue("key-ready")
			ch := e.subscribe()
			e.addKey(q, "a")
			e.waitEvent(ch, broker.EventReady, q)
		}},
		{"ManyAgainstFew", func(e *env) {
			e.addKeys("default", "big", 300)
			small := e.addKeys("default", "small", 10)
			want := map[string]bool{}
			for _, m := range small {
				want[m.ID] = true
			}
			// The small key's tasks come every other task.
			var got int
			for fetched := 0; len(want) > 0; {
				ls := e.fetchN("default", 4)
				if len(ls) == 0 {
					e.Fatalf("the queue ran dry with %d tasks of the small key left", len(want))
				}
				for _, l := range ls {
					fetched++
					if want[l.Msg.ID] {
						delete(want, l.Msg.ID)
						got = fetched
					}
				}
			}
			if got > 20 {
				e.Fatalf("the 10 tasks of the small key came within the first %d tasks, want 20", got)
			}
		}},
		adminCase("KeyMaxConcurrency", func(e *adminEnv) {
			a := e.addKeys("default", "a", 4)
			b := e.addKeys("default", "b", 4)
			u := e.addKey("default", "")
			e.set("default", broker.QueueSettings{KeyMaxConcurrency: 2})
			ls := e.fetchN("default", 10)
			wantIDs(e, "first fetch", leaseIDs(ls), msgIDs(a[0], b[0], u, a[1], b[1]))
			e.wantThrottled("default", 0)
			if st := e.stats("default"); st.Pending != 4 || st.Active != 5 {
				e.Fatalf("Pending %d, Active %d; want 4, 5", st.Pending, st.Active)
			}
			e.complete(ls[0].Ref()) // a[0]
			wantIDs(e, "after a's task ended", leaseIDs(e.fetchN("default", 10)), msgIDs(a[2]))
			wantNoErr(e, "Retry", e.b.Retry(e.ctx, broker.RetryParams{Lease: ls[1].Ref(), Delay: time.Hour})) // b[0]
			wantIDs(e, "after b's task ended", leaseIDs(e.fetchN("default", 10)), msgIDs(b[2]))
			e.wantThrottled("default", 0)
			// Raising the limit lets the keys held back rejoin, by name.
			e.set("default", broker.QueueSettings{KeyMaxConcurrency: 3})
			wantIDs(e, "after raising the limit", leaseIDs(e.fetchN("default", 10)), msgIDs(a[3], b[3]))
			e.fetchNone("default")
		}),
		adminCase("KeyMaxConcurrencyRemoved", func(e *adminEnv) {
			a := e.addKeys("default", "a", 3)
			e.set("default", broker.QueueSettings{KeyMaxConcurrency: 1})
			e.fetchID("default", a[0].ID)
			e.wantThrottled("default", 0)
			e.set("default", broker.QueueSettings{})
			wantIDs(e, "without a limit", leaseIDs(e.fetchN("default", 10)), msgIDs(a[1], a[2]))
		}),
		adminCase("KeyMaxConcurrencyAcrossServers", func(e *adminEnv) {
			e.addKeys("default", "a", 20)
			e.addKeys("default", "b", 20)
			e.set("default", broker.QueueSettings{KeyMaxConcurrency: 3})
			servers := []broker.Broker{e.b, e.second()}
			var mu sync.Mutex
			var got []*broker.Lease
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 5 {
						ls, err := servers[i%2].Fetch(e.ctx, broker.FetchParams{Queue: "default", Max: 2, LeaseDuration: leaseFor, ServerID: fmt.Sprintf("server-%d", i%2)})
						if _, ok := isThrottled(err); err != nil && !ok {
							e.Errorf("Fetch: %v", err)
							return
						}
						mu.Lock()
						got = append(got, ls...)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			perKey := map[string]int{}
			for _, k := range keysOf(got) {
				perKey[k]++
			}
			if perKey["a"] != 3 || perKey["b"] != 3 || len(got) != 6 {
				e.Fatalf("8 fetchers on two servers under a key limit of 3 got %v, want 3 of a and 3 of b", perKey)
			}
			e.wantCounts("default", counts{Pending: 34, Active: 6})
		}),
		adminCase("KilledWorkerReleasesItsSlot", func(e *adminEnv) {
			a := e.addKeys("default", "a", 2)
			e.set("default", broker.QueueSettings{KeyMaxConcurrency: 1})
			e.fetchID("default", a[0].ID)
			e.wantThrottled("default", 0)
			// Its worker dies: the lease runs out, the slot stays taken
			// until the task is recovered.
			e.advance(leaseFor)
			e.wantThrottled("default", 0)
			wantIDs(e, "recovered", e.recoverAll("default", 0), msgIDs(a[0]))
			l := e.fetchID("default", a[1].ID)
			e.wantForward(e.forward("default"), 1, false, 0)
			e.wantThrottled("default", 0)
			e.complete(l.Ref())
			l = e.fetchID("default", a[0].ID)
			e.complete(l.Ref())
			e.wantCounts("default", counts{})
		}),
		adminCase("SlotReleaseWakes", func(e *adminEnv) {
			q := uniqueQueue("key-slot")
			a := e.addKeys(q, "a", 2)
			e.set(q, broker.QueueSettings{KeyMaxConcurrency: 1})
			l := e.fetchID(q, a[0].ID)
			e.wantThrottled(q, 0) // a is held back
			ch := e.subscribe()
			e.complete(l.Ref())
			e.waitEvent(ch, broker.EventReady, q)
			e.fetchID(q, a[1].ID)
		}),
		adminCase("ArchiveAndRequeueReleaseSlots", func(e *adminEnv) {
			a := e.addKeys("default", "a", 3)
			e.set("default", broker.QueueSettings{KeyMaxConcurrency: 1})
			e.archive(e.fetchID("default", a[0].ID).Ref(), "failed for good")
			l := e.fetchID("default", a[1].ID)
			wantNoErr(e, "Requeue", e.b.Requeue(e.ctx, l.Ref()))
			l = e.fetchID("default", a[1].ID)
			e.complete(l.Ref())
			e.fetchID("default", a[2].ID)
		}),
		adminCase("KeyRateLimit", func(e *adminEnv) {
			a := e.addKeys("default", "a", 3)
			b := e.addKeys("default", "b", 3)
			e.set("default", broker.QueueSettings{KeyRateLimit: 2})
			wantIDs(e, "first fetch", leaseIDs(e.fetchN("default", 10)), msgIDs(a[0], b[0]))
			e.wantThrottled("default", 500*time.Millisecond)
			e.advance(200 * time.Millisecond)
			e.wantThrottled("default", 300*time.Millisecond)
			e.advance(300 * time.Millisecond)
			wantIDs(e, "500 ms later", leaseIDs(e.fetchN("default", 10)), msgIDs(a[1], b[1]))
			// A task without a key is not limited.
			u := e.addKeys("default", "", 2)
			wantIDs(e, "tasks without a key", leaseIDs(e.fetchN("default", 10)), msgIDs(u[0], u[1]))
			e.advance(500 * time.Millisecond)
			wantIDs(e, "the last ones", leaseIDs(e.fetchN("default", 10)), msgIDs(a[2], b[2]))
		}),
		adminCase("KeyRateBurst", func(e *adminEnv) {
			a := e.addKeys("default", "a", 6)
			e.set("default", broker.QueueSettings{KeyRateLimit: 1, KeyRateBurst: 3})
			wantIDs(e, "a full bucket", leaseIDs(e.fetchN("default", 10)), msgIDs(a[0], a[1], a[2]))
			e.wantThrottled("default", time.Second)
			e.advance(time.Hour)
			if got := e.fetchN("default", 10); len(got) != 3 {
				e.Fatalf("an hour later: %d tasks, want the burst of 3", len(got))
			}
		}),
		adminCase("KeyRateLimitRemoved", func(e *adminEnv) {
			a := e.addKeys("default", "a", 2)
			b := e.addKeys("default", "b", 2)
			e.set("default", broker.QueueSettings{KeyRateLimit: 0.5})
			e.fetchN("default", 10)
			e.wantThrottled("default", 2*time.Second)
			e.set("default", broker.QueueSettings{})
			wantIDs(e, "without the limit", leaseIDs(e.fetchN("default", 10)), msgIDs(a[1], b[1]))
		}),
		adminCase("QueueLimitsBoundTheRotation", func(e *adminEnv) {
			a := e.addKeys("default", "a", 3)
			b := e.addKeys("default", "b", 3)
			e.set("default", broker.QueueSettings{MaxConcurrency: 3})
			wantIDs(e, "under max concurrency 3", leaseIDs(e.fetchN("default", 10)), msgIDs(a[0], b[0], a[1]))
			e.wantThrottled("default", 0)
			e.set("default", broker.QueueSettings{})
			wantIDs(e, "the rest", leaseIDs(e.fetchN("default", 10)), msgIDs(b[1], a[2], b[2]))
		}),
		adminCase("SettingsRoundTrip", func(e *adminEnv) {
			s := broker.QueueSettings{MaxConcurrency: 7, KeyMaxConcurrency: 2, KeyRateLimit: 1.5, KeyRateBurst: 4}
			e.set("default", s)
			if got := e.stats("default").Settings; got != s {
				e.Fatalf("Settings = %+v, want %+v", got, s)
			}
			for _, bad := range []broker.QueueSettings{
				{KeyMaxConcurrency: -1}, {KeyRateLimit: -1}, {KeyRateBurst: -1},
				{KeyRateLimit: math.NaN()}, {KeyRateLimit: math.Inf(1)},
			} {
				wantErrIs(e, fmt.Sprintf("SetQueueSettings %+v", bad), e.a.SetQueueSettings(e.ctx, "default", bad), base.ErrInvalidArgument)
			}
			if got := e.stats("default").Settings; got != s {
				e.Fatalf("Settings after refused changes = %+v, want %+v", got, s)
			}
		}),
		adminCase("StatsAndList", func(e *adminEnv) {
			c := e.addKeys("default", "c", 2)
			e.advance(time.Second)
			a := e.addKey("default", "a")
			u := e.addKey("default", "")
			p := e.addPrio("default", 2)
			st := e.stats("default")
			if st.Pending != 5 {
				e.Fatalf("Pending = %d, want 5", st.Pending)
			}
			wantTime(e, "OldestPending", st.OldestPending, Epoch)
			wantIDs(e, "ListTasks pending", e.listIDs("default", base.StatePending, ""), msgIDs(p, u, a, c[0], c[1]))
			page := e.list("default", base.StatePending, "", 2, 2)
			wantIDs(e, "ListTasks pending offset 2 limit 2", infoIDs(page), msgIDs(a, c[0]))
			if page[0].Message.Key != "a" {
				e.Fatalf("listed Key %q, want a", page[0].Message.Key)
			}
		}),
		adminCase("TaskOps", func(e *adminEnv) {
			a := e.addKeys("default", "a", 3)
			b := e.addKey("default", "b")
			wantNoErr(e, "DeleteTask", e.b.DeleteTask(e.ctx, "default", a[1].ID))
			wantNoErr(e, "ArchiveTask", e.a.ArchiveTask(e.ctx, "default", b.ID))
			e.wantCounts("default", counts{Pending: 2, Archived: 1})
			c := e.addKey("default", "c")
			wantNoErr(e, "RunTask", e.a.RunTask(e.ctx, "default", b.ID))
			wantIDs(e, "fetch order", e.fetchEach("default"), msgIDs(a[0], c, b, a[2]))
		}),
		adminCase("BulkOps", func(e *adminEnv) {
			e.addKeys("default", "a", 3)
			e.addKeys("default", "b", 2)
			e.addKey("default", "")
			n, err := e.a.ArchiveAll(e.ctx, "default", base.StatePending, "")
			wantNoErr(e, "ArchiveAll pending", err)
			if n != 6 {
				e.Fatalf("ArchiveAll pending = %d, want 6", n)
			}
			e.wantCounts("default", counts{Archived: 6})
			e.fetchNone("default")
			n, err = e.a.RunAll(e.ctx, "default", base.StateArchived, "")
			wantNoErr(e, "RunAll archived", err)
			if n != 6 {
				e.Fatalf("RunAll archived = %d, want 6", n)
			}
			if got := keysOf(e.fetchN("default", 3)); fmt.Sprint(got) == "[a a a]" {
				e.Fatalf("after RunAll the keys take no turns: %v", got)
			}
			n, err = e.a.DeleteAll(e.ctx, "default", base.StatePending, "")
			wantNoErr(e, "DeleteAll pending", err)
			if n != 3 {
				e.Fatalf("DeleteAll pending = %d, want 3", n)
			}
			e.wantCounts("default", counts{Active: 3})
			e.fetchNone("default")
		}),
		adminCase("ListKeys", func(e *adminEnv) {
			keys, err := e.a.ListKeys(e.ctx, "default")
			wantNoErr(e, "ListKeys of an unknown queue", err)
			if len(keys) != 0 {
				e.Fatalf("ListKeys of an unknown queue: %v", keys)
			}
			_, err = e.a.ListKeys(e.ctx, "bad:name")
			wantErrIs(e, "ListKeys of a bad queue name", err, base.ErrInvalidArgument)
			e.addKeys("default", "b", 2)
			e.addKeys("default", "c", 1)
			e.addKeys("default", "a", 2)
			e.addKey("default", "")
			e.fetchN("default", 3) // b, c, a: c has no task left pending
			keys, err = e.a.ListKeys(e.ctx, "default")
			wantNoErr(e, "ListKeys", err)
			want := []broker.KeyStats{{Key: "a", Pending: 1, Active: 1}, {Key: "b", Pending: 1, Active: 1}, {Key: "c", Active: 1}}
			if fmt.Sprint(keys) != fmt.Sprint(want) {
				e.Fatalf("ListKeys = %v, want %v", keys, want)
			}
		}),
		adminCase("PauseAndDeleteQueue", func(e *adminEnv) {
			q := uniqueQueue("key-pause")
			e.addKeys(q, "a", 2)
			wantNoErr(e, "PauseQueue", e.a.PauseQueue(e.ctx, q))
			e.fetchNone(q)
			ch := e.subscribe()
			wantNoErr(e, "UnpauseQueue", e.a.UnpauseQueue(e.ctx, q))
			e.waitEvent(ch, broker.EventReady, q)
			e.set(q, broker.QueueSettings{KeyMaxConcurrency: 1, KeyRateLimit: 1})
			e.complete(e.fetchOne(q).Ref())
			wantErrIs(e, "DeleteQueue without force", e.a.DeleteQueue(e.ctx, q, false), base.ErrQueueNotEmpty)
			wantNoErr(e, "DeleteQueue with force", e.a.DeleteQueue(e.ctx, q, true))
			e.fetchNone(q)
			// A new queue of that name starts afresh: no limit, no bucket.
			m := e.addKeys(q, "a", 2)
			wantIDs(e, "fetch after the queue was deleted", leaseIDs(e.fetchN(q, 10)), msgIDs(m[0], m[1]))
		}),
	}
}
