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
	queues   *queueSet
	onReady  func()
	onSched  func()
	onCancel func(taskID string)
	// onUnknown, when set, is told of events for queues not served.
	onUnknown func(queue string)
	cancel    context.CancelFunc
	done      chan struct{}
}

func newSubscriber(b broker.Broker, logger *slog.Logger, clock clockwork.Clock, queues *queueSet, onReady, onSched func(), onCancel func(string), onUnknown func(string)) *subscriber {
	return &subscriber{b: b, logger: logger.With("component", "htq.subscriber"), clock: clock,
		queues: queues, onReady: onReady, onSched: onSched, onCancel: onCancel, onUnknown: onUnknown, done: make(chan struct{})}
}

// start subscribes and returns once the subscription is live (or its
// first attempt failed: then it goes on trying in the background), so that
// no event sent after the server started is missed.
func (s *subscriber) start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	first, firstErr := s.b.Subscribe(ctx)
	go func() {
		defer close(s.done)
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			events, err := first, firstErr
			if first == nil && firstErr == nil {
				events, err = s.b.Subscribe(ctx)
			}
			first, firstErr = nil, nil
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
			if s.onUnknown != nil {
				s.onUnknown("")
			}
			for ev := range events {
				s.dispatch(ev)
			}
		}
	}()
}

func (s *subscriber) dispatch(ev broker.Event) {
	switch ev.Kind {
	case broker.EventReady, broker.EventScheduled:
		switch {
		case !s.queues.has(ev.Queue):
			if s.onUnknown != nil {
				s.onUnknown(ev.Queue)
			}
		case ev.Kind == broker.EventReady:
			s.onReady()
		default:
			s.onSched()
		}
	case broker.EventCancel:
		s.onCancel(ev.TaskID)
	case broker.EventResync:
		s.onReady()
		s.onSched()
		if s.onUnknown != nil {
			s.onUnknown("")
		}
	}
}

func (s *subscriber) shutdown() {
	s.cancel()
	<-s.done
}
