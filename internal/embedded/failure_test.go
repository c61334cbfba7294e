package embedded

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// TestWriteFailure: when a write fails (a full disk), the operations waiting
// on it fail with that error, memory goes back to what the file holds, and
// the broker works again once writes succeed.
func TestWriteFailure(t *testing.T) {
	b, err := Open(t.Context(), t.TempDir(), Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	msg := func(id string) *base.TaskMessage {
		return &base.TaskMessage{ID: id, Type: "x", Queue: "q", Payload: []byte("p")}
	}
	if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: msg("kept")}); err != nil {
		t.Fatal(err)
	}
	ls, err := b.Fetch(ctx, broker.FetchParams{Queue: "q", Max: 1, LeaseDuration: time.Minute})
	if err != nil || len(ls) != 1 {
		t.Fatalf("Fetch: %v, %d", err, len(ls))
	}
	// Fetch does not wait for the disk; make sure it is written before the
	// disk fills up.
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var failing atomic.Bool
	failing.Store(true)
	b.mu.Lock()
	real := b.commitFn
	b.commitFn = func(bt *batch) error {
		if failing.Load() {
			return fmt.Errorf("write: %w", syscall.ENOSPC)
		}
		return real(bt)
	}
	b.mu.Unlock()

	err = b.Enqueue(ctx, broker.EnqueueParams{Msg: msg("lost")})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Enqueue on a full disk: got %v, want ENOSPC", err)
	}
	if _, err := b.GetTaskInfo(ctx, "q", "lost"); !errors.Is(err, base.ErrTaskNotFound) {
		t.Fatalf("the failed task is visible: %v", err)
	}
	// The fetch was written before the failure, so the lease holds.
	if errs := b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()}); !errors.Is(errs[0], syscall.ENOSPC) {
		t.Fatalf("Complete on a full disk: got %v, want ENOSPC", errs[0])
	}
	if ti, err := b.GetTaskInfo(ctx, "q", "kept"); err != nil || ti.State != base.StateActive {
		t.Fatalf("after a failed Complete the task must still be active: %v, %v", ti, err)
	}

	// A fetch made while writes fail is undone with them: its lease is
	// lost, and the task is pending again.
	if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: msg("undone")}); err == nil {
		t.Fatal("Enqueue succeeded on a full disk")
	}

	failing.Store(false)
	if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: msg("later")}); err != nil {
		t.Fatalf("Enqueue once the disk has room: %v", err)
	}
	if errs := b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()}); errs[0] != nil {
		t.Fatalf("Complete once the disk has room: %v", errs[0])
	}
	if err := b.CheckInvariants(ctx); err != nil {
		t.Fatal(err)
	}
}
