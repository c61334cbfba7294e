package base

import "errors"

// Sentinel errors shared by every backend and re-exported by package htq.
// Backends wrap them with context; callers test them with errors.Is.
var (
	// ErrInvalidArgument marks bad input from a caller: an empty type, a
	// negative option, a malformed queue name. Nothing was written.
	ErrInvalidArgument = errors.New("htq: invalid argument")
	// ErrDuplicateTask means a task with the same uniqueness key is still
	// locked (Unique option). Nothing was written.
	ErrDuplicateTask = errors.New("htq: task already exists")
	// ErrTaskIDConflict means a task with the same ID but other content
	// (see TaskMessage.SameEnqueue) exists in the queue. Nothing was
	// written.
	ErrTaskIDConflict = errors.New("htq: task ID conflicts with another task")
	// ErrTaskNotFound means no task has that ID in that queue.
	ErrTaskNotFound = errors.New("htq: task not found")
	// ErrQueueNotFound means the queue does not exist.
	ErrQueueNotFound = errors.New("htq: queue not found")
	// ErrLeaseLost means the caller's lease on an active task has expired or
	// was taken over (the task was recovered, requeued or deleted). The
	// caller must stop working on the task and write nothing more for it.
	ErrLeaseLost = errors.New("htq: lease lost")
	// ErrPayloadTooLarge means the payload exceeds MaxPayloadSize.
	ErrPayloadTooLarge = errors.New("htq: payload too large")
	// ErrStorageClosed means the storage handle was closed.
	ErrStorageClosed = errors.New("htq: storage closed")
	// ErrUnknownScheme means a storage URL names a scheme htq does not know.
	ErrUnknownScheme = errors.New("htq: unknown storage URL scheme")
	// ErrQueuePaused means the operation needs a queue that is not paused.
	ErrQueuePaused = errors.New("htq: queue paused")
	// ErrQueueNotEmpty means a queue still holds tasks (DeleteQueue without force).
	ErrQueueNotEmpty = errors.New("htq: queue not empty")
	// ErrNotFound means a named record (not a task or a queue) does not exist.
	ErrNotFound = errors.New("htq: not found")
	// ErrWrongState means the task is not in a state the operation applies to.
	ErrWrongState = errors.New("htq: task in wrong state for this operation")
	// ErrReplicationTimeout means a write was made on the storage's
	// primary, but fewer copies than the storage was configured to wait
	// for (replicas that received it, or an fsync of the append-only
	// file) confirmed it before the wait's timeout. The write happened
	// and stays unless a failover or crash loses it; a caller that
	// retries may write it twice (an Enqueue retried with the same task
	// ID and content finds it stored and succeeds without a second copy).
	ErrReplicationTimeout = errors.New("htq: write not confirmed by enough copies in time")
	// ErrUnavailable means the storage could not be reached, did not
	// answer within the call's deadline, or cannot serve yet (Redis
	// loading its data after a restart, a failover in progress). It says
	// nothing of the operation itself: a write sent before the connection
	// broke may have been made. Retrying is safe for an Enqueue (the task
	// keeps its ID across attempts, and finding it stored is success);
	// the error wraps the cause, so errors.Is also finds e.g.
	// context.DeadlineExceeded.
	ErrUnavailable = errors.New("htq: storage unavailable")
)
