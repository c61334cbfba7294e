package embedded

import (
	"context"
	"fmt"

	"github.com/htqueue/htq/internal/broker"
)

// subBuffer is how many events a subscriber may fall behind before they are
// coalesced into one EventResync.
const subBuffer = 256

// subscriber is one Subscribe call. Its fields are guarded by Broker.mu.
type subscriber struct {
	ch chan broker.Event
	// behind is set when an event could not be delivered; the next delivery
	// starts with an EventResync so that the subscriber looks everywhere.
	behind bool
	stop   func() bool // stops the context.AfterFunc
}

// Subscribe delivers events in-process, at the moment of the change that
// causes them. Nothing is lost across a reconnection here (there is none),
// but a subscriber that does not keep up gets one EventResync in place of
// the events it missed.
func (b *Broker) Subscribe(ctx context.Context) (<-chan broker.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("htq: subscribe: %w", err)
	}
	if err := b.begin(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	s := &subscriber{ch: make(chan broker.Event, subBuffer)}
	b.subs[s] = struct{}{}
	s.stop = context.AfterFunc(ctx, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.dropSub(s)
	})
	return s.ch, nil
}

// dropSub ends a subscription. The caller holds b.mu.
func (b *Broker) dropSub(s *subscriber) {
	if _, ok := b.subs[s]; !ok {
		return
	}
	delete(b.subs, s)
	close(s.ch)
}

// emit sends an event to every subscriber without blocking. The caller
// holds b.mu.
func (b *Broker) emit(kind broker.EventKind, queue string) {
	b.send(broker.Event{Kind: kind, Queue: queue})
}

// send delivers ev to every subscriber without blocking. The caller holds
// b.mu.
func (b *Broker) send(ev broker.Event) {
	for s := range b.subs {
		if s.behind {
			select {
			case s.ch <- broker.Event{Kind: broker.EventResync}:
				s.behind = false
			default:
				continue
			}
		}
		select {
		case s.ch <- ev:
		default:
			s.behind = true
		}
	}
}

// emitDone sends EventDone for a watched task that completed or was
// archived, and forgets the watch. The caller holds b.mu.
func (b *Broker) emitDone(q *queue, t *task) {
	t.watched = false
	b.send(broker.Event{Kind: broker.EventDone, Queue: q.name, TaskID: t.msg.ID})
}

// emitScheduled sends EventScheduled when t is now the earliest scheduled or
// retry task of q. The caller holds b.mu.
func (b *Broker) emitScheduled(q *queue, t *task) {
	if q.nextDue() == t {
		b.emit(broker.EventScheduled, q.name)
	}
}

// nextDue returns the scheduled or retry task of q that is due first.
func (q *queue) nextDue() *task {
	s, r := q.scheduled.min(), q.retry.min()
	switch {
	case s == nil:
		return r
	case r == nil:
		return s
	case r.at.Before(s.at):
		return r
	}
	return s
}

// readyIfFirst sends EventReady when q's pending list has just gone from
// empty to not empty. The caller holds b.mu.
func (b *Broker) readyIfFirst(q *queue, before int) {
	if before == 0 && q.pending.Len() > 0 && !q.paused {
		b.emit(broker.EventReady, q.name)
	}
}
