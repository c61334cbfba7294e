package rdb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// withChunk sets the chunk size of EnqueueBatch for one test.
func withChunk(t *testing.T, n int) {
	t.Helper()
	old := enqueueChunkTasks
	enqueueChunkTasks = n
	t.Cleanup(func() { enqueueChunkTasks = old })
}

// errClass names the error kinds Enqueue answers with.
func errClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, base.ErrTaskIDConflict):
		return "id-conflict"
	case errors.Is(err, base.ErrDuplicateTask):
		return "duplicate"
	case errors.Is(err, base.ErrInvalidArgument):
		return "invalid"
	}
	return "other: " + err.Error()
}

func wantClasses(t *testing.T, errs []error, want ...string) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("EnqueueBatch returned %d results, want %d", len(errs), len(want))
	}
	for i, w := range want {
		if got := errClass(errs[i]); got != w {
			t.Errorf("entry %d: %s (%v), want %s", i, got, errs[i], w)
		}
	}
}

// dumpQueue describes every key of queue q (tag {q}) by its content, with
// the tag replaced by {Q}, so that two queues filled the same way compare
// equal. Lock TTLs are reported as present or not.
func dumpQueue(t *testing.T, b *Broker, q string) map[string]string {
	t.Helper()
	prefix := "htq:{" + q + "}:"
	out := map[string]string{}
	for _, k := range redis(t, b, "KEYS", globEscape(prefix)+"*") {
		var v []string
		switch typ := redis(t, b, "TYPE", k)[0]; typ {
		case "hash":
			kv := redis(t, b, "HGETALL", k)
			var pairs []string
			for i := 0; i+1 < len(kv); i += 2 {
				pairs = append(pairs, fmt.Sprintf("%s=%q", kv[i], kv[i+1]))
			}
			slices.Sort(pairs)
			v = pairs
		case "list":
			v = redis(t, b, "LRANGE", k, "0", "-1")
		case "zset":
			zs, err := b.c.Do(t.Context(), b.c.B().Zrange().Key(k).Min("0").Max("-1").Withscores().Build()).AsZScores()
			if err != nil {
				t.Fatalf("ZRANGE %s: %v", k, err)
			}
			for _, z := range zs {
				v = append(v, fmt.Sprint(z.Member, "=", int64(z.Score)))
			}
		case "set":
			v = redis(t, b, "SMEMBERS", k)
			slices.Sort(v)
		case "stream": // the event log: its events without their IDs
			es, err := b.c.Do(t.Context(), b.c.B().Xrange().Key(k).Start("-").End("+").Build()).AsXRange()
			if err != nil {
				t.Fatalf("XRANGE %s: %v", k, err)
			}
			for _, e := range es {
				evs, err := decodeLogEntry(q, e)
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range evs {
					v = append(v, fmt.Sprint(ev.Kind, ev.TaskID, ev.State, ev.Error, ev.Time.UnixMilli()))
				}
			}
		case "string":
			v = redis(t, b, "GET", k)
			pttl := redis(t, b, "PTTL", k)[0]
			v = append(v, fmt.Sprint("ttl:", pttl != "-1"))
		default:
			t.Fatalf("key %s has type %s", k, typ)
		}
		out["htq:{Q}:"+strings.TrimPrefix(k, prefix)] = strings.Join(v, " ")
	}
	return out
}

func withQueue(m *base.TaskMessage, q string) *base.TaskMessage {
	c := *m
	c.Queue = q
	return &c
}

// TestEnqueueBatchLikeSingleEnqueues enqueues random mixes (pending,
// scheduled, due, aggregating, unique, with retention, invalid; IDs and
// unique keys drawn from small pools, so that they repeat inside the batch
// and against tasks already stored) once with EnqueueBatch and once with
// one Enqueue per task into another queue: the answers and every key of
// the two queues must be the same, whatever the chunk size.
func TestEnqueueBatchLikeSingleEnqueues(t *testing.T) {
	for _, chunk := range []int{1, 3, 64, 250} {
		t.Run(fmt.Sprint("chunk=", chunk), func(t *testing.T) {
			withChunk(t, chunk)
			clock := clockwork.NewFakeClockAt(epoch)
			b := newTestBroker(t, clock)
			ctx := t.Context()
			rng := rand.New(rand.NewPCG(uint64(chunk), 7))
			gen := func(i int) broker.EnqueueParams {
				m := msg("x", fmt.Sprint("id", rng.IntN(400)))
				m.Payload = []byte(strings.Repeat("p", rng.IntN(150)))
				var p broker.EnqueueParams
				switch rng.IntN(10) {
				case 0:
					p.ProcessAt = epoch.Add(time.Duration(1+rng.IntN(600)) * time.Second)
				case 1:
					p.ProcessAt = epoch.Add(-time.Minute)
				case 2:
					m.GroupKey = fmt.Sprint("g", rng.IntN(3))
				case 3:
					m.Retention = time.Hour
				case 4:
					m.Type = "" // invalid
				}
				if rng.IntN(4) == 0 {
					m.UniqueKey, m.UniqueTTL = fmt.Sprint("u", rng.IntN(40)), time.Duration(1+rng.IntN(100))*time.Second
				}
				p.Msg = m
				return p
			}
			// Tasks and locks already stored in both queues, some locks
			// expired by the time of the batch.
			for i := range 150 {
				p := gen(i)
				for _, q := range []string{"single", "batch"} {
					_ = b.Enqueue(ctx, broker.EnqueueParams{Msg: withQueue(p.Msg, q), ProcessAt: p.ProcessAt})
				}
			}
			clock.Advance(30 * time.Second)
			ps := make([]broker.EnqueueParams, 700)
			for i := range ps {
				ps[i] = gen(i)
				ps[i].Msg = withQueue(ps[i].Msg, "batch")
			}
			want := make([]string, len(ps))
			for i, p := range ps {
				want[i] = errClass(b.Enqueue(ctx, broker.EnqueueParams{Msg: withQueue(p.Msg, "single"), ProcessAt: p.ProcessAt}))
			}
			wantClasses(t, b.EnqueueBatch(ctx, ps), want...)
			single, batch := dumpQueue(t, b, "single"), dumpQueue(t, b, "batch")
			for _, p := range []string{"htq:{Q}:pending", "htq:{Q}:scheduled", "htq:{Q}:groups", "htq:{Q}:g:", "htq:{Q}:unique:"} {
				if !slices.ContainsFunc(slices.Collect(maps.Keys(single)), func(k string) bool { return strings.HasPrefix(k, p) && single[k] != "" }) {
					t.Errorf("the single enqueues left no %s: the mix misses a case", p)
				}
			}
			if !maps.Equal(single, batch) {
				for _, k := range slices.Sorted(maps.Keys(single)) {
					if single[k] != batch[k] {
						t.Errorf("%s\n  single: %.300s\n  batch:  %.300s", k, single[k], batch[k])
					}
				}
				for k := range batch {
					if _, ok := single[k]; !ok {
						t.Errorf("%s only after the batch: %.300s", k, batch[k])
					}
				}
			}
			checkInvariants(t, b)
		})
	}
}

// TestEnqueueBatchInBatchDuplicates checks IDs and unique keys that repeat
// inside one batch, within a chunk and across chunks: the first task
// stored wins; a task refused for one reason does not hold its ID or key.
func TestEnqueueBatchInBatchDuplicates(t *testing.T) {
	withChunk(t, 4)
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx := t.Context()
	uniq := func(id, key string) *base.TaskMessage {
		m := msg("q", id)
		m.UniqueKey, m.UniqueTTL = key, time.Hour
		return m
	}
	locked := uniq("holder", "held")
	mustEnqueue(t, b, locked, time.Time{})
	second := msg("q", "a")
	second.Payload = []byte("second")
	ps := []broker.EnqueueParams{
		{Msg: msg("q", "a")},      // 0 stored
		{Msg: second},             // 1 same ID, same chunk
		{Msg: uniq("b", "k")},     // 2 stored, holds k
		{Msg: uniq("c", "k")},     // 3 k held by 2
		{Msg: uniq("a", "k2")},    // 4 ID of 0 (chunk 2): ID checked first, k2 stays free
		{Msg: uniq("d", "k2")},    // 5 stored, holds k2
		{Msg: uniq("e", "held")},  // 6 held before the batch
		{Msg: msg("q", "e")},      // 7 6 was refused: e is free
		{Msg: msg("q", "b")},      // 8 ID of 2 (chunk 3)
		{Msg: uniq("f", "k")},     // 9 k held by 2, two chunks later
		{Msg: msg("q", "holder")}, // 10 stored before the batch
		{Msg: uniq("g", "k3")},    // 11 stored
		{Msg: msg("q", "g")},      // 12 ID of 11 (next chunk)
		{Msg: uniq("g", "k4")},    // 13 ID of 11: k4 stays free
		{Msg: uniq("h", "k4")},    // 14 stored
		{Msg: uniq("h2", "k4")},   // 15 k4 held by 14
	}
	wantClasses(t, b.EnqueueBatch(ctx, ps),
		"ok", "id-conflict", "ok", "duplicate",
		"id-conflict", "ok", "duplicate", "ok",
		"id-conflict", "duplicate", "id-conflict", "ok",
		"id-conflict", "id-conflict", "ok", "duplicate")
	ti, err := b.GetTaskInfo(ctx, "q", "a")
	if err != nil {
		t.Fatal(err)
	}
	if string(ti.Message.Payload) != "p-a" || ti.Message.UniqueKey != "" {
		t.Errorf("task a = %+v, want the first one", ti.Message)
	}
	for key, id := range map[string]string{"k": "b", "k2": "d", "k3": "g", "k4": "h", "held": "holder"} {
		v := redis(t, b, "GET", "htq:{q}:unique:"+key)
		if len(v) != 1 || !strings.HasSuffix(v[0], ":"+id) {
			t.Errorf("lock %s = %v, want held by %s", key, v, id)
		}
	}
	var got []string
	for _, l := range mustFetch(t, b, "q", 100) {
		got = append(got, l.Msg.ID)
	}
	if want := []string{"holder", "a", "b", "d", "e", "g", "h"}; !slices.Equal(got, want) {
		t.Errorf("fetch order %v, want %v", got, want)
	}
	checkInvariants(t, b)
}

// TestEnqueueBatchMixedQueues interleaves more queues than the batch keeps
// in a list (so they are indexed) with chunks filling up at different
// times: each queue gets its tasks in order, is registered once, and
// refusals in one queue do not touch another.
func TestEnqueueBatchMixedQueues(t *testing.T) {
	withChunk(t, 5)
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx := t.Context()
	const nq = 12
	mustEnqueue(t, b, msg("q3", "t7"), time.Time{})
	var ps []broker.EnqueueParams
	want := map[string][]string{"q3": {"t7"}}
	var classes []string
	for i := range 300 {
		q := fmt.Sprint("q", (i*i+i/7)%nq)
		id := fmt.Sprint("t", i%40)
		m := msg(q, id)
		m.Payload = fmt.Append(nil, "p", i) // a taken ID with other content
		ps = append(ps, broker.EnqueueParams{Msg: m})
		if slices.Contains(want[q], id) {
			classes = append(classes, "id-conflict")
			continue
		}
		classes = append(classes, "ok")
		want[q] = append(want[q], id)
	}
	ps = append(ps, broker.EnqueueParams{Msg: msg("bad{queue}", "x")})
	classes = append(classes, "invalid")
	wantClasses(t, b.EnqueueBatch(ctx, ps), classes...)
	qs, err := b.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.Sorted(maps.Keys(want)); !slices.Equal(qs, want) {
		t.Errorf("Queues = %v, want %v", qs, want)
	}
	for q, ids := range want {
		var got []string
		for _, l := range mustFetch(t, b, q, 1000) {
			got = append(got, l.Msg.ID)
		}
		if !slices.Equal(got, ids) {
			t.Errorf("queue %s: fetch order %v, want %v", q, got, ids)
		}
	}
	checkInvariants(t, b)
}

// TestEnqueueBatchStates mixes pending, scheduled, already due and
// aggregating tasks (with unique keys and retention) in one chunk and
// checks each stored state as GetTaskInfo reports it.
func TestEnqueueBatchStates(t *testing.T) {
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx := t.Context()
	mk := func(id string, f func(m *base.TaskMessage)) *base.TaskMessage {
		m := msg("q", id)
		if f != nil {
			f(m)
		}
		return m
	}
	unique := func(m *base.TaskMessage) { m.UniqueKey, m.UniqueTTL = "u-"+m.ID, time.Minute }
	group := func(g string) func(*base.TaskMessage) { return func(m *base.TaskMessage) { m.GroupKey = g } }
	ps := []broker.EnqueueParams{
		{Msg: mk("p1", nil)},
		{Msg: mk("s1", unique), ProcessAt: epoch.Add(time.Hour)},
		{Msg: mk("g1", group("ga"))},
		{Msg: mk("due", func(m *base.TaskMessage) { m.Retention = time.Hour }), ProcessAt: epoch.Add(-time.Second)},
		{Msg: mk("s2", nil), ProcessAt: epoch.Add(time.Minute)},
		{Msg: mk("g2", group("gb")), ProcessAt: epoch.Add(time.Hour)}, // a group wins over a due time, as in enqueue.lua
		{Msg: mk("p2", unique)},
		{Msg: mk("g3", func(m *base.TaskMessage) { group("ga")(m); unique(m) })},
		{Msg: mk("now", nil), ProcessAt: epoch},
	}
	wantClasses(t, b.EnqueueBatch(ctx, ps), "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok")
	for _, c := range []struct {
		id    string
		state base.TaskState
		next  time.Time
	}{
		{"p1", base.StatePending, epoch}, {"s1", base.StateScheduled, epoch.Add(time.Hour)},
		{"g1", base.StateAggregating, time.Time{}}, {"due", base.StatePending, epoch},
		{"s2", base.StateScheduled, epoch.Add(time.Minute)}, {"g2", base.StateAggregating, time.Time{}},
		{"p2", base.StatePending, epoch}, {"g3", base.StateAggregating, time.Time{}},
		{"now", base.StatePending, epoch},
	} {
		ti, err := b.GetTaskInfo(ctx, "q", c.id)
		if err != nil {
			t.Fatalf("GetTaskInfo %s: %v", c.id, err)
		}
		if ti.State != c.state || !ti.NextProcessAt.Equal(c.next) {
			t.Errorf("%s: state %v next %v, want %v %v", c.id, ti.State, ti.NextProcessAt, c.state, c.next)
		}
	}
	if g := redis(t, b, "ZRANGE", "htq:{q}:g:ga", "0", "-1"); !slices.Equal(g, []string{"g1", "g3"}) {
		t.Errorf("group ga = %v", g)
	}
	if gs := redis(t, b, "SMEMBERS", "htq:{q}:groups"); len(gs) != 2 {
		t.Errorf("groups = %v, want ga and gb", gs)
	}
	if s := redis(t, b, "ZRANGE", "htq:{q}:scheduled", "0", "-1"); !slices.Equal(s, []string{"s2", "s1"}) {
		t.Errorf("scheduled = %v", s)
	}
	if p := redis(t, b, "LRANGE", "htq:{q}:pending", "0", "-1"); !slices.Equal(p, []string{"now", "p2", "due", "p1"}) {
		t.Errorf("pending = %v", p)
	}
	if r := redis(t, b, "HGET", "htq:{q}:t:due", "R"); !slices.Equal(r, []string{"3600000"}) {
		t.Errorf("retention field of due = %v", r)
	}
	checkInvariants(t, b)
}

// TestEnqueueBatchFailuresWriteNothing checks that refused tasks, and a
// task found stored already with the same content, leave every key as it
// was: a batch of nothing but those (over several chunks), then those
// mixed with stored tasks, whose own keys are the only change.
func TestEnqueueBatchFailuresWriteNothing(t *testing.T) {
	withChunk(t, 3)
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx := t.Context()
	m := msg("q", "a")
	m.UniqueKey, m.UniqueTTL = "u", time.Hour
	m.GroupKey = "g"
	mustEnqueue(t, b, m, time.Time{})
	mustEnqueue(t, b, msg("q", "b"), epoch.Add(time.Hour))
	mustEnqueue(t, b, msg("q", "c"), time.Time{})
	redis(t, b, "SET", "htq:{q}:t:wrongtype", "x") // a key of another type where a task would go
	before := snapshot(t, b)

	refused := func() []broker.EnqueueParams {
		dup := msg("q", "d")
		dup.UniqueKey, dup.UniqueTTL = "u", time.Hour
		dupGroup := msg("q", "e")
		dupGroup.UniqueKey, dupGroup.UniqueTTL = "u", time.Hour
		dupGroup.GroupKey = "g2"
		dupLater := msg("q", "f")
		dupLater.UniqueKey, dupLater.UniqueTTL = "u", time.Hour
		conflictUnique := msg("q", "a")
		conflictUnique.UniqueKey, conflictUnique.UniqueTTL = "other", time.Hour
		conflictGroup := msg("q", "b")
		conflictGroup.GroupKey = "g3"
		return []broker.EnqueueParams{
			{Msg: msg("q", "a")}, {Msg: dup}, {Msg: dupGroup},
			{Msg: dupLater, ProcessAt: epoch.Add(time.Minute)}, {Msg: conflictUnique}, {Msg: conflictGroup},
			{Msg: msg("q", "c"), ProcessAt: epoch.Add(time.Minute)}, // stored already: success
			{Msg: msg("q", "wrongtype")},
			{Msg: msg("q", "")},
		}
	}
	wantClasses(t, b.EnqueueBatch(ctx, refused()),
		"id-conflict", "duplicate", "duplicate", "duplicate", "id-conflict", "id-conflict", "ok", "id-conflict", "invalid")
	if after := snapshot(t, b); !maps.Equal(before, after) {
		t.Fatalf("refused batch changed keys:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}

	// Refusals between stored tasks: only the stored ones' keys change.
	stored := msg("q", "new1")
	scheduled := msg("q", "new2")
	grouped := msg("q", "new3")
	grouped.GroupKey = "g"
	ps := append([]broker.EnqueueParams{{Msg: stored}}, refused()...)
	ps = append(ps, broker.EnqueueParams{Msg: scheduled, ProcessAt: epoch.Add(2 * time.Hour)}, broker.EnqueueParams{Msg: grouped})
	errs := b.EnqueueBatch(ctx, ps)
	if errs[0] != nil || errs[len(errs)-1] != nil || errs[len(errs)-2] != nil {
		t.Fatalf("stored tasks refused: %v", errs)
	}
	after := snapshot(t, b)
	changed := map[string]bool{}
	for k, v := range after {
		if before[k] != v {
			changed[k] = true
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			changed[k] = true
		}
	}
	want := map[string]bool{
		"htq:{q}:t:new1": true, "htq:{q}:t:new2": true, "htq:{q}:t:new3": true,
		"htq:{q}:pending": true, "htq:{q}:scheduled": true, "htq:{q}:g:g": true, "htq:{q}:events": true,
	}
	if !maps.Equal(changed, want) {
		t.Errorf("changed keys %v, want %v", slices.Sorted(maps.Keys(changed)), slices.Sorted(maps.Keys(want)))
	}
	if p := redis(t, b, "LRANGE", "htq:{q}:pending", "0", "-1"); !slices.Equal(p, []string{"new1", "c"}) {
		t.Errorf("pending = %v", p)
	}
	redis(t, b, "DEL", "htq:{q}:t:wrongtype")
	checkInvariants(t, b)
}

// eventLog records the events published on the events channel.
type eventLog struct {
	mu   sync.Mutex
	msgs []string
}

// listen subscribes to the events channel with a connection of its own
// and returns a function that waits until everything published so far has
// arrived and returns the events of queue q.
func listen(t *testing.T, b *Broker) func(q string) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var log eventLog
	subscribed := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.c.Receive(ctx, b.c.B().Subscribe().Channel(channelEvents).Build(), func(m rueidis.PubSubMessage) {
			log.mu.Lock()
			log.msgs = append(log.msgs, m.Message)
			log.mu.Unlock()
			if m.Message == "mark:ready" {
				select {
				case <-subscribed:
				default:
					close(subscribed)
				}
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	// Publish until the subscription is live.
	for {
		redis(t, b, "PUBLISH", channelEvents, "mark:ready")
		select {
		case <-subscribed:
		case <-time.After(20 * time.Millisecond):
			continue
		}
		break
	}
	n := 0
	return func(q string) []string {
		t.Helper()
		n++
		mark := fmt.Sprint("mark:", n)
		redis(t, b, "PUBLISH", channelEvents, mark)
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			log.mu.Lock()
			ms := slices.Clone(log.msgs)
			log.mu.Unlock()
			if i := slices.Index(ms, mark); i >= 0 {
				var out []string
				for _, m := range ms[:i] {
					if strings.HasSuffix(m, ":"+q) {
						out = append(out, m)
					}
				}
				log.mu.Lock()
				log.msgs = slices.Delete(log.msgs, 0, i+1)
				log.mu.Unlock()
				return out
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("mark %s not received", mark)
		return nil
	}
}

// TestEnqueueBatchEvents checks the hints of a batch: r:<queue> once when
// the batch made pending not empty (not once per task or chunk), none when
// tasks were pending already; s:<queue> when a task of the batch became
// the earliest scheduled one, none when it did not.
func TestEnqueueBatchEvents(t *testing.T) {
	withChunk(t, 10)
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx := t.Context()
	events := listen(t, b)
	seq := 0
	batch := func(q string, n int, at time.Time) {
		t.Helper()
		ps := make([]broker.EnqueueParams, n)
		for i := range ps {
			seq++
			ps[i] = broker.EnqueueParams{Msg: msg(q, fmt.Sprint("t", seq)), ProcessAt: at}
		}
		for i, err := range b.EnqueueBatch(ctx, ps) {
			if err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
		}
	}
	batch("ev", 35, time.Time{})
	if got := events("ev"); !slices.Equal(got, []string{"r:ev"}) {
		t.Errorf("events of a 35-task batch into an empty queue: %v, want one r:ev", got)
	}
	batch("ev", 35, time.Time{})
	if got := events("ev"); len(got) != 0 {
		t.Errorf("events of a batch into a queue with pending tasks: %v, want none", got)
	}
	batch("ev", 25, epoch.Add(time.Hour))
	if got := events("ev"); !slices.Equal(got, []string{"s:ev"}) {
		t.Errorf("events of a scheduled batch into no scheduled task: %v, want one s:ev", got)
	}
	batch("ev", 5, epoch.Add(2*time.Hour))
	if got := events("ev"); len(got) != 0 {
		t.Errorf("events of a batch scheduled after the earliest: %v, want none", got)
	}
	batch("ev", 5, epoch.Add(time.Minute))
	if got := events("ev"); !slices.Equal(got, []string{"s:ev"}) {
		t.Errorf("events of a batch scheduled before the earliest: %v, want one s:ev", got)
	}
}

// TestEnqueueBatchChunkBytes checks that large messages split chunks by
// size and that the tasks keep their order.
func TestEnqueueBatchChunkBytes(t *testing.T) {
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx := t.Context()
	var ps []broker.EnqueueParams
	var want []string
	for i := range 7 {
		m := msg("q", fmt.Sprint("big", i))
		m.Payload = []byte(strings.Repeat(string(rune('a'+i)), enqueueChunkBytes/3))
		ps = append(ps, broker.EnqueueParams{Msg: m})
		want = append(want, m.ID)
	}
	for i, err := range b.EnqueueBatch(ctx, ps) {
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	var got []string
	for _, l := range mustFetch(t, b, "q", 10) {
		if !slices.Equal(l.Msg.Payload, ps[len(got)].Msg.Payload) {
			t.Errorf("task %s: payload differs", l.Msg.ID)
		}
		got = append(got, l.Msg.ID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("fetch order %v, want %v", got, want)
	}
}

// TestEnqueueBatchNoScriptManyChunks runs a batch of several chunks after
// Redis lost its script cache.
func TestEnqueueBatchNoScriptManyChunks(t *testing.T) {
	withChunk(t, 50)
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx := t.Context()
	redis(t, b, "SCRIPT", "FLUSH")
	var ps []broker.EnqueueParams
	var want []string
	for i := range 260 {
		m := msg("q", fmt.Sprint("t", i))
		ps = append(ps, broker.EnqueueParams{Msg: m})
		want = append(want, m.ID)
	}
	for i, err := range b.EnqueueBatch(ctx, ps) {
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	var got []string
	for _, l := range mustFetch(t, b, "q", 1000) {
		got = append(got, l.Msg.ID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("fetch order differs: got %d tasks", len(got))
	}
	checkInvariants(t, b)
}
