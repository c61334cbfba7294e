package htq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/broker"
	"github.com/jonboulle/clockwork"
	"github.com/redis/rueidis"
)

// expireLease makes the lease of an active task run out now, as if its
// worker had stopped renewing it (by setting its deadline in the active
// set to the epoch), and recovers the task as another server's recoverer
// would.
func expireLease(t *testing.T, st *Storage, queue, id string) {
	t.Helper()
	expireLeaseAndRecover(t, st, queue, id, newStorageWatch(clockwork.NewRealClock()), nil)
}

// expireLeaseAndRecover is expireLease with the recoverer's storage watch
// and ErrorHandler.
func expireLeaseAndRecover(t *testing.T, st *Storage, queue, id string, watch *storageWatch, eh ErrorHandler) {
	t.Helper()
	recoverExpired(t, st, queue, id, watch, func(int, error, *Task) time.Duration { return time.Hour }, eh, nil)
}

// expireLeaseWith is expireLease with the recoverer's retry delay.
func expireLeaseWith(t *testing.T, st *Storage, queue, id string, delay RetryDelayFunc) {
	t.Helper()
	recoverExpired(t, st, queue, id, newStorageWatch(clockwork.NewRealClock()), delay, nil, nil)
}

// recoverExpired is expireLease with the recoverer's storage watch, retry
// delay, ErrorHandler and BeforeArchiveLost (before, nil for none).
func recoverExpired(t *testing.T, st *Storage, queue, id string, watch *storageWatch, delay RetryDelayFunc, eh ErrorHandler,
	before func(context.Context, *Task, error) error) {
	t.Helper()
	ctx := context.Background()
	opt, err := rueidis.ParseURL(st.String())
	if err != nil {
		t.Fatal(err)
	}
	opt.DisableCache = true
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	// The lease's deadline is its own member's score, or its lease
	// group's (internal/rdb/lua/lib.lua): set whichever there is.
	key := "htq:{" + queue + "}:active"
	held, err := rc.Do(ctx, rc.B().Hget().Key("htq:{"+queue+"}:leases").Field(id).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	group := "\x02" + strings.TrimRight(held, "+!")
	if err := rc.Do(ctx, rc.B().Zadd().Key(key).Xx().ScoreMember().ScoreMember(1, id).ScoreMember(1, group).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	leases, err := brokerOf(st).ExpiredLeases(ctx, queue, 10)
	if err != nil || len(leases) != 1 || leases[0].Msg.ID != id {
		t.Fatalf("ExpiredLeases = %v, %v", leases, err)
	}
	rec := newRecoverer(brokerOf(st), discardLogger(), newQueueSet(map[string]int{queue: 1}, false), delay, eh, watch)
	rec.beforeArchive = before
	rec.recover(ctx, leases[0])
}

// A lease that ran out while this server could not reach the storage is
// not a handler failure: the recoverer retries the task without counting
// an attempt, even one with no retries left; otherwise it counts (here:
// MaxRetry(0) archives).
func TestRecoverAfterOutageIsNotAFailure(t *testing.T) {
	for _, outage := range []bool{true, false} {
		t.Run(fmt.Sprintf("outage=%v", outage), func(t *testing.T) {
			st := openTestStorage(t)
			ctx := context.Background()
			info, err := NewClient(st).Enqueue(NewTask("t", nil), MaxRetry(0))
			if err != nil {
				t.Fatal(err)
			}
			b := brokerOf(st)
			if _, err := b.Fetch(ctx, broker.FetchParams{Queue: "default", Max: 1, LeaseDuration: time.Minute, ServerID: "s"}); err != nil {
				t.Fatal(err)
			}
			watch := newStorageWatch(clockwork.NewRealClock())
			if outage {
				watch.failed(errors.New("dial tcp 127.0.0.1:1: connect: connection refused"))
			}
			expireLeaseAndRecover(t, st, "default", info.ID, watch, nil)
			got := taskInfo(t, st, "default", info.ID)
			switch {
			case outage && (got.State != TaskStateRetry || got.Retried != 0 || !strings.Contains(got.LastErr, "unreachable")):
				t.Errorf("after an outage: %v retried=%d %q, want retry, not counted", got.State, got.Retried, got.LastErr)
			case !outage && (got.State != TaskStateArchived || got.LastErr != ErrLeaseExpired.Error()):
				t.Errorf("without outage: %v %q, want archived with %q", got.State, got.LastErr, ErrLeaseExpired)
			}
		})
	}
}

// The recoverer tells the ErrorHandler of a lost worker's attempt before
// it writes the outcome, with an error wrapping ErrLeaseExpired and the
// task's metadata in ctx, as the processor does for a handler's error.
func TestRecoverTellsErrorHandler(t *testing.T) {
	st := openTestStorage(t)
	ctx := context.Background()
	info, err := NewClient(st).Enqueue(NewTask("lost", []byte("p")), MaxRetry(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := brokerOf(st).Fetch(ctx, broker.FetchParams{Queue: "default", Max: 1, LeaseDuration: time.Minute, ServerID: "s"}); err != nil {
		t.Fatal(err)
	}
	var calls []string
	eh := ErrorHandlerFunc(func(ctx context.Context, task *Task, err error) {
		id, _ := GetTaskID(ctx)
		maxRetry, _ := GetMaxRetry(ctx)
		state := taskInfo(t, st, "default", id).State
		calls = append(calls, fmt.Sprintf("%s %s %s max=%d lease-expired=%v state=%v", id, task.Type(), task.Payload(), maxRetry,
			errors.Is(err, ErrLeaseExpired), state))
	})
	expireLeaseAndRecover(t, st, "default", info.ID, newStorageWatch(clockwork.NewRealClock()), eh)
	want := info.ID + " lost p max=0 lease-expired=true state=active"
	if len(calls) != 1 || calls[0] != want {
		t.Fatalf("ErrorHandler calls %q, want [%q]", calls, want)
	}
	if got := taskInfo(t, st, "default", info.ID).State; got != TaskStateArchived {
		t.Errorf("task %v after recovery, want archived", got)
	}
}

// BeforeArchiveLost runs before a lost worker's task is archived (not
// before a retry); its error keeps the task, retried without using up a
// retry, and the ErrorHandler is told an error wrapping both.
func TestBeforeArchiveLost(t *testing.T) {
	st := openTestStorage(t)
	ctx := context.Background()
	c := NewClient(st)
	hookErr := errors.New("notification service down")
	for _, tc := range []struct {
		name     string
		maxRetry int
		fail     bool
		calls    int
		state    TaskState
	}{
		{"archived", 0, false, 1, TaskStateArchived},
		{"kept", 0, true, 1, TaskStateRetry},
		{"retried: no call", 1, true, 0, TaskStateRetry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := c.Enqueue(NewTask("lost", []byte(tc.name)), MaxRetry(tc.maxRetry))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := brokerOf(st).Fetch(ctx, broker.FetchParams{Queue: "default", Max: 1, LeaseDuration: time.Minute, ServerID: "s"}); err != nil {
				t.Fatal(err)
			}
			var calls int
			before := func(ctx context.Context, task *Task, err error) error {
				calls++
				if id, _ := GetTaskID(ctx); id != info.ID || !errors.Is(err, ErrLeaseExpired) || string(task.Payload()) != tc.name {
					t.Errorf("BeforeArchiveLost(%s, %s, %v)", id, task.Payload(), err)
				}
				if tc.fail {
					return hookErr
				}
				return nil
			}
			var told error
			eh := ErrorHandlerFunc(func(_ context.Context, _ *Task, err error) { told = err })
			recoverExpired(t, st, "default", info.ID, newStorageWatch(clockwork.NewRealClock()),
				func(int, error, *Task) time.Duration { return time.Hour }, eh, before)
			got := taskInfo(t, st, "default", info.ID)
			if calls != tc.calls || got.State != tc.state {
				t.Fatalf("hook called %d times, task %v; want %d and %v", calls, got.State, tc.calls, tc.state)
			}
			if tc.fail && tc.calls == 1 {
				if got.Retried != 0 || !errors.Is(told, hookErr) || !errors.Is(told, ErrLeaseExpired) || !strings.Contains(got.LastErr, hookErr.Error()) {
					t.Fatalf("kept task: retried %d, last error %q, ErrorHandler told %v", got.Retried, got.LastErr, told)
				}
			}
		})
	}
}
