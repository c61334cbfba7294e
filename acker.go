package htq

import (
	"context"
	"errors"
	"log/slog"
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
}

// maxAckBatch bounds how many outcomes one Complete call carries.
const maxAckBatch = 256

func newAcker(b broker.Broker, logger *slog.Logger) *acker {
	return &acker{b: b, logger: logger.With("component", "htq.acker"),
		in: make(chan broker.LeaseRef, 4*maxAckBatch), done: make(chan struct{})}
}

func (a *acker) start() { go a.loop() }

// complete queues the outcome of a successful task.
func (a *acker) complete(ref broker.LeaseRef) { a.in <- ref }

// shutdown writes every queued outcome and stops. Call it once no task
// can complete any more.
func (a *acker) shutdown() {
	close(a.in)
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

func (a *acker) write(batch []broker.LeaseRef) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, err := range a.b.Complete(ctx, batch) {
		switch {
		case err == nil:
		case errors.Is(err, ErrLeaseLost):
			a.logger.Warn("completed task had lost its lease; it will run again", "queue", batch[i].Queue, "id", batch[i].ID)
		default:
			logCall(a.logger, "complete", err, "queue", batch[i].Queue, "id", batch[i].ID)
		}
	}
}
