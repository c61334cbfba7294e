package htq

import (
	"context"
	"log/slog"
	"time"

	"github.com/htqueue/htq/internal/broker"
	"github.com/jonboulle/clockwork"
)

// A forwarder moves scheduled and retry tasks to pending when they are
// due. It sleeps until the earliest due time of its queues (as the storage
// reports it), or until an event says an earlier task was added, so that a
// due task is forwarded within milliseconds; maxSleep bounds the sleep in
// case an event was lost.
type forwarder struct {
	b        broker.Broker
	logger   *slog.Logger
	clock    clockwork.Clock
	queues   *queueSet
	maxSleep time.Duration

	wake chan struct{}
	life lifecycle
}

// forwardBatch bounds how many tasks one Forward call moves.
const forwardBatch = 1000

func newForwarder(b broker.Broker, logger *slog.Logger, clock clockwork.Clock, queues *queueSet, maxSleep time.Duration) *forwarder {
	return &forwarder{b: b, logger: logger.With("component", "htq.forwarder"), clock: clock,
		queues: queues, maxSleep: maxSleep,
		wake: make(chan struct{}, 1)}
}

func (f *forwarder) start(ctx context.Context) {
	f.life.start(func(quit <-chan struct{}) {
		timer := f.clock.NewTimer(0)
		defer timer.Stop()
		for {
			select {
			case <-quit:
				return
			case <-f.wake:
			case <-timer.Chan():
			}
			timer.Reset(f.forward(ctx))
		}
	})
}

// signal wakes the forwarder; it never blocks.
func (f *forwarder) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *forwarder) shutdown() { f.life.stop() }

// forward moves due tasks of every queue and returns how long to sleep.
func (f *forwarder) forward(ctx context.Context) time.Duration {
	sleep := f.maxSleep
	for _, q := range f.queues.names() {
		res, err := f.b.Forward(ctx, q, forwardBatch)
		if err != nil {
			logCall(f.logger, "forward", err, "queue", q)
			continue
		}
		if res.HasNext && res.NextIn < sleep {
			sleep = res.NextIn
		}
	}
	if sleep < 0 {
		sleep = 0
	}
	return sleep
}
