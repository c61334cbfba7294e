package htq

import (
	"context"
	"log/slog"
	"time"

	"github.com/htqueue/htq/internal/broker"
	"github.com/jonboulle/clockwork"
)

// A subscriber listens to the storage's events and wakes the processor
// when one of the server's queues gets ready tasks, and the forwarder when
// a scheduled or retry task may be due earlier than it thought.
type subscriber struct {
	b        broker.Broker
	logger   *slog.Logger
	clock    clockwork.Clock
	queues   *queueSelector
	onReady  func()
	onSched  func()
	onCancel func(taskID string)
	cancel   context.CancelFunc
	done     chan struct{}
}

func newSubscriber(b broker.Broker, logger *slog.Logger, clock clockwork.Clock, queues *queueSelector, onReady, onSched func(), onCancel func(string)) *subscriber {
	return &subscriber{b: b, logger: logger.With("component", "htq.subscriber"), clock: clock,
		queues: queues, onReady: onReady, onSched: onSched, onCancel: onCancel, done: make(chan struct{})}
}

func (s *subscriber) start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	go func() {
		defer close(s.done)
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			events, err := s.b.Subscribe(ctx)
			if err != nil {
				logCall(s.logger, "subscribe", err)
				select {
				case <-ctx.Done():
					return
				case <-s.clock.After(backoff):
				}
				backoff = min(2*backoff, 5*time.Second)
				continue
			}
			backoff = 100 * time.Millisecond
			// Anything may have happened before the subscription started.
			s.onReady()
			s.onSched()
			for ev := range events {
				s.dispatch(ev)
			}
		}
	}()
}

func (s *subscriber) dispatch(ev broker.Event) {
	switch ev.Kind {
	case broker.EventReady:
		if s.queues.has(ev.Queue) {
			s.onReady()
		}
	case broker.EventScheduled:
		if s.queues.has(ev.Queue) {
			s.onSched()
		}
	case broker.EventCancel:
		s.onCancel(ev.TaskID)
	case broker.EventResync:
		s.onReady()
		s.onSched()
	}
}

func (s *subscriber) shutdown() {
	s.cancel()
	<-s.done
}
