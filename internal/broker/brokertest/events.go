package brokertest

import (
	"context"
	"time"

	"github.com/htqueue/htq/internal/broker"
)

func eventTests() []testCase {
	return []testCase{
		{"ReadyOnEnqueue", func(e *env) {
			q := uniqueQueue("ev-enqueue")
			ch := e.subscribe()
			e.add(q)
			e.waitEvent(ch, broker.EventReady, q)
		}},
		{"ReadyOnEnqueueBatch", func(e *env) {
			q := uniqueQueue("ev-batch")
			ch := e.subscribe()
			errs := e.b.EnqueueBatch(e.ctx, []broker.EnqueueParams{{Msg: e.newMsg(q)}, {Msg: e.newMsg(q)}})
			for _, err := range errs {
				wantNoErr(e, "EnqueueBatch", err)
			}
			e.waitEvent(ch, broker.EventReady, q)
		}},
		{"ReadyAgainAfterDrained", func(e *env) {
			q := uniqueQueue("ev-again")
			ch := e.subscribe()
			e.add(q)
			e.waitEvent(ch, broker.EventReady, q)
			e.drain(q)
			e.add(q)
			e.waitEvent(ch, broker.EventReady, q)
		}},
		{"ReadyOnForward", func(e *env) {
			q := uniqueQueue("ev-forward")
			ch := e.subscribe()
			e.schedule(q, time.Minute)
			e.waitEvent(ch, broker.EventScheduled, q)
			e.advance(time.Minute)
			e.wantForward(e.forward(q), 1, false, 0)
			e.waitEvent(ch, broker.EventReady, q)
		}},
		{"ReadyOnRequeue", func(e *env) {
			q := uniqueQueue("ev-requeue")
			e.add(q)
			l := e.fetchOne(q)
			ch := e.subscribe()
			wantNoErr(e, "Requeue", e.b.Requeue(e.ctx, l.Ref()))
			e.waitEvent(ch, broker.EventReady, q)
		}},
		{"ScheduledOnEnqueue", func(e *env) {
			q := uniqueQueue("ev-scheduled")
			ch := e.subscribe()
			e.schedule(q, time.Hour)
			e.waitEvent(ch, broker.EventScheduled, q)
		}},
		{"ScheduledOnRetry", func(e *env) {
			q := uniqueQueue("ev-retry")
			e.add(q)
			l := e.fetchOne(q)
			ch := e.subscribe()
			e.retry(l.Ref(), time.Minute, "x")
			e.waitEvent(ch, broker.EventScheduled, q)
		}},
		{"ManySubscribers", func(e *env) {
			q := uniqueQueue("ev-many")
			ch1, ch2 := e.subscribe(), e.subscribe()
			e.add(q)
			e.waitEvent(ch1, broker.EventReady, q)
			e.waitEvent(ch2, broker.EventReady, q)
		}},
		{"ClosedOnCancel", func(e *env) {
			ctx, cancel := context.WithCancel(e.ctx)
			ch, err := e.b.Subscribe(ctx)
			wantNoErr(e, "Subscribe", err)
			cancel()
			timer := time.NewTimer(eventTimeout)
			defer timer.Stop()
			for {
				select {
				case _, ok := <-ch:
					if !ok {
						// Other subscriptions and the broker keep working.
						q := uniqueQueue("ev-after-cancel")
						ch2 := e.subscribe()
						e.add(q)
						e.waitEvent(ch2, broker.EventReady, q)
						return
					}
				case <-timer.C:
					e.Fatalf("event channel still open %v after its context was cancelled", eventTimeout)
				}
			}
		}},
	}
}
