package embedded

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// TestWorkflowSurvivesReopen stores a workflow, finishes part of it,
// closes and reopens the directory: the outcomes, the waiting task and the
// rules that release it are all there, and the record's retention runs on.
func TestWorkflowSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	clock := clockwork.NewFakeClockAt(time.Date(2031, 3, 14, 15, 9, 26, 0, time.UTC))
	opts := Options{Clock: clock, Logger: discardLogger()}
	open := func() *Broker {
		t.Helper()
		b, err := Open(ctx, dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.CheckInvariants(ctx); err != nil {
			t.Fatal(err)
		}
		return b
	}
	msg := func(id string) *base.TaskMessage {
		return &base.TaskMessage{ID: "w." + id, Type: "t", Queue: "q", Workflow: "w", WorkflowTask: id}
	}
	w := &base.Workflow{ID: "w", Retention: time.Hour, Tasks: []*base.WorkflowTask{
		{ID: "a", Msg: msg("a")},
		{ID: "b", Msg: msg("b")},
		{ID: "c", Msg: msg("c"), DependsOn: []base.Dependency{{Task: "a"}, {Task: "b", Policy: base.RunOnFailure}}},
		{ID: "d", Msg: msg("d"), DependsOn: []base.Dependency{{Task: "c"}}},
	}}
	b := open()
	if err := b.EnqueueWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	fetch := func(b *Broker, want string) *broker.Lease {
		t.Helper()
		ls, err := b.Fetch(ctx, broker.FetchParams{Queue: "q", Max: 1, LeaseDuration: time.Minute})
		if err != nil || len(ls) != 1 || ls[0].Msg.ID != want {
			t.Fatalf("Fetch: %v, %v; want %s", ls, err, want)
		}
		return ls[0]
	}
	la := fetch(b, "w.a")
	if err := b.WriteResult(ctx, la.Ref(), []byte("from a")); err != nil {
		t.Fatal(err)
	}
	if errs := b.Complete(ctx, []broker.LeaseRef{la.Ref()}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	lb := fetch(b, "w.b")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = open()
	defer func() { _ = b.Close() }()
	// b was active: its lease ended at reopen; it fails for good.
	ls, err := b.ExpiredLeases(ctx, "q", 10)
	if err != nil || len(ls) != 1 || ls[0].Msg.ID != lb.Msg.ID || ls[0].Msg.Workflow != "w" {
		t.Fatalf("ExpiredLeases after reopen: %v, %v", ls, err)
	}
	if err := b.Archive(ctx, broker.ArchiveParams{Lease: ls[0].Ref(), ErrMsg: "gone", RequireExpired: true}); err != nil {
		t.Fatal(err)
	}
	lc := fetch(b, "w.c")
	rs, err := b.DependencyResults(ctx, lc.Ref())
	if err != nil || len(rs) != 2 || string(rs[0].Result) != "from a" || rs[1].Outcome != base.OutcomeFailed || rs[1].LastErr != "gone" {
		t.Fatalf("DependencyResults after reopen: %+v, %v", rs, err)
	}
	if errs := b.Complete(ctx, []broker.LeaseRef{lc.Ref()}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = open()
	ld := fetch(b, "w.d")
	clock.Advance(time.Minute)
	if errs := b.Complete(ctx, []broker.LeaseRef{ld.Ref()}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = open()
	wi, err := b.GetWorkflow(ctx, "w")
	if err != nil || wi.State() != base.WorkflowFailed || wi.FinishedAt.IsZero() {
		t.Fatalf("GetWorkflow after the last reopen: %+v, %v", wi, err)
	}
	clock.Advance(time.Hour)
	if n, err := b.DeleteExpiredWorkflows(ctx, "q", 10); n != 1 || err != nil {
		t.Fatalf("DeleteExpiredWorkflows after reopen: %d, %v", n, err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckInvariants(ctx); err != nil {
		t.Fatal(err)
	}
}
