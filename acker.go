package htq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/jonboulle/clockwork"
)

// An acker writes the outcome of successful tasks in batches: while one
// Complete call is on its way to the storage, the next outcomes gather, so
// that a busy server acknowledges many tasks per round trip and an idle one
// acknowledges each at once.
//
// A completion the storage could not take (an outage, a timeout) is tried
// again, backing off: the task stays tracked by the processor meanwhile,
// so the heartbeater keeps renewing its lease, and an outage shorter than
// the lease re-runs nothing. While the storage is unreachable it is tried
// until the storage answers, even past the lease by this process's
// reckoning (which runs out before the storage's own: it counts from
// before each renewal was sent): only the storage knows whether the lease
// still holds, and a completion that gets there before the recoverer saves
// a re-run; one that comes too late is refused (ErrLeaseLost). Another
// error is tried again while the lease may be valid. A completion is given
// up only then, or when shutdown has waited ackDrainLimit: each is logged
// with the task and the reason, for the task will run again.
type acker struct {
	b      broker.Broker
	logger *slog.Logger
	clock  clockwork.Clock
	// done is called once per task when its outcome is written or given
	// up, with the tasks of a batch together.
	done   func([]*activeTask)
	watch  *storageWatch
	in     chan *activeTask
	closed chan struct{}
	exited chan struct{}

	mu       sync.RWMutex // guards isClosed against sends on a closed in
	isClosed bool

	// refs and finished are write's buffers for the lease references of a
	// batch and the tasks it is done with, kept between batches (used by
	// the loop's goroutine alone).
	refs     []broker.LeaseRef
	finished []*activeTask
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

func newAcker(b broker.Broker, logger *slog.Logger, clock clockwork.Clock, done func([]*activeTask), watch *storageWatch) *acker {
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
		a.done([]*activeTask{at})
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
		failed := len(a.write(pending[:n], closedAt))
		// The ones to try again are pending[:failed] now: the rest follow
		// them in the same array, which the next batches reuse.
		left := failed + copy(pending[failed:], pending[n:])
		clear(pending[left:])
		pending = pending[:left]
		switch {
		case failed == 0:
			backoff = 0
		case backoff == 0:
			backoff = ackBackoffMin
		default:
			backoff = min(2*backoff, ackBackoffMax)
		}
	}
}

// write completes a batch and returns the tasks to try again (see the
// type's comment for which): the first of batch, moved there in their
// order.
func (a *acker) write(batch []*activeTask, closedAt time.Time) (again []*activeTask) {
	refs := a.refs[:0]
	for _, at := range batch {
		refs = append(refs, at.lease.Ref())
	}
	a.refs = refs
	defer clear(refs) // hold no task's strings until the next batch
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	errs := a.b.Complete(ctx, refs)
	cancel()
	again = batch[:0]
	finished := a.finished[:0]
	now := a.clock.Now()
	drainOver := !closedAt.IsZero() && now.Sub(closedAt) > ackDrainLimit
	for i, at := range batch {
		err := errs[i]
		a.watch.failed(err)
		switch {
		case err == nil:
		case errors.Is(err, ErrLeaseLost):
			a.leaseLost(refs[i], at)
		case !drainOver && (errors.Is(err, ErrUnavailable) || at.leaseUntil.Load() > now.UnixNano()):
			// The storage may have applied it and lost the answer.
			at.ackUnsure = true
			again = append(again, at)
			continue
		default:
			reason := "its lease has run out by this server's clock and the storage refused the completion"
			if drainOver {
				reason = fmt.Sprintf("shutting down: the storage did not take the completion within %v", ackDrainLimit)
			}
			if at.ackUnsure {
				reason += "; an earlier try may have recorded it"
			}
			a.logger.Error("completed task not recorded; it will run again once its lease runs out",
				"queue", refs[i].Queue, "id", refs[i].ID, "reason", reason, "err", err)
		}
		finished = append(finished, at)
	}
	a.done(finished)
	clear(finished)
	a.finished = finished[:0]
	return again
}

// leaseLost reports a completion the storage refused because the lease
// no longer holds the task. When an earlier try of it failed without an
// answer, that try may have completed the task itself (the storage
// applied it and the answer was lost): the task's state tells. A task the
// recoverer took from this server has a failure recorded since it was
// fetched (LastFailedAt), so a completed task without one was completed
// by this server's earlier try.
func (a *acker) leaseLost(ref broker.LeaseRef, at *activeTask) {
	const lost = "completed task had lost its lease; it will run again"
	if !at.ackUnsure {
		a.logger.Warn(lost, "queue", ref.Queue, "id", ref.ID)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	ti, err := a.b.GetTaskInfo(ctx, ref.Queue, ref.ID)
	cancel()
	switch {
	case err == nil && ti.State == base.StateCompleted && ti.Message.LastFailedAt.Equal(at.lease.Msg.LastFailedAt):
		a.logger.Info("completion recorded by an earlier try whose answer was lost", "queue", ref.Queue, "id", ref.ID)
	case err == nil && ti.State == base.StateCompleted:
		a.logger.Warn("completed task had lost its lease; it ran again after its lease ran out and is completed",
			"queue", ref.Queue, "id", ref.ID, "last_err", ti.Message.LastErr)
	case errors.Is(err, ErrTaskNotFound):
		a.logger.Info("completed task no longer stored: most likely an earlier try whose answer was lost recorded it (no retention)",
			"queue", ref.Queue, "id", ref.ID)
	case err != nil:
		a.logger.Warn("completed task had lost its lease, or an earlier try whose answer was lost recorded it; its state could not be read",
			"queue", ref.Queue, "id", ref.ID, "err", err)
	default:
		a.logger.Warn(lost, "queue", ref.Queue, "id", ref.ID, "state", ti.State.String())
	}
}
