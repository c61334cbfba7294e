package base

import (
	"fmt"
	"strings"
	"time"
)

// TaskMessage is a task as the storage keeps it: what the caller gave at
// Enqueue plus the bookkeeping that changes over the task's life. Backends
// store every field and give it back unchanged.
type TaskMessage struct {
	// ID identifies the task within its queue.
	ID string
	// Type names the handler that processes the task.
	Type string
	// Payload is the task's data, opaque to htq.
	Payload []byte
	// Queue is the queue the task belongs to.
	Queue string

	// MaxRetry is how many times a failed task is retried before it is
	// archived. 0 means never retried.
	MaxRetry int
	// Retried is how many times the task has been retried so far.
	Retried int
	// Timeout bounds one attempt; 0 means no per-attempt timeout.
	Timeout time.Duration
	// Deadline bounds every attempt; zero means none.
	Deadline time.Time

	// UniqueKey, when not empty, is the uniqueness lock the task holds
	// until it completes or is deleted, for at most UniqueTTL.
	UniqueKey string
	// UniqueTTL is how long the uniqueness lock lasts at most.
	UniqueTTL time.Duration

	// Retention is how long the task is kept in the completed state after
	// it succeeds; 0 means it is deleted at once.
	Retention time.Duration
	// GroupKey, when not empty, puts the task in the aggregating state of
	// that group.
	GroupKey string

	// Priority (0 to MaxPriority) orders the queue's pending tasks: a task
	// of a higher priority is fetched before any of a lower one, in the
	// order they became pending within one priority. 0 is the default.
	Priority int
	// Key, when not empty, is the task's fair-sharing key (a tenant, a
	// user): the queue serves the keys of its pending tasks in turn and
	// applies its per-key limits (QueueSettings.KeyConcurrency, KeyRate).
	// A task has a Key or a Priority, not both.
	Key string
	// Workflow, when not empty, is the ID of the workflow the task belongs
	// to, and WorkflowTask its ID within that workflow (workflow.go).
	Workflow     string
	WorkflowTask string

	// LastErr is the error message of the last failed attempt.
	LastErr string
	// LastFailedAt is when the last attempt failed (zero if never).
	LastFailedAt time.Time

	// Headers carries context propagated from the enqueuer to the
	// workers, such as the W3C trace context ("traceparent",
	// "tracestate"). Nil when there is none; backends store it in no
	// bytes then. It is not content: SameEnqueue does not compare it.
	Headers map[string]string
}

// Limits of TaskMessage.Headers.
const (
	// MaxHeaders is the most entries Headers may hold.
	MaxHeaders = 16
	// MaxHeadersSize bounds the sum of the lengths of Headers' names and
	// values, in bytes.
	MaxHeadersSize = 4096
)

// Validate checks the fields a caller controls. It is the one place that
// decides what a backend may be asked to store.
func (m *TaskMessage) Validate() error {
	if err := ValidateTaskType(m.Type); err != nil {
		return err
	}
	if err := ValidateTaskID(m.ID); err != nil {
		return err
	}
	if err := ValidateQueueName(m.Queue); err != nil {
		return err
	}
	if len(m.Payload) > MaxPayloadSize {
		return fmt.Errorf("%w: payload is %d bytes, the limit is %d", ErrPayloadTooLarge, len(m.Payload), MaxPayloadSize)
	}
	if m.MaxRetry < 0 {
		return fmt.Errorf("%w: MaxRetry %d is negative", ErrInvalidArgument, m.MaxRetry)
	}
	if m.Timeout < 0 {
		return fmt.Errorf("%w: Timeout %v is negative", ErrInvalidArgument, m.Timeout)
	}
	if m.Retention < 0 {
		return fmt.Errorf("%w: Retention %v is negative", ErrInvalidArgument, m.Retention)
	}
	if m.UniqueKey != "" && m.UniqueTTL < time.Second {
		return fmt.Errorf("%w: Unique TTL %v is shorter than one second", ErrInvalidArgument, m.UniqueTTL)
	}
	if m.GroupKey != "" {
		if err := ValidateGroupKey(m.GroupKey); err != nil {
			return err
		}
	}
	if err := m.validateLane(); err != nil {
		return err
	}
	if m.Workflow != "" || m.WorkflowTask != "" {
		if err := ValidateWorkflowID(m.Workflow); err != nil {
			return err
		}
		if err := ValidateTaskID(m.WorkflowTask); err != nil {
			return fmt.Errorf("workflow task ID: %w", err)
		}
	}
	return ValidateHeaders(m.Headers)
}

// ValidateHeaders checks propagated headers: at most MaxHeaders entries
// and MaxHeadersSize bytes, each name an HTTP token (RFC 9110) in lower
// case, as propagators write them, each value printable ASCII (so that
// it can travel as an HTTP header and in JSON unchanged).
func ValidateHeaders(h map[string]string) error {
	if h == nil {
		return nil
	}
	if len(h) == 0 {
		return fmt.Errorf("%w: Headers is empty but not nil", ErrInvalidArgument)
	}
	if len(h) > MaxHeaders {
		return fmt.Errorf("%w: %d headers, the limit is %d", ErrInvalidArgument, len(h), MaxHeaders)
	}
	size := 0
	for k, v := range h {
		size += len(k) + len(v)
		if !headerName(k) {
			return fmt.Errorf("%w: header name %q is not a lower-case HTTP token", ErrInvalidArgument, k)
		}
		for i := 0; i < len(v); i++ {
			if v[i] < ' ' || v[i] > '~' {
				return fmt.Errorf("%w: header %s: the value holds a byte that is not printable ASCII", ErrInvalidArgument, k)
			}
		}
	}
	if size > MaxHeadersSize {
		return fmt.Errorf("%w: headers are %d bytes, the limit is %d", ErrInvalidArgument, size, MaxHeadersSize)
	}
	return nil
}

// validateLane checks Priority and Key, the fields that choose where a
// pending task waits.
func (m *TaskMessage) validateLane() error {
	if m.Priority < 0 || m.Priority > MaxPriority {
		return fmt.Errorf("%w: priority %d is outside 0 to %d", ErrInvalidArgument, m.Priority, MaxPriority)
	}
	if m.Key != "" {
		if err := ValidateFairKey(m.Key); err != nil {
			return err
		}
		if m.Priority != 0 {
			return fmt.Errorf("%w: a task has a priority or a fair-sharing key, not both (priority %d, key %q)", ErrInvalidArgument, m.Priority, m.Key)
		}
	}
	return nil
}

// headerName reports whether s is a non-empty HTTP token without upper
// case letters.
func headerName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// SameEnqueue reports whether o asks to store the same task as m: the
// fields a caller gives at Enqueue are equal (ID, Queue, Type, Payload —
// a nil payload differs from an empty one, as both are stored —, MaxRetry,
// Timeout, Deadline as an instant, UniqueKey, UniqueTTL when there is a
// UniqueKey, Retention, GroupKey, Priority, Key, Workflow, WorkflowTask).
// The bookkeeping
// fields (Retried, LastErr, LastFailedAt), the propagated Headers (a
// repeated enqueue may come from another trace) and the due time of the
// call are not compared. A backend that finds a task
// with o's ID stored treats an Enqueue of o as already done when this
// holds, and as base.ErrTaskIDConflict otherwise.
func (m *TaskMessage) SameEnqueue(o *TaskMessage) bool {
	return m.ID == o.ID && m.Queue == o.Queue && m.Type == o.Type &&
		(m.Payload == nil) == (o.Payload == nil) && string(m.Payload) == string(o.Payload) &&
		m.MaxRetry == o.MaxRetry && m.Timeout == o.Timeout && m.Deadline.Equal(o.Deadline) &&
		m.UniqueKey == o.UniqueKey && (m.UniqueKey == "" || m.UniqueTTL == o.UniqueTTL) &&
		m.Retention == o.Retention && m.GroupKey == o.GroupKey &&
		m.Priority == o.Priority && m.Key == o.Key &&
		m.Workflow == o.Workflow && m.WorkflowTask == o.WorkflowTask
}

// TaskInfo describes a task as stored, for Enqueue's answer and the
// Inspector.
type TaskInfo struct {
	Message *TaskMessage
	State   TaskState
	// NextProcessAt is when a pending, scheduled or retry task is due
	// (now for pending ones); zero for other states.
	NextProcessAt time.Time
	// LeaseDeadline is when the lease of an active task runs out; a task
	// whose lease ran out is orphaned (its worker is gone).
	LeaseDeadline time.Time
	// CompletedAt is when a completed task succeeded.
	CompletedAt time.Time
	// Result is what the handler wrote with its ResultWriter.
	Result []byte
}
