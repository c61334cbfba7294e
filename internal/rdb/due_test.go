package rdb

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/broker"
)

// TestDueTimeNeverEarly: due times are kept in milliseconds; one asked for
// between two milliseconds is rounded up, so the task is never forwarded
// before the instant the caller gave.
func TestDueTimeNeverEarly(t *testing.T) {
	clock := clockwork.NewFakeClockAt(epoch)
	ctx := t.Context()
	for name, enqueue := range map[string]func(b *Broker, at time.Time){
		"Enqueue": func(b *Broker, at time.Time) { mustEnqueue(t, b, msg("q", "a"), at) },
		"EnqueueBatch": func(b *Broker, at time.Time) {
			if errs := b.EnqueueBatch(ctx, []broker.EnqueueParams{{Msg: msg("q", "a"), ProcessAt: at}}); errs[0] != nil {
				t.Fatal(errs[0])
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			clock := clockwork.NewFakeClockAt(clock.Now())
			b := newTestBroker(t, clock)
			enqueue(b, clock.Now().Add(time.Second+500*time.Microsecond))
			clock.Advance(time.Second + 400*time.Microsecond)
			if res, err := b.Forward(ctx, "q", 10); err != nil || res.Moved != 0 {
				t.Fatalf("0.1 ms before its time: Forward = %+v, %v; want nothing moved", res, err)
			}
			clock.Advance(time.Millisecond)
			if res, err := b.Forward(ctx, "q", 10); err != nil || res.Moved != 1 {
				t.Fatalf("after its time: Forward = %+v, %v; want it moved", res, err)
			}
		})
	}
}
