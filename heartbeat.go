package htq

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/jonboulle/clockwork"
)

// A heartbeater renews, every third of the lease duration, the lease of
// every task the server runs, and the server's presence record. A lease the
// storage refuses to renew (the task was recovered or deleted meanwhile),
// or one that runs out while the storage cannot be reached, is lost: the
// task's handler ctx is cancelled and its outcome will not be written.
//
// While the storage cannot be reached, renewals are tried again soon
// (backing off from heartbeatRetryMin to heartbeatRetryMax) instead of a
// whole interval later, so that a lease is renewed as soon as the storage
// answers again: an outage shorter than the lease loses no lease.
type heartbeater struct {
	b        broker.Broker
	logger   *slog.Logger
	clock    clockwork.Clock
	proc     *processor
	info     *base.ServerInfo
	lease    time.Duration
	interval time.Duration
	life     lifecycle
	// failing is set while beats do not reach the storage.
	failing atomic.Bool
}

func newHeartbeater(b broker.Broker, logger *slog.Logger, clock clockwork.Clock, proc *processor, info *base.ServerInfo, lease time.Duration) *heartbeater {
	return &heartbeater{b: b, logger: logger.With("component", "htq.heartbeater"), clock: clock,
		proc: proc, info: info, lease: lease, interval: lease / 3}
}

func (h *heartbeater) start(ctx context.Context) {
	ok := h.beat(ctx)
	h.failing.Store(!ok)
	h.life.start(func(quit <-chan struct{}) {
		var retry time.Duration // the wait after a failed beat; 0 after a good one
		timer := h.clock.NewTimer(h.next(ok, &retry))
		defer timer.Stop()
		for {
			select {
			case <-quit:
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				logCall(h.logger, "clear server state", h.b.ClearServerState(ctx, h.info.ID))
				cancel()
				return
			case <-timer.Chan():
				ok := h.beat(ctx)
				h.failing.Store(!ok)
				timer.Reset(h.next(ok, &retry))
			}
		}
	})
}

// heartbeatRetryMin and heartbeatRetryMax bound the wait before a failed
// beat is tried again; the cap is how long after the storage answers
// again the leases are renewed at the latest.
const (
	heartbeatRetryMin = 100 * time.Millisecond
	heartbeatRetryMax = 500 * time.Millisecond
)

// next returns the wait before the next beat: the interval after a beat
// that reached the storage, else a backoff (doubling from
// heartbeatRetryMin to heartbeatRetryMax, never more than the interval).
func (h *heartbeater) next(ok bool, retry *time.Duration) time.Duration {
	if ok {
		*retry = 0
		return h.interval
	}
	*retry = min(max(2**retry, heartbeatRetryMin), heartbeatRetryMax, h.interval)
	return *retry
}

// callTimeout bounds one storage call of a beat: the interval while the
// storage answers, and at most heartbeatRetryMax*2 while beats fail, so
// that a call that hangs on a dead connection does not hold up the next
// try once the storage is back.
func (h *heartbeater) callTimeout() time.Duration {
	if h.failing.Load() {
		return min(h.interval, 2*heartbeatRetryMax)
	}
	return h.interval
}

// shutdown stops the heartbeats and removes the presence record.
func (h *heartbeater) shutdown() { h.life.stop() }

// beat renews every lease and the presence record, and reports whether
// the storage took them all.
func (h *heartbeater) beat(ctx context.Context) bool {
	running := h.proc.snapshot()
	// One renewal call per queue and lease length (queues may set their own).
	type group struct {
		queue string
		lease time.Duration
	}
	groups := make(map[group][]*activeTask)
	for _, at := range running {
		g := group{at.lease.Msg.Queue, at.leaseDuration}
		groups[g] = append(groups[g], at)
	}
	ok := true
	for g, tasks := range groups {
		ok = h.renew(ctx, g.queue, g.lease, tasks) && ok
	}
	info := *h.info
	info.ActiveTasks = make([]base.ActiveTask, 0, len(running))
	for _, at := range running {
		started := at.started.Load()
		if started == 0 || at.acking.Load() {
			continue // leased ahead, waiting for a worker, or done and waiting for the acker
		}
		info.ActiveTasks = append(info.ActiveTasks, base.ActiveTask{ID: at.lease.Msg.ID, Queue: at.lease.Msg.Queue, Type: at.lease.Msg.Type, Started: time.Unix(0, started)})
	}
	wctx, cancel := context.WithTimeout(ctx, h.callTimeout())
	defer cancel()
	err := h.b.WriteServerState(wctx, &info, 3*h.interval)
	h.proc.watch.failed(err)
	logCall(h.logger, "write server state", err)
	return ok && err == nil
}

// renew extends the leases of tasks of queue q and reports whether the
// storage answered.
func (h *heartbeater) renew(ctx context.Context, q string, lease time.Duration, tasks []*activeTask) bool {
	refs := make([]broker.LeaseRef, len(tasks))
	for i, at := range tasks {
		refs[i] = at.lease.Ref()
	}
	sent := h.clock.Now()
	wctx, cancel := context.WithTimeout(ctx, h.callTimeout())
	lost, err := h.b.ExtendLeases(wctx, q, refs, lease)
	cancel()
	if err != nil {
		h.proc.watch.failed(err)
		logCall(h.logger, "extend leases", err, "queue", q, "tasks", len(tasks))
		// Cut off from the storage: a lease that has run out by our own
		// reckoning is presumed taken over by the recoverer.
		now := h.clock.Now().UnixNano()
		for _, at := range tasks {
			if at.leaseUntil.Load() <= now {
				at.loseLease()
			}
		}
		return false
	}
	lostSet := make(map[string]bool, len(lost))
	for _, id := range lost {
		lostSet[id] = true
	}
	until := sent.Add(lease).UnixNano()
	for _, at := range tasks {
		if lostSet[at.lease.Msg.ID] {
			h.leaseLost(q, at)
			continue
		}
		at.leaseUntil.Store(until)
	}
	return true
}

// leaseLost handles a lease the storage did not extend. The task may have
// finished meanwhile: this beat's list of tasks was taken before, and an
// outcome written since (a completion, a retry, a requeue at shutdown)
// ends the lease. Such a task has no handler left to cancel, and the
// write of its outcome tells whether the lease held; only a task whose
// handler still runs loses its lease here, with a warning.
func (h *heartbeater) leaseLost(q string, at *activeTask) {
	if at.finished.Load() || at.aborted.Load() || !h.proc.tracks(at) {
		h.logger.Debug("lease of a finished task not extended", "queue", q, "id", at.lease.Msg.ID)
		return
	}
	h.logger.Warn("lease lost; cancelling the task", "queue", q, "id", at.lease.Msg.ID)
	at.loseLease()
}
