package rdb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/redistest"
)

// openThrough opens a Broker on db 0 of the Redis at addr.
func openThrough(t *testing.T, addr string) *Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := Open(ctx, "redis://"+addr+"/0?timeout=2s", Options{})
	if err != nil {
		t.Fatalf("Open %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// brokersAroundProxy starts a redis-server and a loopback proxy in front
// of it, and returns the proxy, a Broker connected directly and one
// connected through the proxy.
func brokersAroundProxy(t *testing.T) (px *redistest.Proxy, direct, through *Broker) {
	t.Helper()
	rs := redistest.Start(t)
	px = redistest.StartProxy(t, rs.Addr)
	return px, openThrough(t, rs.Addr), openThrough(t, px.Addr)
}

// enqueueN enqueues n tasks t0 … t<n-1> into queue q through b, each with
// MaxRetry maxRetry, and returns their IDs.
func enqueueN(t *testing.T, b *Broker, n, maxRetry int) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for i := range n {
		m := msg("q", fmt.Sprint("t", i))
		m.MaxRetry = maxRetry
		mustEnqueue(t, b, m, time.Time{})
		ids = append(ids, m.ID)
	}
	return ids
}

func leaseIDs(ls []*broker.Lease) []string {
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = l.Msg.ID
	}
	slices.Sort(ids)
	return ids
}

// A fetch whose script ran on Redis but whose reply was lost (the
// connection broke after the request) leaves its tasks leased to a token
// nobody holds. The next Fetch of the queue calls with the same token
// prefix and gets exactly those tasks, their leases renewed: they run
// once, are completed, and no lease expires (MaxRetry 0 would archive a
// task that never ran).
func TestFetchWhoseReplyWasLost(t *testing.T) {
	px, direct, b := brokersAroundProxy(t)
	ctx := t.Context()
	want := enqueueN(t, direct, 5, 0)
	p := broker.FetchParams{Queue: "q", Max: 10, LeaseDuration: 30 * time.Second, ServerID: "s1"}

	dropped := px.DropNextReply()
	ls, err := b.Fetch(ctx, p)
	select {
	case <-dropped:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy dropped no reply")
	}
	if err == nil {
		t.Fatalf("Fetch whose reply was dropped = %d leases, nil error; want an error", len(ls))
	}
	if n := redis(t, direct, "HLEN", "htq:{q}:leases"); n[0] != "5" {
		t.Fatalf("leases after the lost fetch: %v, want 5 (the script ran)", n)
	}
	group := "\x02" + redis(t, direct, "HGET", "htq:{q}:leases", "t0")[0]
	before := redis(t, direct, "ZSCORE", "htq:{q}:active", group)

	time.Sleep(5 * time.Millisecond) // a renewed deadline is a later one
	ls, err = b.Fetch(ctx, p)
	if err != nil {
		t.Fatalf("Fetch after the lost one: %v", err)
	}
	if got := leaseIDs(ls); !slices.Equal(got, want) {
		t.Fatalf("Fetch after the lost one = %v, want the tasks of the lost reply %v", got, want)
	}
	after := redis(t, direct, "ZSCORE", "htq:{q}:active", group)
	if len(after) != 1 || len(before) != 1 || after[0] <= before[0] {
		t.Errorf("active zset before %v, after the second fetch %v: want the lease group's deadline renewed", before, after)
	}
	if more, err := b.Fetch(ctx, p); err != nil || len(more) != 0 {
		t.Errorf("third Fetch = %d leases, %v; want none (each task handed out once)", len(more), err)
	}
	completeAll(t, b, ls)
	if exp, err := direct.ExpiredLeases(ctx, "q", 100); err != nil || len(exp) != 0 {
		t.Errorf("ExpiredLeases = %d, %v; want none", len(exp), err)
	}
	info, err := direct.QueueStats(ctx, "q")
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	if info.ProcessedTotal != 5 || info.FailedTotal != 0 || info.Archived != 0 || info.Active != 0 {
		t.Errorf("stats after completing: processed %d failed %d archived %d active %d; want 5 0 0 0",
			info.ProcessedTotal, info.FailedTotal, info.Archived, info.Active)
	}
	checkInvariants(t, direct)
}

// A fetch cut off before Redis saw it leaves its prefix for the next
// Fetch, which finds no record and leases afresh; so does a prefix whose
// record names no task it still holds.
func TestFetchAgainWithoutRecordLeasesAfresh(t *testing.T) {
	px, direct, b := brokersAroundProxy(t)
	ctx := t.Context()
	p := broker.FetchParams{Queue: "q", Max: 10, LeaseDuration: 30 * time.Second, ServerID: "s1"}
	mustEnqueue(t, direct, msg("q", "a"), time.Time{})

	px.Cut()
	if _, err := b.Fetch(ctx, p); err == nil {
		t.Fatal("Fetch through a cut connection succeeded")
	}
	px.Restore()
	k, _ := b.keys("q")
	if k.refetchN.Load() != 1 {
		t.Fatal("a fetch that failed with the connection did not keep its prefix")
	}
	ls, err := b.Fetch(ctx, p)
	if err != nil || len(ls) != 1 || ls[0].Msg.ID != "a" {
		t.Fatalf("Fetch again = %v, %v; want task a leased afresh", ls, err)
	}

	// A record whose task was completed meanwhile: the same prefix leases
	// the next pending task.
	refs := []broker.LeaseRef{ls[0].Ref()}
	if errs := b.Complete(ctx, refs); errs[0] != nil {
		t.Fatalf("Complete: %v", errs[0])
	}
	mustEnqueue(t, direct, msg("q", "b"), time.Time{})
	k.keepRefetch(ls[0].Token)
	ls, err = b.Fetch(ctx, p)
	if err != nil || len(ls) != 1 || ls[0].Msg.ID != "b" {
		t.Fatalf("Fetch with a spent record = %v, %v; want task b", ls, err)
	}
	if errs := b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()}); errs[0] != nil {
		t.Fatalf("Complete b: %v", errs[0])
	}
	if _, err := direct.GetTaskInfo(ctx, "q", "b"); !errors.Is(err, base.ErrTaskNotFound) {
		t.Errorf("task b after its completion: %v, want not found", err)
	}
}

// A fetch again with a smaller Max than the lost one hands out at most Max
// of its tasks per call, each once, and the rest on the next calls.
func TestFetchAgainHonoursMax(t *testing.T) {
	px, direct, b := brokersAroundProxy(t)
	ctx := t.Context()
	want := enqueueN(t, direct, 5, 3)
	p := broker.FetchParams{Queue: "q", Max: 10, LeaseDuration: 30 * time.Second, ServerID: "s1"}
	dropped := px.DropNextReply()
	if ls, err := b.Fetch(ctx, p); err == nil {
		t.Fatalf("Fetch whose reply was dropped = %d leases, nil error; want an error", len(ls))
	}
	<-dropped
	mustEnqueue(t, direct, msg("q", "later"), time.Time{})
	p.Max = 2
	var got []*broker.Lease
	for range 3 {
		ls, err := b.Fetch(ctx, p)
		if err != nil || len(ls) == 0 || len(ls) > 2 {
			t.Fatalf("Fetch again with Max 2 = %d leases, %v; want 1 or 2", len(ls), err)
		}
		got = append(got, ls...)
	}
	if ids := leaseIDs(got); !slices.Equal(ids, want) {
		t.Fatalf("three fetches again with Max 2 = %v, want the tasks of the lost reply %v once each", ids, want)
	}
	ls, err := b.Fetch(ctx, p)
	if err != nil || len(ls) != 1 || ls[0].Msg.ID != "later" {
		t.Fatalf("the next Fetch = %d leases, %v; want the task enqueued later", len(ls), err)
	}
	for i, err := range b.Complete(ctx, []broker.LeaseRef{got[0].Ref(), got[1].Ref(), got[2].Ref(), got[3].Ref(), got[4].Ref(), ls[0].Ref()}) {
		if err != nil {
			t.Errorf("Complete %d: %v", i, err)
		}
	}
	checkInvariants(t, direct)
}
