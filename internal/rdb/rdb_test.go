package rdb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/redistest"
)

var epoch = time.Date(2031, time.March, 14, 15, 9, 26, 0, time.UTC)

func msg(q, id string) *base.TaskMessage {
	return &base.TaskMessage{ID: id, Type: "test", Payload: []byte("p-" + id), Queue: q, MaxRetry: 3}
}

func mustEnqueue(t *testing.T, b *Broker, m *base.TaskMessage, at time.Time) {
	t.Helper()
	if err := b.Enqueue(t.Context(), broker.EnqueueParams{Msg: m, ProcessAt: at}); err != nil {
		t.Fatalf("Enqueue %s: %v", m.ID, err)
	}
}

func mustFetch(t *testing.T, b *Broker, q string, n int) []*broker.Lease {
	t.Helper()
	ls, err := b.Fetch(t.Context(), broker.FetchParams{Queue: q, Max: n, LeaseDuration: 30 * time.Second, ServerID: "s1"})
	if err != nil {
		t.Fatalf("Fetch %s: %v", q, err)
	}
	return ls
}

// redis runs a raw command and returns its reply as a string slice.
func redis(t *testing.T, b *Broker, args ...string) []string {
	t.Helper()
	r := b.c.Do(t.Context(), b.c.B().Arbitrary(args...).Build())
	if v, err := r.AsStrSlice(); err == nil {
		return v
	}
	if v, err := r.ToString(); err == nil {
		return []string{v}
	}
	if v, err := r.AsInt64(); err == nil {
		return []string{fmt.Sprint(v)}
	}
	if err := r.Error(); err != nil && !strings.Contains(err.Error(), "nil") {
		t.Fatalf("redis %v: %v", args, err)
	}
	return nil
}

// setTaskFields writes fields of the task at key as a script that writes
// them would: a task in the string form (lua/lib.lua's task_get) becomes
// a hash first.
func setTaskFields(t *testing.T, b *Broker, key string, fieldValues ...string) {
	t.Helper()
	if redis(t, b, "TYPE", key)[0] == "string" {
		m := redis(t, b, "GET", key)[0]
		redis(t, b, "DEL", key)
		redis(t, b, "HSET", key, "m", m)
	}
	redis(t, b, append([]string{"HSET", key}, fieldValues...)...)
}

// snapshot returns every key of the database with its DUMP.
func snapshot(t *testing.T, b *Broker) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range redis(t, b, "KEYS", "*") {
		d := redis(t, b, "DUMP", k)
		out[k] = strings.Join(d, "")
	}
	return out
}

func checkInvariants(t *testing.T, b *Broker) {
	t.Helper()
	if err := b.CheckInvariants(t.Context()); err != nil {
		t.Fatalf("invariants: %v", err)
	}
}

// TestRedisClock runs the time-dependent operations on Redis TIME (no
// Options.Clock), as production does.
func TestRedisClock(t *testing.T) {
	b := newTestBroker(t, nil)
	ctx := t.Context()
	now, err := b.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(now); d < -time.Second || d > time.Second {
		t.Fatalf("Now = %v, %v away from this process's clock", now, d)
	}
	mustEnqueue(t, b, msg("q", "later"), now.Add(300*time.Millisecond))
	mustEnqueue(t, b, msg("q", "now"), now.Add(-time.Second))
	ls := mustFetch(t, b, "q", 10)
	if len(ls) != 1 || ls[0].Msg.ID != "now" {
		t.Fatalf("Fetch = %v, want only the task due now", ls)
	}
	if d := ls[0].Deadline.Sub(now); d < 29*time.Second || d > 31*time.Second {
		t.Errorf("lease deadline is %v after Now, want about 30s", d)
	}
	fr, err := b.Forward(ctx, "q", 10)
	if err != nil {
		t.Fatal(err)
	}
	if fr.Moved != 0 || !fr.HasNext || fr.NextIn <= 0 || fr.NextIn > 301*time.Millisecond { // due times round up to the ms
		t.Fatalf("Forward = %+v, want nothing moved and the next in (0, 301ms]", fr)
	}
	time.Sleep(fr.NextIn) // Redis TIME is the clock here: real waiting is the point.
	fr, err = b.Forward(ctx, "q", 10)
	if err != nil {
		t.Fatal(err)
	}
	if fr.Moved != 1 || fr.HasNext {
		t.Fatalf("Forward after the due time = %+v, want 1 moved and none next", fr)
	}
	// A unique lock decided on Redis time.
	u := msg("q", "u1")
	u.UniqueKey, u.UniqueTTL = "k", time.Second
	mustEnqueue(t, b, u, time.Time{})
	u2 := msg("q", "u2")
	u2.UniqueKey, u2.UniqueTTL = "k", time.Second
	if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: u2}); !errors.Is(err, base.ErrDuplicateTask) {
		t.Fatalf("second unique Enqueue: %v, want ErrDuplicateTask", err)
	}
	if pttl := redis(t, b, "PTTL", "htq:{q}:unique:k"); pttl[0] == "-1" || pttl[0] == "-2" || len(pttl[0]) > 4 {
		t.Errorf("lock PTTL = %v, want at most 1000 ms", pttl)
	}
	checkInvariants(t, b)
}

// TestNoScriptFallback checks that the scripts run after Redis lost its
// script cache (restart, failover, SCRIPT FLUSH).
func TestNoScriptFallback(t *testing.T) {
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx := t.Context()
	redis(t, b, "SCRIPT", "FLUSH")
	mustEnqueue(t, b, msg("q", "a"), time.Time{})
	redis(t, b, "SCRIPT", "FLUSH")
	otherA := msg("q", "a")
	otherA.Payload = []byte("other")
	errs := b.EnqueueBatch(ctx, []broker.EnqueueParams{{Msg: msg("q", "b")}, {Msg: msg("q", "c")}, {Msg: otherA}})
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], base.ErrTaskIDConflict) {
		t.Fatalf("EnqueueBatch after SCRIPT FLUSH = %v", errs)
	}
	redis(t, b, "SCRIPT", "FLUSH")
	ls := mustFetch(t, b, "q", 3)
	redis(t, b, "SCRIPT", "FLUSH")
	refs := make([]broker.LeaseRef, len(ls))
	for i, l := range ls {
		refs[i] = l.Ref()
	}
	for _, err := range b.Complete(ctx, refs) {
		if err != nil {
			t.Fatalf("Complete after SCRIPT FLUSH: %v", err)
		}
	}
	checkInvariants(t, b)
}

// TestFailedEnqueueWritesNothing checks that a refused Enqueue leaves every
// key as it was.
func TestFailedEnqueueWritesNothing(t *testing.T) {
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx := t.Context()
	m := msg("q", "a")
	m.UniqueKey, m.UniqueTTL = "u", time.Hour
	m.GroupKey = "g"
	mustEnqueue(t, b, m, time.Time{})
	mustEnqueue(t, b, msg("q", "b"), epoch.Add(time.Hour))
	before := snapshot(t, b)

	conflict := msg("q", "a")
	conflict.UniqueKey, conflict.UniqueTTL = "other", time.Hour
	dup := msg("q", "c")
	dup.UniqueKey, dup.UniqueTTL = "u", time.Hour
	dup.GroupKey = "g2"
	bad := msg("q", "")
	for _, c := range []struct {
		m    *base.TaskMessage
		want error
	}{{conflict, base.ErrTaskIDConflict}, {dup, base.ErrDuplicateTask}, {bad, base.ErrInvalidArgument}} {
		if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: c.m}); !errors.Is(err, c.want) {
			t.Errorf("Enqueue %q: %v, want %v", c.m.ID, err, c.want)
		}
		errs := b.EnqueueBatch(ctx, []broker.EnqueueParams{{Msg: c.m}})
		if !errors.Is(errs[0], c.want) {
			t.Errorf("EnqueueBatch %q: %v, want %v", c.m.ID, errs[0], c.want)
		}
	}
	if after := snapshot(t, b); !maps.Equal(before, after) {
		t.Errorf("refused enqueues changed keys:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	checkInvariants(t, b)
}

// TestFencedWritesChangeNothing checks that every fenced script refused
// for a stale token leaves every key as it was.
func TestFencedWritesChangeNothing(t *testing.T) {
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx := t.Context()
	m := msg("q", "a")
	m.UniqueKey, m.UniqueTTL = "u", time.Hour
	m.Retention = time.Hour
	mustEnqueue(t, b, m, time.Time{})
	l := mustFetch(t, b, "q", 1)[0]
	before := snapshot(t, b)
	stale := l.Ref()
	stale.Token += "x"
	checks := map[string]error{
		"Complete":    b.Complete(ctx, []broker.LeaseRef{stale})[0],
		"Retry":       b.Retry(ctx, broker.RetryParams{Lease: stale, ErrMsg: "x", IsFailure: true}),
		"Archive":     b.Archive(ctx, broker.ArchiveParams{Lease: stale, ErrMsg: "x"}),
		"Requeue":     b.Requeue(ctx, stale),
		"WriteResult": b.WriteResult(ctx, stale, []byte("r")),
		"RetryLive":   b.Retry(ctx, broker.RetryParams{Lease: l.Ref(), ErrMsg: "x", RequireExpired: true}),
		"ArchiveLive": b.Archive(ctx, broker.ArchiveParams{Lease: l.Ref(), ErrMsg: "x", RequireExpired: true}),
	}
	for op, err := range checks {
		if !errors.Is(err, base.ErrLeaseLost) {
			t.Errorf("%s with a stale token: %v, want ErrLeaseLost", op, err)
		}
	}
	lost, err := b.ExtendLeases(ctx, "q", []broker.LeaseRef{stale}, time.Minute)
	if err != nil || len(lost) != 1 {
		t.Errorf("ExtendLeases with a stale token = %v, %v", lost, err)
	}
	if after := snapshot(t, b); !maps.Equal(before, after) {
		t.Errorf("refused writes changed keys")
	}
	checkInvariants(t, b)
}

// TestCounters checks the processed and failed counters, all-time and per
// day (with their 90-day expiry).
func TestCounters(t *testing.T) {
	clock := clockwork.NewFakeClockAt(epoch)
	b := newTestBroker(t, clock)
	ctx := t.Context()
	for i := range 5 {
		mustEnqueue(t, b, msg("q", fmt.Sprint(i)), time.Time{})
	}
	ls := mustFetch(t, b, "q", 5)
	for _, err := range b.Complete(ctx, []broker.LeaseRef{ls[0].Ref(), ls[1].Ref()}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Retry(ctx, broker.RetryParams{Lease: ls[2].Ref(), ErrMsg: "x", IsFailure: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.Retry(ctx, broker.RetryParams{Lease: ls[3].Ref(), ErrMsg: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Archive(ctx, broker.ArchiveParams{Lease: ls[4].Ref(), ErrMsg: "x"}); err != nil {
		t.Fatal(err)
	}
	day := fmt.Sprint(epoch.UnixMilli() / 86400000)
	for key, want := range map[string]string{
		"htq:{q}:stat:processed": "5", "htq:{q}:stat:processed:" + day: "5",
		"htq:{q}:stat:failed": "2", "htq:{q}:stat:failed:" + day: "2",
	} {
		if got := redis(t, b, "GET", key); len(got) != 1 || got[0] != want {
			t.Errorf("%s = %v, want %s", key, got, want)
		}
	}
	ttl := redis(t, b, "TTL", "htq:{q}:stat:processed:"+day)
	if ttl[0] != fmt.Sprint(90*24*3600) && ttl[0] != fmt.Sprint(90*24*3600-1) {
		t.Errorf("day counter TTL = %v, want 90 days", ttl)
	}
	if ttl := redis(t, b, "TTL", "htq:{q}:stat:processed"); ttl[0] != "-1" {
		t.Errorf("all-time counter TTL = %v, want none", ttl)
	}
	checkInvariants(t, b)
}

// TestArchiveTrim checks that the archive keeps its newest tasks up to the
// size and age limits and deletes the hashes it drops.
func TestArchiveTrim(t *testing.T) {
	clock := clockwork.NewFakeClockAt(epoch)
	b := newTestBroker(t, clock)
	b.archiveMax = "3"
	ctx := t.Context()
	archive := func(id string) {
		t.Helper()
		m := msg("q", id)
		m.UniqueKey, m.UniqueTTL = "u-"+id, 1000*time.Hour
		mustEnqueue(t, b, m, time.Time{})
		l := mustFetch(t, b, "q", 1)[0]
		if err := b.Archive(ctx, broker.ArchiveParams{Lease: l.Ref(), ErrMsg: "x"}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
	}
	for i := range 5 {
		archive(fmt.Sprint(i))
	}
	if got := redis(t, b, "ZRANGE", "htq:{q}:archived", "0", "-1"); !slices.Equal(got, []string{"2", "3", "4"}) {
		t.Errorf("archived = %v, want the 3 newest", got)
	}
	for _, id := range []string{"0", "1"} {
		if _, err := b.GetTaskInfo(ctx, "q", id); !errors.Is(err, base.ErrTaskNotFound) {
			t.Errorf("trimmed task %s: %v, want ErrTaskNotFound", id, err)
		}
		if got := redis(t, b, "EXISTS", "htq:{q}:unique:u-"+id); got[0] != "0" {
			t.Errorf("lock of trimmed task %s is still there", id)
		}
	}
	clock.Advance(DefaultArchiveMaxAge)
	archive("5")
	if got := redis(t, b, "ZRANGE", "htq:{q}:archived", "0", "-1"); !slices.Equal(got, []string{"5"}) {
		t.Errorf("archived after 90 days = %v, want only the new one", got)
	}
	checkInvariants(t, b)
}

// TestUniqueLockValue checks the lock's stored form and that only its
// owner releases it.
func TestUniqueLockValue(t *testing.T) {
	clock := clockwork.NewFakeClockAt(epoch)
	b := newTestBroker(t, clock)
	ctx := t.Context()
	a := msg("q", "a")
	a.UniqueKey, a.UniqueTTL = "k", time.Minute
	mustEnqueue(t, b, a, time.Time{})
	key := "htq:{q}:unique:k"
	want := fmt.Sprintf("%d:a", epoch.Add(time.Minute).UnixMilli())
	if got := redis(t, b, "GET", key); got[0] != want {
		t.Fatalf("lock = %v, want %s", got, want)
	}
	// The PX ttl only cleans up: with a fake clock it is generous.
	if pttl := redis(t, b, "PTTL", key); len(pttl[0]) < 8 {
		t.Errorf("lock PTTL = %v, want more than a day", pttl)
	}
	la := mustFetch(t, b, "q", 1)[0]
	clock.Advance(time.Minute) // a's lock expired on the storage clock
	c := msg("q", "c")
	c.UniqueKey, c.UniqueTTL = "k", time.Minute
	mustEnqueue(t, b, c, time.Time{})
	if err := b.Complete(ctx, []broker.LeaseRef{la.Ref()})[0]; err != nil {
		t.Fatal(err)
	}
	if got := redis(t, b, "GET", key); !strings.HasSuffix(got[0], ":c") {
		t.Errorf("lock after a completed = %v, want it still c's", got)
	}
	checkInvariants(t, b)
}

// TestQueueRegistrationCached checks that a Broker adds a queue to
// htq:queues once, pipelined with its first enqueue.
func TestQueueRegistrationCached(t *testing.T) {
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	mustEnqueue(t, b, msg("q", "a"), time.Time{})
	redis(t, b, "DEL", keyQueues)
	mustEnqueue(t, b, msg("q", "b"), time.Time{})
	b.EnqueueBatch(t.Context(), []broker.EnqueueParams{{Msg: msg("q", "c")}, {Msg: msg("r", "a")}, {Msg: msg("r", "b")}})
	qs, err := b.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(qs, []string{"r"}) {
		t.Errorf("Queues = %v, want [r] (q was registered once, before the DEL)", qs)
	}
	// After reregisterEvery, an enqueue adds the queue again (another
	// process may have deleted it).
	k, _ := b.keys("q")
	k.registeredAt.Add(-int64(reregisterEvery) - 1)
	mustEnqueue(t, b, msg("q", "d"), time.Time{})
	if qs, _ := b.Queues(t.Context()); !slices.Equal(qs, []string{"q", "r"}) {
		t.Errorf("Queues after the re-registration period = %v, want [q r]", qs)
	}
}

// TestCheckInvariantsFindsViolations breaks the storage by hand in each
// way CheckInvariants must report.
func TestCheckInvariantsFindsViolations(t *testing.T) {
	cases := []struct {
		name    string
		breakIt func(t *testing.T, b *Broker)
		want    string
	}{
		{"hash in no structure", func(t *testing.T, b *Broker) {
			redis(t, b, "LREM", "htq:{q}:pending", "0", "p")
		}, "task p (state 2) is in no structure"},
		{"task in two structures", func(t *testing.T, b *Broker) {
			redis(t, b, "ZADD", "htq:{q}:retry", "1", "p")
		}, "task p is in 2 structures: pending, retry"},
		{"state disagrees", func(t *testing.T, b *Broker) {
			setTaskFields(t, b, "htq:{q}:t:p", "s", "3")
		}, "task p has state 3 but is in pending"},
		{"active without token", func(t *testing.T, b *Broker) {
			redis(t, b, "HDEL", "htq:{q}:leases", "a")
		}, "counts 1 leases, it governs 0"},
		{"active without its group's member", func(t *testing.T, b *Broker) {
			redis(t, b, "ZREM", "htq:{q}:active", "\x02"+redis(t, b, "HGET", "htq:{q}:leases", "a")[0])
		}, "has no member in the active zset"},
		{"active without lease entry", func(t *testing.T, b *Broker) {
			// A lease with a member of its own (extended alone), which
			// is gone.
			tok := redis(t, b, "HGET", "htq:{q}:leases", "a")[0]
			redis(t, b, "HSET", "htq:{q}:leases", "a", tok+"!")
			redis(t, b, "HINCRBY", "htq:{q}:fetch-counts", tok, "-1")
		}, "active task a has no active-zset entry"},
		{"group count", func(t *testing.T, b *Broker) {
			redis(t, b, "HINCRBY", "htq:{q}:fetch-counts", redis(t, b, "HGET", "htq:{q}:leases", "a")[0], "1")
		}, "counts 2 leases, it governs 1"},
		{"group record", func(t *testing.T, b *Broker) {
			redis(t, b, "DEL", "htq:{q}:fetch:"+redis(t, b, "HGET", "htq:{q}:leases", "a")[0])
		}, "has no record"},
		{"group member without count", func(t *testing.T, b *Broker) {
			redis(t, b, "ZADD", "htq:{q}:active", "1", "\x02s1/ghost")
		}, "lease group s1/ghost is in the active zset but has no count"},
		{"lease entry without task", func(t *testing.T, b *Broker) {
			redis(t, b, "ZADD", "htq:{q}:active", "1", "ghost")
		}, "active entry ghost has no task"},
		{"lease without task", func(t *testing.T, b *Broker) {
			redis(t, b, "HSET", "htq:{q}:leases", "ghost", "tok")
		}, "lease of ghost has no task"},
		{"pending duplicate", func(t *testing.T, b *Broker) {
			redis(t, b, "LPUSH", "htq:{q}:pending", "p")
		}, "task p is in 2 structures: pending, pending"},
		{"pending in another lane", func(t *testing.T, b *Broker) {
			setTaskFields(t, b, "htq:{q}:t:p", "P", "3")
		}, "pending task p waits in pending, not in its lane pending:3"},
		{"keyed task in the plain lane", func(t *testing.T, b *Broker) {
			setTaskFields(t, b, "htq:{q}:t:p", "k", "acme")
		}, "pending task p waits in pending, not in its lane pending:k:acme"},
		{"key count", func(t *testing.T, b *Broker) {
			redis(t, b, "HSET", "htq:{q}:pending:held", "acme", "1")
		}, "key acme counts 1 active tasks, it has 0"},
		{"priority lane entry", func(t *testing.T, b *Broker) {
			redis(t, b, "LPUSH", "htq:{q}:pending:3", "a")
		}, "task a has state 1 but is in pending:3"},
		{"token outside active", func(t *testing.T, b *Broker) {
			redis(t, b, "HSET", "htq:{q}:leases", "p", "tok")
		}, "task p has state 1 but is in pending"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
			mustEnqueue(t, b, msg("q", "a"), time.Time{})
			mustFetch(t, b, "q", 1)
			mustEnqueue(t, b, msg("q", "p"), time.Time{})
			checkInvariants(t, b)
			c.breakIt(t, b)
			err := b.CheckInvariants(t.Context())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckInvariants = %v, want a violation %q", err, c.want)
			}
		})
	}
}

// TestCorruptTask checks that a task whose message cannot be decoded does
// not break Fetch for the others and can still be recovered, in either of
// the two forms of a task (lua/lib.lua's task_get).
func TestCorruptTask(t *testing.T) {
	for _, form := range []string{"string", "hash"} {
		t.Run(form, func(t *testing.T) {
			clock := clockwork.NewFakeClockAt(epoch)
			b := newTestBroker(t, clock)
			ctx := t.Context()
			mustEnqueue(t, b, msg("q", "bad"), time.Time{})
			mustEnqueue(t, b, msg("q", "good"), time.Time{})
			if form == "string" {
				redis(t, b, "SET", "htq:{q}:t:bad", "garbage")
			} else {
				setTaskFields(t, b, "htq:{q}:t:bad", "m", "garbage")
			}
			ls := mustFetch(t, b, "q", 10)
			if len(ls) != 1 || ls[0].Msg.ID != "good" {
				t.Fatalf("Fetch = %d leases, want only the good task", len(ls))
			}
			clock.Advance(time.Minute)
			exp, err := b.ExpiredLeases(ctx, "q", 10)
			if err != nil {
				t.Fatal(err)
			}
			var bad *broker.Lease
			for _, l := range exp {
				if l.Msg.ID == "bad" {
					bad = l
				}
			}
			if bad == nil {
				t.Fatal("the corrupt task is not among the expired leases")
			}
			if err := b.Archive(ctx, broker.ArchiveParams{Lease: bad.Ref(), ErrMsg: "corrupt", RequireExpired: true}); err != nil {
				t.Fatalf("Archive of the corrupt task: %v", err)
			}
			if _, err := b.GetTaskInfo(ctx, "q", "bad"); err == nil || !strings.Contains(err.Error(), "corrupt") {
				t.Errorf("GetTaskInfo of the corrupt task: %v, want a corrupt error", err)
			}
			checkInvariants(t, b)
		})
	}
}

// TestLeaseTokensUnique checks that no two fetches share a token, so that
// a task fetched again never gets a token it had before.
func TestLeaseTokensUnique(t *testing.T) {
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx := t.Context()
	seen := map[string]bool{}
	fetches := 0
	for i := range 50 {
		mustEnqueue(t, b, msg("q", fmt.Sprint(i)), time.Time{})
	}
	for range 3 {
		var round []*broker.Lease
		for len(round) < 50 {
			ls := mustFetch(t, b, "q", 7)
			if len(ls) == 0 {
				t.Fatalf("Fetch returned nothing after %d of 50 tasks", len(round))
			}
			round = append(round, ls...)
			fetches++
			if seen[ls[0].Token] {
				t.Fatalf("token %q granted by two fetches", ls[0].Token)
			}
			seen[ls[0].Token] = true
		}
		for _, l := range round {
			if !seen[l.Token] {
				t.Fatalf("task %s: token %q is not its fetch's", l.Msg.ID, l.Token)
			}
			if err := b.Requeue(ctx, l.Ref()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(seen) != fetches {
		t.Errorf("granted %d tokens in %d fetches, want one a fetch", len(seen), fetches)
	}
}

// TestClosedBroker checks the Redis-specific side of Close: the client is
// closed, a second Close is harmless and subscriptions end.
func TestClosedBroker(t *testing.T) {
	b := newTestBroker(t, nil)
	ch, err := b.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-ch:
		if ok {
			for range ch {
			}
		}
	case <-time.After(5 * time.Second):
		t.Fatal("subscription channel not closed by Close")
	}
	if _, err := b.Subscribe(t.Context()); !errors.Is(err, base.ErrStorageClosed) {
		t.Errorf("Subscribe after Close: %v", err)
	}
	if err := b.Ping(t.Context()); !errors.Is(err, base.ErrStorageClosed) {
		t.Errorf("Ping after Close: %v", err)
	}
}

// TestSubscribeResync kills the subscription's connection and expects one
// EventResync once it is back, then events again.
func TestSubscribeResync(t *testing.T) {
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := b.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	redis(t, b, "CLIENT", "KILL", "TYPE", "pubsub")
	want := func(kind broker.EventKind, q string) {
		t.Helper()
		timeout := time.After(5 * time.Second)
		for {
			select {
			case e, ok := <-ch:
				if !ok {
					t.Fatal("channel closed")
				}
				if e.Kind == kind && e.Queue == q {
					return
				}
			case <-timeout:
				t.Fatalf("no event %v %q", kind, q)
			}
		}
	}
	want(broker.EventResync, "")
	q := fmt.Sprintf("resync-%d", time.Now().UnixNano())
	mustEnqueue(t, b, msg(q, "a"), time.Time{})
	want(broker.EventReady, q)
	cancel()
	for range ch {
	}
}

func TestDecodeEvent(t *testing.T) {
	for in, want := range map[string]broker.Event{
		"r:default": {Kind: broker.EventReady, Queue: "default"},
		"s:a b":     {Kind: broker.EventScheduled, Queue: "a b"},
		"c:id:1":    {Kind: broker.EventCancel, TaskID: "id:1"},
		"d:q:id:1":  {Kind: broker.EventDone, Queue: "q", TaskID: "id:1"},
	} {
		if got, ok := decodeEvent(in); !ok || got != want {
			t.Errorf("decodeEvent(%q) = %v, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "r:", "x:q", "ready", "c:", "d:q", "d::x", "d:q:"} {
		if _, ok := decodeEvent(in); ok {
			t.Errorf("decodeEvent(%q) accepted", in)
		}
	}
}

// TestScriptsCompile loads every script into Redis.
func TestScriptsCompile(t *testing.T) {
	b := newTestBroker(t, nil)
	if err := b.loadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestOpenLoadsOnlyMissingScripts checks that Open loads the scripts a
// Redis does not hold yet, and no others: a SCRIPT LOAD of a cached script
// still costs Redis a SHA-1 of its whole source.
func TestOpenLoadsOnlyMissingScripts(t *testing.T) {
	rs := redistest.Start(t)
	all := len(allScripts) + len(adminScripts) + len(workflowScripts)
	loads := func() int {
		t.Helper()
		b := openThrough(t, rs.Addr)
		st, err := b.c.Do(t.Context(), b.c.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(st, "cmdstat_script|load:calls=")
		if !ok {
			return 0
		}
		n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		if err != nil {
			t.Fatal(err)
		}
		if err := b.c.Do(t.Context(), b.c.B().ConfigResetstat().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := loads(); n != all {
		t.Errorf("first Open on an empty Redis: %d SCRIPT LOADs, want %d", n, all)
	}
	if n := loads(); n != 0 {
		t.Errorf("Open with every script cached: %d SCRIPT LOADs, want 0", n)
	}
	b := openThrough(t, rs.Addr)
	if err := b.c.Do(t.Context(), b.c.B().ScriptFlush().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if n := loads(); n != all {
		t.Errorf("Open after SCRIPT FLUSH: %d SCRIPT LOADs, want %d", n, all)
	}
	// The scripts run after all that.
	mustEnqueue(t, b, msg("q", "a"), time.Time{})
	if got := mustFetch(t, b, "q", 1); len(got) != 1 {
		t.Fatalf("Fetch: %d tasks, want 1", len(got))
	}
}

// TestFetchObeysSettings checks the settings Fetch reads from the queue's
// settings hash (written by SetQueueSettings): max concurrency, rate limit
// and lease length.
func TestFetchObeysSettings(t *testing.T) {
	clock := clockwork.NewFakeClockAt(epoch)
	b := newTestBroker(t, clock)
	ctx := t.Context()
	for i := range 10 {
		mustEnqueue(t, b, msg("q", fmt.Sprint(i)), time.Time{})
	}
	redis(t, b, "HSET", "htq:{q}:settings", "mc", "3", "ld", "120000")
	ls := mustFetch(t, b, "q", 10)
	if len(ls) != 3 {
		t.Fatalf("Fetch with max concurrency 3: %d tasks", len(ls))
	}
	if ls[0].Duration != 2*time.Minute || !ls[0].Deadline.Equal(epoch.Add(2*time.Minute)) {
		t.Errorf("lease = %v until %v, want the queue's 2m", ls[0].Duration, ls[0].Deadline)
	}
	_, err := b.Fetch(ctx, broker.FetchParams{Queue: "q", Max: 1, LeaseDuration: time.Minute})
	var th *broker.ThrottledError
	if !errors.As(err, &th) || th.RetryIn <= 0 || th.Queue != "q" {
		t.Fatalf("Fetch at max concurrency: %v, want a ThrottledError", err)
	}
	if err := b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()})[0]; err != nil {
		t.Fatal(err)
	}
	if got := mustFetch(t, b, "q", 10); len(got) != 1 {
		t.Fatalf("Fetch after one completion: %d tasks, want 1", len(got))
	}

	// Rate limit: 2 tasks/s, burst 2.
	redis(t, b, "HDEL", "htq:{q}:settings", "mc")
	redis(t, b, "HSET", "htq:{q}:settings", "rl", "2", "rb", "2")
	if got := mustFetch(t, b, "q", 10); len(got) != 2 {
		t.Fatalf("Fetch with a full bucket of 2: %d tasks", len(got))
	}
	_, err = b.Fetch(ctx, broker.FetchParams{Queue: "q", Max: 1, LeaseDuration: time.Minute})
	if !errors.As(err, &th) || th.RetryIn != 500*time.Millisecond {
		t.Fatalf("Fetch with an empty bucket: %v, want a ThrottledError of 500ms", err)
	}
	clock.Advance(500 * time.Millisecond)
	if got := mustFetch(t, b, "q", 10); len(got) != 1 {
		t.Fatalf("Fetch 500ms later: %d tasks, want 1", len(got))
	}
	// A throttled queue with nothing pending is just empty.
	redis(t, b, "DEL", "htq:{q}:pending")
	redis(t, b, "HSET", "htq:{q}:settings", "tk", "0")
	if ls, err := b.Fetch(ctx, broker.FetchParams{Queue: "q", Max: 1, LeaseDuration: time.Minute}); err != nil || len(ls) != 0 {
		t.Fatalf("Fetch of an empty throttled queue: %v, %v", ls, err)
	}
}

// TestWatchedCompletion checks the hooks of watched tasks (field w, set
// by WatchTask): Complete publishes d:<queue>:<id> and keeps the task for
// broker.WatchGrace; Archive publishes too.
func TestWatchedCompletion(t *testing.T) {
	clock := clockwork.NewFakeClockAt(epoch)
	b := newTestBroker(t, clock)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	q := fmt.Sprintf("watch-%d", time.Now().UnixNano())
	events, err := b.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, b, msg(q, "a"), time.Time{})
	mustEnqueue(t, b, msg(q, "b"), time.Time{})
	ls := mustFetch(t, b, q, 2)
	// Watch both while active, as watch.lua does.
	for _, l := range ls {
		setTaskFields(t, b, "htq:{"+q+"}:t:"+l.Msg.ID, "w", "1")
		tok := redis(t, b, "HGET", "htq:{"+q+"}:leases", l.Msg.ID)[0]
		redis(t, b, "HSET", "htq:{"+q+"}:leases", l.Msg.ID, tok+"+")
	}
	if err := b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()})[0]; err != nil {
		t.Fatal(err)
	}
	if err := b.Archive(ctx, broker.ArchiveParams{Lease: ls[1].Ref(), ErrMsg: "x"}); err != nil {
		t.Fatal(err)
	}
	done := map[string]bool{}
	timeout := time.After(5 * time.Second)
	for len(done) < 2 {
		select {
		case e := <-events:
			if e.Kind == broker.EventDone && e.Queue == q {
				done[e.TaskID] = true
			}
		case <-timeout:
			t.Fatalf("done events for %v only", done)
		}
	}
	ti, err := b.GetTaskInfo(ctx, q, ls[0].Msg.ID)
	if err != nil || ti.State != base.StateCompleted {
		t.Fatalf("watched task after Complete: %+v, %v; want completed", ti, err)
	}
	clock.Advance(broker.WatchGrace)
	if n, err := b.DeleteExpiredCompleted(ctx, q, 10); err != nil || n != 1 {
		t.Fatalf("DeleteExpiredCompleted after the grace: %d, %v", n, err)
	}
	checkInvariants(t, b)
}

// TestInvariantsWithAggregationSets checks that tasks taken from their
// group into an aggregation set count as aggregating in that set.
func TestInvariantsWithAggregationSets(t *testing.T) {
	clock := clockwork.NewFakeClockAt(epoch)
	b := newTestBroker(t, clock)
	ctx := t.Context()
	for i := range 3 {
		m := msg("q", fmt.Sprint(i))
		m.GroupKey = "g"
		mustEnqueue(t, b, m, time.Time{})
	}
	a, err := b.TakeGroup(ctx, broker.TakeGroupParams{Queue: "q", Group: "g", MaxSize: 2, Lease: time.Minute})
	if err != nil || a == nil || len(a.Msgs) != 2 {
		t.Fatalf("TakeGroup = %+v, %v; want 2 tasks", a, err)
	}
	checkInvariants(t, b)
	set := a.SetID
	redis(t, b, "HDEL", "htq:{q}:agg:"+set, "i:"+a.Msgs[0].ID)
	if err := b.CheckInvariants(ctx); err == nil || !strings.Contains(err.Error(), "task "+a.Msgs[0].ID+" (state 7) is in no structure") {
		t.Fatalf("CheckInvariants after losing a set member = %v", err)
	}
}
