package htq

import (
	"errors"

	"github.com/htqueue/htq/internal/base"
)

// Errors returned by htq. Test them with errors.Is: the errors returned are
// wrapped with context.
var (
	// ErrInvalidArgument marks bad input (an empty type, a negative option,
	// a malformed queue name, a Deadline in the past). Nothing was written.
	ErrInvalidArgument = base.ErrInvalidArgument
	// ErrDuplicateTask is returned by Enqueue when a task with the same
	// type, payload and queue holds a uniqueness lock (the Unique option).
	ErrDuplicateTask = base.ErrDuplicateTask
	// ErrTaskIDConflict is returned by Enqueue when the queue already holds
	// a task with the ID given by the TaskID option and other content (type,
	// payload or options). The same task enqueued again with the same ID
	// is not an error: it is already stored, and is not stored twice.
	ErrTaskIDConflict = base.ErrTaskIDConflict
	// ErrTaskNotFound means no task has that ID in that queue.
	ErrTaskNotFound = base.ErrTaskNotFound
	// ErrQueueNotFound means the queue does not exist.
	ErrQueueNotFound = base.ErrQueueNotFound
	// ErrLeaseLost means a worker's lease on its task has expired or been
	// taken over; the worker's writes for that task are refused.
	ErrLeaseLost = base.ErrLeaseLost
	// ErrPayloadTooLarge means the payload is over MaxPayloadSize bytes.
	ErrPayloadTooLarge = base.ErrPayloadTooLarge
	// ErrStorageClosed means the Storage was closed.
	ErrStorageClosed = base.ErrStorageClosed
	// ErrUnknownScheme means Open was given a URL whose scheme htq does not know.
	ErrUnknownScheme = base.ErrUnknownScheme
	// ErrWrongState means the task is not in a state the operation applies
	// to (e.g. RunTask of a pending task, DeleteTask of an active one).
	ErrWrongState = base.ErrWrongState
	// ErrReplicationTimeout is returned, on a Redis storage opened with
	// wait_replicas or wait_aof_local (docs/operations.md), by a write
	// (Enqueue, a task's completion, …) that Redis made but that fewer
	// replicas than asked, or no fsync of the append-only file, confirmed
	// within wait_timeout. The write happened; a failover or crash may
	// still lose it. Retrying an Enqueue with the same TaskInfo.ID (the
	// TaskID option) does not store the task twice.
	ErrReplicationTimeout = base.ErrReplicationTimeout
	// ErrUnavailable means the storage could not be reached, did not
	// answer within its timeout (the Redis URL's timeout parameter, 5 s
	// by default), or cannot serve yet (Redis loading its data after a
	// restart, a failover in progress). The operation may or may not have
	// happened. Enqueue and EnqueueBatch retry such failures themselves
	// (see ClientOptions) and return it only when their time is up; a
	// caller may retry them again: the task keeps its ID, and finding it
	// already stored with the same content is success.
	ErrUnavailable = base.ErrUnavailable
	// ErrWorkflowCycle is returned by EnqueueWorkflow when the
	// dependencies form a cycle (the *WorkflowError names the tasks along
	// it). It wraps ErrInvalidArgument.
	ErrWorkflowCycle = base.ErrWorkflowCycle
	// ErrDependencyNotFound is returned by EnqueueWorkflow when a task
	// depends on an ID the workflow does not hold. It wraps
	// ErrInvalidArgument.
	ErrDependencyNotFound = base.ErrDependencyNotFound
	// ErrDuplicateWorkflowTask is returned by EnqueueWorkflow when two
	// tasks share an ID (or a task ID in one queue). It wraps
	// ErrInvalidArgument.
	ErrDuplicateWorkflowTask = base.ErrDuplicateWorkflowTask
	// ErrWorkflowNotFound means no workflow has that ID (or its record was
	// deleted after its retention).
	ErrWorkflowNotFound = base.ErrWorkflowNotFound
	// ErrWorkflowIDConflict is returned by EnqueueWorkflow when a workflow
	// with its ID and other tasks or options is stored. The same workflow
	// enqueued again is not an error.
	ErrWorkflowIDConflict = base.ErrWorkflowIDConflict
	// ErrServerClosed is returned by Start and Run on a Server that was
	// already shut down.
	ErrServerClosed = errors.New("htq: server closed")
	// ErrServerRunning is returned by Start and Run on a Server that is
	// already running.
	ErrServerRunning = errors.New("htq: server already running")
	// ErrTaskCanceled is the cause of a handler ctx cancelled through
	// Inspector.CancelProcessing.
	ErrTaskCanceled = errors.New("htq: task canceled")
	// ErrLeaseExpired is the error recorded on a task whose worker stopped
	// renewing its lease (the worker crashed or was cut off).
	ErrLeaseExpired = errors.New("htq: task lease expired")
)

// WorkflowError is the error of EnqueueWorkflow about some of its tasks:
// Tasks names them (IDs within the workflow) and errors.Is finds its
// sentinel (ErrWorkflowCycle, ErrDependencyNotFound, ErrTaskIDConflict, …).
type WorkflowError = base.WorkflowError

// SkipRetry, returned by a Handler (or wrapped in its error), archives the
// task at once instead of retrying it.
var SkipRetry = errors.New("skip retry for the task")

// MaxPayloadSize is the largest payload Enqueue accepts, in bytes.
const MaxPayloadSize = base.MaxPayloadSize
