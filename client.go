package htq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/lazydeadline"
)

// Client enqueues tasks. It is safe for concurrent use.
//
// A task's ID is chosen before the first attempt to store it, and a call
// that fails because the storage could not be reached or did not answer
// (ErrUnavailable) is tried again, with backoff, within the call's
// context (see ClientOptions.RetryFor): a first attempt may have stored
// the task although its answer was lost, and the storage takes the same
// task found under its ID as already done, so no attempt stores it twice.
type Client struct {
	s        *Storage
	now      func() time.Time
	retryFor time.Duration
	// clock times the waits between attempts (tests replace it).
	clock clockwork.Clock
	tr    tracing
	// timers arm the RetryFor deadlines that something waits on, under
	// a context that cannot be canceled (see bound).
	timers *lazydeadline.Timers
}

// deadlineTick is the tick of Client.timers: how late at most the Done
// channel of a RetryFor deadline may close.
const deadlineTick = 10 * time.Millisecond

// ClientOptions tunes NewClientWithOptions. The zero value is ready to use.
type ClientOptions struct {
	// RetryFor bounds an Enqueue or EnqueueBatch whose context has no
	// deadline of its own: the call, its attempts and the waits between
	// them included, ends within RetryFor, trying again while the storage
	// cannot be reached or does not answer. A call whose context has a
	// deadline keeps trying until that deadline. 0 means DefaultRetryFor;
	// a negative value makes such a call one attempt, bounded only by the
	// storage's own timeout.
	RetryFor time.Duration

	// TracerProvider makes the span of each Enqueue and EnqueueBatch
	// (kind producer, named "send <queue>"). Nil: OpenTelemetry's global
	// provider, a no-op unless the application set one.
	TracerProvider trace.TracerProvider
	// Propagator writes the trace context of an enqueue (its span's) into
	// the task, from where a Server's handler and htq serve's URL
	// requests and pull workers get it. Nil: OpenTelemetry's global
	// propagator, a no-op unless the application set one (such as
	// propagation.TraceContext{}).
	Propagator propagation.TextMapPropagator
}

// DefaultRetryFor is ClientOptions.RetryFor's default.
const DefaultRetryFor = 10 * time.Second

// Backoff between the attempts of a call: the first wait is about
// retryBackoffMin, each next one about twice the last, at most
// retryBackoffMax (each wait is drawn between half and all of it).
const (
	retryBackoffMin = 50 * time.Millisecond
	retryBackoffMax = time.Second
)

// NewClient returns a Client that writes to s, with the default
// ClientOptions.
func NewClient(s *Storage) *Client {
	return NewClientWithOptions(s, ClientOptions{})
}

// NewClientWithOptions returns a Client that writes to s.
func NewClientWithOptions(s *Storage, opts ClientOptions) *Client {
	retryFor := opts.RetryFor
	if retryFor == 0 {
		retryFor = DefaultRetryFor
	}
	return &Client{s: s, now: time.Now, retryFor: retryFor, clock: clockwork.NewRealClock(),
		tr: newTracing(opts.TracerProvider, opts.Propagator), timers: lazydeadline.NewTimers(deadlineTick)}
}

// Close releases the client. The Storage stays open (close it with its
// own Close).
func (c *Client) Close() error { return nil }

// Enqueue writes task to its queue and returns what was stored. Options
// override the task's own. It fails with ErrDuplicateTask, ErrTaskIDConflict
// or an ErrInvalidArgument error and then writes nothing. It fails with
// an error wrapping ErrUnavailable when the storage could not be reached
// in time (ClientOptions.RetryFor); the task may have been stored
// nonetheless. To retry such a call without risking a second copy, give
// the task its ID with the TaskID option: the same task enqueued again
// under its ID is stored once.
func (c *Client) Enqueue(task *Task, opts ...Option) (*TaskInfo, error) {
	return c.EnqueueContext(context.Background(), task, opts...)
}

// EnqueueContext is Enqueue with a context for the storage calls: while
// the storage cannot be reached or does not answer, the call tries again
// until ctx ends (or, when ctx has no deadline, for ClientOptions.RetryFor).
//
// The task carries the trace context of ctx (as ClientOptions.Propagator
// writes it) to the handler that runs it.
func (c *Client) EnqueueContext(ctx context.Context, task *Task, opts ...Option) (_ *TaskInfo, err error) {
	p, info, err := c.prepare(task, opts)
	if err != nil {
		return nil, err
	}
	ctx, span := c.tr.startEnqueue(ctx, p.Msg.Queue, 1)
	defer func() { endSpan(span, err) }()
	if span.IsRecording() {
		span.SetAttributes(semconv.MessagingMessageID(p.Msg.ID), AttrTaskType.String(p.Msg.Type))
	}
	p.Msg.Headers = c.tr.headers(ctx)
	ctx, lc := c.bound(ctx)
	defer lc.Cancel()
	b := brokerOf(c.s)
	for attempt := 0; ; attempt++ {
		err = b.Enqueue(ctx, p)
		if err == nil || !c.again(ctx, attempt, err) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("htq: enqueue %s: %w", task.Type(), err)
	}
	return info, nil
}

// bound gives ctx the deadline of ClientOptions.RetryFor when it has none;
// the caller cancels the second result (nil when ctx is returned as it
// is, which Cancel allows).
func (c *Client) bound(ctx context.Context) (context.Context, *lazydeadline.Context) {
	if _, ok := ctx.Deadline(); ok || c.retryFor < 0 {
		return ctx, nil
	}
	// No timer unless something waits on Done (a retry's backoff, the
	// embedded store's wait for its commit, a pipelined Redis call), and
	// then, under a context that cannot be canceled (htq serve's), a
	// place in c.timers rather than a timer of its own: see
	// internal/lazydeadline.
	lc := lazydeadline.NewOn(c.timers, ctx, c.retryFor)
	return lc, lc
}

// again tells whether a call that failed with err on its attempt-th try
// (from 0) is to be tried again, after waiting for the backoff: only when
// err says the storage could not be reached or did not answer, never for a
// refusal (ErrDuplicateTask, ErrInvalidArgument, …), and while ctx lasts.
// A call whose context has no deadline and RetryFor < 0 is not retried.
func (c *Client) again(ctx context.Context, attempt int, err error) bool {
	if !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
		return false
	}
	if _, ok := ctx.Deadline(); !ok {
		return false
	}
	d := min(retryBackoffMin<<min(attempt, 10), retryBackoffMax)
	d = d/2 + rand.N(d/2+1)
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

// BatchError reports the tasks of an EnqueueBatch that were not stored.
// The other tasks were stored.
type BatchError struct {
	// Errs has one entry per task given, nil for those stored.
	Errs []error
}

// Error summarises the failures.
func (e *BatchError) Error() string {
	var b strings.Builder
	n := 0
	for i, err := range e.Errs {
		if err == nil {
			continue
		}
		if n < 3 {
			fmt.Fprintf(&b, "; task %d: %v", i, err)
		}
		n++
	}
	return fmt.Sprintf("htq: %d of %d tasks not enqueued%s", n, len(e.Errs), b.String())
}

// Unwrap gives the individual errors, so errors.Is(err, ErrDuplicateTask)
// is true when any task was a duplicate.
func (e *BatchError) Unwrap() []error {
	var errs []error
	for _, err := range e.Errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// EnqueueBatch writes many tasks in one round trip to the storage. opts
// apply to every task (after each task's own options). Every task is
// checked before anything is written: one invalid task fails the whole
// batch with nothing written. Past that, each task is stored atomically
// on its own: the returned slice has the TaskInfo of each stored task and
// nil for the others, and the error is a *BatchError naming them. Tasks
// that failed because the storage could not be reached or did not answer
// are tried again as EnqueueContext does, the others not.
func (c *Client) EnqueueBatch(ctx context.Context, tasks []*Task, opts ...Option) (_ []*TaskInfo, err error) {
	params := make([]broker.EnqueueParams, len(tasks))
	infos := make([]*TaskInfo, len(tasks))
	queue := ""
	for i, t := range tasks {
		p, info, err := c.prepare(t, opts)
		if err != nil {
			return nil, fmt.Errorf("htq: enqueue batch: task %d: %w", i, err)
		}
		params[i], infos[i] = p, info
		if i == 0 || p.Msg.Queue == queue {
			queue = p.Msg.Queue
		} else {
			queue = "" // several queues
		}
	}
	ctx, span := c.tr.startEnqueue(ctx, queue, len(tasks))
	defer func() { endSpan(span, err) }()
	if h := c.tr.headers(ctx); h != nil {
		for i := range params {
			params[i].Msg.Headers = h
		}
	}
	errs := c.enqueueBatch(ctx, params)
	failed := false
	for i, err := range errs {
		if err != nil {
			infos[i] = nil
			failed = true
		}
	}
	if failed {
		return infos, &BatchError{Errs: errs}
	}
	return infos, nil
}

// enqueueBatch stores params, trying again those that fail with
// ErrUnavailable while ctx (bounded by RetryFor) allows.
func (c *Client) enqueueBatch(ctx context.Context, params []broker.EnqueueParams) []error {
	ctx, lc := c.bound(ctx)
	defer lc.Cancel()
	b := brokerOf(c.s)
	errs := b.EnqueueBatch(ctx, params)
	for attempt := 0; ; attempt++ {
		var idx []int // the tasks to try again
		var last error
		for i, err := range errs {
			if errors.Is(err, ErrUnavailable) {
				idx = append(idx, i)
				last = err
			}
		}
		if len(idx) == 0 || !c.again(ctx, attempt, last) {
			return errs
		}
		ps := make([]broker.EnqueueParams, len(idx))
		for j, i := range idx {
			ps[j] = params[i]
		}
		for j, err := range b.EnqueueBatch(ctx, ps) {
			errs[idx[j]] = err
		}
	}
}

// prepare validates a task with its options and builds the storage call
// and the TaskInfo that Enqueue returns.
func (c *Client) prepare(task *Task, opts []Option) (broker.EnqueueParams, *TaskInfo, error) {
	if task == nil {
		return broker.EnqueueParams{}, nil, fmt.Errorf("%w: nil task", ErrInvalidArgument)
	}
	e := new(enqueued)
	if err := composeOptionsInto(&e.o, task.opts, opts); err != nil {
		return broker.EnqueueParams{}, nil, err
	}
	if e.o.inWorkflow() {
		return broker.EnqueueParams{}, nil, fmt.Errorf("%w: DependsOn and OnDependencyFailure apply to the tasks of a workflow (Workflow.Add, Client.EnqueueWorkflow)", ErrInvalidArgument)
	}
	if e.o.taskID == "" {
		// A string of its own: the embedded store keeps the ID, and a
		// string inside e would keep all of e.
		e.o.taskID = newTaskID()
	}
	return c.buildIn(task, e)
}

// enqueued is what the preparation of one task allocates: its composed
// options, the message to store and the TaskInfo to return, in one
// allocation instead of three (they are made together and live about as
// long as each other; no storage keeps the message itself, the embedded
// store keeps a copy).
type enqueued struct {
	o    taskOptions
	msg  base.TaskMessage
	info TaskInfo
}

// build checks a task with its composed options (o.taskID set) and
// builds the storage call and the TaskInfo that Enqueue returns.
func (c *Client) build(task *Task, o taskOptions) (broker.EnqueueParams, *TaskInfo, error) {
	return c.buildIn(task, &enqueued{o: o})
}

// buildIn is build with the options in e.o, the message and TaskInfo
// written into e.
func (c *Client) buildIn(task *Task, e *enqueued) (broker.EnqueueParams, *TaskInfo, error) {
	o := &e.o
	now := c.now()
	if !o.deadline.IsZero() && !o.deadline.After(now) {
		return broker.EnqueueParams{}, nil, fmt.Errorf("%w: Deadline %v is in the past", ErrInvalidArgument, o.deadline.Format(time.RFC3339Nano))
	}
	timeout := o.timeout
	if timeout == 0 && o.deadline.IsZero() {
		timeout = DefaultTimeout
	}
	msg := &e.msg
	*msg = base.TaskMessage{
		ID:        o.taskID,
		Type:      task.typename,
		Payload:   task.payload,
		Queue:     o.queue,
		MaxRetry:  o.maxRetry,
		Timeout:   timeout,
		Deadline:  o.deadline,
		Retention: o.retention,
		GroupKey:  o.group,
		Priority:  o.priority,
		Key:       o.key,
	}
	if o.uniqueTTL > 0 {
		msg.UniqueKey = uniqueKey(task.typename, task.payload)
		msg.UniqueTTL = o.uniqueTTL
	}
	if err := msg.Validate(); err != nil {
		return broker.EnqueueParams{}, nil, err
	}
	processAt := o.processAt
	if o.processIn > 0 {
		processAt = now.Add(o.processIn)
	}
	state := TaskStatePending
	next := now
	switch {
	case msg.GroupKey != "":
		state, next = TaskStateAggregating, time.Time{}
	case processAt.After(now):
		state, next = TaskStateScheduled, processAt
	}
	info := &e.info
	*info = TaskInfo{
		ID: msg.ID, Queue: msg.Queue, Type: msg.Type, Payload: msg.Payload,
		State: state, MaxRetry: msg.MaxRetry, Timeout: msg.Timeout,
		Deadline: msg.Deadline, Group: msg.GroupKey, NextProcessAt: next,
		Retention: msg.Retention, Priority: msg.Priority, Key: msg.Key,
	}
	return broker.EnqueueParams{Msg: msg, ProcessAt: processAt}, info, nil
}

// uniqueKey names the uniqueness lock of a type and payload (the queue is
// part of the storage key).
func uniqueKey(typename string, payload []byte) string {
	h := sha256.New()
	h.Write([]byte(typename))
	h.Write([]byte{0})
	h.Write(payload)
	return hex.EncodeToString(h.Sum(nil))
}
