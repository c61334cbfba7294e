package htq

import (
	"context"
	"log/slog"

	"github.com/htqueue/htq/internal/broker"
)

// A janitor deletes completed tasks whose retention has run out, and the
// records of finished workflows whose retention has run out, a batch at a
// time.
type janitor struct {
	b         broker.Broker
	logger    *slog.Logger
	queues    *queueSet
	batchSize int
}

func newJanitor(b broker.Broker, logger *slog.Logger, queues *queueSet, batchSize int) *janitor {
	return &janitor{b: b, logger: logger.With("component", "htq.janitor"), queues: queues, batchSize: batchSize}
}

func (j *janitor) exec(ctx context.Context) {
	for _, q := range j.queues.names() {
		j.sweep(ctx, q, "delete expired completed tasks", j.b.DeleteExpiredCompleted)
		j.sweep(ctx, q, "delete expired workflows", j.b.DeleteExpiredWorkflows)
	}
}

// sweep calls del on queue q a batch at a time until a batch is not full.
func (j *janitor) sweep(ctx context.Context, q, what string, del func(ctx context.Context, queue string, limit int) (int, error)) {
	for ctx.Err() == nil {
		n, err := del(ctx, q, j.batchSize)
		if err != nil {
			logCall(j.logger, what, err, "queue", q)
			return
		}
		if n < j.batchSize {
			return
		}
	}
}

// A healthChecker pings the storage and tells the user's HealthCheckFunc.
type healthChecker struct {
	b  broker.Broker
	fn func(error)
}

func newHealthChecker(b broker.Broker, fn func(error)) *healthChecker {
	return &healthChecker{b: b, fn: fn}
}

func (h *healthChecker) exec(ctx context.Context) {
	if h.fn == nil {
		return
	}
	h.fn(h.b.Ping(ctx))
}
