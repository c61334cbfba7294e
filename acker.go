package htq

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/htqueue/htq/internal/broker"
)

// An acker writes the outcome of successful tasks in batches: while one
// Complete call is on its way to the storage, the next outcomes gather, so
// that a busy server acknowledges many tasks per round trip and an idle one
// acknowledges each at once.
type acker struct {
	b      broker.Broker
	logger *slog.Logger
	in     chan broker.LeaseRef
	done   chan struct{}

	mu     sync.RWMutex // guards closed against sends on a closed in
	closed bool
}

// maxAckBatch bounds how many outcomes one Complete call carries.
const maxAckBatch = 256

func newAcker(b broker.Broker, logger *slog.Logger) *acker {
	return &acker{b: b, logger: logger.With("component", "htq.acker"),
		in: make(chan broker.LeaseRef, 4*maxAckBatch), done: make(chan struct{})}
}

func (a *acker) start() { go a.loop() }

// complete queues the outcome of a successful task.
// A handler that outlives the shutdown timeout finds the acker closed; its
// task was sent back to pending, so its outcome is dropped.
func (a *acker) complete(ref broker.LeaseRef) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return
	}
	a.in <- ref
}

// shutdown writes every queued outcome and stops.
func (a *acker) shutdown() {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.in)
	}
	a.mu.Unlock()
	<-a.done
}

func (a *acker) loop() {
	defer close(a.done)
	batch := make([]broker.LeaseRef, 0, maxAckBatch)
	for ref := range a.in {
		batch = append(batch[:0], ref)
	gather:
		for len(batch) < maxAckBatch {
			select {
			case ref, ok := <-a.in:
				if !ok {
					break gather
				}
				batch = append(batch, ref)
			default:
				break gather
			}
		}
		a.write(batch)
	}
}

// write completes a batch, trying again (three times, backing off) the
// entries that failed for a reason other than a lost lease, so that a
// storage hiccup does not make finished tasks run again.
func (a *acker) write(batch []broker.LeaseRef) {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs := a.b.Complete(ctx, batch)
		cancel()
		var again []broker.LeaseRef
		var lastErr error
		for i, err := range errs {
			switch {
			case err == nil:
			case errors.Is(err, ErrLeaseLost):
				a.logger.Warn("completed task had lost its lease; it will run again", "queue", batch[i].Queue, "id", batch[i].ID)
			default:
				again, lastErr = append(again, batch[i]), err
			}
		}
		if len(again) == 0 {
			return
		}
		if attempt == 3 {
			a.logger.Error("could not record completed tasks; they will run again once their leases run out",
				"tasks", len(again), "err", lastErr)
			return
		}
		time.Sleep(backoff) // outside any lock; the acker is its own goroutine
		backoff *= 2
		batch = again
	}
}
