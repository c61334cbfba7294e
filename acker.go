package htq

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/htqueue/htq/internal/broker"
	"github.com/jonboulle/clockwork"
)

// An acker writes the outcome of successful tasks in batches: while one
// Complete call is on its way to the storage, the next outcomes gather, so
// that a busy server acknowledges many tasks per round trip and an idle one
// acknowledges each at once.
//
// A completion the storage could not take (an outage, a timeout) is tried
// again, backing off, for as long as the task's lease can still be valid:
// the task stays tracked by the processor meanwhile, so the heartbeater
// keeps renewing its lease, and an outage shorter than the lease re-runs
// nothing. Only when the lease has run out by this process's reckoning is
// the completion given up: the recoverer will have taken the task over.
type acker struct {
	b      broker.Broker
	logger *slog.Logger
	clock  clockwork.Clock
	// done is called once per task when its outcome is written or given up.
	done   func(*activeTask)
	watch  *storageWatch
	in     chan *activeTask
	closed chan struct{}
	exited chan struct{}

	mu       sync.RWMutex // guards isClosed against sends on a closed in
	isClosed bool
}

const (
	// maxAckBatch bounds how many outcomes one Complete call carries.
	maxAckBatch = 256
	// ackBackoffMin and ackBackoffMax bound the wait between two tries of
	// a completion the storage did not take.
	ackBackoffMin = 20 * time.Millisecond
	ackBackoffMax = time.Second
	// ackDrainLimit bounds how long shutdown keeps trying completions the
	// storage does not take (their leases may be longer).
	ackDrainLimit = 10 * time.Second
)

func newAcker(b broker.Broker, logger *slog.Logger, clock clockwork.Clock, done func(*activeTask), watch *storageWatch) *acker {
	return &acker{b: b, logger: logger.With("component", "htq.acker"), clock: clock, done: done, watch: watch,
		in: make(chan *activeTask, 4*maxAckBatch), closed: make(chan struct{}), exited: make(chan struct{})}
}

func (a *acker) start() { go a.loop() }

// complete queues the outcome of a successful task. A handler that
// outlives the shutdown timeout finds the acker closed; its task was sent
// back to pending, so its outcome is dropped.
func (a *acker) complete(at *activeTask) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.isClosed {
		a.done(at)
		return
	}
	a.in <- at
}

// shutdown writes every queued outcome (trying for at most ackDrainLimit
// while the storage does not take them) and stops.
func (a *acker) shutdown() {
	a.mu.Lock()
	if !a.isClosed {
		a.isClosed = true
		close(a.in)
		close(a.closed)
	}
	a.mu.Unlock()
	<-a.exited
}

func (a *acker) loop() {
	defer close(a.exited)
	var (
		pending  []*activeTask // outcomes to write, oldest first
		backoff  time.Duration // wait before the next try; 0 after a success
		closedAt time.Time
		open     = true
	)
	in := a.in // set to nil once closed and drained
	timer := a.clock.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for open || len(pending) > 0 {
		if len(pending) == 0 {
			at, ok := <-in
			if !ok {
				break
			}
			pending = append(pending, at)
		} else if backoff > 0 {
			// Wait out the backoff, gathering new outcomes meanwhile.
			timer.Reset(backoff)
		wait:
			for {
				select {
				case at, ok := <-in:
					if !ok {
						open, in = false, nil
						continue
					}
					pending = append(pending, at)
				case <-timer.Chan():
					break wait
				}
			}
		}
		// Gather what is queued already, up to a batch.
	gather:
		for open && len(pending) < maxAckBatch {
			select {
			case at, ok := <-in:
				if !ok {
					open, in = false, nil
					break gather
				}
				pending = append(pending, at)
			default:
				break gather
			}
		}
		if !open && closedAt.IsZero() {
			closedAt = a.clock.Now()
		}
		n := min(len(pending), maxAckBatch)
		failed := a.write(pending[:n], closedAt)
		pending = append(failed, pending[n:]...)
		switch {
		case len(failed) == 0:
			backoff = 0
		case backoff == 0:
			backoff = ackBackoffMin
		default:
			backoff = min(2*backoff, ackBackoffMax)
		}
	}
}

// write completes a batch and returns the tasks to try again: those the
// storage did not take for a reason other than a lost lease, while their
// leases may still be valid (and, after shutdown began, for at most
// ackDrainLimit).
func (a *acker) write(batch []*activeTask, closedAt time.Time) (again []*activeTask) {
	refs := make([]broker.LeaseRef, len(batch))
	for i, at := range batch {
		refs[i] = at.lease.Ref()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	errs := a.b.Complete(ctx, refs)
	cancel()
	now := a.clock.Now()
	drainOver := !closedAt.IsZero() && now.Sub(closedAt) > ackDrainLimit
	var lastErr error
	var givenUp int
	for i, at := range batch {
		err := errs[i]
		a.watch.failed(err)
		switch {
		case err == nil:
		case errors.Is(err, ErrLeaseLost):
			a.logger.Warn("completed task had lost its lease; it will run again", "queue", refs[i].Queue, "id", refs[i].ID)
		case at.leaseUntil.Load() > now.UnixNano() && !drainOver:
			again, lastErr = append(again, at), err
			continue
		default:
			givenUp++
			lastErr = err
		}
		a.done(at)
	}
	if givenUp > 0 {
		a.logger.Error("could not record completed tasks before their leases ran out; they will run again",
			"tasks", givenUp, "err", lastErr)
	}
	return again
}
