package brokertest

import (
	"context"
	"errors"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

func lifecycleTests() []testCase {
	return []testCase{
		{"Ping", func(e *env) {
			wantNoErr(e, "Ping", e.b.Ping(e.ctx))
		}},
		{"NowFollowsClock", func(e *env) {
			now, err := e.b.Now(e.ctx)
			wantNoErr(e, "Now", err)
			wantTime(e, "Now", now, Epoch)
			e.advance(90 * time.Minute)
			now, err = e.b.Now(e.ctx)
			wantNoErr(e, "Now", err)
			wantTime(e, "Now after advancing the clock 90m", now, Epoch.Add(90*time.Minute))
		}},
		{"EmptyStorage", func(e *env) {
			if qs := e.queues(); len(qs) != 0 {
				e.Fatalf("Queues of new storage = %v, want none", qs)
			}
			e.fetchNone("default")
			e.wantForward(e.forward("default"), 0, false, 0)
			if ls := e.expired("default"); len(ls) != 0 {
				e.Fatalf("ExpiredLeases of new storage = %v, want none", leaseIDs(ls))
			}
			n, err := e.b.DeleteExpiredCompleted(e.ctx, "default", 100)
			wantNoErr(e, "DeleteExpiredCompleted", err)
			if n != 0 {
				e.Fatalf("DeleteExpiredCompleted of new storage = %d, want 0", n)
			}
		}},
		{"CallsAfterCloseFail", testCallsAfterClose},
	}
}

// testCallsAfterClose checks that every method fails with
// base.ErrStorageClosed once the broker is closed.
func testCallsAfterClose(e *env) {
	e.add("default")
	l := e.fetchOne("default")
	ref := l.Ref()
	e.add("default")
	wantNoErr(e, "Close", e.b.Close())
	e.closed = true

	ctx := e.ctx
	msg := e.newMsg("default")
	calls := []struct {
		name string
		call func() error
	}{
		{"Ping", func() error { return e.b.Ping(ctx) }},
		{"Now", func() error { _, err := e.b.Now(ctx); return err }},
		{"Enqueue", func() error { return e.b.Enqueue(ctx, broker.EnqueueParams{Msg: msg}) }},
		{"EnqueueBatch", func() error {
			errs := e.b.EnqueueBatch(ctx, []broker.EnqueueParams{{Msg: msg}})
			if len(errs) != 1 {
				e.Fatalf("EnqueueBatch of 1 task after Close returned %d results", len(errs))
			}
			return errs[0]
		}},
		{"Fetch", func() error {
			_, err := e.b.Fetch(ctx, broker.FetchParams{Queue: "default", Max: 1, LeaseDuration: leaseFor})
			return err
		}},
		{"Complete", func() error {
			errs := e.b.Complete(ctx, []broker.LeaseRef{ref})
			if len(errs) != 1 {
				e.Fatalf("Complete of 1 lease after Close returned %d results", len(errs))
			}
			return errs[0]
		}},
		{"Retry", func() error { return e.b.Retry(ctx, broker.RetryParams{Lease: ref, Delay: time.Second, ErrMsg: "x"}) }},
		{"Archive", func() error { return e.b.Archive(ctx, broker.ArchiveParams{Lease: ref, ErrMsg: "x"}) }},
		{"Requeue", func() error { return e.b.Requeue(ctx, ref) }},
		{"ExtendLeases", func() error {
			_, err := e.b.ExtendLeases(ctx, "default", []broker.LeaseRef{ref}, leaseFor)
			return err
		}},
		{"ExpiredLeases", func() error { _, err := e.b.ExpiredLeases(ctx, "default", 10); return err }},
		{"WriteResult", func() error { return e.b.WriteResult(ctx, ref, []byte("r")) }},
		{"Forward", func() error { _, err := e.b.Forward(ctx, "default", 10); return err }},
		{"DeleteExpiredCompleted", func() error { _, err := e.b.DeleteExpiredCompleted(ctx, "default", 10); return err }},
		{"GetTaskInfo", func() error { _, err := e.b.GetTaskInfo(ctx, "default", ref.ID); return err }},
		{"DeleteTask", func() error { return e.b.DeleteTask(ctx, "default", ref.ID) }},
		{"Queues", func() error { _, err := e.b.Queues(ctx); return err }},
		{"Subscribe", func() error {
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			_, err := e.b.Subscribe(sctx)
			return err
		}},
		{"WriteServerState", func() error {
			return e.b.WriteServerState(ctx, &base.ServerInfo{ID: "s1", Host: "h", PID: 1, Concurrency: 1, Started: e.now()}, time.Minute)
		}},
		{"ClearServerState", func() error { return e.b.ClearServerState(ctx, "s1") }},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, base.ErrStorageClosed) {
			e.Errorf("%s after Close: got error %v, want an error wrapping ErrStorageClosed", c.name, err)
		}
	}
	// Closing again must not panic; it may report that the storage is
	// already closed.
	if err := e.b.Close(); err != nil && !errors.Is(err, base.ErrStorageClosed) {
		e.Errorf("second Close: got %v, want nil or an error wrapping ErrStorageClosed", err)
	}
}
