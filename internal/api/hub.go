package api

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/htqueue/htq/internal/attempt"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/metrics"
)

// A hub holds the handler's one storage subscription and wakes the
// long-polling fetches whose queues an event names. It subscribes on the
// first fetch that waits, and resubscribes (with backoff) while its
// context lasts. It also remembers the tasks recently asked to cancel, so
// a pull worker learns of it at its next heartbeat.
type hub struct {
	ctx    context.Context
	b      store
	logger *slog.Logger

	mu       sync.Mutex
	started  bool
	waiters  map[string]map[*waiter]struct{}
	onSched  func(queue string)
	canceled map[string]time.Time
}

// cancelMemory is how long a cancel request is remembered for heartbeats.
const cancelMemory = 10 * time.Minute

// A waiter is one long-polling fetch.
type waiter struct {
	queues []string
	wake   chan struct{}
}

func newHub(ctx context.Context, b store, logger *slog.Logger) *hub {
	return &hub{ctx: ctx, b: b, logger: logger, waiters: make(map[string]map[*waiter]struct{}),
		canceled: make(map[string]time.Time)}
}

// add registers a waiter for queues (and starts the subscription).
func (h *hub) add(queues []string) *waiter {
	w := &waiter{queues: queues, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.startLocked()
	for _, q := range queues {
		set := h.waiters[q]
		if set == nil {
			set = make(map[*waiter]struct{})
			h.waiters[q] = set
		}
		set[w] = struct{}{}
	}
	return w
}

// remove unregisters a waiter.
func (h *hub) remove(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, q := range w.queues {
		if set := h.waiters[q]; set != nil {
			delete(set, w)
			if len(set) == 0 {
				delete(h.waiters, q)
			}
		}
	}
}

// start begins the subscription once (so the hub learns of cancels even
// before anyone waits).
func (h *hub) start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.startLocked()
}

func (h *hub) startLocked() {
	if h.started {
		return
	}
	h.started = true
	go h.run()
}

func (h *hub) run() {
	backoff := 100 * time.Millisecond
	for h.ctx.Err() == nil {
		events, err := h.b.Subscribe(h.ctx)
		if err != nil {
			if h.ctx.Err() != nil {
				return
			}
			h.logger.Warn("storage subscription failed; pull workers fall back to slow polling until it is back", "err", err, "retry_in", backoff)
			select {
			case <-h.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		h.wakeAll() // anything may have happened before the subscription began
		for ev := range events {
			h.dispatch(ev)
		}
	}
}

func (h *hub) dispatch(ev broker.Event) {
	switch ev.Kind {
	case broker.EventReady:
		h.wakeQueue(ev.Queue)
	case broker.EventScheduled:
		if h.onSched != nil {
			h.onSched(ev.Queue)
		}
		h.wakeQueue(ev.Queue)
	case broker.EventResync:
		if h.onSched != nil {
			h.onSched("")
		}
		h.wakeAll()
	case broker.EventCancel:
		h.mu.Lock()
		now := time.Now()
		h.canceled[ev.TaskID] = now
		if len(h.canceled) > 1024 {
			for id, at := range h.canceled {
				if now.Sub(at) > cancelMemory {
					delete(h.canceled, id)
				}
			}
		}
		h.mu.Unlock()
	}
}

// wasCanceled reports whether task id was asked to cancel lately.
func (h *hub) wasCanceled(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.canceled[id]
	return ok && time.Since(at) < cancelMemory
}

func (h *hub) wakeQueue(q string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.waiters[q] {
		w.signal()
	}
}

func (h *hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.waiters {
		for w := range set {
			w.signal()
		}
	}
}

func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// upkeep forwards the due scheduled and retry tasks, recovers the tasks
// of vanished workers and deletes the completed tasks whose retention ran
// out, of the queues pull workers fetch from: no Go Server may be running
// for them. Each queue is looked at when a fetch names it, no more often
// than its next due time (as the storage reports it) or an event asks,
// and every recoverEvery for expired leases and expired completed tasks.
type upkeep struct {
	b       store
	metrics *metrics.Metrics
	logger  *slog.Logger

	mu     sync.Mutex
	queues map[string]*queueUpkeep
}

type queueUpkeep struct {
	mu          sync.Mutex
	nextForward time.Time
	nextRecover time.Time
}

const (
	// forwardFallback is the longest a queue goes without a Forward while
	// it is fetched from (covers lost events).
	forwardFallback = 5 * time.Second
	// recoverEvery is how often a fetched queue is checked for expired
	// leases and completed tasks past their retention.
	recoverEvery = time.Second
	upkeepBatch  = 1000
)

func newUpkeep(b store, m *metrics.Metrics, logger *slog.Logger) *upkeep {
	return &upkeep{b: b, metrics: m, logger: logger, queues: make(map[string]*queueUpkeep)}
}

func (u *upkeep) get(q string) *queueUpkeep {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.queues[q]
	if s == nil {
		s = &queueUpkeep{}
		u.queues[q] = s
	}
	return s
}

// scheduled is told that queue (every queue for "") may have a task due
// earlier than thought.
func (u *upkeep) scheduled(queue string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for name, s := range u.queues {
		if queue == "" || name == queue {
			s.mu.Lock()
			s.nextForward = time.Time{}
			s.mu.Unlock()
		}
	}
}

// run does what is due for queue and returns when it next will be.
func (u *upkeep) run(ctx context.Context, queue string, retryDelay func(n int, msg string) time.Duration) time.Time {
	s := u.get(queue)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if !now.Before(s.nextRecover) {
		s.nextRecover = now.Add(recoverEvery)
		u.recover(ctx, queue, retryDelay)
		u.sweep(ctx, queue)
	}
	if !now.Before(s.nextForward) {
		s.nextForward = now.Add(forwardFallback)
		res, err := u.b.Forward(ctx, queue, upkeepBatch)
		switch {
		case err != nil:
			u.logger.Warn("forward due tasks failed", "queue", queue, "err", err)
			s.nextForward = now.Add(time.Second)
		case res.HasNext && res.NextIn < forwardFallback:
			s.nextForward = now.Add(res.NextIn)
		}
	}
	return earliest(s.nextForward, s.nextRecover)
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// sweep deletes the completed tasks of queue whose retention ran out, as
// a Go Server's janitor does, a batch at a time.
func (u *upkeep) sweep(ctx context.Context, queue string) {
	for ctx.Err() == nil {
		n, err := u.b.DeleteExpiredCompleted(ctx, queue, upkeepBatch)
		if err != nil {
			u.logger.Warn("delete expired completed tasks failed", "queue", queue, "err", err)
			return
		}
		if n < upkeepBatch {
			return
		}
	}
}

// recover sends the active tasks of queue whose lease ran out to retry, or
// to archive when they are out of retries (as the core's Recoverer).
func (u *upkeep) recover(ctx context.Context, queue string, retryDelay func(n int, msg string) time.Duration) {
	leases, err := u.b.ExpiredLeases(ctx, queue, upkeepBatch)
	if err != nil {
		u.logger.Warn("list expired leases failed", "queue", queue, "err", err)
		return
	}
	const why = "htq: task lease expired (the pull worker stopped sending heartbeats)"
	for _, l := range leases {
		msg := l.Msg
		_, err = attempt.Fail(ctx, u.b, attempt.Failed{
			Lease: l.Ref(), Msg: msg, ErrMsg: why, IsFailure: true, RequireExpired: true,
			Delay: func(retried int) time.Duration { return retryDelay(retried, why) },
		})
		if err != nil {
			u.logger.Debug("recover task", "queue", queue, "id", msg.ID, "err", err)
			continue
		}
		u.metrics.LeaseLost(queue, metrics.LeaseExpired)
		u.logger.Info("recovered the task of a vanished pull worker", "queue", queue, "id", msg.ID, "retried", msg.Retried)
	}
}
