package attempt_test

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/htqueue/htq/internal/attempt"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/embedded"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	lease = 30 * time.Second
	delay = 7 * time.Second
)

// TestFail runs each case on a fresh mem: store: a task with Retried and
// MaxRetry is leased, its lease left to run out when the case says, and
// Fail is called; the test reads back where the task ended.
func TestFail(t *testing.T) {
	tests := []struct {
		name             string
		retried, max     int
		skip, notFailure bool
		requireExpired   bool
		leaseRunOut      bool

		// wantState is the state Fail chooses; wantRetried the task's
		// Retried after it. An error that is not a failure is counted as
		// failed only when the task is archived.
		wantState   base.TaskState
		wantRetried int
		wantErr     error // then the task must still be active and untouched
	}{
		{name: "retries left", retried: 1, max: 3, wantState: base.StateRetry, wantRetried: 2},
		{name: "no retries at all", retried: 0, max: 0, wantState: base.StateArchived, wantRetried: 0},
		{name: "last retry used", retried: 3, max: 3, wantState: base.StateArchived, wantRetried: 3},
		{name: "retried past max", retried: 4, max: 3, wantState: base.StateArchived, wantRetried: 4},
		{name: "skip with retries left", retried: 0, max: 3, skip: true, wantState: base.StateArchived, wantRetried: 0},
		{name: "not a failure, retries left", retried: 1, max: 3, notFailure: true, wantState: base.StateRetry, wantRetried: 1},
		{name: "not a failure, out of retries", retried: 3, max: 3, notFailure: true, wantState: base.StateRetry, wantRetried: 3},
		{name: "not a failure but skip", retried: 0, max: 3, notFailure: true, skip: true, wantState: base.StateArchived, wantRetried: 0},
		{name: "expired lease, retries left", retried: 1, max: 3, requireExpired: true, leaseRunOut: true, wantState: base.StateRetry, wantRetried: 2},
		{name: "expired lease, out of retries", retried: 3, max: 3, requireExpired: true, leaseRunOut: true, wantState: base.StateArchived, wantRetried: 3},
		{name: "live lease not recovered (retry)", retried: 1, max: 3, requireExpired: true, wantState: base.StateRetry, wantErr: base.ErrLeaseLost},
		{name: "live lease not recovered (archive)", retried: 3, max: 3, requireExpired: true, wantState: base.StateArchived, wantErr: base.ErrLeaseLost},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			clock := clockwork.NewFakeClockAt(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
			b, err := embedded.OpenMemory(embedded.Options{Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			msg := &base.TaskMessage{ID: "t1", Type: "email", Queue: "default", Retried: tc.retried, MaxRetry: tc.max, LastErr: "before"}
			if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: msg}); err != nil {
				t.Fatal(err)
			}
			leases, err := b.Fetch(ctx, broker.FetchParams{Queue: "default", Max: 1, LeaseDuration: lease, ServerID: "s1"})
			if err != nil || len(leases) != 1 {
				t.Fatalf("Fetch = %d leases, %v; want 1", len(leases), err)
			}
			l := leases[0]
			if tc.leaseRunOut {
				clock.Advance(lease + time.Second)
			}
			var delayCalls []int
			state, err := attempt.Fail(ctx, b, attempt.Failed{
				Lease: l.Ref(), Msg: l.Msg, ErrMsg: "boom",
				SkipRetry: tc.skip, IsFailure: !tc.notFailure, RequireExpired: tc.requireExpired,
				Delay: func(retried int) time.Duration { delayCalls = append(delayCalls, retried); return delay },
			})
			if state != tc.wantState {
				t.Errorf("Fail chose %v, want %v", state, tc.wantState)
			}
			if !errors.Is(err, tc.wantErr) || (err != nil && tc.wantErr == nil) {
				t.Fatalf("Fail error = %v, want %v", err, tc.wantErr)
			}
			wantCalls := 0
			if tc.wantState == base.StateRetry {
				wantCalls = 1
			}
			if len(delayCalls) != wantCalls || (wantCalls == 1 && delayCalls[0] != tc.retried) {
				t.Errorf("Delay called with %v, want %d call(s) with %d", delayCalls, wantCalls, tc.retried)
			}

			got, err := b.GetTaskInfo(ctx, "default", "t1")
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != nil {
				if got.State != base.StateActive || got.Message.LastErr != "before" || got.Message.Retried != tc.retried {
					t.Errorf("task after refused write: %v LastErr %q Retried %d, want active %q %d",
						got.State, got.Message.LastErr, got.Message.Retried, "before", tc.retried)
				}
				return
			}
			if got.State != tc.wantState {
				t.Errorf("task ended %v, want %v", got.State, tc.wantState)
			}
			if got.Message.LastErr != "boom" {
				t.Errorf("LastErr = %q, want %q", got.Message.LastErr, "boom")
			}
			if got.Message.Retried != tc.wantRetried {
				t.Errorf("Retried = %d, want %d", got.Message.Retried, tc.wantRetried)
			}
			if !got.Message.LastFailedAt.Equal(clock.Now()) {
				t.Errorf("LastFailedAt = %v, want the storage's now %v", got.Message.LastFailedAt, clock.Now())
			}
			st, err := b.QueueStats(ctx, "default")
			if err != nil {
				t.Fatal(err)
			}
			wantFailed := int64(1)
			if tc.notFailure && tc.wantState == base.StateRetry {
				wantFailed = 0
			}
			if st.Failed != wantFailed {
				t.Errorf("failed counter = %d, want %d", st.Failed, wantFailed)
			}
			if tc.wantState == base.StateRetry && !got.NextProcessAt.Equal(clock.Now().Add(delay)) {
				t.Errorf("retry due at %v, want now+Delay %v", got.NextProcessAt, clock.Now().Add(delay))
			}
		})
	}
}
