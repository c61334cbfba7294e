package rdb

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// groupKeys returns how many of a queue's lease-group keys exist: the
// counts hash, fetch records, and lease groups' members of the active
// zset.
func groupKeys(t *testing.T, b *Broker, q string) (counts, records, members int) {
	t.Helper()
	k := newQueueKeys(q)
	if redis(t, b, "EXISTS", k.fetchN)[0] == "1" {
		counts = 1
	}
	records = len(redis(t, b, "KEYS", "htq:{"+q+"}:fetch:*"))
	for _, m := range redis(t, b, "ZRANGE", k.active, "0", "-1") {
		if m != "" && m[0] == 2 {
			members++
		}
	}
	return counts, records, members
}

// wantGroupKeys fails unless queue q has counts, records and members
// lease-group keys (groupKeys) when, a moment of the test.
func wantGroupKeys(t *testing.T, b *Broker, q, when string, counts, records, members int) {
	t.Helper()
	if c, r, m := groupKeys(t, b, q); c != counts || r != records || m != members {
		t.Fatalf("%s: counts hash %d, records %d, group members %d; want %d, %d, %d", when, c, r, m, counts, records, members)
	}
}

// TestLeaseGroupLeavesNothing completes a fetch of 130 tasks (some of
// which Complete must read) in several calls, with the leases of another
// fetch between them: once every lease has ended, no group member, record
// or count is left, and the active zset is gone.
func TestLeaseGroupLeavesNothing(t *testing.T) {
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	for i := range 135 {
		m := msg("q", fmt.Sprint("t", i))
		if i%7 == 0 {
			m.Retention = time.Hour
		}
		mustEnqueue(t, b, m, time.Time{})
	}
	ls := mustFetch(t, b, "q", 130)
	other := mustFetch(t, b, "q", 10)
	if len(ls) != 130 || len(other) != 5 {
		t.Fatalf("Fetch = %d and %d leases, want 130 and 5", len(ls), len(other))
	}
	wantGroupKeys(t, b, "q", "after two fetches", 1, 2, 2)
	k := newQueueKeys("q")
	if n := redis(t, b, "ZCARD", k.active)[0]; n != "2" {
		t.Fatalf("active zset holds %s members, want 2 (one a fetch)", n)
	}
	parts := [][]*broker.Lease{ls[:50], append(slices.Clone(ls[50:51]), other[:2]...), ls[51:129]}
	for _, p := range parts {
		completeAll(t, b, p)
		checkInvariants(t, b)
	}
	wantGroupKeys(t, b, "q", "with one lease of each fetch left", 1, 2, 2)
	completeAll(t, b, append(slices.Clone(ls[129:]), other[2:]...))
	wantGroupKeys(t, b, "q", "after every lease ended", 0, 0, 0)
	if n := redis(t, b, "EXISTS", k.active, k.leases)[0]; n != "0" {
		t.Errorf("active zset and leases hash: %s exist after every lease ended, want 0", n)
	}
	checkInvariants(t, b)
}

// TestLeaseGroupWithoutRecord checks recovery's fallback: a group whose
// record is gone (no script leaves one so; a leak must not lose tasks) has
// its expired leases found in the leases hash, each recovered once, and
// the group is dropped with its last lease.
func TestLeaseGroupWithoutRecord(t *testing.T) {
	clock := clockwork.NewFakeClockAt(epoch)
	b := newTestBroker(t, clock)
	ctx := t.Context()
	for i := range 5 {
		mustEnqueue(t, b, msg("q", fmt.Sprint("t", i)), time.Time{})
	}
	ls := mustFetch(t, b, "q", 5)
	completeAll(t, b, ls[:1])
	redis(t, b, "DEL", newQueueKeys("q").fetch+ls[0].Token)
	clock.Advance(31 * time.Second)
	var got []string
	for range 3 {
		exp, err := b.ExpiredLeases(ctx, "q", 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range exp {
			if l.Token != ls[0].Token {
				t.Errorf("expired lease of %s has token %q, want the fetch's %q", l.Msg.ID, l.Token, ls[0].Token)
			}
			if err := b.Retry(ctx, broker.RetryParams{Lease: l.Ref(), Delay: time.Hour, ErrMsg: "lease expired", IsFailure: true, RequireExpired: true}); err != nil {
				t.Fatalf("Retry %s: %v", l.Msg.ID, err)
			}
			got = append(got, l.Msg.ID)
		}
	}
	slices.Sort(got)
	if want := []string{"t1", "t2", "t3", "t4"}; !slices.Equal(got, want) {
		t.Fatalf("recovered %v, want %v once each", got, want)
	}
	wantGroupKeys(t, b, "q", "after recovery", 0, 0, 0)
	checkInvariants(t, b)
}

// TestLeasesOfThePreviousLayout writes, by hand, leases as the version
// before lease groups left them (one active-zset member per task, a token
// "<server ID>/<random>.<n>" per task, '+' for a task Complete must read,
// a fetch record with an expiry, no count) beside a fetch of this version,
// and checks that every operation on them works by the old rules: the
// Inspector's deadline and list, Complete, ExtendLeases, Requeue, expiry
// and recovery.
func TestLeasesOfThePreviousLayout(t *testing.T) {
	clock := clockwork.NewFakeClockAt(epoch)
	b := newTestBroker(t, clock)
	ctx := t.Context()
	k := newQueueKeys("q")
	ids := []string{"a", "b", "d", "e"}
	for _, id := range ids {
		m := msg("q", id)
		if id == "b" {
			m.Retention = time.Hour // a hash; its lease is marked '+'
		}
		mustEnqueue(t, b, m, time.Time{})
	}
	// The previous version's fetch of a, b, d, e.
	prefix := "oldworker/k3j9x0q2m8v5t1r7k3j9x0q2m8v5t1r7k3j9x0q2m8v5t1r7k3j9x0q."
	deadline := epoch.Add(30 * time.Second).UnixMilli()
	old := map[string]broker.LeaseRef{}
	for i, id := range ids {
		if got := redis(t, b, "RPOP", k.pending); len(got) != 1 || got[0] != id {
			t.Fatalf("RPOP = %v, want %s", got, id)
		}
		tok := prefix + fmt.Sprint(i+1)
		held := tok
		if id == "b" {
			held += "+"
		}
		redis(t, b, "ZADD", k.active, fmt.Sprint(deadline), id)
		redis(t, b, "HSET", k.leases, id, held)
		old[id] = broker.LeaseRef{Queue: "q", ID: id, Token: tok}
	}
	redis(t, b, "SET", k.fetch+prefix, "1111\na\nb\nd\ne", "PX", "30000")
	checkInvariants(t, b)

	// A fetch of this version beside them.
	clock.Advance(5 * time.Second)
	for _, id := range []string{"n1", "n2"} {
		mustEnqueue(t, b, msg("q", id), time.Time{})
	}
	cur := mustFetch(t, b, "q", 10)
	if len(cur) != 2 {
		t.Fatalf("Fetch = %d leases, want n1 and n2", len(cur))
	}
	ti, err := b.GetTaskInfo(ctx, "q", "d")
	if err != nil || !ti.LeaseDeadline.Equal(time.UnixMilli(deadline)) {
		t.Fatalf("GetTaskInfo(d) = %v, %v; want the previous version's deadline %v", ti, err, time.UnixMilli(deadline))
	}
	list, err := b.ListTasks(ctx, broker.ListParams{Queue: "q", State: base.StateActive, Limit: 10})
	if err != nil || len(list) != 6 {
		t.Fatalf("ListTasks(active) = %d tasks, %v; want 6", len(list), err)
	}
	if list[0].Message.ID != "a" || list[5].Message.ID != "n2" && list[5].Message.ID != "n1" {
		t.Errorf("ListTasks(active) starts with %s and ends with %s; want the earliest deadline first", list[0].Message.ID, list[5].Message.ID)
	}

	// Complete a, b (old) and n1 in one call.
	for i, err := range b.Complete(ctx, []broker.LeaseRef{old["a"], old["b"], cur[0].Ref()}) {
		if err != nil {
			t.Fatalf("Complete %d: %v", i, err)
		}
	}
	if ti, err := b.GetTaskInfo(ctx, "q", "b"); err != nil || ti.State != base.StateCompleted {
		t.Fatalf("task b after Complete: %v, %v; want completed (kept for its retention)", ti, err)
	}
	checkInvariants(t, b)
	// Extend d (old) and n2 (the last lease of its group) by a minute.
	lost, err := b.ExtendLeases(ctx, "q", []broker.LeaseRef{old["d"], cur[1].Ref()}, time.Minute)
	if err != nil || len(lost) != 0 {
		t.Fatalf("ExtendLeases = lost %v, %v", lost, err)
	}
	if err := b.Requeue(ctx, old["e"]); err != nil {
		t.Fatalf("Requeue(e, old token): %v", err)
	}
	checkInvariants(t, b)
	clock.Advance(31 * time.Second) // past both first deadlines, before the extended ones
	if exp, err := b.ExpiredLeases(ctx, "q", 10); err != nil || len(exp) != 0 {
		t.Fatalf("ExpiredLeases = %d, %v; want none before the extended deadlines", len(exp), err)
	}
	clock.Advance(30 * time.Second)
	exp, err := b.ExpiredLeases(ctx, "q", 10)
	if err != nil || len(exp) != 2 {
		t.Fatalf("ExpiredLeases = %d, %v; want d and n2", len(exp), err)
	}
	for _, l := range exp {
		if want := map[string]string{"d": old["d"].Token, "n2": cur[1].Token}[l.Msg.ID]; l.Token != want {
			t.Errorf("expired lease of %s has token %q, want %q", l.Msg.ID, l.Token, want)
		}
		if err := b.Retry(ctx, broker.RetryParams{Lease: l.Ref(), Delay: time.Hour, ErrMsg: "lease expired", IsFailure: true, RequireExpired: true}); err != nil {
			t.Fatalf("Retry %s: %v", l.Msg.ID, err)
		}
	}
	if errs := b.Complete(ctx, []broker.LeaseRef{old["d"]}); !errors.Is(errs[0], base.ErrLeaseLost) {
		t.Errorf("Complete(d) after its recovery: %v, want ErrLeaseLost", errs[0])
	}
	if n := redis(t, b, "EXISTS", k.active, k.leases, k.fetchN)[0]; n != "0" {
		t.Errorf("active zset, leases and counts: %s exist after every lease ended, want 0", n)
	}
	checkInvariants(t, b)
	// e was requeued: fetched again under this version's rules.
	again := mustFetch(t, b, "q", 10)
	if len(again) != 1 || again[0].Msg.ID != "e" {
		t.Fatalf("Fetch after the requeue = %v, want e", again)
	}
	completeAll(t, b, again)
	checkInvariants(t, b)
}
