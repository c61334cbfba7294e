package htq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestServerProcessesTasks(t *testing.T) {
	st := openTestStorage(t)
	const n = 500
	var mu sync.Mutex
	seen := map[string]int{}
	all := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		id, ok := GetTaskID(ctx)
		q, _ := GetQueueName(ctx)
		if !ok || q != "work" || task.Type() != "job" {
			return fmt.Errorf("bad context: %q %q %q", id, q, task.Type())
		}
		mu.Lock()
		seen[id]++
		if len(seen) == n {
			close(all)
		}
		mu.Unlock()
		return nil
	})
	startServer(t, st, quietConfig(Config{Concurrency: 8, Queues: map[string]int{"work": 1}}), h)
	c := NewClient(st)
	ids := map[string]bool{}
	for i := 0; i < n; i++ {
		info, err := c.Enqueue(NewTask("job", []byte(fmt.Sprint(i))), Queue("work"))
		if err != nil {
			t.Fatal(err)
		}
		ids[info.ID] = true
	}
	recv(t, all, 30*time.Second, "all tasks processed")
	mu.Lock()
	defer mu.Unlock()
	for id, count := range seen {
		if !ids[id] || count != 1 {
			t.Fatalf("task %s processed %d times (known: %v)", id, count, ids[id])
		}
	}
	// Successful tasks without retention are gone.
	waitFor(t, 5*time.Second, "completed tasks deleted", func() bool {
		for id := range ids {
			if _, err := brokerOf(st).GetTaskInfo(context.Background(), "work", id); !errors.Is(err, ErrTaskNotFound) {
				return false
			}
		}
		return true
	})
}

func TestServerRetriesThenSucceeds(t *testing.T) {
	st := openTestStorage(t)
	var attempts atomic.Int32
	done := make(chan int, 1)
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		n, _ := GetRetryCount(ctx)
		max, _ := GetMaxRetry(ctx)
		if attempts.Add(1) < 3 {
			return errors.New("flaky")
		}
		if max != 5 {
			return fmt.Errorf("max retry %d", max)
		}
		done <- n
		return nil
	})
	startServer(t, st, quietConfig(Config{Concurrency: 2, RetryDelayFunc: func(int, error, *Task) time.Duration { return 10 * time.Millisecond }}), h)
	info, err := NewClient(st).Enqueue(NewTask("flaky", nil), MaxRetry(5), Retention(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n := recv(t, done, 10*time.Second, "third attempt"); n != 2 {
		t.Fatalf("third attempt saw retry count %d, want 2", n)
	}
	waitFor(t, 5*time.Second, "task completed", func() bool { return taskInfo(t, st, "default", info.ID).State == TaskStateCompleted })
	got := taskInfo(t, st, "default", info.ID)
	if got.Retried != 2 || got.LastErr != "flaky" || got.CompletedAt.IsZero() {
		t.Fatalf("completed task: %+v", got)
	}
}

func TestServerArchives(t *testing.T) {
	st := openTestStorage(t)
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		switch task.Type() {
		case "skip":
			return fmt.Errorf("bad payload: %w", SkipRetry)
		case "panic":
			panic("boom")
		case "exhausted":
			return errors.New("always fails")
		}
		return nil
	})
	startServer(t, st, quietConfig(Config{RetryDelayFunc: func(int, error, *Task) time.Duration { return 0 }}), h)
	c := NewClient(st)
	skip, _ := c.Enqueue(NewTask("skip", nil), MaxRetry(10))
	pnc, _ := c.Enqueue(NewTask("panic", nil), MaxRetry(0))
	exh, _ := c.Enqueue(NewTask("exhausted", nil), MaxRetry(2))
	for _, tc := range []struct {
		id, errPart string
		retried     int
	}{{skip.ID, "skip retry", 0}, {pnc.ID, "panic: boom", 0}, {exh.ID, "always fails", 2}} {
		waitFor(t, 10*time.Second, tc.id+" archived", func() bool { return taskInfo(t, st, "default", tc.id).State == TaskStateArchived })
		got := taskInfo(t, st, "default", tc.id)
		if !strings.Contains(got.LastErr, tc.errPart) || got.Retried != tc.retried || got.LastFailedAt.IsZero() {
			t.Errorf("archived task %s: LastErr %q Retried %d", tc.id, got.LastErr, got.Retried)
		}
	}
	if got := taskInfo(t, st, "default", pnc.ID); !strings.Contains(got.LastErr, "goroutine") {
		t.Errorf("panic LastErr has no stack: %q", got.LastErr)
	}
}

func TestServerNonFailureErrorKeepsRetries(t *testing.T) {
	st := openTestStorage(t)
	errBusy := errors.New("rate limited")
	var calls atomic.Int32
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		if calls.Add(1) <= 3 {
			return errBusy
		}
		return nil
	})
	startServer(t, st, quietConfig(Config{
		IsFailure:      func(err error) bool { return !errors.Is(err, errBusy) },
		RetryDelayFunc: func(int, error, *Task) time.Duration { return 0 },
	}), h)
	info, _ := NewClient(st).Enqueue(NewTask("t", nil), MaxRetry(1), Retention(time.Hour))
	waitFor(t, 10*time.Second, "completed", func() bool { return taskInfo(t, st, "default", info.ID).State == TaskStateCompleted })
	if got := taskInfo(t, st, "default", info.ID); got.Retried != 0 {
		t.Fatalf("non-failure errors used up retries: Retried = %d", got.Retried)
	}
}

func TestHandlerTimeoutAndDeadline(t *testing.T) {
	st := openTestStorage(t)
	causes := make(chan error, 2)
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		<-ctx.Done()
		causes <- ctx.Err()
		return ctx.Err()
	})
	startServer(t, st, quietConfig(Config{}), h)
	c := NewClient(st)
	start := time.Now()
	if _, err := c.Enqueue(NewTask("slow", nil), Timeout(100*time.Millisecond), MaxRetry(0)); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, causes, 10*time.Second, "timeout"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx ended with %v", err)
	}
	if _, err := c.Enqueue(NewTask("slow", nil), Deadline(time.Now().Add(150*time.Millisecond)), MaxRetry(0)); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, causes, 10*time.Second, "deadline"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx ended with %v", err)
	}
	if time.Since(start) < 250*time.Millisecond {
		t.Fatal("contexts ended before their timeout and deadline")
	}
}

// A handler that never waits on Done but polls Err (its context makes no
// timer until something waits: internal/lazydeadline) still sees its
// timeout, with context.Cause agreeing, and its context ends with the
// attempt.
func TestHandlerPollsDeadline(t *testing.T) {
	st := openTestStorage(t)
	type result struct {
		err, cause error
		ctx        context.Context
	}
	results := make(chan result, 1)
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		for ctx.Err() == nil {
			time.Sleep(time.Millisecond) // the handler's own work, checking its context between steps
		}
		results <- result{ctx.Err(), context.Cause(ctx), ctx}
		return ctx.Err()
	})
	startServer(t, st, quietConfig(Config{}), h)
	if _, err := NewClient(st).Enqueue(NewTask("poll", nil), Timeout(50*time.Millisecond), MaxRetry(0)); err != nil {
		t.Fatal(err)
	}
	r := recv(t, results, 10*time.Second, "timeout")
	if !errors.Is(r.err, context.DeadlineExceeded) || !errors.Is(r.cause, context.DeadlineExceeded) {
		t.Fatalf("ctx ended with %v (cause %v); want context.DeadlineExceeded", r.err, r.cause)
	}
	if _, ok := GetTaskID(r.ctx); !ok {
		t.Fatal("the handler's context lost its task's metadata once done")
	}
}

// A handler's context is canceled when the attempt is over, as an HTTP
// request's is when its handler returns.
func TestHandlerContextEndsWithAttempt(t *testing.T) {
	st := openTestStorage(t)
	ctxs := make(chan context.Context, 1)
	startServer(t, st, quietConfig(Config{}), HandlerFunc(func(ctx context.Context, task *Task) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ctxs <- ctx
		return nil
	}))
	if _, err := NewClient(st).Enqueue(NewTask("quick", nil)); err != nil {
		t.Fatal(err)
	}
	ctx := recv(t, ctxs, 10*time.Second, "handler")
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second): // a bound on a broken cancel, not a speed check
		t.Fatal("the handler's context was not canceled after the attempt")
	}
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err() after the attempt = %v; want context.Canceled", err)
	}
}

func TestResultAndRetention(t *testing.T) {
	st := openTestStorage(t)
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		_, err := task.ResultWriter().Write([]byte("result:" + string(task.Payload())))
		return err
	})
	startServer(t, st, quietConfig(Config{JanitorInterval: 50 * time.Millisecond}), h)
	c := NewClient(st)
	kept, _ := c.Enqueue(NewTask("r", []byte("a")), Retention(time.Hour))
	short, _ := c.Enqueue(NewTask("r", []byte("b")), Retention(time.Second))
	waitFor(t, 10*time.Second, "completed", func() bool {
		return taskInfo(t, st, "default", kept.ID).State == TaskStateCompleted
	})
	if got := taskInfo(t, st, "default", kept.ID); string(got.Result) != "result:a" || got.CompletedAt.IsZero() {
		t.Fatalf("completed task: result %q completedAt %v", got.Result, got.CompletedAt)
	}
	// The janitor deletes the one whose retention ran out.
	waitFor(t, 10*time.Second, "janitor deletes expired task", func() bool {
		_, err := brokerOf(st).GetTaskInfo(context.Background(), "default", short.ID)
		return errors.Is(err, ErrTaskNotFound)
	})
	if got := taskInfo(t, st, "default", kept.ID); got.State != TaskStateCompleted {
		t.Fatal("janitor deleted a task still within its retention")
	}
}

func TestUniqueLockReleasedOnCompletion(t *testing.T) {
	st := openTestStorage(t)
	done := make(chan struct{}, 1)
	startServer(t, st, quietConfig(Config{}), HandlerFunc(func(context.Context, *Task) error {
		done <- struct{}{}
		return nil
	}))
	c := NewClient(st)
	if _, err := c.Enqueue(NewTask("u", []byte("x")), Unique(time.Hour)); err != nil {
		t.Fatal(err)
	}
	recv(t, done, 10*time.Second, "first task")
	waitFor(t, 5*time.Second, "lock released", func() bool {
		_, err := c.Enqueue(NewTask("u", []byte("x")), Unique(time.Hour))
		return err == nil
	})
}

func TestScheduledTaskStartsAtItsTime(t *testing.T) {
	st := openTestStorage(t)
	started := make(chan time.Time, 1)
	startServer(t, st, quietConfig(Config{}), HandlerFunc(func(context.Context, *Task) error {
		started <- time.Now()
		return nil
	}))
	due := time.Now().Add(300 * time.Millisecond)
	if _, err := NewClient(st).Enqueue(NewTask("s", nil), ProcessAt(due)); err != nil {
		t.Fatal(err)
	}
	at := recv(t, started, 10*time.Second, "scheduled task start")
	if at.Before(due) {
		t.Fatalf("started %v before its time", due.Sub(at))
	}
}

// TestWeightedQueues checks that with both queues full, the share of each
// follows the weights (3:1) within tolerance over thousands of tasks. A
// fetch takes a batch from one queue (up to the free room, here at most 8),
// so the share is drawn per fetch: 8,000 tasks are at least 1,000 draws,
// and the bounds below are more than three standard deviations wide.
func TestWeightedQueues(t *testing.T) {
	st := openTestStorage(t)
	c := NewClient(st)
	ctx := context.Background()
	const each, counted = 10000, 8000
	for _, q := range []string{"high", "low"} {
		tasks := make([]*Task, each)
		for i := range tasks {
			tasks[i] = NewTask("w", nil)
		}
		if _, err := c.EnqueueBatch(ctx, tasks, Queue(q)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	counts := map[string]int{}
	total := 0
	enough := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		q, _ := GetQueueName(ctx)
		mu.Lock()
		defer mu.Unlock()
		if total < counted { // while both queues surely have tasks
			counts[q]++
			total++
			if total == counted {
				close(enough)
			}
		}
		return nil
	})
	startServer(t, st, quietConfig(Config{Concurrency: 4, Queues: map[string]int{"high": 3, "low": 1}}), h)
	recv(t, enough, 60*time.Second, "the counted tasks")
	mu.Lock()
	defer mu.Unlock()
	ratio := float64(counts["high"]) / float64(counts["low"])
	if ratio < 2.4 || ratio > 3.75 {
		t.Fatalf("high:low = %d:%d = %.2f, want about 3", counts["high"], counts["low"], ratio)
	}
	t.Logf("high:low = %d:%d = %.2f", counts["high"], counts["low"], ratio)
}

func TestStrictPriority(t *testing.T) {
	st := openTestStorage(t)
	c := NewClient(st)
	ctx := context.Background()
	for _, q := range []string{"critical", "low"} {
		tasks := make([]*Task, 300)
		for i := range tasks {
			tasks[i] = NewTask("p", nil)
		}
		if _, err := c.EnqueueBatch(ctx, tasks, Queue(q)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var order []string
	done := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		q, _ := GetQueueName(ctx)
		mu.Lock()
		defer mu.Unlock()
		order = append(order, q)
		if len(order) == 600 {
			close(done)
		}
		return nil
	})
	startServer(t, st, quietConfig(Config{Concurrency: 4, StrictPriority: true, Queues: map[string]int{"critical": 6, "low": 1}}), h)
	recv(t, done, 30*time.Second, "600 tasks")
	mu.Lock()
	defer mu.Unlock()
	for i, q := range order[:300] {
		if q != "critical" {
			t.Fatalf("task %d came from %s before critical was drained", i, q)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	st := openTestStorage(t)
	h := HandlerFunc(func(context.Context, *Task) error { return nil })
	for _, cfg := range []Config{
		{Concurrency: -1},
		{Queues: map[string]int{"a:b": 1}},
		{Queues: map[string]int{"ok": 0}},
		{LeaseDuration: time.Millisecond},
		{ShutdownTimeout: -time.Second},
	} {
		err := NewServer(st, cfg).Start(h)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Start with %+v = %v, want ErrInvalidArgument", cfg, err)
		}
	}
	srv := NewServer(st, quietConfig(Config{}))
	if err := srv.Start(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Start(nil) = %v", err)
	}
	if err := srv.Start(h); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(h); !errors.Is(err, ErrServerRunning) {
		t.Errorf("second Start = %v", err)
	}
	srv.Shutdown()
	srv.Shutdown()
	if err := srv.Start(h); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Start after Shutdown = %v", err)
	}
}

// TestShutdownRequeuesUnfinishedTasks: a task still running after
// ShutdownTimeout has its ctx cancelled and goes back to pending with no
// attempt counted; a task that ends in time completes.
func TestShutdownRequeuesUnfinishedTasks(t *testing.T) {
	st := openTestStorage(t)
	started := make(chan string, 2)
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		id, _ := GetTaskID(ctx)
		started <- id
		if task.Type() == "quick" {
			time.Sleep(50 * time.Millisecond)
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	})
	srv := NewServer(st, quietConfig(Config{Concurrency: 2, ShutdownTimeout: 300 * time.Millisecond}))
	if err := srv.Start(h); err != nil {
		t.Fatal(err)
	}
	c := NewClient(st)
	quick, _ := c.Enqueue(NewTask("quick", nil), Retention(time.Hour))
	stuck, _ := c.Enqueue(NewTask("stuck", nil))
	recv(t, started, 5*time.Second, "first start")
	recv(t, started, 5*time.Second, "second start")
	srv.Shutdown()
	if got := taskInfo(t, st, "default", quick.ID); got.State != TaskStateCompleted {
		t.Errorf("quick task: %v, want completed", got.State)
	}
	got := taskInfo(t, st, "default", stuck.ID)
	if got.State != TaskStatePending || got.Retried != 0 {
		t.Errorf("stuck task: %v retried %d, want pending with no retry counted", got.State, got.Retried)
	}
}

// TestLostLeaseCancelsHandler: when a task's lease is taken over (here the
// test expires it by hand and recovers it as another server would), the
// next heartbeat cancels the running handler with ErrLeaseLost, and its
// late outcome is not written.
func TestLostLeaseCancelsHandler(t *testing.T) {
	st := openTestStorage(t)
	started := make(chan string, 1)
	causes := make(chan error, 1)
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		id, _ := GetTaskID(ctx)
		started <- id
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil // a success that must not be written
	})
	lease := 600 * time.Millisecond
	startServer(t, st, quietConfig(Config{LeaseDuration: lease, RetryDelayFunc: func(int, error, *Task) time.Duration { return time.Hour }}), h)
	info, _ := NewClient(st).Enqueue(NewTask("long", nil))
	id := recv(t, started, 5*time.Second, "task start")
	if id != info.ID {
		t.Fatalf("started %s, want %s", id, info.ID)
	}
	expireLease(t, st, "default", id)
	if cause := recv(t, causes, 5*lease, "handler cancelled"); !errors.Is(cause, ErrLeaseLost) {
		t.Fatalf("handler ctx cancelled with %v, want ErrLeaseLost", cause)
	}
	// The recovered task stays in retry: the stale success was refused.
	time.Sleep(100 * time.Millisecond) // let a wrongly written outcome land, if any
	if got := taskInfo(t, st, "default", id); got.State != TaskStateRetry || got.LastErr != ErrLeaseExpired.Error() {
		t.Fatalf("task after lease loss: %v %q, want retry with %q", got.State, got.LastErr, ErrLeaseExpired)
	}
}
