package htq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/htqueue/htq/internal/attempt"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/jonboulle/clockwork"
)

// A processor fetches tasks from the server's queues and runs them on a
// pool of concurrency workers. It fetches in batches (one storage call for
// as many tasks as there is room for), hands outcomes of successful tasks
// to an acker that writes them in batches, and when every queue is empty it
// sleeps until a storage event (or the fallback poll) wakes it.
//
// While handlers are quick (under prefetchBelow on average), it leases up
// to ahead(concurrency) tasks more than it runs, so that the next batch is
// already here when a worker frees up, and while workers have tasks
// waiting or a fetch is on its way it fetches only once there is room for
// half of that many: few large fetches cost the storage much less per task
// than many small ones.
// With slower handlers it leases no more than it can run, so that no task
// waits behind a long one while another server is idle.
// Leased tasks waiting for a worker have their leases renewed like running
// ones.
//
// Leased tasks wait in one queue, in the order they were leased, and a
// worker takes the oldest only once it runs: a worker woken for a task but
// not yet scheduled onto a CPU holds none, so that the tasks start in the
// order the storage gave them (the order fair sharing by key and
// priorities chose) even when one of the process's threads is held off
// its CPU for a while.
//
// A worker that finishes a task takes the next waiting one without
// parking, and idle workers are woken one at a time: a batch wakes one,
// and each worker woken, once it has taken a task, wakes the next while
// tasks still wait. Handlers that block (the usual case) start as many
// workers as there are tasks, one wake-up each, as before; quick ones are
// run by the few workers already awake, without a wake-up and a park of
// a goroutine per task.
type processor struct {
	processorParams
	logger *slog.Logger

	// leased counts tasks leased and not yet finished; room for more is
	// signalled on freed (without blocking) whenever one finishes.
	leased atomic.Int64
	freed  chan struct{}
	// fetching counts the fetch calls on their way to the storage.
	fetching atomic.Int32
	// handlerTime is a moving average of handler durations (ns).
	handlerTime atomic.Int64
	// ready carries wake-ups to idle workers (at most one on its way at a
	// time); closed by drain.
	ready chan struct{}
	// waitMu guards waiting[next:], the leased tasks no worker has taken
	// yet, oldest first; idle, the workers parked (or parking) for lack
	// of one; woken, the wake-ups sent on ready and not yet received;
	// and closed (drain has closed ready).
	waitMu  sync.Mutex
	waiting []*activeTask
	next    int
	idle    int
	woken   int
	closed  bool
	// nwaiting is how many tasks wait (len(waiting)-next), for
	// leaseLimits to read without the lock.
	nwaiting atomic.Int64
	// wakes has one channel per fetch loop, each signalled (without
	// blocking) when a queue may have tasks.
	wakes []chan struct{}
	// quit stops the fetch loops; fetchers ends when they have stopped.
	quit      chan struct{}
	quitOnce  sync.Once
	fetchers  sync.WaitGroup
	closeOnce sync.Once
	workers   sync.WaitGroup

	acker *acker
	// watch records the storage failures this server saw.
	watch *storageWatch

	// mu guards active, the tasks tracked (leased and not forgotten), in
	// no order: each knows its index (activeTask.slot), so that tracking
	// and forgetting one costs no hashing of its lease.
	mu     sync.Mutex
	active []*activeTask
}

type processorParams struct {
	broker        broker.Broker
	logger        *slog.Logger
	clock         clockwork.Clock
	handler       Handler
	queues        *queueSet
	concurrency   int
	leaseDuration time.Duration
	pollInterval  time.Duration
	retryDelay    RetryDelayFunc
	isFailure     func(error) bool
	errorHandler  ErrorHandler
	baseContext   func() context.Context
	serverID      string
	tracing       tracing
}

// activeTask is one task leased by this server: waiting for a worker or
// running.
type activeTask struct {
	lease *broker.Lease
	// started is when a worker started it (Unix ns; 0 while it waits).
	started atomic.Int64
	// leaseDuration is how long each renewal of the lease lasts.
	leaseDuration time.Duration
	// ctx is the handler's context (taskCtx: no timer, no standard
	// context unless the handler waits on it); canceled with a cause when
	// the lease is lost, at shutdown, on request, and when the attempt
	// is over.
	ctx taskCtx
	// slot is the task's index in processor.active, -1 once forgotten
	// (guarded by processor.mu).
	slot int
	// task and writer are what the handler gets (set by run): in the
	// activeTask, they cost no allocation of their own.
	task   Task
	writer ResultWriter
	// leaseUntil is this process's estimate of when its lease runs out
	// (Unix nanoseconds of the local clock), renewed by the heartbeater.
	leaseUntil atomic.Int64
	// lost is set when the lease was lost; aborted when shutdown sent the
	// task back to pending. Either way the outcome is not written.
	lost    atomic.Bool
	aborted atomic.Bool
	// acking is set when the handler succeeded and the acker holds the
	// outcome: the task stays tracked (its lease renewed) until written.
	acking atomic.Bool
	// finished is set when the handler has returned (before its outcome
	// is written): a lost lease has nothing left to cancel.
	finished atomic.Bool
	// ackUnsure is set (by the acker alone) when a Complete of the task
	// failed without an answer: the storage may have applied it.
	ackUnsure bool
}

const (
	// maxFetchBatch bounds how many tasks one fetch call asks for, and
	// how many a processor with quick handlers leases ahead (see ahead).
	// Larger batches cost the worker and the storage less per task (one
	// call's fixed cost shared by more tasks; 64 → 128 took 0.026 → 0.015
	// fetch scripts per task at Concurrency 50 on Redis, and about 10 %
	// of the worker's CPU, docs/performance.md) at the price of more tasks
	// held by one server while handlers are quick (under prefetchBelow).
	maxFetchBatch = 128
	// prefetchBelow is the average handler time under which the processor
	// leases ahead of its workers.
	prefetchBelow = 2 * time.Millisecond
	// timeEvery is how often a worker times a quick handler (see work).
	timeEvery = 8
	// fetchBackoffMin and fetchBackoffMax bound the wait after a failed
	// fetch; the cap is how soon work resumes once the storage answers.
	fetchBackoffMin = 10 * time.Millisecond
	fetchBackoffMax = 100 * time.Millisecond
)

// errShutdown is the cause of a handler ctx cancelled at shutdown.
var errShutdown = errors.New("htq: server shutting down")

func newProcessor(p processorParams) *processor {
	proc := &processor{
		processorParams: p,
		logger:          p.logger.With("component", "htq.processor"),
		freed:           make(chan struct{}, 1),
		ready:           make(chan struct{}, 1),
		wakes:           makeWakes(fetchLoops(p.concurrency)),
		quit:            make(chan struct{}),
	}
	proc.watch = newStorageWatch(p.clock)
	proc.acker = newAcker(p.broker, p.logger, p.clock, proc.forgetAll, proc.watch)
	// Until handlers have shown they are quick, assume they are not.
	proc.handlerTime.Store(int64(time.Second))
	return proc
}

func (p *processor) start(ctx context.Context) {
	p.acker.start()
	for i := 0; i < p.concurrency; i++ {
		p.workers.Add(1)
		go p.work()
	}
	for _, wake := range p.wakes {
		p.fetchers.Add(1)
		go p.fetchLoop(ctx, wake)
	}
}

// fetchLoops is how many fetch loops a processor runs: with several, one
// loop's fetch is on its way while another's tasks run, so that a busy
// server does not wait a round trip between batches.
func fetchLoops(concurrency int) int {
	return min(4, max(1, concurrency/4))
}

func makeWakes(n int) []chan struct{} {
	wakes := make([]chan struct{}, n)
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
	}
	return wakes
}

// signal wakes the fetch loops that sleep; it never blocks.
func (p *processor) signal() {
	for _, wake := range p.wakes {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// stopFetching stops the fetch loops, waits until they have stopped, and
// sends tasks leased but not started back to pending.
func (p *processor) stopFetching() {
	p.quitOnce.Do(func() { close(p.quit) })
	p.fetchers.Wait()
	p.waitMu.Lock()
	left := append([]*activeTask(nil), p.waiting[p.next:]...)
	clear(p.waiting)
	p.waiting, p.next = p.waiting[:0], 0
	p.nwaiting.Store(0)
	p.waitMu.Unlock()
	for _, at := range left {
		p.requeue(at)
		p.forget(at)
		p.release(1)
	}
}

// ahead is how many tasks a processor with quick handlers leases beyond
// its concurrency: eight per worker, at least concurrency and at most
// maxFetchBatch unless concurrency is larger.
func ahead(concurrency int) int {
	return max(concurrency, min(8*concurrency, maxFetchBatch))
}

// reserve waits for room to lease tasks and reserves up to max of it; it
// reports false on quit. While handlers are quick and workers have leased
// tasks waiting or another fetch is on its way, it waits for room for half
// of ahead(concurrency) tasks (or max), so that fetches come in large
// batches; a worker that takes the last waiting task and a fetch that
// comes back signal freed, so that the next fetch is not late.
func (p *processor) reserve(max int) (int, bool) {
	for {
		limit, want := p.leaseLimits(max)
		cur := p.leased.Load()
		if room := limit - cur; room >= want {
			n := min(room, int64(max))
			if p.leased.CompareAndSwap(cur, cur+n) {
				return int(n), true
			}
			continue
		}
		select {
		case <-p.quit:
			return 0, false
		case <-p.freed:
		}
	}
}

// leaseLimits returns how many tasks the processor may hold leased now
// and the least room a fetch of up to max tasks waits for (see reserve).
func (p *processor) leaseLimits(max int) (limit, want int64) {
	limit, want = int64(p.concurrency), 1
	if time.Duration(p.handlerTime.Load()) < prefetchBelow {
		more := int64(ahead(p.concurrency))
		limit += more
		if p.nwaiting.Load() > 0 || p.fetching.Load() > 0 {
			want = min(more/2, int64(max))
		}
	}
	return limit, want
}

// release gives back room for n leases, and wakes a fetch loop waiting in
// reserve when there is room enough for it now (not on every task while
// it waits for a larger batch).
func (p *processor) release(n int) {
	cur := p.leased.Add(-int64(n))
	if limit, want := p.leaseLimits(maxFetchBatch); limit-cur >= want {
		p.signalFreed()
	}
}

// signalFreed wakes a fetch loop waiting in reserve; it never blocks.
func (p *processor) signalFreed() {
	select {
	case p.freed <- struct{}{}:
	default:
	}
}

func (p *processor) fetchLoop(ctx context.Context, wake <-chan struct{}) {
	defer p.fetchers.Done()
	poll := p.clock.NewTimer(p.pollInterval)
	defer poll.Stop()
	var backoff time.Duration // after failed fetches
	for {
		n, ok := p.reserve(maxFetchBatch)
		if !ok {
			return
		}
		p.fetching.Add(1)
		leases, wait, err := p.fetch(ctx, n)
		p.fetching.Add(-1)
		p.signalFreed() // a fetch waiting for this one to come back decides again
		if len(leases) < n {
			p.release(n - len(leases))
		}
		if err != nil {
			p.watch.failed(err)
			// Back off, but briefly: the storage is asked again within
			// fetchBackoffMax of answering again (a storage event of its
			// reconnection wakes the loop sooner).
			backoff = min(max(2*backoff, fetchBackoffMin), fetchBackoffMax)
			if backoff == fetchBackoffMin {
				logCall(p.logger, "fetch", err)
			}
			if !p.sleep(poll, wake, backoff) {
				return
			}
			continue
		}
		if backoff > 0 {
			p.logger.Info("fetching again: the storage answers")
			backoff = 0
		}
		if len(leases) > 0 {
			p.hand(p.track(leases, p.clock.Now()))
			continue
		}
		if wait == 0 || wait > p.pollInterval {
			wait = p.pollInterval
		}
		if !p.sleep(poll, wake, wait) {
			return
		}
	}
}

// track registers the tasks of leases, fetched by a call answered at now,
// so that the heartbeater renews their leases.
//
// The batch's tasks share one array: one allocation per fetch instead of
// one per task (as the broker's leases and messages do). A handler that
// keeps its context or task after it returns keeps that array alive.
func (p *processor) track(leases []*broker.Lease, now time.Time) []*activeTask {
	ats := make([]*activeTask, len(leases))
	batch := make([]activeTask, len(leases))
	base := p.baseContext()
	for i, l := range leases {
		at := &batch[i]
		at.lease, at.leaseDuration = l, l.Duration
		if at.leaseDuration <= 0 {
			at.leaseDuration = p.leaseDuration
		}
		at.leaseUntil.Store(now.Add(at.leaseDuration).UnixNano())
		at.ctx.Init(base)
		ats[i] = at
	}
	p.mu.Lock()
	for _, at := range ats {
		at.slot = len(p.active)
		p.active = append(p.active, at)
	}
	p.mu.Unlock()
	return ats
}

// hand queues leased tasks for the workers and wakes one idle worker
// (which wakes the next: see nextTask). It never blocks.
func (p *processor) hand(ats []*activeTask) {
	p.waitMu.Lock()
	p.waiting = append(p.waiting, ats...)
	p.nwaiting.Add(int64(len(ats)))
	p.wakeLocked()
	p.waitMu.Unlock()
}

// wakeLocked wakes an idle worker when tasks wait and no wake-up is on
// its way already. waitMu is held; it never blocks (ready has room for
// the one wake-up).
func (p *processor) wakeLocked() {
	if p.next < len(p.waiting) && p.idle > 0 && p.woken == 0 && !p.closed {
		p.woken++
		p.ready <- struct{}{}
	}
}

// nextTask returns the oldest waiting task, waiting (parked) for one while
// there is none; nil once drain has closed ready and none is left. A
// worker woken that takes a task wakes another while more wait, and one
// that takes the last signals freed (a fetch that waits for a larger
// batch goes now).
func (p *processor) nextTask() *activeTask {
	p.waitMu.Lock()
	for p.next == len(p.waiting) {
		if p.closed {
			p.waitMu.Unlock()
			return nil
		}
		p.idle++
		p.waitMu.Unlock()
		_, ok := <-p.ready
		p.waitMu.Lock()
		p.idle--
		if ok {
			p.woken--
		}
	}
	at := p.takeLocked()
	p.wakeLocked()
	last := p.next == len(p.waiting)
	p.waitMu.Unlock()
	if last {
		p.signalFreed()
	}
	return at
}

// takeLocked returns the oldest task in waiting, which is not empty;
// waitMu is held.
func (p *processor) takeLocked() *activeTask {
	p.nwaiting.Add(-1)
	at := p.waiting[p.next]
	p.waiting[p.next] = nil
	p.next++
	if p.next == len(p.waiting) || p.next >= 64 && 2*p.next >= len(p.waiting) {
		// Reuse the array: a queue that never empties does not grow.
		n := copy(p.waiting, p.waiting[p.next:])
		clear(p.waiting[n:])
		p.waiting, p.next = p.waiting[:n], 0
	}
	return at
}

// forget stops tracking a task (its lease is no longer renewed).
func (p *processor) forget(at *activeTask) {
	at.ctx.Cancel(nil)
	p.mu.Lock()
	p.forgetLocked(at)
	p.mu.Unlock()
}

// forgetAll is forget of several tasks, under one lock (the acker's
// batches).
func (p *processor) forgetAll(ats []*activeTask) {
	for _, at := range ats {
		at.ctx.Cancel(nil)
	}
	p.mu.Lock()
	for _, at := range ats {
		p.forgetLocked(at)
	}
	p.mu.Unlock()
}

// forgetLocked removes at from active, unless it is forgotten already;
// p.mu is held.
func (p *processor) forgetLocked(at *activeTask) {
	i := at.slot
	if i < 0 || i >= len(p.active) || p.active[i] != at {
		return // forgotten already
	}
	last := len(p.active) - 1
	p.active[i] = p.active[last]
	p.active[i].slot = i
	p.active[last] = nil
	p.active = p.active[:last]
	at.slot = -1
}

// work runs tasks until ready is closed. A task whose outcome the acker
// holds frees its worker at once but stays tracked until the acker is done
// with it (forget).
//
// While handlers are quick, a worker times one task in timeEvery (a clock
// read costs hundreds of nanoseconds on some virtual machines, a good
// part of a quick task's cost); slower ones it times every time.
func (p *processor) work() {
	defer p.workers.Done()
	for n := 0; ; n++ {
		at := p.nextTask()
		if at == nil {
			return
		}
		p.run(at, n%timeEvery == 0 || time.Duration(p.handlerTime.Load()) >= prefetchBelow)
		if !at.acking.Load() {
			p.forget(at)
		}
		p.release(1)
	}
}

// sleep waits for a wake-up, the poll timer (reset to d) or quit, and
// reports false on quit.
func (p *processor) sleep(poll clockwork.Timer, wake <-chan struct{}, d time.Duration) bool {
	poll.Reset(d)
	select {
	case <-p.quit:
		return false
	case <-wake:
	case <-poll.Chan():
	}
	return true
}

// fetch tries the queues in this fetch's order and returns the tasks of
// the first queue that has any. When queues had nothing only because their
// settings (max concurrency, rate limit) held them back, wait says how long
// until one may give a task.
func (p *processor) fetch(ctx context.Context, n int) (leases []*broker.Lease, wait time.Duration, err error) {
	var firstErr error
	for _, q := range p.queues.current().order() {
		leases, err := p.broker.Fetch(ctx, broker.FetchParams{Queue: q, Max: n, LeaseDuration: p.leaseDuration, ServerID: p.serverID})
		var throttled *broker.ThrottledError
		switch {
		case errors.As(err, &throttled):
			if wait == 0 || throttled.RetryIn < wait {
				wait = throttled.RetryIn
			}
			continue
		case err != nil:
			if firstErr == nil {
				firstErr = fmt.Errorf("queue %s: %w", q, err)
			}
			continue
		}
		if len(leases) > 0 {
			return leases, 0, nil
		}
	}
	return nil, wait, firstErr
}

// run processes one leased task and writes its outcome; with timeIt, it
// folds the handler's duration into handlerTime.
func (p *processor) run(at *activeTask, timeIt bool) {
	l := at.lease
	msg := l.Msg
	now := p.clock.Now()
	at.started.Store(now.UnixNano())

	at.ctx.md.msg = msg
	if msg.Workflow != "" {
		at.ctx.md.deps = &depsLoader{b: p.broker, lease: l.Ref()}
	}
	if deadline, ok := taskDeadline(msg, now); ok {
		at.ctx.SetDeadline(deadline)
	}
	// The handler's context ends with the attempt (the ErrorHandler
	// still gets it live).
	defer at.ctx.Cancel(nil)
	ctx, span := p.tracing.startAttempt(&at.ctx, msg)
	at.writer = ResultWriter{ctx: ctx, b: p.broker, lease: l}
	at.task = Task{typename: msg.Type, payload: msg.Payload, w: &at.writer}
	task := &at.task
	var err error
	if at.ctx.ErrAt(now) != nil {
		err = context.Cause(ctx) // the deadline passed (or the lease was lost) before it could start
	} else {
		err = p.perform(ctx, task)
	}
	at.finished.Store(true)
	if timeIt {
		p.observe(p.clock.Since(now))
	}

	switch {
	case at.aborted.Load():
		// Shutdown sent it back to pending; another worker will run it.
		endAttempt(span, "requeued", err)
	case at.lost.Load():
		p.logger.Warn("task finished after its lease was lost; outcome dropped", "queue", msg.Queue, "id", msg.ID, "err", err)
		endAttempt(span, "lease_lost", err)
	case err == nil:
		at.acking.Store(true)
		p.acker.complete(at)
		endAttempt(span, "success", nil)
	default:
		state, werr := p.fail(ctx, l, task, err)
		outcome := state.String()
		if errors.Is(werr, ErrLeaseLost) {
			outcome = "lease_lost"
		}
		endAttempt(span, outcome, err)
	}
}

// observe folds one handler duration into the moving average (1/8 weight).
func (p *processor) observe(d time.Duration) {
	old := p.handlerTime.Load()
	p.handlerTime.Store(old - old/8 + int64(d)/8)
}

// taskDeadline is when an attempt that starts at now must end.
func taskDeadline(msg *base.TaskMessage, now time.Time) (time.Time, bool) {
	var d time.Time
	if msg.Timeout > 0 {
		d = now.Add(msg.Timeout)
	}
	if !msg.Deadline.IsZero() && (d.IsZero() || msg.Deadline.Before(d)) {
		d = msg.Deadline
	}
	return d, !d.IsZero()
}

// perform calls the handler, turning a panic into an error with its stack.
func (p *processor) perform(ctx context.Context, task *Task) (err error) {
	defer func() {
		if x := recover(); x != nil {
			err = fmt.Errorf("panic: %v\n%s", x, debug.Stack())
		}
	}()
	return p.handler.ProcessTask(ctx, task)
}

// fail writes the outcome of a failed attempt by attempt.Fail's rule: err
// wrapping SkipRetry archives, Config.IsFailure says whether it counts as a
// failure, Config.RetryDelayFunc gives the delay of a retry.
// It returns the state it moved the task to and the error of that write
// (logged here).
func (p *processor) fail(ctx context.Context, l *broker.Lease, task *Task, err error) (base.TaskState, error) {
	msg := l.Msg
	if p.errorHandler != nil {
		p.errorHandler.HandleError(ctx, task, err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	state, werr := attempt.Fail(wctx, p.broker, attempt.Failed{
		Lease: l.Ref(), Msg: msg, ErrMsg: err.Error(),
		SkipRetry: errors.Is(err, SkipRetry), IsFailure: p.isFailure(err),
		Delay: func(retried int) time.Duration { return p.retryDelay(retried, err, task) },
	})
	logCall(p.logger, "write failed attempt", werr, "queue", msg.Queue, "id", msg.ID)
	return state, werr
}

// drain waits up to timeout for running tasks, then cancels the ones still
// running and sends them back to pending, and flushes the acker. Fetching
// must have stopped.
func (p *processor) drain(timeout time.Duration) {
	p.closeReady()
	done := make(chan struct{})
	go func() {
		p.workers.Wait()
		close(done)
	}()
	timer := p.clock.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.Chan():
		p.requeueRunning()
	}
	p.acker.shutdown()
}

// closeReady closes ready: idle workers, and each worker once no task
// waits, return.
func (p *processor) closeReady() {
	p.closeOnce.Do(func() {
		p.waitMu.Lock()
		p.closed = true
		close(p.ready)
		p.waitMu.Unlock()
	})
}

// requeue sends one leased task back to pending.
func (p *processor) requeue(at *activeTask) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	at.aborted.Store(true)
	at.ctx.Cancel(errShutdown)
	ref := at.lease.Ref()
	err := p.broker.Requeue(ctx, ref)
	if err == nil {
		p.logger.Info("task sent back to pending at shutdown", "queue", ref.Queue, "id", ref.ID)
	}
	logCall(p.logger, "requeue at shutdown", err, "queue", ref.Queue, "id", ref.ID)
}

// requeueRunning cancels every running task and puts it back to pending
// (not those that succeeded and wait for the acker).
func (p *processor) requeueRunning() {
	for _, at := range p.snapshot() {
		if !at.acking.Load() {
			p.requeue(at)
		}
	}
}

// tracks reports whether at is still tracked (not forgotten).
func (p *processor) tracks(at *activeTask) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return at.slot >= 0 && at.slot < len(p.active) && p.active[at.slot] == at
}

// snapshot returns the tasks running now.
func (p *processor) snapshot() []*activeTask {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*activeTask(nil), p.active...)
}

// loseLease marks a task's lease lost and cancels its handler.
func (at *activeTask) loseLease() {
	if at.lost.CompareAndSwap(false, true) {
		at.ctx.Cancel(ErrLeaseLost)
	}
}

// cancelTask cancels the handler running task id, if this server runs it,
// with ErrTaskCanceled as the cause. The handler's error then decides the
// outcome as usual.
func (p *processor) cancelTask(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, at := range p.active {
		if at.lease.Msg.ID == id {
			p.logger.Info("cancelling task on request", "queue", at.lease.Msg.Queue, "id", id)
			at.ctx.Cancel(ErrTaskCanceled)
		}
	}
}
