// Package attempt holds htq's one rule for an attempt that ends without
// success: whether the task is retried or archived, and what is written.
// The Server's processor and recoverer and the HTTP API's pull workers and
// their recoverer all call Fail; code that only needs to know the outcome
// (the URL dispatcher's log line) asks Archives. None decides on its own.
package attempt

import (
	"context"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Store is the part of a broker that records the end of a failed attempt.
type Store interface {
	Retry(ctx context.Context, p broker.RetryParams) error
	Archive(ctx context.Context, p broker.ArchiveParams) error
}

// Failed describes an attempt that ended without success.
type Failed struct {
	// Lease names the task and the lease its worker holds.
	Lease broker.LeaseRef
	// Msg is the task as leased; Fail reads its Retried and MaxRetry.
	Msg *base.TaskMessage
	// ErrMsg is the error, stored as the task's LastErr.
	ErrMsg string
	// SkipRetry asks to archive the task whatever its retries.
	SkipRetry bool
	// IsFailure tells whether the error counts as a failure.
	IsFailure bool
	// Delay returns how long after the storage's now the retry is due,
	// given how many times the task has been retried. Fail calls it only
	// when the task goes to retry.
	Delay func(retried int) time.Duration
	// RequireExpired makes the write fail with base.ErrLeaseLost unless
	// the lease has run out (set by recoverers, so that a lease renewed
	// meanwhile is left alone).
	RequireExpired bool
}

// Fail records an attempt that ended without success, by the one rule:
//
//   - The task is archived when SkipRetry is set, or when the error counts
//     as a failure (IsFailure) and the task has used up its retries
//     (Msg.Retried >= Msg.MaxRetry). An archived task keeps its Retried and
//     counts as failed.
//   - Otherwise it goes to retry, due after Delay(Msg.Retried). Only an
//     error that counts as a failure uses up a retry (Retried+1) and counts
//     as failed; one that does not is retried even when the task is out of
//     retries.
//   - Either way the task's LastErr becomes ErrMsg and its LastFailedAt the
//     storage's now, and RequireExpired is passed on to the write.
//
// A worker that vanished (its lease ran out) is a failure: recoverers call
// Fail with IsFailure and RequireExpired set and their own ErrMsg.
//
// Fail returns the state it chose (base.StateRetry or base.StateArchived),
// also when the write failed, and the write's error (wrapping
// base.ErrLeaseLost when the lease no longer holds the task).
func Fail(ctx context.Context, s Store, f Failed) (base.TaskState, error) {
	if Archives(f.Msg.Retried, f.Msg.MaxRetry, f.SkipRetry, f.IsFailure) {
		return base.StateArchived, s.Archive(ctx, broker.ArchiveParams{
			Lease: f.Lease, ErrMsg: f.ErrMsg, RequireExpired: f.RequireExpired})
	}
	return base.StateRetry, s.Retry(ctx, broker.RetryParams{
		Lease: f.Lease, Delay: f.Delay(f.Msg.Retried), ErrMsg: f.ErrMsg,
		IsFailure: f.IsFailure, RequireExpired: f.RequireExpired})
}

// Archives reports whether Fail archives a task retried times out of
// maxRetry: the rule's first point, for code that must know the outcome
// without writing it (a log line, say).
func Archives(retried, maxRetry int, skipRetry, isFailure bool) bool {
	return skipRetry || (isFailure && retried >= maxRetry)
}
