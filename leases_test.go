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
	recoverExpired(t, st, queue, id, watch, func(int, error, *Task) time.Duration { return time.Hour }, eh)
}

// expireLeaseWith is expireLease with the recoverer's retry delay.
func expireLeaseWith(t *testing.T, st *Storage, queue, id string, delay RetryDelayFunc) {
	t.Helper()
	recoverExpired(t, st, queue, id, newStorageWatch(clockwork.NewRealClock()), delay, nil)
}

func recoverExpired(t *testing.T, st *Storage, queue, id string, watch *storageWatch, delay RetryDelayFunc, eh ErrorHandler) {
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
	key := "htq:{" + queue + "}:active"
	if err := rc.Do(ctx, rc.B().Zadd().Key(key).Xx().ScoreMember().ScoreMember(1, id).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	leases, err := brokerOf(st).ExpiredLeases(ctx, queue, 10)
	if err != nil || len(leases) != 1 || leases[0].Msg.ID != id {
		t.Fatalf("ExpiredLeases = %v, %v", leases, err)
	}
	rec := newRecoverer(brokerOf(st), discardLogger(), newQueueSet(map[string]int{queue: 1}, false), delay, eh, watch)
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
