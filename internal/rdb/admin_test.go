package rdb

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// TestAdminScripts loads every script of the management operations into
// Redis (TestScriptHeaders checks their headers with the others').
func TestAdminScripts(t *testing.T) {
	b := newTestBroker(t, nil)
	for _, s := range adminScripts {
		if err := b.c.Do(t.Context(), b.c.B().ScriptLoad().Script(s.src).Build()).Error(); err != nil {
			t.Errorf("%s.lua: %v", s.name, err)
		}
	}
}

// TestDeleteQueueLeavesNoKey deletes a queue holding every kind of key and
// checks that no key of its hash tag is left, nor its name in htq:queues.
func TestDeleteQueueLeavesNoKey(t *testing.T) {
	clock := clockwork.NewFakeClockAt(epoch)
	b := newTestBroker(t, clock)
	ctx := t.Context()
	mustEnqueue(t, b, msg("other", "x"), time.Time{})
	for i := range 3 {
		m := msg("q", fmt.Sprint("u", i))
		m.UniqueKey, m.UniqueTTL, m.Retention = fmt.Sprint("key", i), time.Hour, time.Hour
		mustEnqueue(t, b, m, time.Time{})
	}
	ls := mustFetch(t, b, "q", 3)
	if err := b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()})[0]; err != nil {
		t.Fatal(err)
	}
	if err := b.Retry(ctx, broker.RetryParams{Lease: ls[1].Ref(), Delay: time.Hour, ErrMsg: "x", IsFailure: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.Archive(ctx, broker.ArchiveParams{Lease: ls[2].Ref(), ErrMsg: "x"}); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, b, msg("q", "later"), epoch.Add(time.Hour))
	for i := range 4 {
		m := msg("q", fmt.Sprint("g", i))
		m.GroupKey = fmt.Sprint("grp", i%2)
		mustEnqueue(t, b, m, time.Time{})
	}
	if _, err := b.TakeGroup(ctx, broker.TakeGroupParams{Queue: "q", Group: "grp0", MaxSize: 5, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, b, msg("q", "p"), time.Time{})
	if _, err := b.WatchTask(ctx, "q", "p"); err != nil {
		t.Fatal(err)
	}
	if err := b.SetQueueSettings(ctx, "q", broker.QueueSettings{MaxConcurrency: 3, RateLimit: 5}); err != nil {
		t.Fatal(err)
	}
	mustFetch(t, b, "q", 1) // fills the rate limit's bucket fields
	if _, err := b.QueueStats(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteQueue(ctx, "q", true); !errors.Is(err, base.ErrQueueNotEmpty) {
		t.Fatalf("DeleteQueue with an active task: %v", err)
	}
	for _, l := range mustActive(t, b, "q") {
		if err := b.Complete(ctx, []broker.LeaseRef{l})[0]; err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(48 * time.Hour) // counters of several days
	if err := b.DeleteQueue(ctx, "q", true); err != nil {
		t.Fatalf("DeleteQueue: %v", err)
	}
	if keys := redis(t, b, "KEYS", "htq:{q}:*"); len(keys) != 0 {
		t.Errorf("keys left after DeleteQueue: %v", keys)
	}
	if qs := redis(t, b, "SMEMBERS", "htq:queues"); !slices.Equal(qs, []string{"other"}) {
		t.Errorf("htq:queues = %v, want other", qs)
	}
	checkInvariants(t, b)
}

// mustActive returns the lease references of every active task of q, read
// from the leases hash (without the '+' flag).
func mustActive(t *testing.T, b *Broker, q string) []broker.LeaseRef {
	t.Helper()
	var refs []broker.LeaseRef
	for id, tok := range hgetall(t, b, "htq:{"+q+"}:leases") {
		refs = append(refs, broker.LeaseRef{Queue: q, ID: id, Token: strings.TrimSuffix(tok, "+")})
	}
	return refs
}

// hgetall returns the fields of hash key.
func hgetall(t *testing.T, b *Broker, key string) map[string]string {
	t.Helper()
	m, err := b.c.Do(t.Context(), b.c.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", key, err)
	}
	return m
}

// TestRefusedAdminWritesChangeNothing checks that refused management
// operations leave every key as it was.
func TestRefusedAdminWritesChangeNothing(t *testing.T) {
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx := t.Context()
	for _, id := range []string{"a", "b", "c"} {
		mustEnqueue(t, b, msg("q", id), time.Time{})
	}
	mustFetch(t, b, "q", 1) // a is active
	m := msg("q", "r")
	m.Retention = time.Hour
	mustEnqueue(t, b, m, time.Time{})
	g := msg("q", "g")
	g.GroupKey = "grp"
	mustEnqueue(t, b, g, time.Time{})
	g2 := msg("q", "g2")
	g2.GroupKey = "grp"
	mustEnqueue(t, b, g2, time.Time{})
	agg, err := b.TakeGroup(ctx, broker.TakeGroupParams{Queue: "q", Group: "grp", MaxSize: 1, GracePeriod: time.Hour, Lease: time.Minute})
	if err != nil || agg == nil {
		t.Fatalf("TakeGroup: %v, %v", agg, err)
	}
	before := snapshot(t, b)
	stale := *agg
	stale.Token = "x"
	checks := map[string]struct {
		err  error
		want error
	}{
		"RunTask pending":          {b.RunTask(ctx, "q", "b"), base.ErrWrongState},
		"RunTask active":           {b.RunTask(ctx, "q", "a"), base.ErrWrongState},
		"RunTask taken":            {b.RunTask(ctx, "q", "g"), base.ErrWrongState},
		"RunTask missing":          {b.RunTask(ctx, "q", "zz"), base.ErrTaskNotFound},
		"ArchiveTask active":       {b.ArchiveTask(ctx, "q", "a"), base.ErrWrongState},
		"ArchiveTask taken":        {b.ArchiveTask(ctx, "q", "g"), base.ErrWrongState},
		"ArchiveTask missing":      {b.ArchiveTask(ctx, "q", "zz"), base.ErrTaskNotFound},
		"DeleteQueue":              {b.DeleteQueue(ctx, "q", false), base.ErrQueueNotEmpty},
		"DeleteQueue forced":       {b.DeleteQueue(ctx, "q", true), base.ErrQueueNotEmpty},
		"FinishAggregation stale":  {b.FinishAggregation(ctx, &stale, msg("q", "new")), base.ErrLeaseLost},
		"FinishAggregation ID":     {b.FinishAggregation(ctx, agg, msg("q", "b")), base.ErrTaskIDConflict},
		"SetQueueSettings invalid": {b.SetQueueSettings(ctx, "q", broker.QueueSettings{MaxConcurrency: -1}), base.ErrInvalidArgument},
	}
	for op, c := range checks {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", op, c.err, c.want)
		}
	}
	if n, err := b.RunAll(ctx, "q", base.StatePending, ""); !errors.Is(err, base.ErrWrongState) || n != 0 {
		t.Errorf("RunAll pending: %d, %v", n, err)
	}
	if after := snapshot(t, b); !maps.Equal(before, after) {
		t.Errorf("refused operations changed keys")
	}
	checkInvariants(t, b)
}

// TestAdminOnRedisTime runs time-dependent management operations on Redis
// TIME (no Options.Clock), as production does.
func TestAdminOnRedisTime(t *testing.T) {
	b := newTestBroker(t, nil)
	ctx := t.Context()
	mustEnqueue(t, b, msg("q", "a"), time.Time{})
	st, err := b.QueueStats(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(st.Now); d < -time.Second || d > time.Second {
		t.Errorf("QueueStats.Now = %v, %v from the local clock", st.Now, d)
	}
	if st.MemoryBytes <= 0 {
		t.Errorf("MemoryBytes = %d", st.MemoryBytes)
	}
	if d := st.Now.Sub(st.OldestPending); d < 0 || d > time.Second {
		t.Errorf("OldestPending = %v, Now = %v", st.OldestPending, st.Now)
	}
	days, err := b.History(ctx, "q", 2)
	if err != nil || len(days) != 2 || !days[0].Date.Equal(st.Now.UTC().Truncate(24*time.Hour)) {
		t.Errorf("History = %v, %v", days, err)
	}
	tick := time.Now().Truncate(time.Second)
	for i, want := range []bool{true, false} {
		ok, err := b.ClaimTick(ctx, "e", tick, time.Minute)
		if err != nil || ok != want {
			t.Errorf("ClaimTick %d = %v, %v; want %v", i, ok, err, want)
		}
	}
	if ttl := redis(t, b, "PTTL", claimKey("e", tick.UnixMilli())); len(ttl) != 1 || ttl[0] == "-1" || ttl[0] == "-2" {
		t.Errorf("claim PTTL = %v, want a ttl", ttl)
	}
	if err := b.SetQueueSettings(ctx, "q", broker.QueueSettings{RateLimit: 1000, RateBurst: 1}); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, b, msg("q", "b"), time.Time{})
	ls, err := b.Fetch(ctx, broker.FetchParams{Queue: "q", Max: 5, LeaseDuration: time.Minute})
	if err != nil || len(ls) != 1 {
		t.Fatalf("Fetch at 1000/s, burst 1: %d, %v", len(ls), err)
	}
	g := msg("q", "g")
	g.GroupKey = "grp"
	mustEnqueue(t, b, g, time.Time{})
	agg, err := b.TakeGroup(ctx, broker.TakeGroupParams{Queue: "q", Group: "grp", MaxSize: 10, Lease: time.Minute})
	if err != nil || agg == nil || len(agg.Msgs) != 1 {
		t.Fatalf("TakeGroup with no grace period: %v, %v", agg, err)
	}
	if err := b.FinishAggregation(ctx, agg, msg("q", "agg")); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, b)
}

// TestAggregationSetLayout checks the stored form of an aggregation set
// (docs/redis-layout.md).
func TestAggregationSetLayout(t *testing.T) {
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	for _, id := range []string{"a", "b"} {
		m := msg("q", id)
		m.GroupKey = "grp"
		mustEnqueue(t, b, m, time.Time{})
	}
	agg, err := b.TakeGroup(t.Context(), broker.TakeGroupParams{Queue: "q", Group: "grp", MaxSize: 2, Lease: time.Minute})
	if err != nil || agg == nil {
		t.Fatalf("TakeGroup: %v, %v", agg, err)
	}
	gotMap := hgetall(t, b, "htq:{q}:agg:"+agg.SetID)
	want := map[string]string{"t": agg.Token, "g": "grp", "i:a": fmt.Sprint(epoch.UnixMilli()), "i:b": fmt.Sprint(epoch.UnixMilli())}
	if !maps.Equal(gotMap, want) {
		t.Errorf("aggregation set = %v, want %v", gotMap, want)
	}
	if score := redis(t, b, "ZSCORE", "htq:{q}:aggs", agg.SetID); len(score) != 1 || score[0] != fmt.Sprint(epoch.Add(time.Minute).UnixMilli()) {
		t.Errorf("aggs score = %v, want the lease deadline", score)
	}
	if s := redis(t, b, "HGET", "htq:{q}:t:a", "s"); len(s) != 1 || s[0] != "7" {
		t.Errorf("taken task's s = %v, want 7", s)
	}
	checkInvariants(t, b)
}

// TestAdminKeysShareHashTag checks the management keys of a queue, as
// TestQueueKeysShareHashTag does for the others.
func TestAdminKeysShareHashTag(t *testing.T) {
	for _, q := range []string{"default", "with space", "glob*?[x]\\"} {
		k, err := queueKeysFor(q)
		if err != nil {
			t.Fatal(err)
		}
		ak := k.adminKeys()
		for _, key := range []string{ak.aggs, ak.agg + "set{1}"} {
			if got := hashTag(key); got != q || !strings.HasPrefix(key, "htq:{") {
				t.Errorf("queue %q: key %q hashes on %q", q, key, got)
			}
		}
	}
}
