package rdb

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Reconnection backoff of a subscription.
const (
	subscribeBackoffMin = 50 * time.Millisecond
	subscribeBackoffMax = 5 * time.Second
)

// Subscribe listens on the events channel over a dedicated connection; see
// broker.Broker. It returns once the subscription is active, so that every
// event published after it returns is delivered (barring a reconnection).
// When the connection is lost it reconnects with backoff and then sends
// one EventResync. Events are coalesced while the reader is slow: a queue
// with several pending hints of one kind gets one event. The channel is
// closed when ctx is done or the Broker is closed.
func (b *Broker) Subscribe(ctx context.Context) (<-chan broker.Event, error) {
	b.subsMu.Lock()
	if b.closed.Load() {
		b.subsMu.Unlock()
		return nil, fmt.Errorf("rdb: subscribe: %w", base.ErrStorageClosed)
	}
	b.subsWG.Add(2)
	b.subsMu.Unlock()

	// The subscription ends with ctx or with the Broker.
	sctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(b.life, cancel)
	s := &subscription{
		b:      b,
		out:    make(chan broker.Event, 64),
		notify: make(chan struct{}, 1),
		ready:  make(chan error, 1),
		queued: make(map[broker.Event]struct{}),
	}
	go func() {
		defer b.subsWG.Done()
		defer cancel()
		defer stop()
		s.receive(sctx)
	}()
	go func() {
		defer b.subsWG.Done()
		s.forward(sctx)
	}()
	select {
	case err := <-s.ready:
		if err != nil {
			return nil, fmt.Errorf("rdb: subscribe: %w", err)
		}
		return s.out, nil
	case <-sctx.Done():
		// The goroutines see sctx too and end by themselves.
		if b.closed.Load() {
			return nil, fmt.Errorf("rdb: subscribe: %w", base.ErrStorageClosed)
		}
		return nil, fmt.Errorf("rdb: subscribe: %w", ctx.Err())
	}
}

// subscription is one Subscribe call: receive reads the connection and
// queues events without ever blocking the connection's reader; forward
// hands the queued events to the caller.
type subscription struct {
	b      *Broker
	out    chan broker.Event
	notify chan struct{} // cap 1: something was queued
	ready  chan error    // cap 1: the first subscription's outcome

	mu     sync.Mutex
	order  []broker.Event
	queued map[broker.Event]struct{}
}

func (s *subscription) push(e broker.Event) {
	s.mu.Lock()
	if _, ok := s.queued[e]; !ok {
		s.queued[e] = struct{}{}
		s.order = append(s.order, e)
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *subscription) take() []broker.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs := s.order
	s.order = nil
	clear(s.queued)
	return evs
}

// receive keeps a subscription to the events channel until ctx is done,
// reconnecting with backoff.
func (s *subscription) receive(ctx context.Context) {
	b := s.b
	var subscribed atomic.Bool // some subscription has been confirmed
	var readyOnce sync.Once
	ready := func(err error) { readyOnce.Do(func() { s.ready <- err }) }
	onSub := func(p rueidis.PubSubSubscription) {
		if p.Kind != "subscribe" {
			return
		}
		if subscribed.CompareAndSwap(false, true) {
			ready(nil)
		} else {
			s.push(broker.Event{Kind: broker.EventResync})
		}
	}
	onMsg := func(m rueidis.PubSubMessage) {
		if e, ok := decodeEvent(m.Message); ok {
			s.push(e)
		}
	}
	rctx := rueidis.WithOnSubscriptionHook(ctx, onSub)
	backoff := subscribeBackoffMin
	for {
		start := time.Now()
		err := b.c.Dedicated(func(dc rueidis.DedicatedClient) error {
			return dc.Receive(rctx, dc.B().Subscribe().Channel(channelEvents).Build(), onMsg)
		})
		if ctx.Err() != nil {
			ready(ctx.Err())
			return
		}
		if !subscribed.Load() {
			ready(err)
			return
		}
		if time.Since(start) > subscribeBackoffMax {
			backoff = subscribeBackoffMin // it was up for a while
		}
		b.log.Warn("rdb: event subscription lost; reconnecting", "err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		backoff = min(2*backoff, subscribeBackoffMax)
	}
}

// forward hands queued events to the caller until ctx is done, then
// closes the channel.
func (s *subscription) forward(ctx context.Context) {
	defer close(s.out)
	for {
		select {
		case <-s.notify:
		case <-ctx.Done():
			return
		}
		for _, e := range s.take() {
			select {
			case s.out <- e:
			case <-ctx.Done():
				return
			}
		}
	}
}

// decodeEvent parses a message of the events channel.
func decodeEvent(msg string) (broker.Event, bool) {
	if q, ok := strings.CutPrefix(msg, eventReadyPrefix); ok && q != "" {
		return broker.Event{Kind: broker.EventReady, Queue: q}, true
	}
	if q, ok := strings.CutPrefix(msg, eventScheduledPrefix); ok && q != "" {
		return broker.Event{Kind: broker.EventScheduled, Queue: q}, true
	}
	if id, ok := strings.CutPrefix(msg, eventCancelPrefix); ok && id != "" {
		return broker.Event{Kind: broker.EventCancel, TaskID: id}, true
	}
	if rest, ok := strings.CutPrefix(msg, eventDonePrefix); ok {
		// Queue names hold no ':', so the first one ends the queue.
		if q, id, ok := strings.Cut(rest, ":"); ok && q != "" && id != "" {
			return broker.Event{Kind: broker.EventDone, Queue: q, TaskID: id}, true
		}
	}
	return broker.Event{}, false
}
