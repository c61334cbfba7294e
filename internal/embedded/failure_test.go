package embedded

import (
	"errors"
	"fmt"
	"sync"
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

// heldCommits holds the broker's commits until released, and can make the
// first one fail.
type heldCommits struct {
	entered chan struct{} // one value per commit begun
	release chan struct{} // closed: every commit proceeds
	fail    error         // the first commit's error, if any
	n       atomic.Int32
	once    sync.Once
}

// open lets every commit proceed, now and later.
func (h *heldCommits) open() { h.once.Do(func() { close(h.release) }) }

func holdCommits(b *Broker, fail error) *heldCommits {
	h := &heldCommits{entered: make(chan struct{}, 100), release: make(chan struct{}), fail: fail}
	b.mu.Lock()
	real := b.commitFn
	b.commitFn = func(bt *batch) error {
		h.entered <- struct{}{}
		<-h.release
		if h.n.Add(1) == 1 && h.fail != nil {
			return h.fail
		}
		return real(bt)
	}
	b.mu.Unlock()
	return h
}

// TestFetchWaitsForDurableEnqueue: a task whose enqueue is in a batch not
// yet on disk is not handed out until it is, so that no task starts that
// a crash (or a failed write) would undo together with its enqueue; if
// the write fails, Fetch fails with it and hands out nothing (issue 10,
// finding 4: a task started, then a kill undid its enqueue).
func TestFetchWaitsForDurableEnqueue(t *testing.T) {
	for _, fail := range []error{nil, syscall.ENOSPC} {
		t.Run(fmt.Sprintf("write error %v", fail), func(t *testing.T) {
			b, err := Open(t.Context(), t.TempDir(), Options{Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			ctx := t.Context()
			h := holdCommits(b, fail)
			defer h.open() // before Close, which waits for the committer
			enqueued := make(chan error, 1)
			go func() {
				enqueued <- b.Enqueue(ctx, broker.EnqueueParams{Msg: &base.TaskMessage{ID: "t", Type: "x", Queue: "q"}})
			}()
			<-h.entered // the enqueue's batch is being written
			type result struct {
				ls  []*broker.Lease
				err error
			}
			fetched := make(chan result, 1)
			go func() {
				ls, err := b.Fetch(ctx, broker.FetchParams{Queue: "q", Max: 1, LeaseDuration: time.Minute})
				fetched <- result{ls, err}
			}()
			select {
			case r := <-fetched:
				t.Fatalf("Fetch returned %d tasks, %v while the enqueue was not on disk", len(r.ls), r.err)
			case <-time.After(200 * time.Millisecond): // Fetch is meant to wait for the held write: give it time to return wrongly
			}
			h.open()
			r := <-fetched
			if err := <-enqueued; !errors.Is(err, fail) {
				t.Fatalf("Enqueue: %v, want %v", err, fail)
			}
			switch {
			case fail == nil && (r.err != nil || len(r.ls) != 1):
				t.Fatalf("Fetch after the enqueue reached the disk: %d tasks, %v; want t", len(r.ls), r.err)
			case fail != nil && (!errors.Is(r.err, fail) || len(r.ls) != 0):
				t.Fatalf("Fetch when the enqueue's write failed: %d tasks, %v; want none and %v", len(r.ls), r.err, fail)
			}
			if fail != nil {
				if _, err := b.GetTaskInfo(ctx, "q", "t"); !errors.Is(err, base.ErrTaskNotFound) {
					t.Fatalf("the task whose enqueue failed: %v, want not found", err)
				}
			}
			if err := b.CheckInvariants(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
