package broker

import (
	"context"
	"time"

	"github.com/htqueue/htq/internal/base"
)

// Admin is the management half of the storage seam: what the Inspector,
// the Scheduler, the group Aggregator, queue settings and the HTTP service
// need. Every backend implements it with the same conventions as Broker
// (one atomic change per call or per batch, storage clock, base sentinels).
type Admin interface {
	// QueueStats reports the sizes, counters and settings of a queue. It
	// fails with base.ErrQueueNotFound for a queue that was never
	// enqueued into, paused or given settings.
	QueueStats(ctx context.Context, queue string) (*QueueStats, error)
	// History reports processed and failed counts for each of the last
	// days days (today first, days of the storage clock in UTC).
	History(ctx context.Context, queue string, days int) ([]DailyStats, error)
	// ListTasks returns one page of a queue's tasks in one state, in the
	// state's natural order: pending oldest first, active by lease
	// deadline, scheduled and retry by due time, archived newest first,
	// completed by end of retention, aggregating (of p.Group) oldest first,
	// waiting (workflow tasks waiting for dependencies) oldest first.
	// A page costs O(log n + page size), never a scan of the queue.
	ListTasks(ctx context.Context, p ListParams) ([]*base.TaskInfo, error)

	// RunTask moves a scheduled, retry, archived or aggregating task to
	// pending. Pending, active and waiting tasks fail with
	// base.ErrWrongState.
	RunTask(ctx context.Context, queue, id string) error
	// ArchiveTask moves a pending, scheduled, retry, aggregating or waiting
	// task to archived. Active tasks fail with base.ErrWrongState; an archived task
	// is left as it is.
	ArchiveTask(ctx context.Context, queue, id string) error
	// DeleteAll, RunAll and ArchiveAll apply DeleteTask, RunTask or
	// ArchiveTask to every task of the queue in state (and of group, for
	// aggregating tasks), in batches each atomic, and report how many
	// tasks they changed. Active tasks are refused with base.ErrWrongState,
	// and so is RunAll of waiting tasks (RunTask refuses a waiting task:
	// it starts when its dependencies have finished).
	DeleteAll(ctx context.Context, queue string, state base.TaskState, group string) (int, error)
	RunAll(ctx context.Context, queue string, state base.TaskState, group string) (int, error)
	ArchiveAll(ctx context.Context, queue string, state base.TaskState, group string) (int, error)

	// PauseQueue stops every server from fetching the queue (allowed for a
	// queue with no task yet); UnpauseQueue lets them again and wakes them.
	PauseQueue(ctx context.Context, queue string) error
	UnpauseQueue(ctx context.Context, queue string) error
	// DeleteQueue deletes a queue with its settings, counters and tasks.
	// Without force it fails with base.ErrQueueNotEmpty when the queue
	// holds any task; with force it still fails so while tasks are active.
	DeleteQueue(ctx context.Context, queue string, force bool) error

	// SetQueueSettings stores settings every server obeys at fetch time.
	SetQueueSettings(ctx context.Context, queue string, s QueueSettings) error

	// ListServers returns the presence records that have not expired.
	ListServers(ctx context.Context) ([]*base.ServerInfo, error)
	// CancelProcessing asks whichever server runs task id to cancel its
	// handler's ctx (an EventCancel to every subscriber).
	CancelProcessing(ctx context.Context, id string) error
	// WatchTask marks a task so that its completion or archiving sends an
	// EventDone, and returns its current state. A watched task without
	// retention is kept for WatchGrace after it completes, so the watcher
	// can read its result.
	WatchTask(ctx context.Context, queue, id string) (*base.TaskInfo, error)

	// ListKeys lists the fair-sharing keys of a queue that have pending or
	// active tasks, sorted by key, with their counts: O(keys).
	ListKeys(ctx context.Context, queue string) ([]KeyStats, error)

	// ListGroups lists the groups of a queue that hold aggregating tasks,
	// sorted by name, with their sizes.
	ListGroups(ctx context.Context, queue string) ([]GroupStats, error)
	// TakeGroup checks, on the storage clock, whether a group is ready
	// (it holds p.MaxSize tasks or more, its oldest task waited p.MaxDelay,
	// or its newest waited p.GracePeriod) and if so moves up to p.MaxSize
	// of its oldest tasks into an aggregation set leased for p.Lease. It
	// returns nil when the group is not ready. Two callers never take the
	// same task.
	TakeGroup(ctx context.Context, p TakeGroupParams) (*Aggregation, error)
	// FinishAggregation atomically enqueues msg (as pending) and deletes
	// the tasks of the aggregation set. It fails with base.ErrLeaseLost
	// when the set's lease ran out and the set was given back.
	FinishAggregation(ctx context.Context, a *Aggregation, msg *base.TaskMessage) error
	// ReclaimAggregations gives the tasks of aggregation sets whose lease
	// ran out (their aggregator died) back to their groups.
	ReclaimAggregations(ctx context.Context, queue string) (int, error)

	// ClaimTick records that a scheduler enqueued entry's task for tick;
	// it reports false when another scheduler already did. Claims expire
	// after ttl.
	ClaimTick(ctx context.Context, entryID string, tick time.Time, ttl time.Duration) (bool, error)
	// WriteSchedulerEntries records (or renews) a scheduler's entries for ttl.
	WriteSchedulerEntries(ctx context.Context, schedulerID string, entries []*base.SchedulerEntry, ttl time.Duration) error
	// ClearSchedulerEntries removes a scheduler's entries.
	ClearSchedulerEntries(ctx context.Context, schedulerID string) error
	// ListSchedulerEntries returns the entries of every live scheduler.
	ListSchedulerEntries(ctx context.Context) ([]*base.SchedulerEntry, error)
}

// WatchGrace is how long a watched task without retention is kept after
// it completes.
const WatchGrace = time.Minute

// QueueStats is a snapshot of one queue.
type QueueStats struct {
	Queue                                       string
	Pending, Active, Scheduled, Retry, Archived int
	Completed, Aggregating                      int
	// Waiting counts workflow tasks waiting for their dependencies.
	Waiting                     int
	Groups                      int
	Processed, Failed           int64 // today (UTC, storage clock)
	ProcessedTotal, FailedTotal int64
	// OldestPending is when the oldest pending task became pending (zero
	// when none is).
	OldestPending time.Time
	Paused        bool
	// MemoryBytes is the storage the queue takes, or -1 when the backend
	// cannot tell cheaply.
	MemoryBytes int64
	Settings    QueueSettings
	// Now is the storage clock when the snapshot was taken.
	Now time.Time
}

// DailyStats counts one day's outcomes.
type DailyStats struct {
	Date              time.Time // midnight UTC
	Processed, Failed int64
}

// ListParams selects one page of tasks.
type ListParams struct {
	Queue string
	State base.TaskState
	// Group is required for base.StateAggregating.
	Group string
	// Offset and Limit select the page (Limit ≥ 1).
	Offset, Limit int
}

// QueueSettings are stored with a queue and obeyed by every server.
type QueueSettings struct {
	// MaxConcurrency bounds the queue's active tasks across all servers
	// (0: no bound).
	MaxConcurrency int
	// RateLimit bounds how many tasks start per second across all servers
	// (0: no bound), with bursts of up to RateBurst (default 1).
	RateLimit float64
	RateBurst int
	// LeaseDuration, when set, replaces the servers' lease for this
	// queue's tasks (for long tasks).
	LeaseDuration time.Duration

	// KeyMaxConcurrency bounds the active tasks of one fair-sharing key
	// (base.TaskMessage.Key) across all servers (0: no bound).
	KeyMaxConcurrency int
	// KeyRateLimit bounds how many tasks of one key start per second
	// across all servers (0: no bound), with bursts of up to KeyRateBurst
	// (default 1).
	KeyRateLimit float64
	KeyRateBurst int
}

// KeyStats describes one fair-sharing key of a queue: its pending tasks
// (of priority 0, the only ones a key holds) and its active ones.
type KeyStats struct {
	Key             string
	Pending, Active int
}

// GroupStats describes one group of aggregating tasks.
type GroupStats struct {
	Group string
	Size  int
}

// TakeGroupParams says when a group is ready to aggregate.
type TakeGroupParams struct {
	Queue, Group string
	MaxSize      int
	MaxDelay     time.Duration
	GracePeriod  time.Duration
	Lease        time.Duration
}

// Aggregation is a set of tasks taken from a group for aggregation.
type Aggregation struct {
	Queue, Group string
	// SetID names the set; Token fences it.
	SetID, Token string
	Msgs         []*base.TaskMessage
}

// ThrottledError is returned by Fetch when the queue's settings allow no
// task to start now; RetryIn says when one may.
type ThrottledError struct {
	Queue   string
	RetryIn time.Duration
}

func (e *ThrottledError) Error() string {
	return "broker: queue " + e.Queue + " throttled for " + e.RetryIn.String()
}
