package htq

import (
	"context"
	"fmt"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Task is a unit of work: a type that names its handler, a payload, and the
// options it was created with.
type Task struct {
	typename string
	payload  []byte
	opts     []Option

	// w is set on tasks a Server hands to a Handler.
	w *ResultWriter
}

// NewTask returns a task of the given type and payload. opts become the
// task's default options; options given to Enqueue override them.
func NewTask(typename string, payload []byte, opts ...Option) *Task {
	return &Task{typename: typename, payload: payload, opts: opts}
}

// Type returns the task's type.
func (t *Task) Type() string { return t.typename }

// Payload returns the task's payload.
func (t *Task) Payload() []byte { return t.payload }

// ResultWriter returns the writer for the task's result. It is nil for a
// task that is not being processed by a Server.
func (t *Task) ResultWriter() *ResultWriter { return t.w }

// ResultWriter stores the result of the task being processed. The result
// is kept with the task and shown by the Inspector; it lasts as long as the
// task (use the Retention option to keep completed tasks).
type ResultWriter struct {
	ctx   context.Context // the attempt's; Write detaches it from its cancelation
	b     broker.Broker
	lease *broker.Lease
}

// Write stores data as the task's result, replacing any earlier one. It
// fails with ErrLeaseLost when the worker no longer holds the task.
func (w *ResultWriter) Write(data []byte) (n int, err error) {
	if err := w.b.WriteResult(context.WithoutCancel(w.ctx), w.lease.Ref(), data); err != nil {
		return 0, fmt.Errorf("htq: write result of task %s: %w", w.lease.Msg.ID, err)
	}
	return len(data), nil
}

// TaskID returns the ID of the task the writer belongs to.
func (w *ResultWriter) TaskID() string { return w.lease.Msg.ID }

// TaskState is the state of a task.
type TaskState int

// The task states, numbered as asynq numbers them.
const (
	TaskStateActive      TaskState = TaskState(base.StateActive)
	TaskStatePending     TaskState = TaskState(base.StatePending)
	TaskStateScheduled   TaskState = TaskState(base.StateScheduled)
	TaskStateRetry       TaskState = TaskState(base.StateRetry)
	TaskStateArchived    TaskState = TaskState(base.StateArchived)
	TaskStateCompleted   TaskState = TaskState(base.StateCompleted)
	TaskStateAggregating TaskState = TaskState(base.StateAggregating)
	// TaskStateWaiting is a workflow task waiting for its dependencies
	// (see Workflow).
	TaskStateWaiting TaskState = TaskState(base.StateWaiting)
)

// String returns the state's name ("pending", …).
func (s TaskState) String() string { return base.TaskState(s).String() }

// TaskInfo describes a task and its current state.
type TaskInfo struct {
	// ID identifies the task within its queue.
	ID string
	// Queue is the queue the task belongs to.
	Queue string
	// Type is the task's type.
	Type string
	// Payload is the task's payload.
	Payload []byte
	// State is the task's state.
	State TaskState
	// MaxRetry is how many times the task is retried before it is archived.
	MaxRetry int
	// Retried is how many times the task has been retried.
	Retried int
	// LastErr is the error of the last failed attempt.
	LastErr string
	// LastFailedAt is when the last attempt failed (zero if none did).
	LastFailedAt time.Time
	// Timeout bounds one attempt (0: none).
	Timeout time.Duration
	// Deadline bounds every attempt (zero: none).
	Deadline time.Time
	// Group is the task's group key (empty: none).
	Group string
	// Priority is the task's priority within its queue (0 to MaxPriority).
	Priority int
	// Key is the task's fair-sharing key (empty: none).
	Key string
	// NextProcessAt is when a pending, scheduled or retry task is due.
	NextProcessAt time.Time
	// IsOrphaned is true for an active task whose lease has run out: its
	// worker is gone and the Recoverer will send it to retry or archive.
	IsOrphaned bool
	// Retention is how long the task is kept after it completes.
	Retention time.Duration
	// CompletedAt is when the task completed (zero unless completed).
	CompletedAt time.Time
	// Result is what the handler wrote with the task's ResultWriter.
	Result []byte
	// Workflow is the ID of the workflow the task belongs to, and
	// WorkflowTask its ID within it (both empty for a task of no
	// workflow).
	Workflow, WorkflowTask string
}

func newTaskInfo(ti *base.TaskInfo, now time.Time) *TaskInfo {
	m := ti.Message
	info := &TaskInfo{
		ID:            m.ID,
		Queue:         m.Queue,
		Type:          m.Type,
		Payload:       m.Payload,
		State:         TaskState(ti.State),
		MaxRetry:      m.MaxRetry,
		Retried:       m.Retried,
		LastErr:       m.LastErr,
		LastFailedAt:  m.LastFailedAt,
		Timeout:       m.Timeout,
		Deadline:      m.Deadline,
		Group:         m.GroupKey,
		Priority:      m.Priority,
		Key:           m.Key,
		NextProcessAt: ti.NextProcessAt,
		Retention:     m.Retention,
		CompletedAt:   ti.CompletedAt,
		Result:        ti.Result,
		Workflow:      m.Workflow,
		WorkflowTask:  m.WorkflowTask,
	}
	if ti.State == base.StateActive && !ti.LeaseDeadline.IsZero() && ti.LeaseDeadline.Before(now) {
		info.IsOrphaned = true
	}
	return info
}
