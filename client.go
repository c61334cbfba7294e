package htq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Client enqueues tasks. It is safe for concurrent use.
type Client struct {
	s   *Storage
	now func() time.Time
}

// NewClient returns a Client that writes to s.
func NewClient(s *Storage) *Client {
	return &Client{s: s, now: time.Now}
}

// Close releases the client. The Storage stays open (close it with its
// own Close).
func (c *Client) Close() error { return nil }

// Enqueue writes task to its queue and returns what was stored. Options
// override the task's own. It fails with ErrDuplicateTask, ErrTaskIDConflict
// or an ErrInvalidArgument error and then writes nothing.
func (c *Client) Enqueue(task *Task, opts ...Option) (*TaskInfo, error) {
	return c.EnqueueContext(context.Background(), task, opts...)
}

// EnqueueContext is Enqueue with a context for the storage call.
func (c *Client) EnqueueContext(ctx context.Context, task *Task, opts ...Option) (*TaskInfo, error) {
	p, info, err := c.prepare(task, opts)
	if err != nil {
		return nil, err
	}
	if err := brokerOf(c.s).Enqueue(ctx, p); err != nil {
		return nil, fmt.Errorf("htq: enqueue %s: %w", task.Type(), err)
	}
	return info, nil
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
// nil for the others, and the error is a *BatchError naming them.
func (c *Client) EnqueueBatch(ctx context.Context, tasks []*Task, opts ...Option) ([]*TaskInfo, error) {
	params := make([]broker.EnqueueParams, len(tasks))
	infos := make([]*TaskInfo, len(tasks))
	for i, t := range tasks {
		p, info, err := c.prepare(t, opts)
		if err != nil {
			return nil, fmt.Errorf("htq: enqueue batch: task %d: %w", i, err)
		}
		params[i], infos[i] = p, info
	}
	errs := brokerOf(c.s).EnqueueBatch(ctx, params)
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

// prepare validates a task with its options and builds the storage call
// and the TaskInfo that Enqueue returns.
func (c *Client) prepare(task *Task, opts []Option) (broker.EnqueueParams, *TaskInfo, error) {
	if task == nil {
		return broker.EnqueueParams{}, nil, fmt.Errorf("%w: nil task", ErrInvalidArgument)
	}
	o, err := composeOptions(task.opts, opts)
	if err != nil {
		return broker.EnqueueParams{}, nil, err
	}
	now := c.now()
	if !o.deadline.IsZero() && !o.deadline.After(now) {
		return broker.EnqueueParams{}, nil, fmt.Errorf("%w: Deadline %v is in the past", ErrInvalidArgument, o.deadline.Format(time.RFC3339Nano))
	}
	timeout := o.timeout
	if timeout == 0 && o.deadline.IsZero() {
		timeout = DefaultTimeout
	}
	id := o.taskID
	if id == "" {
		id = newTaskID()
	}
	msg := &base.TaskMessage{
		ID:        id,
		Type:      task.typename,
		Payload:   task.payload,
		Queue:     o.queue,
		MaxRetry:  o.maxRetry,
		Timeout:   timeout,
		Deadline:  o.deadline,
		Retention: o.retention,
		GroupKey:  o.group,
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
	info := &TaskInfo{
		ID: msg.ID, Queue: msg.Queue, Type: msg.Type, Payload: msg.Payload,
		State: state, MaxRetry: msg.MaxRetry, Timeout: msg.Timeout,
		Deadline: msg.Deadline, Group: msg.GroupKey, NextProcessAt: next,
		Retention: msg.Retention,
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
