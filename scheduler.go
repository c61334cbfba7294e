package htq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/jonboulle/clockwork"
	"github.com/robfig/cron/v3"
)

// SchedulerOpts configures a Scheduler. nil means every default.
type SchedulerOpts struct {
	// Location is the time zone cron specs are read in (default UTC).
	Location *time.Location
	// Logger receives the scheduler's logs (default slog.Default()).
	Logger *slog.Logger
	// HeartbeatInterval is how often the scheduler renews its entries'
	// record for the Inspector (default 10 s).
	HeartbeatInterval time.Duration
	// EnqueueErrorHandler is told when a periodic task could not be
	// enqueued (default: the error is logged).
	EnqueueErrorHandler func(task *Task, opts []Option, err error)
	// PostEnqueueFunc, when set, is called after each enqueue this
	// scheduler made (not for ticks another scheduler took).
	PostEnqueueFunc func(info *TaskInfo, err error)

	// clock drives the scheduler's timers (tests).
	clock clockwork.Clock
}

// Scheduler enqueues periodic tasks. Several Schedulers with the same
// entries on one storage enqueue each tick once between them: each tick is
// claimed in the storage before it is enqueued.
type Scheduler struct {
	s      *Storage
	client *Client
	id     string
	loc    *time.Location
	logger *slog.Logger
	clock  clockwork.Clock
	opts   SchedulerOpts

	mu      sync.Mutex
	entries map[string]*schedulerEntry
	state   serverState

	wake chan struct{}
	life lifecycle
}

type schedulerEntry struct {
	id    string
	spec  string
	sched cron.Schedule
	task  *Task
	opts  []Option
	next  time.Time
	prev  time.Time
}

// NewScheduler returns a Scheduler that enqueues into s.
func NewScheduler(s *Storage, opts *SchedulerOpts) *Scheduler {
	var o SchedulerOpts
	if opts != nil {
		o = *opts
	}
	if o.Location == nil {
		o.Location = time.UTC
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = 10 * time.Second
	}
	if o.clock == nil {
		o.clock = clockwork.NewRealClock()
	}
	return &Scheduler{
		s: s, client: NewClient(s), id: uuid.NewString(), loc: o.Location,
		logger: o.Logger.With("component", "htq.scheduler"), clock: o.clock, opts: o,
		entries: make(map[string]*schedulerEntry),
		wake:    make(chan struct{}, 1),
	}
}

// Register adds a periodic task: cronspec is a standard 5-field cron
// expression (minute hour day-of-month month day-of-week), a descriptor
// such as @daily or @hourly, or @every <duration>. It returns the entry's
// ID, which is the same in every Scheduler that registers the same spec,
// task and options. A bad spec is an ErrInvalidArgument error naming the
// field at fault.
func (s *Scheduler) Register(cronspec string, task *Task, opts ...Option) (entryID string, err error) {
	sched, err := parseCronSpec(cronspec)
	if err != nil {
		return "", err
	}
	if task == nil {
		return "", fmt.Errorf("%w: nil task", ErrInvalidArgument)
	}
	// Check the task and options now rather than at the first tick.
	if _, _, err := s.client.prepare(task, opts); err != nil {
		return "", fmt.Errorf("htq: register %q: %w", cronspec, err)
	}
	e := &schedulerEntry{id: entryIDFor(cronspec, task, opts), spec: cronspec, sched: sched, task: task, opts: opts}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.entries[e.id]; dup {
		return e.id, nil
	}
	e.next = nextTick(sched, s.clock.Now().In(s.loc))
	s.entries[e.id] = e
	s.signal()
	return e.id, nil
}

// Unregister removes an entry.
func (s *Scheduler) Unregister(entryID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entries[entryID]; !ok {
		return fmt.Errorf("htq: unregister %s: %w: no such entry", entryID, ErrInvalidArgument)
	}
	delete(s.entries, entryID)
	s.signal()
	return nil
}

func (s *Scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start starts the scheduler and returns.
func (s *Scheduler) Start() error {
	if s.s == nil {
		return fmt.Errorf("%w: nil Storage", ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateRunning:
		return ErrServerRunning
	case stateClosed:
		return ErrServerClosed
	}
	s.state = stateRunning
	s.life.start(s.loop)
	return nil
}

// Run starts the scheduler and blocks until SIGINT or SIGTERM, then shuts
// it down.
func (s *Scheduler) Run() error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := s.Start(); err != nil {
		return err
	}
	<-sigs
	s.Shutdown()
	return nil
}

// Shutdown stops the scheduler and removes its entries' record.
func (s *Scheduler) Shutdown() {
	s.mu.Lock()
	running := s.state == stateRunning
	s.state = stateClosed
	s.mu.Unlock()
	if !running {
		return
	}
	s.life.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := brokerOf(s.s).ClearSchedulerEntries(ctx, s.id); err != nil {
		s.logger.Warn("clear scheduler entries failed", "err", err)
	}
}

func (s *Scheduler) loop(quit <-chan struct{}) {
	admin := brokerOf(s.s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heartbeat := s.clock.NewTicker(s.opts.HeartbeatInterval)
	defer heartbeat.Stop()
	s.writeEntries(ctx, admin)
	timer := s.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Reset(s.untilNext())
		select {
		case <-quit:
			return
		case <-s.wake:
		case <-heartbeat.Chan():
			s.writeEntries(ctx, admin)
		case <-timer.Chan():
			s.fireDue(ctx, admin)
			s.writeEntries(ctx, admin) // so the Inspector shows the new prev/next
		}
	}
}

// untilNext is how long until the earliest entry is due (an hour when
// there is none: Register wakes the loop).
func (s *Scheduler) untilNext() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := time.Hour
	now := s.clock.Now()
	for _, e := range s.entries {
		d = min(d, e.next.Sub(now))
	}
	return max(d, 0)
}

// fireDue enqueues the task of every due entry whose tick this scheduler
// claims first.
func (s *Scheduler) fireDue(ctx context.Context, admin broker.Admin) {
	now := s.clock.Now().In(s.loc)
	s.mu.Lock()
	var due []*schedulerEntry
	var ticks []time.Time
	for _, e := range s.entries {
		if !e.next.After(now) {
			due = append(due, e)
			ticks = append(ticks, e.next)
			e.prev = e.next
			e.next = nextTick(e.sched, now) // missed ticks are skipped, not replayed
		}
	}
	s.mu.Unlock()
	for k, e := range due {
		tick := ticks[k]
		ttl := claimTTL(e.sched, tick)
		claimed, err := admin.ClaimTick(ctx, e.id, tick, ttl)
		if err != nil {
			s.enqueueFailed(e, fmt.Errorf("htq: claim tick %v of %s: %w", tick, e.id, err))
			continue
		}
		if !claimed {
			continue // another scheduler enqueued this tick
		}
		info, err := s.client.EnqueueContext(ctx, e.task, e.opts...)
		s.recordEnqueue(ctx, brokerOf(s.s), e, tick, info, err)
		if s.opts.PostEnqueueFunc != nil {
			s.opts.PostEnqueueFunc(info, err)
		}
		if err != nil {
			s.enqueueFailed(e, err)
			continue
		}
		s.logger.Debug("enqueued periodic task", "entry", e.id, "spec", e.spec, "tick", tick, "id", info.ID)
	}
}

func (s *Scheduler) enqueueFailed(e *schedulerEntry, err error) {
	if s.opts.EnqueueErrorHandler != nil {
		s.opts.EnqueueErrorHandler(e.task, e.opts, err)
		return
	}
	s.logger.Error("periodic task not enqueued", "entry", e.id, "spec", e.spec, "err", err)
}

func (s *Scheduler) writeEntries(ctx context.Context, admin broker.Admin) {
	s.mu.Lock()
	list := make([]*base.SchedulerEntry, 0, len(s.entries))
	for _, e := range s.entries {
		opts := make([]string, len(e.opts))
		for k, o := range e.opts {
			opts[k] = o.String()
		}
		list = append(list, &base.SchedulerEntry{ID: e.id, SchedulerID: s.id, Spec: e.spec, Type: e.task.Type(),
			Payload: e.task.Payload(), Options: opts, Next: e.next, Prev: e.prev})
	}
	s.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, s.opts.HeartbeatInterval)
	defer cancel()
	if err := admin.WriteSchedulerEntries(wctx, s.id, list, 3*s.opts.HeartbeatInterval); err != nil && !errors.Is(err, context.Canceled) {
		s.logger.Warn("write scheduler entries failed", "err", err)
	}
}

// SchedulerEntry describes a registered periodic task.
type SchedulerEntry struct {
	ID   string
	Spec string
	Task *Task
	Opts []string
	Next time.Time
	Prev time.Time
	// SchedulerID names the scheduler holding the entry.
	SchedulerID string
}

// SchedulerEntries lists the entries of every live scheduler.
func (i *Inspector) SchedulerEntries() ([]*SchedulerEntry, error) {
	list, err := brokerOf(i.s).ListSchedulerEntries(context.Background())
	if err != nil {
		return nil, fmt.Errorf("htq: list scheduler entries: %w", err)
	}
	out := make([]*SchedulerEntry, len(list))
	for k, e := range list {
		out[k] = &SchedulerEntry{ID: e.ID, Spec: e.Spec, Task: NewTask(e.Type, e.Payload), Opts: e.Options,
			Next: e.Next, Prev: e.Prev, SchedulerID: e.SchedulerID}
	}
	return out, nil
}

// entryIDFor derives an entry's ID from what it does, so that Schedulers
// with the same entries agree on their IDs (and so on their tick claims).
func entryIDFor(spec string, task *Task, opts []Option) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", spec, task.Type())
	h.Write(task.Payload())
	for _, o := range slices.Concat(task.opts, opts) {
		fmt.Fprintf(h, "\x00%s", o.String())
	}
	return hex.EncodeToString(h.Sum(nil))[:20]
}

// nextTick is the entry's first tick after t. Intervals (@every) are
// aligned to the Unix epoch, so that Schedulers started at different
// moments tick at the same instants.
func nextTick(s cron.Schedule, t time.Time) time.Time {
	if every, ok := s.(cron.ConstantDelaySchedule); ok {
		d := every.Delay
		return time.Unix(0, (t.UnixNano()/int64(d)+1)*int64(d)).In(t.Location())
	}
	return s.Next(t)
}

// claimTTL keeps a tick's claim for two periods (at least 10 s, at most a
// day), long enough for every Scheduler to have seen the tick.
func claimTTL(s cron.Schedule, tick time.Time) time.Duration {
	period := nextTick(s, tick).Sub(tick)
	return min(max(2*period, 10*time.Second), 24*time.Hour)
}

var cronFields = []struct {
	name string
	opt  cron.ParseOption
}{
	{"minute", cron.Minute}, {"hour", cron.Hour}, {"day-of-month", cron.Dom},
	{"month", cron.Month}, {"day-of-week", cron.Dow},
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseCron is p.Parse(spec), with the cron library's panics turned into
// errors: it slices out of range on a time zone prefix without a space
// ("TZ=UTC"), found by FuzzParseCronSpec, and a panic on some other input
// must not take a server down either.
func parseCron(p cron.Parser, spec string) (sched cron.Schedule, err error) {
	if (strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=")) && !strings.Contains(spec, " ") {
		return nil, errors.New("a time zone (TZ=…) must be followed by a space and the schedule")
	}
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("the cron parser failed on it: %v", r)
		}
	}()
	return p.Parse(spec)
}

// parseCronSpec parses a spec, and on failure names the field at fault.
func parseCronSpec(spec string) (cron.Schedule, error) {
	if rest, ok := strings.CutPrefix(strings.TrimSpace(spec), "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil || d < time.Second {
			return nil, fmt.Errorf("%w: cron spec %q: @every needs a duration of at least 1s", ErrInvalidArgument, spec)
		}
	}
	sched, err := parseCron(cronParser, spec)
	if err == nil {
		return sched, nil
	}
	fields := strings.Fields(spec)
	if strings.HasPrefix(strings.TrimSpace(spec), "@") || len(fields) == 0 {
		return nil, fmt.Errorf("%w: cron spec %q: %v", ErrInvalidArgument, spec, err)
	}
	if len(fields) != len(cronFields) {
		return nil, fmt.Errorf("%w: cron spec %q has %d fields; want 5 (minute hour day-of-month month day-of-week) or a descriptor such as @daily or @every 30s",
			ErrInvalidArgument, spec, len(fields))
	}
	for k, f := range cronFields {
		if _, ferr := parseCron(cron.NewParser(f.opt), fields[k]); ferr != nil {
			return nil, fmt.Errorf("%w: cron spec %q: field %d (%s) %q: %v", ErrInvalidArgument, spec, k+1, f.name, fields[k], ferr)
		}
	}
	return nil, fmt.Errorf("%w: cron spec %q: %v", ErrInvalidArgument, spec, err)
}
