// Package broker defines the storage interface every htq backend implements.
// The Client, the Server's components, the Inspector and the HTTP service
// talk to storage only through it, so a backend that passes the conformance
// suite in package brokertest works everywhere.
//
// Conventions every implementation keeps:
//   - Each method is one atomic state change (or a batch of independent
//     atomic changes where it says so): it checks every precondition before
//     its first write, so an error leaves nothing half-moved. A task is in
//     exactly one state at any moment; an active task always has a lease and
//     a lease always belongs to an active task.
//   - Times that decide leases and due dates are read from the storage's own
//     clock (Redis TIME, the embedded store's clock), never the caller's,
//     except that absolute times a user gave (ProcessAt, Deadline) are
//     stored as given.
//   - Errors wrap the sentinels of package base (base.ErrLeaseLost, …) so
//     that callers can use errors.Is.
//   - The one error that comes after a write is base.ErrReplicationTimeout:
//     a backend told to wait for copies of the writes callers rely on (the
//     Redis backend's WaitOptions) made the change whole, but its copies
//     were not confirmed in time.
package broker

import (
	"context"
	"strings"
	"time"

	"github.com/htqueue/htq/internal/base"
)

// Broker is the storage seam of htq: the operations of servers and
// clients below, and the management operations of Admin.
type Broker interface {
	Admin
	MetaStore
	EventLog
	Workflows

	// Ping checks that the storage answers.
	Ping(ctx context.Context) error
	// Close releases the broker's resources. Calls after Close fail with
	// base.ErrStorageClosed.
	Close() error
	// Now returns the storage's clock.
	Now(ctx context.Context) (time.Time, error)

	// Enqueue stores a new task (see EnqueueParams for the state it gets).
	// It fails with base.ErrTaskIDConflict when the queue already holds a
	// task with that ID and other content, and with base.ErrDuplicateTask
	// when the message's UniqueKey is locked; in both cases nothing is
	// written. The queue is registered (Queues lists it) by the first
	// Enqueue into it.
	//
	// Enqueue is idempotent: when the queue holds a task with that ID and
	// the same content (base.TaskMessage.SameEnqueue), in whatever state,
	// the call succeeds and writes nothing, once that task is as durable
	// as a new one would be. That is a retry whose first attempt was
	// stored although its caller saw an error; the ID is checked before
	// the uniqueness lock, so the retry of a Unique task does not meet its
	// own lock, and ProcessAt is not compared (the first attempt's due
	// time stays). A task that was deleted (completed without retention)
	// is not remembered: the same Enqueue then stores it again.
	Enqueue(ctx context.Context, p EnqueueParams) error
	// EnqueueBatch stores many tasks in as few round trips as the backend
	// allows. Each task is atomic on its own and treated as by Enqueue
	// (one found stored with the same content is a success): the result
	// has one entry per task, nil where it was stored, the Enqueue error
	// where not. Tasks are decided in order, each seeing those stored
	// before it, the batch's own included.
	EnqueueBatch(ctx context.Context, ps []EnqueueParams) []error

	// Fetch moves up to p.Max pending tasks of p.Queue to active and
	// grants each a lease of p.LeaseDuration (from the storage's clock)
	// with a fresh token (see Lease.Token). A paused queue yields nothing. An empty result
	// with a nil error means there was nothing to fetch.
	//
	// The order: tasks of a higher Priority first; within one priority,
	// oldest first — except that the tasks of priority 0 wait in lanes,
	// one for those without a fair-sharing Key and one per key, and the
	// lanes are served in turn (round robin): each turn takes the oldest
	// task of the lane at the front of the rotation and puts the lane at
	// its back. A lane joins the rotation at its back when it gets a task
	// (the lane without a key: when a fetch or a keyed lane's joining finds
	// it holding tasks). A key whose active tasks reach KeyMaxConcurrency
	// leaves the rotation until one of them ends; a key whose rate bucket
	// (KeyRateLimit, KeyRateBurst; it starts full) is empty leaves it
	// until a token is due, and rejoins at the first Fetch from then on,
	// keys in order of that time, then of name. The queue's own limits
	// (MaxConcurrency, RateLimit) bound the whole fetch.
	Fetch(ctx context.Context, p FetchParams) ([]*Lease, error)
	// Complete finishes active tasks that succeeded: each goes to completed
	// (Retention > 0, with its result and completion time) or is deleted,
	// its uniqueness lock is released and the processed counters grow.
	// Each entry is checked and applied on its own; the result has one
	// entry per lease, nil or an error wrapping base.ErrLeaseLost when the
	// token no longer holds the task.
	Complete(ctx context.Context, leases []LeaseRef) []error
	// Retry moves an active task to retry, due after p.Delay on the storage
	// clock, with LastErr and LastFailedAt set and, when p.IsFailure,
	// Retried+1 (an error that is not a failure does not use up a retry).
	Retry(ctx context.Context, p RetryParams) error
	// Archive moves an active task to archived with LastErr and
	// LastFailedAt set (Retried is kept).
	Archive(ctx context.Context, p ArchiveParams) error
	// Requeue moves an active task back to pending without counting an
	// attempt (used at shutdown). Its lease ends.
	Requeue(ctx context.Context, l LeaseRef) error
	// ExtendLeases pushes the deadline of each still-held lease to the
	// storage clock's now + d. It returns the IDs of the leases that were
	// lost (not extended); an error means none could be checked.
	ExtendLeases(ctx context.Context, queue string, leases []LeaseRef, d time.Duration) (lost []string, err error)
	// ExpiredLeases lists up to limit active tasks of queue whose lease
	// deadline has passed on the storage clock (their worker is gone). The
	// caller recovers each with Retry or Archive and RequireExpired set.
	ExpiredLeases(ctx context.Context, queue string, limit int) ([]*Lease, error)
	// WriteResult stores data as the result of an active task held by l.
	WriteResult(ctx context.Context, l LeaseRef, data []byte) error

	// Forward moves up to limit scheduled and retry tasks of queue that are
	// due (on the storage clock) to pending, oldest due first. It reports
	// how many it moved and when the next one left is due.
	Forward(ctx context.Context, queue string, limit int) (ForwardResult, error)
	// DeleteExpiredCompleted deletes up to limit completed tasks of queue
	// whose retention has run out and reports how many it deleted.
	DeleteExpiredCompleted(ctx context.Context, queue string, limit int) (int, error)

	// GetTaskInfo returns the task's current state and data, or an error
	// wrapping base.ErrTaskNotFound.
	GetTaskInfo(ctx context.Context, queue, id string) (*base.TaskInfo, error)
	// DeleteTask deletes a task that is not active, releasing its
	// uniqueness lock. It fails with base.ErrTaskNotFound when there is no
	// such task and base.ErrWrongState when it is active.
	DeleteTask(ctx context.Context, queue, id string) error
	// Queues lists every queue that has ever been enqueued into, sorted.
	Queues(ctx context.Context) ([]string, error)

	// Subscribe delivers events that tell a server when to look again
	// (see Event). The channel is closed when ctx is done. Events may be
	// coalesced or, across a reconnection, lost; after a reconnection the
	// backend sends one event with Kind EventResync. Callers keep a slow
	// fallback check for that reason.
	Subscribe(ctx context.Context) (<-chan Event, error)

	// WriteServerState records (or renews) a running server's presence for ttl.
	WriteServerState(ctx context.Context, info *base.ServerInfo, ttl time.Duration) error
	// ClearServerState removes a server's presence record.
	ClearServerState(ctx context.Context, serverID string) error
}

// EnqueueParams describes one new task.
type EnqueueParams struct {
	// Msg is the task. Msg.Validate must pass; backends check it again.
	Msg *base.TaskMessage
	// ProcessAt, when after the storage clock's now, makes the task
	// scheduled until then; otherwise (or when zero) the task is pending.
	// A message with a GroupKey is aggregating whatever ProcessAt says.
	// A message with Workflow set is refused (base.ErrInvalidArgument):
	// workflow tasks are stored by EnqueueWorkflow.
	ProcessAt time.Time
}

// FetchParams describes one fetch.
type FetchParams struct {
	Queue string
	// Max is the most tasks to fetch; at least 1.
	Max int
	// LeaseDuration is how long each lease lasts unless extended.
	LeaseDuration time.Duration
	// ServerID names the fetching server (kept for the Inspector).
	ServerID string
}

// LeaseRef names an active task and the token of the lease its worker holds.
type LeaseRef struct {
	Queue string
	ID    string
	Token string
}

// Lease is an active task handed to a worker.
type Lease struct {
	Msg *base.TaskMessage
	// Token fences the lease: every later write for the task presents it.
	// It starts with FetchParams.ServerID and a '/' (see ServerOfToken),
	// so that whoever presents it can be told which server holds it. The
	// leases of one Fetch may share a token (a Fetch leases a task at most
	// once): a lease is named by its queue, task ID and token together,
	// and no later Fetch grants a token an earlier one did.
	Token string
	// Deadline is when the lease runs out on the storage clock.
	Deadline time.Time
	// Duration is the lease granted: FetchParams.LeaseDuration, or the
	// queue's own lease setting (QueueSettings.LeaseDuration). Zero means
	// FetchParams.LeaseDuration (backends that predate queue settings).
	Duration time.Duration
}

// ServerOfToken returns the ServerID of the Fetch that granted a lease
// token: the part before its last '/'; "" for a token without one.
func ServerOfToken(token string) string {
	if i := strings.LastIndexByte(token, '/'); i > 0 {
		return token[:i]
	}
	return ""
}

// Ref returns the reference that names this lease.
func (l *Lease) Ref() LeaseRef { return LeaseRef{Queue: l.Msg.Queue, ID: l.Msg.ID, Token: l.Token} }

// RetryParams describes a failed attempt that will be tried again.
type RetryParams struct {
	Lease LeaseRef
	// Delay is how long after the storage clock's now the task is due.
	Delay time.Duration
	// ErrMsg is the failure, stored as LastErr.
	ErrMsg string
	// IsFailure counts the attempt in the failed counters.
	IsFailure bool
	// RequireExpired makes the call fail with base.ErrLeaseLost unless the
	// lease's deadline has passed (used by the Recoverer, so that a lease
	// extended meanwhile is left alone).
	RequireExpired bool
}

// ArchiveParams describes a failed task that will not be tried again.
type ArchiveParams struct {
	Lease          LeaseRef
	ErrMsg         string
	RequireExpired bool
}

// ForwardResult tells what Forward did.
type ForwardResult struct {
	// Moved is how many tasks became pending.
	Moved int
	// NextIn is how long until the next scheduled or retry task of the
	// queue is due, on the storage clock; meaningful only when HasNext.
	// It is 0 when more due tasks remain than limit allowed.
	NextIn  time.Duration
	HasNext bool
}

// EventKind says what an Event means.
type EventKind int

// The event kinds.
const (
	// EventReady: a queue's pending list went from empty to not empty.
	EventReady EventKind = iota + 1
	// EventScheduled: a scheduled or retry task was added that may be due
	// earlier than any other of its queue.
	EventScheduled
	// EventResync: events may have been lost; look at every queue again.
	EventResync
	// EventCancel: cancel the handler running task TaskID (Admin.CancelProcessing).
	EventCancel
	// EventDone: watched task TaskID of Queue completed or was archived
	// (Admin.WatchTask).
	EventDone
)

// Event is a hint from the storage to servers. Nothing is lost by missing
// one except latency; the state in the storage is the truth.
type Event struct {
	Kind  EventKind
	Queue string
	// TaskID is set for EventCancel and EventDone.
	TaskID string
}
