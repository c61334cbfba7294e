package htq

import (
	"context"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"
)

// A refresher keeps a server's queues in step with its QueueSource: it
// asks the source every interval, and at once when signalled (an event
// named a queue the server does not serve yet), and wakes the fetchers
// and the forwarder when the set changes.
type refresher struct {
	source   func(context.Context) (map[string]int, error)
	logger   *slog.Logger
	clock    clockwork.Clock
	interval time.Duration
	queues   *queueSet
	onChange func()
	wake     chan struct{}
	life     lifecycle
}

func newRefresher(source func(context.Context) (map[string]int, error), logger *slog.Logger, clock clockwork.Clock,
	interval time.Duration, queues *queueSet, onChange func()) *refresher {
	return &refresher{source: source, logger: logger.With("component", "htq.refresher"), clock: clock,
		interval: interval, queues: queues, onChange: onChange,
		wake: make(chan struct{}, 1)}
}

// signal asks for a refresh now; it never blocks.
func (r *refresher) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *refresher) start(ctx context.Context) {
	r.life.start(func(quit <-chan struct{}) {
		ticker := r.clock.NewTicker(r.interval)
		defer ticker.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ticker.Chan():
			case <-r.wake:
			}
			r.refresh(ctx)
		}
	})
}

func (r *refresher) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	queues, err := r.source(ctx)
	if err == nil {
		err = validQueues(queues)
	}
	if err != nil {
		logCall(r.logger, "QueueSource", err)
		return
	}
	if r.queues.set(queues) {
		r.logger.Info("queues changed", "queues", queues)
		r.onChange()
	}
}

func (r *refresher) shutdown() { r.life.stop() }
