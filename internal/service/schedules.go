package service

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/model"
)

// periodic is one stored schedule as the runner registers it.
type periodic struct {
	// id names the stored schedule (for logs).
	id   string
	spec string
	task *htq.Task
	opts []htq.Option
}

// A scheduleRunner keeps an htq.Scheduler's entries equal to the schedules
// stored through the API: it re-reads them when the API says they changed
// and every interval (a change made through another htq serve process),
// registering new ones and unregistering removed ones. Several runners on
// one storage enqueue each tick once between them (the Scheduler claims
// ticks in the storage).
type scheduleRunner struct {
	sched    *htq.Scheduler
	load     func(ctx context.Context) ([]periodic, error)
	interval time.Duration
	logger   *slog.Logger

	mu         sync.Mutex
	registered map[string]string // scheduler entry ID → stored schedule ID

	wake     chan struct{}
	quit     chan struct{}
	done     chan struct{}
	started  bool
	stopOnce sync.Once
}

func newScheduleRunner(st *htq.Storage, ms broker.MetaStore, loc *time.Location, interval time.Duration, logger *slog.Logger) *scheduleRunner {
	r := &scheduleRunner{
		sched:      htq.NewScheduler(st, &htq.SchedulerOpts{Location: loc, Logger: logger}),
		interval:   interval,
		logger:     logger.With("component", "htq.schedules"),
		registered: make(map[string]string),
		wake:       make(chan struct{}, 1),
		quit:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	r.load = func(ctx context.Context) ([]periodic, error) { return loadSchedules(ctx, ms) }
	return r
}

// reload asks for the schedules to be read again now; it never blocks.
func (r *scheduleRunner) reload() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// start loads the schedules once (a failure is an error: the stored
// schedules are unreadable) and starts the scheduler and the reload loop.
func (r *scheduleRunner) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := r.sync(ctx)
	cancel()
	if err != nil {
		return err
	}
	if err := r.sched.Start(); err != nil {
		return fmt.Errorf("start scheduler: %w", err)
	}
	r.started = true
	go r.loop()
	return nil
}

func (r *scheduleRunner) loop() {
	defer close(r.done)
	ticker := time.NewTicker(r.interval)
	defer ticker.Stop()
	for {
		select {
		case <-r.quit:
			return
		case <-ticker.C:
		case <-r.wake:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := r.sync(ctx); err != nil {
			r.logger.Warn("reload schedules", "err", err)
		}
		cancel()
	}
}

// sync registers the stored schedules that are not registered and
// unregisters those no longer stored.
func (r *scheduleRunner) sync(ctx context.Context) error {
	list, err := r.load(ctx)
	if err != nil {
		return fmt.Errorf("load schedules: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	want := make(map[string]string, len(list))
	for _, p := range list {
		entryID, err := r.sched.Register(p.spec, p.task, p.opts...)
		if err != nil {
			// Stored through the API, so checked then; log and go on.
			r.logger.Warn("schedule not registered", "schedule", p.id, "spec", p.spec, "err", err)
			continue
		}
		if _, ok := r.registered[entryID]; !ok {
			r.logger.Info("schedule registered", "schedule", p.id, "spec", p.spec, "entry", entryID)
		}
		want[entryID] = p.id
	}
	for entryID, id := range r.registered {
		if _, ok := want[entryID]; !ok {
			if err := r.sched.Unregister(entryID); err != nil {
				r.logger.Warn("unregister schedule", "schedule", id, "err", err)
			}
			r.logger.Info("schedule removed", "schedule", id, "entry", entryID)
		}
	}
	r.registered = want
	return nil
}

// shutdown stops the reload loop and the scheduler.
func (r *scheduleRunner) shutdown() {
	r.stopOnce.Do(func() {
		close(r.quit)
		if r.started {
			<-r.done
		}
		r.sched.Shutdown()
	})
}

// loadSchedules reads the schedules stored through the API.
func loadSchedules(ctx context.Context, ms broker.MetaStore) ([]periodic, error) {
	stored, err := model.LoadSchedules(ctx, ms)
	if err != nil {
		return nil, err
	}
	out := make([]periodic, 0, len(stored))
	for _, s := range stored {
		task, opts, err := s.Build()
		if err != nil {
			return nil, err
		}
		out = append(out, periodic{id: s.ID, spec: s.Cron, task: task, opts: opts})
	}
	return out, nil
}
