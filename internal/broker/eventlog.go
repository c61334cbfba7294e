package broker

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/htqueue/htq/internal/base"
)

// EventLog is the lifecycle log of the queues: each queue keeps its last
// events, one per task state change and per pause or resume, appended in
// the same atomic operation as the change itself. So whoever reads the log
// sees what every client, server and worker sharing the storage did, on
// any machine, in the order the storage applied it. Unlike Subscribe's
// hints, which only wake servers, the log is the record; it is bounded, so
// a reader that falls behind loses events and is told so
// (EventBatch.Truncated). A backend may log the events of one call (a
// Fetch of 16 tasks, an EnqueueBatch) as one entry and bound the log by
// entries: it keeps at least the events of the last DefaultEventLogSize
// calls that logged any, unless it was opened with another size.
//
// Which changes log what (LogEvent.State is the state after the change):
//
//	enqueued   Enqueue, EnqueueBatch, FinishAggregation's new task: pending, scheduled or aggregating
//	started    Fetch: active
//	succeeded  Complete: completed, or 0 when the task is deleted at once
//	failed     Retry (retry) and Archive (archived), with the attempt's error
//	retried    back to pending to run anew: a due retry task (Forward), RunTask and RunAll, Requeue
//	archived   ArchiveTask and ArchiveAll (by hand): archived
//	deleted    DeleteTask and DeleteAll (by hand): 0
//	paused     PauseQueue of a queue that was not paused (no task)
//	resumed    UnpauseQueue of a paused queue (no task)
//	released   a workflow task whose dependencies finished (see Workflows): pending or scheduled
//	canceled   a workflow task canceled by its workflow's rules or CancelWorkflow: archived,
//	           with the reason as Error
//
// EnqueueWorkflow logs its tasks as enqueued (pending, scheduled or
// waiting). The changes a task's outcome makes to the tasks that depend on
// it are logged in their own queues, after the change that caused them.
//
// A scheduled task becoming due, the janitor's deletions, archive trimming,
// aggregation sets and DeleteQueue log nothing; DeleteQueue deletes the
// queue's log with it.
type EventLog interface {
	// ReadEvents returns, for each queue of p.Cursors, the events logged
	// after its cursor (at most p.Limit per queue, oldest first) and the
	// cursors to read on from. When no queue has any and p.Wait > 0, it
	// waits up to p.Wait for one (a backend may poll meanwhile).
	ReadEvents(ctx context.Context, p ReadEventsParams) (*EventBatch, error)
}

// LogKind says what a LogEvent records.
type LogKind string

// The kinds of LogEvent (see EventLog for which change logs which).
const (
	LogEnqueued  LogKind = "enqueued"
	LogStarted   LogKind = "started"
	LogSucceeded LogKind = "succeeded"
	LogFailed    LogKind = "failed"
	LogRetried   LogKind = "retried"
	LogArchived  LogKind = "archived"
	LogDeleted   LogKind = "deleted"
	LogPaused    LogKind = "paused"
	LogResumed   LogKind = "resumed"
	LogReleased  LogKind = "released"
	LogCanceled  LogKind = "canceled"
)

// LogKinds lists every kind, in the order of the lifecycle.
var LogKinds = []LogKind{LogEnqueued, LogReleased, LogStarted, LogSucceeded, LogFailed, LogRetried, LogArchived, LogCanceled,
	LogDeleted, LogPaused, LogResumed}

// LogEvent is one entry of a queue's event log.
type LogEvent struct {
	// ID orders the events of one queue: "<ms>-<n>", increasing (see
	// CompareEventIDs). IDs of different queues share one clock on one
	// storage node, but their order across queues is only approximate.
	ID     string
	Queue  string
	Kind   LogKind
	TaskID string // "" for paused and resumed
	// State is the task's state after the change; 0 when the task is gone
	// (deleted, or succeeded without retention) and for queue events.
	State base.TaskState
	// Time is when the change happened, on the storage clock.
	Time time.Time
	// Error is the failed attempt's error (failed), or why the task was
	// canceled (canceled).
	Error string
}

// Special cursors of ReadEventsParams.
const (
	// CursorEnd reads only the events logged after the call.
	CursorEnd = ""
	// CursorStart reads from the oldest event the log keeps.
	CursorStart = "0"
)

// DefaultEventLogSize is how many entries (calls that logged events) each
// queue's log keeps by default.
const DefaultEventLogSize = 1000

// MaxEventReadLimit bounds ReadEventsParams.Limit.
const MaxEventReadLimit = 10000

// ReadEventsParams selects the events ReadEvents returns.
type ReadEventsParams struct {
	// Cursors maps each queue to read to the position to read after: an
	// event ID, CursorStart or CursorEnd. A queue without a log (never
	// used, or deleted) has no events.
	Cursors map[string]string
	// Limit bounds the events returned per queue (1 to MaxEventReadLimit).
	Limit int
	// Wait is the longest ReadEvents waits for an event when there is
	// none (0: it answers at once).
	Wait time.Duration
}

// EventBatch is what ReadEvents found.
type EventBatch struct {
	// Events are the events read, each queue's in log order (queues in no
	// particular order between them).
	Events []LogEvent
	// Cursors holds the position after the last event read of each queue
	// of the request (CursorEnd resolved to the log's end), to pass to the
	// next ReadEvents.
	Cursors map[string]string
	// Truncated lists the queues whose cursor had already left the log:
	// events after it were dropped to keep the log's size, and the read
	// went on from the oldest event kept.
	Truncated []string
}

// CheckReadEvents validates p as every backend does.
func CheckReadEvents(p ReadEventsParams) error {
	if p.Limit < 1 || p.Limit > MaxEventReadLimit {
		return fmt.Errorf("%w: read events: Limit %d is out of range [1, %d]", base.ErrInvalidArgument, p.Limit, MaxEventReadLimit)
	}
	if p.Wait < 0 {
		return fmt.Errorf("%w: read events: Wait %v is negative", base.ErrInvalidArgument, p.Wait)
	}
	for q, c := range p.Cursors {
		if err := base.ValidateQueueName(q); err != nil {
			return fmt.Errorf("read events: %w", err)
		}
		if c != CursorEnd && c != CursorStart {
			if _, _, _, err := ParseEventID(c); err != nil {
				return fmt.Errorf("read events: queue %s: %w", q, err)
			}
		}
	}
	return nil
}

// ParseEventID splits an event ID into its numbers: "<ms>-<n>" is the
// first (or only) event of the n-th log entry of millisecond ms,
// "<ms>-<n>.<k>" (k ≥ 1) the k-th next one of that entry (a backend may
// log the events of one call, such as a Fetch of several tasks, as one
// entry).
func ParseEventID(id string) (ms, n, k uint64, err error) {
	a, b, ok := strings.Cut(id, "-")
	if ok {
		c := ""
		b, c, _ = strings.Cut(b, ".")
		ms, err = strconv.ParseUint(a, 10, 64)
		if err == nil {
			n, err = strconv.ParseUint(b, 10, 64)
		}
		if err == nil && c != "" {
			k, err = strconv.ParseUint(c, 10, 64)
			if err == nil && k == 0 {
				err = strconv.ErrSyntax
			}
		}
	}
	if !ok || err != nil {
		return 0, 0, 0, fmt.Errorf("%w: event ID %q: want <ms>-<n> or <ms>-<n>.<k>", base.ErrInvalidArgument, id)
	}
	return ms, n, k, nil
}

// FormatEventID builds the ID of the k-th event (from 0) of the n-th log
// entry of millisecond ms.
func FormatEventID(ms, n, k uint64) string {
	id := strconv.FormatUint(ms, 10) + "-" + strconv.FormatUint(n, 10)
	if k > 0 {
		id += "." + strconv.FormatUint(k, 10)
	}
	return id
}

// CompareEventIDs compares two valid event IDs (or CursorStart, which is
// before every ID) like strings.Compare.
func CompareEventIDs(a, b string) int {
	if a == CursorStart {
		a = "0-0"
	}
	if b == CursorStart {
		b = "0-0"
	}
	am, an, ak, _ := ParseEventID(a)
	bm, bn, bk, _ := ParseEventID(b)
	if c := cmp.Compare(am, bm); c != 0 {
		return c
	}
	if c := cmp.Compare(an, bn); c != 0 {
		return c
	}
	return cmp.Compare(ak, bk)
}
