package htq

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/htqueue/htq/internal/attempt"
	"github.com/htqueue/htq/internal/broker"
)

// A recoverer finds active tasks whose lease ran out (their worker crashed,
// was killed or was cut off from the storage) and sends them to retry, or
// to archive when they are out of retries.
type recoverer struct {
	b          broker.Broker
	logger     *slog.Logger
	queues     *queueSet
	retryDelay RetryDelayFunc
	watch      *storageWatch
}

const recoverBatch = 100

func newRecoverer(b broker.Broker, logger *slog.Logger, queues *queueSet, retryDelay RetryDelayFunc, watch *storageWatch) *recoverer {
	return &recoverer{b: b, logger: logger.With("component", "htq.recoverer"), queues: queues, retryDelay: retryDelay, watch: watch}
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
func (r *recoverer) recover(ctx context.Context, l *broker.Lease) {
	msg := l.Msg
	term := l.Duration
	if term <= 0 {
		term = defaultLeaseDuration
	}
	errMsg, isFailure := ErrLeaseExpired.Error(), true
	if r.watch.unreachableWithin(term + time.Second) {
		errMsg, isFailure = ErrLeaseExpired.Error()+" while the storage was unreachable", false
	}
	_, err := attempt.Fail(ctx, r.b, attempt.Failed{
		Lease: l.Ref(), Msg: msg, ErrMsg: errMsg, IsFailure: isFailure, RequireExpired: true,
		Delay: func(retried int) time.Duration {
			return r.retryDelay(retried, ErrLeaseExpired, NewTask(msg.Type, msg.Payload))
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
