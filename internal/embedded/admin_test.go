package embedded

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// adminFixture is a file broker on a fake clock with helpers that fail the
// test on error.
type adminFixture struct {
	t     *testing.T
	dir   string
	clock *clockwork.FakeClock
	b     *Broker
}

func newAdminFixture(t *testing.T) *adminFixture {
	f := &adminFixture{t: t, dir: t.TempDir(), clock: clockwork.NewFakeClockAt(time.Date(2031, 3, 14, 15, 9, 26, 0, time.UTC))}
	f.open()
	t.Cleanup(func() {
		if err := f.b.CheckInvariants(context.Background()); err != nil && !errors.Is(err, base.ErrStorageClosed) {
			t.Error(err)
		}
		_ = f.b.Close()
	})
	return f
}

func (f *adminFixture) open() {
	b, err := Open(f.t.Context(), f.dir, Options{Clock: f.clock, Logger: discardLogger()})
	if err != nil {
		f.t.Fatal(err)
	}
	f.b = b
}

func (f *adminFixture) reopen() {
	f.t.Helper()
	if err := f.b.Close(); err != nil {
		f.t.Fatal(err)
	}
	f.open()
}

func (f *adminFixture) enqueue(queue, id string, mutate ...func(*base.TaskMessage)) {
	f.t.Helper()
	m := &base.TaskMessage{ID: id, Type: "t", Queue: queue, Payload: []byte(id), MaxRetry: 3}
	for _, fn := range mutate {
		fn(m)
	}
	if err := f.b.Enqueue(f.t.Context(), broker.EnqueueParams{Msg: m}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *adminFixture) fetch(queue string, max int) ([]*broker.Lease, error) {
	return f.b.Fetch(f.t.Context(), broker.FetchParams{Queue: queue, Max: max, LeaseDuration: time.Minute})
}

func (f *adminFixture) stats(queue string) *broker.QueueStats {
	f.t.Helper()
	st, err := f.b.QueueStats(f.t.Context(), queue)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

func ids(infos []*base.TaskInfo) string {
	s := ""
	for _, ti := range infos {
		s += ti.Message.ID + " "
	}
	return s
}

func TestAdminPauseSettingsAndCountersSurviveReopen(t *testing.T) {
	f := newAdminFixture(t)
	ctx := t.Context()
	if _, err := f.b.QueueStats(ctx, "q"); !errors.Is(err, base.ErrQueueNotFound) {
		t.Fatalf("QueueStats of an unknown queue: %v", err)
	}
	if err := f.b.PauseQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	f.enqueue("q", "a")
	if ls, _ := f.fetch("q", 1); len(ls) != 0 {
		t.Fatal("fetched from a paused queue")
	}
	s := broker.QueueSettings{MaxConcurrency: 1, RateLimit: 2, RateBurst: 3, LeaseDuration: time.Hour}
	if err := f.b.SetQueueSettings(ctx, "q", s); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	st := f.stats("q")
	if !st.Paused || st.Settings != s || st.Pending != 1 {
		t.Fatalf("after reopen: paused %v settings %+v pending %d", st.Paused, st.Settings, st.Pending)
	}
	ch, err := f.b.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.b.UnpauseQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; ev.Kind != broker.EventReady || ev.Queue != "q" {
		t.Fatalf("unpause sent %+v", ev)
	}
	f.enqueue("q", "b")
	ls, err := f.fetch("q", 5)
	if err != nil || len(ls) != 1 || ls[0].Duration != time.Hour {
		t.Fatalf("fetch under MaxConcurrency 1: %v, %d leases", err, len(ls))
	}
	var th *broker.ThrottledError
	if _, err := f.fetch("q", 5); !errors.As(err, &th) || th.RetryIn <= 0 {
		t.Fatalf("fetch at max concurrency: %v, want ThrottledError", err)
	}
	if errs := f.b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	f.reopen()
	st = f.stats("q")
	if st.Processed != 1 || st.ProcessedTotal != 1 || st.Failed != 0 {
		t.Fatalf("counters after reopen: %+v", st)
	}
	h, err := f.b.History(ctx, "q", 2)
	if err != nil || len(h) != 2 || h[0].Processed != 1 || !h[0].Date.Equal(time.Date(2031, 3, 14, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("History: %+v, %v", h, err)
	}
	if qs, _ := f.b.Queues(ctx); fmt.Sprint(qs) != "[q]" {
		t.Fatalf("Queues: %v", qs)
	}
	if err := f.b.DeleteQueue(ctx, "q", false); !errors.Is(err, base.ErrQueueNotEmpty) {
		t.Fatalf("DeleteQueue without force: %v", err)
	}
	if err := f.b.DeleteQueue(ctx, "q", true); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	if _, err := f.b.QueueStats(ctx, "q"); !errors.Is(err, base.ErrQueueNotFound) {
		t.Fatalf("QueueStats of a deleted queue: %v", err)
	}
	f.enqueue("q", "c")
	if st := f.stats("q"); st.ProcessedTotal != 0 || st.Paused || st.Settings != (broker.QueueSettings{}) {
		t.Fatalf("a queue enqueued into again starts afresh: %+v", st)
	}
}

func TestAdminRateLimit(t *testing.T) {
	f := newAdminFixture(t)
	for i := range 5 {
		f.enqueue("q", fmt.Sprint("t", i))
	}
	if err := f.b.SetQueueSettings(t.Context(), "q", broker.QueueSettings{RateLimit: 4, RateBurst: 2}); err != nil {
		t.Fatal(err)
	}
	if ls, err := f.fetch("q", 5); err != nil || len(ls) != 2 {
		t.Fatalf("a full bucket of 2: %d, %v", len(ls), err)
	}
	var th *broker.ThrottledError
	if _, err := f.fetch("q", 5); !errors.As(err, &th) || th.RetryIn != 250*time.Millisecond {
		t.Fatalf("empty bucket at 4/s: %v, want RetryIn 250ms", err)
	}
	f.clock.Advance(250 * time.Millisecond)
	if ls, err := f.fetch("q", 5); err != nil || len(ls) != 1 {
		t.Fatalf("one token later: %d, %v", len(ls), err)
	}
}

func TestAdminListRunArchive(t *testing.T) {
	f := newAdminFixture(t)
	ctx := t.Context()
	for i := range 5 {
		f.enqueue("q", fmt.Sprint("p", i))
	}
	page, err := f.b.ListTasks(ctx, broker.ListParams{Queue: "q", State: base.StatePending, Offset: 1, Limit: 2})
	if err != nil || ids(page) != "p1 p2 " {
		t.Fatalf("pending page: %q, %v", ids(page), err)
	}
	if err := f.b.ArchiveTask(ctx, "q", "p3"); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Second)
	if err := f.b.ArchiveTask(ctx, "q", "p1"); err != nil {
		t.Fatal(err)
	}
	page, _ = f.b.ListTasks(ctx, broker.ListParams{Queue: "q", State: base.StateArchived, Limit: 10})
	if ids(page) != "p1 p3 " {
		t.Fatalf("archived, newest first: %q", ids(page))
	}
	if err := f.b.RunTask(ctx, "q", "p0"); !errors.Is(err, base.ErrWrongState) {
		t.Fatalf("RunTask of a pending task: %v", err)
	}
	if err := f.b.RunTask(ctx, "q", "p3"); err != nil {
		t.Fatal(err)
	}
	page, _ = f.b.ListTasks(ctx, broker.ListParams{Queue: "q", State: base.StatePending, Limit: 10})
	if ids(page) != "p0 p2 p4 p3 " {
		t.Fatalf("pending after RunTask: %q", ids(page))
	}
	if n, err := f.b.ArchiveAll(ctx, "q", base.StatePending, ""); err != nil || n != 4 {
		t.Fatalf("ArchiveAll: %d, %v", n, err)
	}
	if n, err := f.b.RunAll(ctx, "q", base.StateArchived, ""); err != nil || n != 5 {
		t.Fatalf("RunAll: %d, %v", n, err)
	}
	if n, err := f.b.DeleteAll(ctx, "q", base.StatePending, ""); err != nil || n != 5 {
		t.Fatalf("DeleteAll: %d, %v", n, err)
	}
	if st := f.stats("q"); st.Pending+st.Archived != 0 {
		t.Fatalf("after DeleteAll: %+v", st)
	}
}

func TestAdminGroups(t *testing.T) {
	f := newAdminFixture(t)
	ctx := t.Context()
	for i := range 3 {
		f.enqueue("q", fmt.Sprint("g", i), func(m *base.TaskMessage) { m.GroupKey = "grp" })
	}
	p := broker.TakeGroupParams{Queue: "q", Group: "grp", MaxSize: 2, GracePeriod: time.Minute, Lease: time.Minute}
	agg, err := f.b.TakeGroup(ctx, p)
	if err != nil || agg == nil || len(agg.Msgs) != 2 || agg.Msgs[0].ID != "g0" {
		t.Fatalf("TakeGroup: %+v, %v", agg, err)
	}
	if err := f.b.RunTask(ctx, "q", "g0"); !errors.Is(err, base.ErrWrongState) {
		t.Fatalf("RunTask of a taken task: %v", err)
	}
	if gs, _ := f.b.ListGroups(ctx, "q"); len(gs) != 1 || gs[0].Size != 1 {
		t.Fatalf("ListGroups: %+v", gs)
	}
	bad := *agg
	bad.Token = "x"
	out := &base.TaskMessage{ID: "agg", Type: "t", Queue: "q"}
	if err := f.b.FinishAggregation(ctx, &bad, out); !errors.Is(err, base.ErrLeaseLost) {
		t.Fatalf("FinishAggregation with a wrong token: %v", err)
	}
	if err := f.b.FinishAggregation(ctx, agg, out); err != nil {
		t.Fatal(err)
	}
	if st := f.stats("q"); st.Aggregating != 1 || st.Pending != 1 {
		t.Fatalf("after FinishAggregation: %+v", st)
	}
	// A set whose aggregator dies is given back; so is one open at a crash.
	f.clock.Advance(time.Minute)
	agg, err = f.b.TakeGroup(ctx, p)
	if err != nil || agg == nil {
		t.Fatalf("TakeGroup after the grace period: %v", err)
	}
	f.clock.Advance(2 * time.Minute)
	if n, err := f.b.ReclaimAggregations(ctx, "q"); err != nil || n != 1 {
		t.Fatalf("ReclaimAggregations: %d, %v", n, err)
	}
	if _, err := f.b.TakeGroup(ctx, p); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	if st := f.stats("q"); st.Aggregating != 1 || st.Groups != 1 {
		t.Fatalf("after reopen the taken task is back in its group: %+v", st)
	}
}

func TestAdminClaimTickSurvivesReopen(t *testing.T) {
	f := newAdminFixture(t)
	ctx := t.Context()
	tick := time.Date(2031, 3, 14, 16, 0, 0, 0, time.UTC)
	if ok, err := f.b.ClaimTick(ctx, "e1", tick, time.Hour); !ok || err != nil {
		t.Fatalf("first claim: %v, %v", ok, err)
	}
	f.enqueue("q", "x") // synced: makes the claim durable too
	f.reopen()
	if ok, _ := f.b.ClaimTick(ctx, "e1", tick, time.Hour); ok {
		t.Fatal("a claimed tick was claimed again after a reopen")
	}
	f.clock.Advance(time.Hour)
	if ok, _ := f.b.ClaimTick(ctx, "e1", tick, time.Hour); !ok {
		t.Fatal("an expired claim was not given again")
	}
}

func TestAdminWatchAndCancel(t *testing.T) {
	f := newAdminFixture(t)
	ctx := t.Context()
	f.enqueue("q", "w")
	ch, err := f.b.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.WatchTask(ctx, "q", "w"); err != nil {
		t.Fatal(err)
	}
	if err := f.b.CancelProcessing(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; ev.Kind != broker.EventCancel || ev.TaskID != "w" {
		t.Fatalf("CancelProcessing sent %+v", ev)
	}
	ls, _ := f.fetch("q", 1)
	if err := f.b.WriteResult(ctx, ls[0].Ref(), []byte("r")); err != nil {
		t.Fatal(err)
	}
	f.b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()})
	if ev := <-ch; ev.Kind != broker.EventDone || ev.TaskID != "w" || ev.Queue != "q" {
		t.Fatalf("Complete of a watched task sent %+v", ev)
	}
	ti, err := f.b.GetTaskInfo(ctx, "q", "w")
	if err != nil || string(ti.Result) != "r" {
		t.Fatalf("a watched task without retention is kept for its watcher: %v", err)
	}
	f.clock.Advance(broker.WatchGrace)
	if n, _ := f.b.DeleteExpiredCompleted(ctx, "q", 10); n != 1 {
		t.Fatalf("kept past WatchGrace: %d deleted", n)
	}
}

func TestMetaStoreSurvivesReopen(t *testing.T) {
	f := newAdminFixture(t)
	ctx := t.Context()
	if _, err := f.b.GetMeta(ctx, "queue/a"); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("GetMeta of a missing key: %v", err)
	}
	if err := f.b.PutMeta(ctx, "queue/a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.b.PutMetaIfAbsent(ctx, "queue/a", []byte("2")); ok || err != nil {
		t.Fatalf("PutMetaIfAbsent of a taken key: %v, %v", ok, err)
	}
	if ok, err := f.b.PutMetaIfAbsent(ctx, "queue/b", []byte("3")); !ok || err != nil {
		t.Fatalf("PutMetaIfAbsent of a free key: %v, %v", ok, err)
	}
	if err := f.b.PutMeta(ctx, "token", []byte("t")); err != nil {
		t.Fatal(err)
	}
	if err := f.b.DeleteMeta(ctx, "token"); err != nil {
		t.Fatal(err)
	}
	if err := f.b.PutMeta(ctx, "bad\nkey", nil); !errors.Is(err, base.ErrInvalidArgument) {
		t.Fatalf("PutMeta of a key with a newline: %v", err)
	}
	f.reopen()
	m, err := f.b.ListMeta(ctx, "queue/")
	if err != nil || len(m) != 2 || string(m["queue/a"]) != "1" || string(m["queue/b"]) != "3" {
		t.Fatalf("ListMeta after reopen: %v, %v", m, err)
	}
	if _, err := f.b.GetMeta(ctx, "token"); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("a deleted key came back: %v", err)
	}
}
