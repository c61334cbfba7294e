package htq

import (
	"context"
	"fmt"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/storage"
)

// Inspector reads and manages queues, tasks, servers and scheduler
// entries. It works on every storage backend.
type Inspector struct {
	s *Storage
	// watching, when set (tests), is called once WaitForResult watches.
	watching func()
}

// NewInspector returns an Inspector over s.
func NewInspector(s *Storage) *Inspector { return &Inspector{s: s} }

// Close releases the Inspector. The Storage stays open.
func (i *Inspector) Close() error { return nil }

// QueueSettings are stored with a queue; every server sharing the storage
// obeys them at fetch time, and a change takes effect at the next fetch.
type QueueSettings struct {
	// MaxConcurrency bounds the queue's running tasks across all servers
	// (0: no bound).
	MaxConcurrency int
	// RateLimit bounds how many of the queue's tasks start per second
	// across all servers (0: no bound), in bursts of up to RateBurst
	// (default 1).
	RateLimit float64
	RateBurst int
	// LeaseDuration replaces the servers' LeaseDuration for the queue's
	// tasks (0: the server's).
	LeaseDuration time.Duration

	// KeyMaxConcurrency bounds the running tasks of one fair-sharing key
	// (the Key option) across all servers (0: no bound). A key at its
	// bound waits out of the rotation until one of its tasks ends.
	KeyMaxConcurrency int
	// KeyRateLimit bounds how many tasks of one key start per second
	// across all servers (0: no bound), in bursts of up to KeyRateBurst
	// (default 1).
	KeyRateLimit float64
	KeyRateBurst int
}

// QueueInfo describes a queue at one moment.
type QueueInfo struct {
	// Queue is the queue's name.
	Queue string
	// MemoryUsage is the storage the queue takes in bytes, or -1 when the
	// backend cannot tell cheaply.
	MemoryUsage int64
	// Latency is how long the oldest pending task has waited. On Redis a
	// task enqueued straight to pending carries no enqueue time (that would
	// cost every Enqueue a write): its wait counts from the first
	// GetQueueInfo that saw it at the head of the queue. Tasks that became
	// pending any other way (forwarded, retried, requeued, run by hand),
	// and every task on the embedded store, count exactly.
	Latency time.Duration
	// Size is the number of tasks in the queue, in every state.
	Size int
	// Groups is the number of groups with aggregating tasks.
	Groups int
	// The number of tasks in each state.
	Pending, Active, Scheduled, Retry, Archived, Completed, Aggregating int
	// Waiting is the number of workflow tasks waiting for dependencies.
	Waiting int
	// Processed and Failed count today's finished and failed attempts
	// (UTC day); the totals count since the queue began.
	Processed, Failed           int
	ProcessedTotal, FailedTotal int
	// Paused is true while servers do not fetch the queue.
	Paused bool
	// Settings are the queue's stored settings.
	Settings QueueSettings
	// Timestamp is when the information was read (storage clock).
	Timestamp time.Time
}

// DailyStats is one day's counts of a queue.
type DailyStats struct {
	Queue     string
	Processed int
	Failed    int
	// Date is the day (midnight UTC).
	Date time.Time
}

// Queues returns the names of every queue, sorted.
func (i *Inspector) Queues() ([]string, error) {
	qs, err := brokerOf(i.s).Queues(context.Background())
	if err != nil {
		return nil, fmt.Errorf("htq: list queues: %w", err)
	}
	return qs, nil
}

// GetQueueInfo describes a queue. It fails with ErrQueueNotFound for a
// queue that does not exist.
func (i *Inspector) GetQueueInfo(queue string) (*QueueInfo, error) {
	st, err := brokerOf(i.s).QueueStats(context.Background(), queue)
	if err != nil {
		return nil, fmt.Errorf("htq: queue info of %s: %w", queue, err)
	}
	info := &QueueInfo{
		Queue: st.Queue, MemoryUsage: st.MemoryBytes, Groups: st.Groups,
		Pending: st.Pending, Active: st.Active, Scheduled: st.Scheduled, Retry: st.Retry,
		Archived: st.Archived, Completed: st.Completed, Aggregating: st.Aggregating, Waiting: st.Waiting,
		Processed: int(st.Processed), Failed: int(st.Failed),
		ProcessedTotal: int(st.ProcessedTotal), FailedTotal: int(st.FailedTotal),
		Paused: st.Paused, Timestamp: st.Now,
		Settings: QueueSettings(st.Settings),
	}
	info.Size = info.Pending + info.Active + info.Scheduled + info.Retry + info.Archived + info.Completed + info.Aggregating + info.Waiting
	if !st.OldestPending.IsZero() {
		info.Latency = max(st.Now.Sub(st.OldestPending), 0)
	}
	return info, nil
}

// History returns the processed and failed counts of each of the last n
// days, today first.
func (i *Inspector) History(queue string, n int) ([]*DailyStats, error) {
	days, err := brokerOf(i.s).History(context.Background(), queue, n)
	if err != nil {
		return nil, fmt.Errorf("htq: history of %s: %w", queue, err)
	}
	out := make([]*DailyStats, len(days))
	for k, d := range days {
		out[k] = &DailyStats{Queue: queue, Processed: int(d.Processed), Failed: int(d.Failed), Date: d.Date}
	}
	return out, nil
}

// SetQueueSettings stores settings for a queue (creating the queue if it
// does not exist yet).
func (i *Inspector) SetQueueSettings(queue string, s QueueSettings) error {
	if s.MaxConcurrency < 0 || s.RateLimit < 0 || s.RateBurst < 0 || s.LeaseDuration < 0 ||
		s.KeyMaxConcurrency < 0 || s.KeyRateLimit < 0 || s.KeyRateBurst < 0 {
		return fmt.Errorf("%w: queue settings must not be negative: %+v", ErrInvalidArgument, s)
	}
	if s.LeaseDuration != 0 && s.LeaseDuration < minLeaseDuration {
		return fmt.Errorf("%w: LeaseDuration %v is shorter than %v", ErrInvalidArgument, s.LeaseDuration, minLeaseDuration)
	}
	if err := brokerOf(i.s).SetQueueSettings(context.Background(), queue, broker.QueueSettings(s)); err != nil {
		return fmt.Errorf("htq: set settings of %s: %w", queue, err)
	}
	return nil
}

// ListOption selects a page of a listing.
type ListOption interface{ applyList(*listOptions) }

type listOptions struct{ size, page int }

type listOptionFunc func(*listOptions)

func (f listOptionFunc) applyList(o *listOptions) { f(o) }

// PageSize sets how many tasks a page holds (default 30).
func PageSize(n int) ListOption { return listOptionFunc(func(o *listOptions) { o.size = n }) }

// Page selects the page, counting from 1 (default 1).
func Page(k int) ListOption { return listOptionFunc(func(o *listOptions) { o.page = k }) }

func (i *Inspector) list(queue string, state base.TaskState, group string, opts []ListOption) ([]*TaskInfo, error) {
	o := listOptions{size: 30, page: 1}
	for _, opt := range opts {
		opt.applyList(&o)
	}
	if o.size < 1 || o.page < 1 {
		return nil, fmt.Errorf("%w: PageSize %d and Page %d must be at least 1", ErrInvalidArgument, o.size, o.page)
	}
	ctx := context.Background()
	tis, err := brokerOf(i.s).ListTasks(ctx, broker.ListParams{Queue: queue, State: state, Group: group, Offset: (o.page - 1) * o.size, Limit: o.size})
	if err != nil {
		return nil, fmt.Errorf("htq: list %s tasks of %s: %w", state, queue, err)
	}
	now := storage.Now(ctx, i.s)
	out := make([]*TaskInfo, len(tis))
	for k, ti := range tis {
		out[k] = newTaskInfo(ti, now)
	}
	return out, nil
}

// ListPendingTasks lists pending tasks in the order they will be fetched:
// the highest priority first; within priority 0, the tasks without a key,
// then each fair-sharing key's, keys by name; each lane oldest first.
func (i *Inspector) ListPendingTasks(queue string, opts ...ListOption) ([]*TaskInfo, error) {
	return i.list(queue, base.StatePending, "", opts)
}

// ListActiveTasks lists active tasks, by lease deadline.
func (i *Inspector) ListActiveTasks(queue string, opts ...ListOption) ([]*TaskInfo, error) {
	return i.list(queue, base.StateActive, "", opts)
}

// ListScheduledTasks lists scheduled tasks, soonest first.
func (i *Inspector) ListScheduledTasks(queue string, opts ...ListOption) ([]*TaskInfo, error) {
	return i.list(queue, base.StateScheduled, "", opts)
}

// ListRetryTasks lists tasks waiting for a retry, soonest first.
func (i *Inspector) ListRetryTasks(queue string, opts ...ListOption) ([]*TaskInfo, error) {
	return i.list(queue, base.StateRetry, "", opts)
}

// ListArchivedTasks lists archived tasks, newest first.
func (i *Inspector) ListArchivedTasks(queue string, opts ...ListOption) ([]*TaskInfo, error) {
	return i.list(queue, base.StateArchived, "", opts)
}

// ListCompletedTasks lists completed tasks, by end of retention.
func (i *Inspector) ListCompletedTasks(queue string, opts ...ListOption) ([]*TaskInfo, error) {
	return i.list(queue, base.StateCompleted, "", opts)
}

// ListAggregatingTasks lists the aggregating tasks of a group, oldest first.
func (i *Inspector) ListAggregatingTasks(queue, group string, opts ...ListOption) ([]*TaskInfo, error) {
	return i.list(queue, base.StateAggregating, group, opts)
}

// ListWaitingTasks lists workflow tasks waiting for their dependencies,
// oldest first.
func (i *Inspector) ListWaitingTasks(queue string, opts ...ListOption) ([]*TaskInfo, error) {
	return i.list(queue, base.StateWaiting, "", opts)
}

// GetTaskInfo returns a task's current state, or ErrTaskNotFound.
func (i *Inspector) GetTaskInfo(queue, id string) (*TaskInfo, error) {
	ctx := context.Background()
	ti, err := brokerOf(i.s).GetTaskInfo(ctx, queue, id)
	if err != nil {
		return nil, fmt.Errorf("htq: task %s/%s: %w", queue, id, err)
	}
	return newTaskInfo(ti, storage.Now(ctx, i.s)), nil
}

// DeleteTask deletes a task that is not active.
func (i *Inspector) DeleteTask(queue, id string) error {
	if err := brokerOf(i.s).DeleteTask(context.Background(), queue, id); err != nil {
		return fmt.Errorf("htq: delete task %s/%s: %w", queue, id, err)
	}
	return nil
}

// RunTask makes a scheduled, retry, archived or aggregating task pending.
func (i *Inspector) RunTask(queue, id string) error {
	if err := brokerOf(i.s).RunTask(context.Background(), queue, id); err != nil {
		return fmt.Errorf("htq: run task %s/%s: %w", queue, id, err)
	}
	return nil
}

// ArchiveTask archives a task that is not active.
func (i *Inspector) ArchiveTask(queue, id string) error {
	if err := brokerOf(i.s).ArchiveTask(context.Background(), queue, id); err != nil {
		return fmt.Errorf("htq: archive task %s/%s: %w", queue, id, err)
	}
	return nil
}

type bulkOp func(a broker.Admin, ctx context.Context, q string, s base.TaskState, g string) (int, error)

var (
	bulkDelete  bulkOp = broker.Admin.DeleteAll
	bulkRun     bulkOp = broker.Admin.RunAll
	bulkArchive bulkOp = broker.Admin.ArchiveAll
)

func (i *Inspector) bulk(op bulkOp, what, queue string, state base.TaskState, group string) (int, error) {
	n, err := op(brokerOf(i.s), context.Background(), queue, state, group)
	if err != nil {
		return n, fmt.Errorf("htq: %s all %s tasks of %s: %w", what, state, queue, err)
	}
	return n, nil
}

// DeleteAllPendingTasks deletes every pending task and returns how many.
func (i *Inspector) DeleteAllPendingTasks(queue string) (int, error) {
	return i.bulk(bulkDelete, "delete", queue, base.StatePending, "")
}

// DeleteAllScheduledTasks deletes every scheduled task and returns how many.
func (i *Inspector) DeleteAllScheduledTasks(queue string) (int, error) {
	return i.bulk(bulkDelete, "delete", queue, base.StateScheduled, "")
}

// DeleteAllRetryTasks deletes every retry task and returns how many.
func (i *Inspector) DeleteAllRetryTasks(queue string) (int, error) {
	return i.bulk(bulkDelete, "delete", queue, base.StateRetry, "")
}

// DeleteAllArchivedTasks deletes every archived task and returns how many.
func (i *Inspector) DeleteAllArchivedTasks(queue string) (int, error) {
	return i.bulk(bulkDelete, "delete", queue, base.StateArchived, "")
}

// DeleteAllCompletedTasks deletes every completed task and returns how many.
func (i *Inspector) DeleteAllCompletedTasks(queue string) (int, error) {
	return i.bulk(bulkDelete, "delete", queue, base.StateCompleted, "")
}

// DeleteAllAggregatingTasks deletes every task of a group and returns how many.
func (i *Inspector) DeleteAllAggregatingTasks(queue, group string) (int, error) {
	return i.bulk(bulkDelete, "delete", queue, base.StateAggregating, group)
}

// RunAllScheduledTasks makes every scheduled task pending and returns how many.
func (i *Inspector) RunAllScheduledTasks(queue string) (int, error) {
	return i.bulk(bulkRun, "run", queue, base.StateScheduled, "")
}

// RunAllRetryTasks makes every retry task pending and returns how many.
func (i *Inspector) RunAllRetryTasks(queue string) (int, error) {
	return i.bulk(bulkRun, "run", queue, base.StateRetry, "")
}

// RunAllArchivedTasks makes every archived task pending and returns how many.
func (i *Inspector) RunAllArchivedTasks(queue string) (int, error) {
	return i.bulk(bulkRun, "run", queue, base.StateArchived, "")
}

// RunAllAggregatingTasks makes every task of a group pending and returns how many.
func (i *Inspector) RunAllAggregatingTasks(queue, group string) (int, error) {
	return i.bulk(bulkRun, "run", queue, base.StateAggregating, group)
}

// ArchiveAllPendingTasks archives every pending task and returns how many.
func (i *Inspector) ArchiveAllPendingTasks(queue string) (int, error) {
	return i.bulk(bulkArchive, "archive", queue, base.StatePending, "")
}

// ArchiveAllScheduledTasks archives every scheduled task and returns how many.
func (i *Inspector) ArchiveAllScheduledTasks(queue string) (int, error) {
	return i.bulk(bulkArchive, "archive", queue, base.StateScheduled, "")
}

// ArchiveAllRetryTasks archives every retry task and returns how many.
func (i *Inspector) ArchiveAllRetryTasks(queue string) (int, error) {
	return i.bulk(bulkArchive, "archive", queue, base.StateRetry, "")
}

// ArchiveAllAggregatingTasks archives every task of a group and returns how many.
func (i *Inspector) ArchiveAllAggregatingTasks(queue, group string) (int, error) {
	return i.bulk(bulkArchive, "archive", queue, base.StateAggregating, group)
}

// DeleteAllWaitingTasks deletes every waiting workflow task of the queue;
// what depends on each is canceled or runs, by its workflow's rules.
func (i *Inspector) DeleteAllWaitingTasks(queue string) (int, error) {
	return i.bulk(bulkDelete, "delete", queue, base.StateWaiting, "")
}

// ArchiveAllWaitingTasks archives every waiting workflow task of the
// queue; what depends on each is canceled or runs, by its workflow's
// rules.
func (i *Inspector) ArchiveAllWaitingTasks(queue string) (int, error) {
	return i.bulk(bulkArchive, "archive", queue, base.StateWaiting, "")
}

// PauseQueue stops every server from fetching the queue; its tasks stay.
// A queue with no task yet may be paused.
func (i *Inspector) PauseQueue(queue string) error {
	if err := brokerOf(i.s).PauseQueue(context.Background(), queue); err != nil {
		return fmt.Errorf("htq: pause %s: %w", queue, err)
	}
	return nil
}

// UnpauseQueue lets servers fetch the queue again.
func (i *Inspector) UnpauseQueue(queue string) error {
	if err := brokerOf(i.s).UnpauseQueue(context.Background(), queue); err != nil {
		return fmt.Errorf("htq: unpause %s: %w", queue, err)
	}
	return nil
}

// DeleteQueue deletes a queue. Without force it refuses a queue that holds
// tasks (ErrQueueNotEmpty); with force it deletes them too, unless some are
// active.
func (i *Inspector) DeleteQueue(queue string, force bool) error {
	if err := brokerOf(i.s).DeleteQueue(context.Background(), queue, force); err != nil {
		return fmt.Errorf("htq: delete queue %s: %w", queue, err)
	}
	return nil
}

// ErrQueueNotEmpty is returned by DeleteQueue for a queue that holds tasks.
var ErrQueueNotEmpty = base.ErrQueueNotEmpty

// ServerInfo describes a running server.
type ServerInfo struct {
	ID             string
	Host           string
	PID            int
	Concurrency    int
	Queues         map[string]int
	StrictPriority bool
	Started        time.Time
	Status         string
	// ActiveWorkers lists the tasks the server is running.
	ActiveWorkers []*WorkerInfo
}

// WorkerInfo is one task a server is running.
type WorkerInfo struct {
	TaskID  string
	Queue   string
	Type    string
	Started time.Time
}

// Servers lists the live servers. A server that died disappears once its
// presence record expires (a few heartbeats).
func (i *Inspector) Servers() ([]*ServerInfo, error) {
	list, err := brokerOf(i.s).ListServers(context.Background())
	if err != nil {
		return nil, fmt.Errorf("htq: list servers: %w", err)
	}
	out := make([]*ServerInfo, len(list))
	for k, s := range list {
		si := &ServerInfo{ID: s.ID, Host: s.Host, PID: s.PID, Concurrency: s.Concurrency, Queues: s.Queues,
			StrictPriority: s.StrictPriority, Started: s.Started, Status: s.Status}
		for _, t := range s.ActiveTasks {
			si.ActiveWorkers = append(si.ActiveWorkers, &WorkerInfo{TaskID: t.ID, Queue: t.Queue, Type: t.Type, Started: t.Started})
		}
		out[k] = si
	}
	return out, nil
}

// CancelProcessing cancels the ctx of running task id on whichever server
// runs it. The handler's error then decides the outcome as usual.
func (i *Inspector) CancelProcessing(id string) error {
	if err := brokerOf(i.s).CancelProcessing(context.Background(), id); err != nil {
		return fmt.Errorf("htq: cancel %s: %w", id, err)
	}
	return nil
}

// KeyInfo describes one fair-sharing key of a queue (the Key option).
type KeyInfo struct {
	Key string
	// Pending and Active count the key's pending and running tasks.
	Pending, Active int
}

// Keys lists the fair-sharing keys of a queue that have pending or running
// tasks, sorted by key. It costs one pass over the queue's keys.
func (i *Inspector) Keys(queue string) ([]*KeyInfo, error) {
	keys, err := brokerOf(i.s).ListKeys(context.Background(), queue)
	if err != nil {
		return nil, fmt.Errorf("htq: keys of %s: %w", queue, err)
	}
	out := make([]*KeyInfo, len(keys))
	for k, s := range keys {
		out[k] = &KeyInfo{Key: s.Key, Pending: s.Pending, Active: s.Active}
	}
	return out, nil
}

// GroupInfo describes a group of aggregating tasks.
type GroupInfo struct {
	Group string
	Size  int
}

// Groups lists the groups of a queue that hold aggregating tasks.
func (i *Inspector) Groups(queue string) ([]*GroupInfo, error) {
	groups, err := brokerOf(i.s).ListGroups(context.Background(), queue)
	if err != nil {
		return nil, fmt.Errorf("htq: groups of %s: %w", queue, err)
	}
	out := make([]*GroupInfo, len(groups))
	for k, g := range groups {
		out[k] = &GroupInfo{Group: g.Group, Size: g.Size}
	}
	return out, nil
}

// WaitForResult waits until the task is completed or archived and returns
// it. The storage notifies the waiter, so it does not poll; a task without
// retention stays readable for a minute after it completes once someone
// waits for it. ctx bounds the wait.
func (i *Inspector) WaitForResult(ctx context.Context, queue, id string) (*TaskInfo, error) {
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := brokerOf(i.s).Subscribe(subCtx)
	if err != nil {
		return nil, fmt.Errorf("htq: wait for %s/%s: %w", queue, id, err)
	}
	ti, err := brokerOf(i.s).WatchTask(ctx, queue, id)
	if err != nil {
		return nil, fmt.Errorf("htq: wait for %s/%s: %w", queue, id, err)
	}
	if i.watching != nil {
		i.watching()
	}
	// A slow check covers a notification lost across a reconnection.
	recheck := time.NewTicker(5 * time.Second)
	defer recheck.Stop()
	for {
		if ti.State == base.StateCompleted || ti.State == base.StateArchived {
			return newTaskInfo(ti, storage.Now(ctx, i.s)), nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("htq: wait for %s/%s: %w", queue, id, context.Cause(ctx))
		case ev, ok := <-events:
			if !ok {
				return nil, fmt.Errorf("htq: wait for %s/%s: %w", queue, id, context.Cause(ctx))
			}
			if !(ev.Kind == broker.EventDone && ev.Queue == queue && ev.TaskID == id) && ev.Kind != broker.EventResync {
				continue
			}
		case <-recheck.C:
		}
		if ti, err = brokerOf(i.s).GetTaskInfo(ctx, queue, id); err != nil {
			return nil, fmt.Errorf("htq: wait for %s/%s: %w", queue, id, err)
		}
	}
}
