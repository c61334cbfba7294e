package htq

import (
	"context"
	"log/slog"
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
type heartbeater struct {
	b        broker.Broker
	logger   *slog.Logger
	clock    clockwork.Clock
	proc     *processor
	info     *base.ServerInfo
	lease    time.Duration
	interval time.Duration
	life     lifecycle
}

func newHeartbeater(b broker.Broker, logger *slog.Logger, clock clockwork.Clock, proc *processor, info *base.ServerInfo, lease time.Duration) *heartbeater {
	return &heartbeater{b: b, logger: logger.With("component", "htq.heartbeater"), clock: clock,
		proc: proc, info: info, lease: lease, interval: lease / 3}
}

func (h *heartbeater) start(ctx context.Context) {
	h.beat(ctx)
	h.life.start(func(quit <-chan struct{}) {
		ticker := h.clock.NewTicker(h.interval)
		defer ticker.Stop()
		for {
			select {
			case <-quit:
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				logCall(h.logger, "clear server state", h.b.ClearServerState(ctx, h.info.ID))
				cancel()
				return
			case <-ticker.Chan():
				h.beat(ctx)
			}
		}
	})
}

// shutdown stops the heartbeats and removes the presence record.
func (h *heartbeater) shutdown() { h.life.stop() }

func (h *heartbeater) beat(ctx context.Context) {
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
	for g, tasks := range groups {
		h.renew(ctx, g.queue, g.lease, tasks)
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
	wctx, cancel := context.WithTimeout(ctx, h.interval)
	defer cancel()
	logCall(h.logger, "write server state", h.b.WriteServerState(wctx, &info, 3*h.interval))
}

func (h *heartbeater) renew(ctx context.Context, q string, lease time.Duration, tasks []*activeTask) {
	refs := make([]broker.LeaseRef, len(tasks))
	for i, at := range tasks {
		refs[i] = at.lease.Ref()
	}
	sent := h.clock.Now()
	wctx, cancel := context.WithTimeout(ctx, h.interval)
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
		return
	}
	lostSet := make(map[string]bool, len(lost))
	for _, id := range lost {
		lostSet[id] = true
	}
	until := sent.Add(lease).UnixNano()
	for _, at := range tasks {
		if lostSet[at.lease.Msg.ID] {
			h.logger.Warn("lease lost; cancelling the task", "queue", q, "id", at.lease.Msg.ID)
			at.loseLease()
			continue
		}
		at.leaseUntil.Store(until)
	}
}
