package htq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/htqueue/htq/internal/attempt"
	"github.com/htqueue/htq/internal/broker"
)

// A recoverer finds active tasks whose lease ran out (their worker crashed,
// was killed or was cut off from the storage) and sends them to retry, or
// to archive when they are out of retries.
type recoverer struct {
	b            broker.Broker
	logger       *slog.Logger
	queues       *queueSet
	retryDelay   RetryDelayFunc
	errorHandler ErrorHandler // nil: none
	// beforeArchive is Config.BeforeArchiveLost (nil: none).
	beforeArchive func(ctx context.Context, task *Task, err error) error
	watch         *storageWatch
}

const recoverBatch = 100

func newRecoverer(b broker.Broker, logger *slog.Logger, queues *queueSet, retryDelay RetryDelayFunc, errorHandler ErrorHandler, watch *storageWatch) *recoverer {
	return &recoverer{b: b, logger: logger.With("component", "htq.recoverer"), queues: queues, retryDelay: retryDelay,
		errorHandler: errorHandler, watch: watch}
}

func (r *recoverer) exec(ctx context.Context) {
	for _, q := range r.queues.names() {
		for ctx.Err() == nil {
			leases, err := r.b.ExpiredLeases(ctx, q, recoverBatch)
			if err != nil {
				logCall(r.logger, "list expired leases", err, "queue", q)
				break
			}
			for _, l := range leases {
				r.recover(ctx, l)
			}
			if len(leases) < recoverBatch {
				break
			}
		}
	}
}

// recover sends a task whose lease expired to retry or archive. When this
// server saw the storage unreachable during the lease's last term, the
// lease may have run out only because its holder could not renew it: the
// task is retried without counting a failure (and never archived for it).
// The ErrorHandler is told first, as of an attempt that failed with
// ErrLeaseExpired; before it, when the task would be archived,
// BeforeArchiveLost, whose error keeps the task (retried without using up
// a retry).
func (r *recoverer) recover(ctx context.Context, l *broker.Lease) {
	msg := l.Msg
	term := l.Duration
	if term <= 0 {
		term = defaultLeaseDuration
	}
	failure, isFailure := ErrLeaseExpired, true
	if r.watch.unreachableWithin(term + time.Second) {
		failure, isFailure = fmt.Errorf("%w while the storage was unreachable", ErrLeaseExpired), false
	}
	hctx, endHooks := withTaskMetadata(ctx, taskMetadata{msg: msg})
	defer endHooks()
	task := NewTask(msg.Type, msg.Payload)
	if r.beforeArchive != nil && attempt.Archives(msg.Retried, msg.MaxRetry, false, isFailure) {
		if herr := r.beforeArchive(hctx, task, failure); herr != nil {
			failure, isFailure = fmt.Errorf("%w; not archived: %w", failure, herr), false
			r.logger.Warn("task of a lost worker not archived: BeforeArchiveLost failed; it will be retried",
				"queue", msg.Queue, "id", msg.ID, "err", herr)
		}
	}
	if r.errorHandler != nil {
		r.errorHandler.HandleError(hctx, task, failure)
	}
	_, err := attempt.Fail(ctx, r.b, attempt.Failed{
		Lease: l.Ref(), Msg: msg, ErrMsg: failure.Error(), IsFailure: isFailure, RequireExpired: true,
		Delay: func(retried int) time.Duration {
			return r.retryDelay(retried, ErrLeaseExpired, task)
		},
	})
	switch {
	case errors.Is(err, ErrLeaseLost):
		// Renewed or recovered by someone else meanwhile: nothing to do.
	case err != nil:
		logCall(r.logger, "recover task", err, "queue", msg.Queue, "id", msg.ID)
	default:
		r.logger.Info("recovered task of a lost worker", "queue", msg.Queue, "id", msg.ID, "type", msg.Type, "retried", msg.Retried)
	}
}
