package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

var _ broker.Admin = (*Broker)(nil)

// maxHistoryDays bounds History, as on Redis.
const maxHistoryDays = 3660

// bulkBatch is how many tasks DeleteAll, RunAll and ArchiveAll change per
// lock hold, so that a huge queue does not stall every other caller.
const bulkBatch = 1000

// adminBegin locks b for an admin call on queue after validating its name.
func (b *Broker) adminBegin(ctx context.Context, op, queue string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := base.ValidateQueueName(queue); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return b.begin()
}

// knownQueue returns the queue or an error wrapping base.ErrQueueNotFound.
// The caller holds b.mu.
func (b *Broker) knownQueue(op, queue string) (*queue, error) {
	q := b.queues[queue]
	if q == nil {
		return nil, fmt.Errorf("%s: queue %q: %w", op, queue, base.ErrQueueNotFound)
	}
	return q, nil
}

// QueueStats reports the sizes, counters and settings of a queue.
// MemoryBytes is the size of its task records.
func (b *Broker) QueueStats(ctx context.Context, queue string) (*broker.QueueStats, error) {
	if err := b.adminBegin(ctx, "queue stats", queue); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	q, err := b.knownQueue("queue stats", queue)
	if err != nil {
		return nil, err
	}
	now := b.now()
	st := &broker.QueueStats{
		Queue:     q.name,
		Pending:   q.pending.Len(),
		Active:    q.active.Len(),
		Scheduled: q.scheduled.Len(),
		Retry:     q.retry.Len(),
		Archived:  q.archived.Len(),
		Completed: q.completed.Len(),
		Waiting:   q.waiting.Len(),
		Groups:    len(q.groups),
		Paused:    q.paused,
		Settings:  q.settings,
		Now:       now,
	}
	for _, g := range q.groups {
		st.Aggregating += len(g)
	}
	for _, set := range q.sets {
		st.Aggregating += len(set.tasks)
	}
	if c := q.counters[dayOf(now)]; c != nil {
		st.Processed, st.Failed = c[0], c[1]
	}
	if c := q.counters[allTime]; c != nil {
		st.ProcessedTotal, st.FailedTotal = c[0], c[1]
	}
	if h := q.pending.oldestHead(); h != nil {
		// A requeued task counts from its requeue.
		st.OldestPending = h.at
	}
	st.MemoryBytes = -1
	return st, nil
}

// History reports processed and failed counts for each of the last days
// days, today first.
func (b *Broker) History(ctx context.Context, queue string, days int) ([]broker.DailyStats, error) {
	if days < 1 || days > maxHistoryDays {
		return nil, fmt.Errorf("%w: history: days %d is not between 1 and %d", base.ErrInvalidArgument, days, maxHistoryDays)
	}
	if err := b.adminBegin(ctx, "history", queue); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	q, err := b.knownQueue("history", queue)
	if err != nil {
		return nil, err
	}
	today := dayOf(b.now())
	out := make([]broker.DailyStats, days)
	for i := range out {
		day := today - uint64(i)
		out[i].Date = time.UnixMilli(int64(day) * 86_400_000).UTC()
		if c := q.counters[day]; c != nil {
			out[i].Processed, out[i].Failed = c[0], c[1]
		}
	}
	return out, nil
}

// ListTasks returns one page of a queue's tasks in one state. A page costs
// O(log n + limit), except a group (sorted per call).
func (b *Broker) ListTasks(ctx context.Context, p broker.ListParams) ([]*base.TaskInfo, error) {
	if p.Limit < 1 || p.Offset < 0 {
		return nil, fmt.Errorf("%w: list tasks: offset %d and limit %d (at least 0 and 1)", base.ErrInvalidArgument, p.Offset, p.Limit)
	}
	if p.State == base.StateAggregating {
		if err := base.ValidateGroupKey(p.Group); err != nil {
			return nil, fmt.Errorf("list tasks: %w", err)
		}
	} else if p.State < base.StateActive || p.State > base.MaxState {
		return nil, fmt.Errorf("%w: list tasks: state %v", base.ErrInvalidArgument, p.State)
	}
	if err := b.adminBegin(ctx, "list tasks", p.Queue); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	q := b.queues[p.Queue]
	if q == nil {
		return nil, nil
	}
	now := b.now()
	var out []*base.TaskInfo
	skip := p.Offset
	take := func(t *task) bool {
		if skip > 0 {
			skip--
			return true
		}
		out = append(out, b.info(t, now))
		return len(out) < p.Limit
	}
	switch p.State {
	case base.StatePending:
		skip = 0
		q.pending.ascendFrom(p.Offset, take)
	case base.StateArchived:
		skip = 0
		q.archived.descendFrom(p.Offset, take) // newest first
	case base.StateAggregating:
		var all []*task
		for _, t := range q.groups[p.Group] {
			all = append(all, t) // not the tasks an aggregator took
		}
		slices.SortFunc(all, func(a, c *task) int { return cmpSeq(a, c) })
		for _, t := range all {
			if !take(t) {
				break
			}
		}
	default:
		skip = 0
		q.treeOf(p.State).ascendFrom(p.Offset, take)
	}
	return out, nil
}

func cmpSeq(a, c *task) int {
	switch {
	case a.seq < c.seq:
		return -1
	case a.seq > c.seq:
		return 1
	}
	return 0
}

// info describes t. The caller holds b.mu.
func (b *Broker) info(t *task, now time.Time) *base.TaskInfo {
	info := &base.TaskInfo{Message: cloneMsg(t.msg), State: t.state}
	switch t.state {
	case base.StatePending:
		info.NextProcessAt = now
	case base.StateScheduled, base.StateRetry:
		info.NextProcessAt = t.at
	case base.StateActive:
		info.LeaseDeadline = t.at
	case base.StateCompleted:
		info.CompletedAt = t.completedAt
	}
	if t.result != nil {
		info.Result = slices.Clone(t.result)
	}
	return info
}

// RunTask moves a scheduled, retry, archived or aggregating task to pending
// and returns once that is on disk.
func (b *Broker) RunTask(ctx context.Context, queue, id string) error {
	if err := b.adminBegin(ctx, "run task", queue); err != nil {
		return err
	}
	q, t := b.queues[queue], b.find(queue, id)
	if t == nil {
		b.mu.Unlock()
		return fmt.Errorf("run task: %w: task %q in queue %q", base.ErrTaskNotFound, id, queue)
	}
	if err := b.run(q, t, b.now()); err != nil {
		b.mu.Unlock()
		return fmt.Errorf("run task: %w", err)
	}
	tk := b.durable()
	b.mu.Unlock()
	return wait(ctx, tk)
}

// run moves t to the back of the pending list. The caller holds b.mu.
func (b *Broker) run(q *queue, t *task, now time.Time) error {
	switch {
	case t.state == base.StateScheduled || t.state == base.StateRetry || t.state == base.StateArchived:
	case t.state == base.StateAggregating && t.set == nil:
	default:
		return fmt.Errorf("%w: task %q in queue %q is %v", base.ErrWrongState, t.msg.ID, q.name, stateName(t))
	}
	before := q.pending.Len()
	q.unindex(t)
	t.state = base.StatePending
	t.at = now // pending since
	q.pending.pushBack(t)
	b.putTask(t)
	b.logEvent(q.name, broker.LogRetried, t.msg.ID, base.StatePending, "", now)
	b.readyIfFirst(q, before)
	return nil
}

func stateName(t *task) string {
	if t.state == base.StateAggregating && t.set != nil {
		return "being aggregated"
	}
	return t.state.String()
}

// ArchiveTask moves a pending, scheduled, retry or aggregating task to
// archived and returns once that is on disk.
func (b *Broker) ArchiveTask(ctx context.Context, queue, id string) error {
	if err := b.adminBegin(ctx, "archive task", queue); err != nil {
		return err
	}
	q, t := b.queues[queue], b.find(queue, id)
	if t == nil {
		b.mu.Unlock()
		return fmt.Errorf("archive task: %w: task %q in queue %q", base.ErrTaskNotFound, id, queue)
	}
	if err := b.archiveTask(q, t, b.now()); err != nil {
		b.mu.Unlock()
		return fmt.Errorf("archive task: %w", err)
	}
	tk := b.durable()
	b.mu.Unlock()
	return wait(ctx, tk)
}

// archiveTask archives t unless it already is. The caller holds b.mu.
func (b *Broker) archiveTask(q *queue, t *task, now time.Time) error {
	switch {
	case t.state == base.StateArchived:
		return nil
	case t.state == base.StatePending || t.state == base.StateScheduled || t.state == base.StateRetry:
	case t.state == base.StateWaiting:
	case t.state == base.StateAggregating && t.set == nil:
	default:
		return fmt.Errorf("%w: task %q in queue %q is %v", base.ErrWrongState, t.msg.ID, q.name, stateName(t))
	}
	q.unindex(t)
	t.state = base.StateArchived
	t.at = now // archived
	q.index(t)
	b.putTask(t)
	b.logEvent(q.name, broker.LogArchived, t.msg.ID, base.StateArchived, "", now)
	b.finish(t, base.OutcomeFailed, t.msg.LastErr, nil, now)
	b.trimArchived(q, now)
	return nil
}

// DeleteAll deletes every task of queue in state (of group, for aggregating
// tasks) and reports how many.
func (b *Broker) DeleteAll(ctx context.Context, queue string, state base.TaskState, group string) (int, error) {
	return b.bulk(ctx, "delete all", queue, state, group, b.deleteOne)
}

// deleteOne deletes t. The caller holds b.mu.
func (b *Broker) deleteOne(q *queue, t *task, now time.Time) error {
	q.unindex(t)
	b.removeTask(q, t)
	b.logEvent(q.name, broker.LogDeleted, t.msg.ID, 0, "", now)
	b.finish(t, base.OutcomeDeleted, "", nil, now)
	return nil
}

// RunAll moves every task of queue in state (of group, for aggregating
// tasks) to pending and reports how many.
func (b *Broker) RunAll(ctx context.Context, queue string, state base.TaskState, group string) (int, error) {
	if state == base.StatePending || state == base.StateCompleted || state == base.StateWaiting {
		return 0, fmt.Errorf("run all: %w: tasks in state %v cannot be run", base.ErrWrongState, state)
	}
	return b.bulk(ctx, "run all", queue, state, group, b.run)
}

// ArchiveAll archives every task of queue in state (of group, for
// aggregating tasks) and reports how many.
func (b *Broker) ArchiveAll(ctx context.Context, queue string, state base.TaskState, group string) (int, error) {
	if state == base.StateArchived {
		return 0, nil
	}
	if state == base.StateCompleted {
		return 0, fmt.Errorf("archive all: %w: completed tasks cannot be archived", base.ErrWrongState)
	}
	return b.bulk(ctx, "archive all", queue, state, group, b.archiveTask)
}

// bulk applies f to the tasks of one state, bulkBatch at a time, each batch
// atomic, and returns once the last batch is on disk.
func (b *Broker) bulk(ctx context.Context, op, name string, state base.TaskState, group string, f func(*queue, *task, time.Time) error) (int, error) {
	switch {
	case state == base.StateActive:
		return 0, fmt.Errorf("%s: %w: active tasks are refused", op, base.ErrWrongState)
	case state == base.StateAggregating:
		if err := base.ValidateGroupKey(group); err != nil {
			return 0, fmt.Errorf("%s: %w", op, err)
		}
	case state < base.StateActive || state > base.MaxState:
		return 0, fmt.Errorf("%w: %s: state %v", base.ErrInvalidArgument, op, state)
	}
	n := 0
	var tk *ticket
	for {
		if err := b.adminBegin(ctx, op, name); err != nil {
			return n, err
		}
		q := b.queues[name]
		if q == nil {
			b.mu.Unlock()
			break
		}
		now := b.now()
		batch := q.firstN(state, group, bulkBatch)
		for _, t := range batch {
			if t.state != state || q.tasks[t.msg.ID] != t {
				continue // moved by the workflow rules of a task before it
			}
			if err := f(q, t, now); err != nil {
				tk = b.durable()
				b.mu.Unlock()
				return n, fmt.Errorf("%s: %w", op, err)
			}
			n++
		}
		tk = b.durable()
		b.mu.Unlock()
		if len(batch) < bulkBatch {
			break
		}
	}
	return n, wait(ctx, tk)
}

// firstN returns up to n tasks of q in state (of group for aggregating
// tasks that no aggregator holds), oldest first. The caller holds b.mu.
func (q *queue) firstN(state base.TaskState, group string, n int) []*task {
	var out []*task
	switch state {
	case base.StatePending:
		q.pending.ascending(func(t *task) bool {
			out = append(out, t)
			return len(out) < n
		})
	case base.StateAggregating:
		for _, t := range q.groups[group] {
			out = append(out, t)
		}
		slices.SortFunc(out, cmpSeq)
		if len(out) > n {
			out = out[:n]
		}
	default:
		q.treeOf(state).ascending(func(t *task) bool {
			out = append(out, t)
			return len(out) < n
		})
	}
	return out
}

// PauseQueue stops servers from fetching the queue.
func (b *Broker) PauseQueue(ctx context.Context, queue string) error {
	if err := b.adminBegin(ctx, "pause queue", queue); err != nil {
		return err
	}
	q := b.registerQueue(queue)
	if !q.paused {
		q.paused = true
		b.saveQueue(q)
		b.logEvent(queue, broker.LogPaused, "", 0, "", b.now())
	}
	tk := b.durable()
	b.mu.Unlock()
	return wait(ctx, tk)
}

// UnpauseQueue lets servers fetch the queue again and wakes them.
func (b *Broker) UnpauseQueue(ctx context.Context, queue string) error {
	if err := b.adminBegin(ctx, "unpause queue", queue); err != nil {
		return err
	}
	q, err := b.knownQueue("unpause queue", queue)
	if err != nil {
		b.mu.Unlock()
		return err
	}
	if q.paused {
		q.paused = false
		b.saveQueue(q)
		b.logEvent(queue, broker.LogResumed, "", 0, "", b.now())
		b.readyIfFirst(q, 0)
	}
	tk := b.durable()
	b.mu.Unlock()
	return wait(ctx, tk)
}

// DeleteQueue deletes a queue with its settings, counters and tasks.
func (b *Broker) DeleteQueue(ctx context.Context, queue string, force bool) error {
	if err := b.adminBegin(ctx, "delete queue", queue); err != nil {
		return err
	}
	q, err := b.knownQueue("delete queue", queue)
	if err != nil {
		b.mu.Unlock()
		return err
	}
	switch {
	case q.active.Len() > 0:
		b.mu.Unlock()
		return fmt.Errorf("delete queue: %w: queue %q has %d active tasks", base.ErrQueueNotEmpty, queue, q.active.Len())
	case len(q.tasks) > 0 && !force:
		b.mu.Unlock()
		return fmt.Errorf("delete queue: %w: queue %q holds %d tasks", base.ErrQueueNotEmpty, queue, len(q.tasks))
	}
	for _, t := range q.tasks {
		b.delTask(t)
	}
	delete(b.queues, queue)
	delete(b.logs, queue)
	if b.store != nil {
		b.buf.queues[queue] = nil
		b.buf.dropStats[queue] = true
		for k := range b.buf.stats {
			if k.queue == queue {
				delete(b.buf.stats, k)
			}
		}
		b.work.Signal()
	}
	tk := b.durable()
	b.mu.Unlock()
	return wait(ctx, tk)
}

// SetQueueSettings stores settings every Fetch of the queue obeys.
func (b *Broker) SetQueueSettings(ctx context.Context, queue string, s broker.QueueSettings) error {
	if s.MaxConcurrency < 0 || s.RateLimit < 0 || math.IsNaN(s.RateLimit) || math.IsInf(s.RateLimit, 0) || s.RateBurst < 0 || s.LeaseDuration < 0 ||
		s.KeyMaxConcurrency < 0 || s.KeyRateLimit < 0 || math.IsNaN(s.KeyRateLimit) || math.IsInf(s.KeyRateLimit, 0) || s.KeyRateBurst < 0 {
		return fmt.Errorf("%w: queue settings %+v: negative or not a number", base.ErrInvalidArgument, s)
	}
	if err := b.adminBegin(ctx, "set queue settings", queue); err != nil {
		return err
	}
	q := b.registerQueue(queue)
	now := b.now()
	if s.RateLimit > 0 && q.settings.RateLimit > 0 && !q.tokensAt.IsZero() {
		// Keep the bucket: refill at the old rate up to now, cap at the
		// new burst.
		old := float64(max1(q.settings.RateBurst))
		tokens := min(old, q.tokens+max(0, now.Sub(q.tokensAt).Seconds())*q.settings.RateLimit)
		q.tokens, q.tokensAt = min(tokens, float64(max1(s.RateBurst))), now
	} else if s.RateLimit == 0 {
		q.tokens, q.tokensAt = 0, time.Time{}
	}
	q.settings = s
	q.pending.settingsChanged(&q.settings, now)
	b.saveQueue(q)
	tk := b.durable()
	b.mu.Unlock()
	return wait(ctx, tk)
}

// CancelProcessing asks the server running task id to cancel its handler.
func (b *Broker) CancelProcessing(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := base.ValidateTaskID(id); err != nil {
		return fmt.Errorf("cancel processing: %w", err)
	}
	if err := b.begin(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	b.send(broker.Event{Kind: broker.EventCancel, TaskID: id})
	return nil
}

// WatchTask marks a task so that completing or archiving it sends an
// EventDone, and returns its current state. Watches live in memory.
func (b *Broker) WatchTask(ctx context.Context, queue, id string) (*base.TaskInfo, error) {
	if err := b.adminBegin(ctx, "watch task", queue); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	t := b.find(queue, id)
	if t == nil {
		return nil, fmt.Errorf("watch task: %w: task %q in queue %q", base.ErrTaskNotFound, id, queue)
	}
	if t.state != base.StateCompleted && t.state != base.StateArchived {
		t.watched = true
	}
	return b.info(t, b.now()), nil
}

// ListGroups lists the groups of a queue that hold aggregating tasks, with
// their sizes (tasks an aggregator took are no longer in their group).
func (b *Broker) ListGroups(ctx context.Context, queue string) ([]broker.GroupStats, error) {
	if err := b.adminBegin(ctx, "list groups", queue); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	q := b.queues[queue]
	if q == nil {
		return nil, nil
	}
	out := make([]broker.GroupStats, 0, len(q.groups))
	for g, members := range q.groups {
		out = append(out, broker.GroupStats{Group: g, Size: len(members)})
	}
	slices.SortFunc(out, func(a, c broker.GroupStats) int {
		switch {
		case a.Group < c.Group:
			return -1
		case a.Group > c.Group:
			return 1
		}
		return 0
	})
	return out, nil
}

// ListKeys lists the fair-sharing keys of a queue with pending or active
// tasks, sorted by key.
func (b *Broker) ListKeys(ctx context.Context, queue string) ([]broker.KeyStats, error) {
	if err := b.adminBegin(ctx, "list keys", queue); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	q := b.queues[queue]
	if q == nil {
		return nil, nil
	}
	out := make([]broker.KeyStats, 0, len(q.pending.keys))
	for k, kl := range q.pending.keys {
		if kl.pending.Len() > 0 || kl.held > 0 {
			out = append(out, broker.KeyStats{Key: k, Pending: kl.pending.Len(), Active: kl.held})
		}
	}
	slices.SortFunc(out, func(a, c broker.KeyStats) int { return strings.Compare(a.Key, c.Key) })
	return out, nil
}

// TakeGroup takes up to p.MaxSize of a ready group's oldest tasks into an
// aggregation set. It does not wait for the disk: sets live in memory, and
// after a crash every task is back in its group.
func (b *Broker) TakeGroup(ctx context.Context, p broker.TakeGroupParams) (*broker.Aggregation, error) {
	if err := base.ValidateGroupKey(p.Group); err != nil {
		return nil, fmt.Errorf("take group: %w", err)
	}
	if p.MaxSize < 1 || p.MaxDelay < 0 || p.GracePeriod < 0 || p.Lease <= 0 {
		return nil, fmt.Errorf("%w: take group: MaxSize %d, MaxDelay %v, GracePeriod %v, Lease %v", base.ErrInvalidArgument, p.MaxSize, p.MaxDelay, p.GracePeriod, p.Lease)
	}
	if err := b.adminBegin(ctx, "take group", p.Queue); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	q := b.queues[p.Queue]
	if q == nil || len(q.groups[p.Group]) == 0 {
		return nil, nil
	}
	now := b.now()
	members := make([]*task, 0, len(q.groups[p.Group]))
	for _, t := range q.groups[p.Group] {
		members = append(members, t)
	}
	slices.SortFunc(members, cmpSeq)
	oldest, newest := members[0], members[len(members)-1]
	ready := len(members) >= p.MaxSize ||
		p.MaxDelay > 0 && !now.Before(oldest.at.Add(p.MaxDelay)) ||
		!now.Before(newest.at.Add(p.GracePeriod))
	if !ready {
		return nil, nil
	}
	set := &aggSet{id: b.newToken(), token: b.newToken(), group: p.Group, deadline: now.Add(p.Lease)}
	agg := &broker.Aggregation{Queue: q.name, Group: p.Group, SetID: set.id, Token: set.token}
	for _, t := range members[:min(len(members), p.MaxSize)] {
		q.unindex(t)
		t.set = set
		set.tasks = append(set.tasks, t)
		agg.Msgs = append(agg.Msgs, cloneMsg(t.msg))
	}
	q.sets[set.id] = set
	return agg, nil
}

// FinishAggregation enqueues msg as pending and deletes the tasks of the
// aggregation set, atomically, and returns once that is on disk.
func (b *Broker) FinishAggregation(ctx context.Context, a *broker.Aggregation, msg *base.TaskMessage) error {
	if a == nil {
		return fmt.Errorf("%w: finish aggregation: no aggregation", base.ErrInvalidArgument)
	}
	t, err := checkEnqueue(broker.EnqueueParams{Msg: msg})
	if err != nil {
		return fmt.Errorf("finish aggregation: %w", err)
	}
	m := t.msg
	if m.Queue != a.Queue {
		return fmt.Errorf("%w: finish aggregation: task of queue %q for an aggregation of %q", base.ErrInvalidArgument, m.Queue, a.Queue)
	}
	if m.GroupKey != "" {
		return fmt.Errorf("%w: finish aggregation: the aggregated task has group %q; it must have none", base.ErrInvalidArgument, m.GroupKey)
	}
	if err := b.adminBegin(ctx, "finish aggregation", a.Queue); err != nil {
		return err
	}
	q := b.queues[a.Queue]
	var set *aggSet
	if q != nil {
		set = q.sets[a.SetID]
	}
	if set == nil || set.token != a.Token || !b.now().Before(set.deadline) {
		b.mu.Unlock()
		return fmt.Errorf("finish aggregation: %w: aggregation set %q of %s/%s", base.ErrLeaseLost, a.SetID, a.Queue, a.Group)
	}
	if err := b.enqueue(t, time.Time{}, b.now()); err != nil {
		b.unlockAndWake()
		return fmt.Errorf("finish aggregation: %w", err)
	}
	for _, t := range slices.Clone(set.tasks) {
		q.unindex(t)
		b.removeTask(q, t)
	}
	delete(q.sets, set.id)
	tk := b.durable()
	b.unlockAndWake()
	return wait(ctx, tk)
}

// ReclaimAggregations gives the tasks of aggregation sets whose lease ran
// out back to their groups and reports how many tasks it gave back.
func (b *Broker) ReclaimAggregations(ctx context.Context, queue string) (int, error) {
	if err := b.adminBegin(ctx, "reclaim aggregations", queue); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	q := b.queues[queue]
	if q == nil {
		return 0, nil
	}
	now := b.now()
	n := 0
	for id, set := range q.sets {
		if now.Before(set.deadline) {
			continue
		}
		for _, t := range set.tasks {
			t.set = nil
			q.index(t)
			n++
		}
		delete(q.sets, id)
	}
	return n, nil
}

// ClaimTick records that a scheduler enqueues entryID's task for tick,
// unless a claim that has not expired exists. It does not wait for the
// disk: the enqueue that follows a claim does, and batches are written in
// order.
func (b *Broker) ClaimTick(ctx context.Context, entryID string, tick time.Time, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if entryID == "" || ttl <= 0 {
		return false, fmt.Errorf("%w: claim tick: entry %q, ttl %v", base.ErrInvalidArgument, entryID, ttl)
	}
	if err := b.begin(); err != nil {
		return false, err
	}
	defer b.mu.Unlock()
	now := b.now()
	key := entryID + "\x00" + string(binary.BigEndian.AppendUint64(nil, uint64(tick.UnixMilli())))
	if exp, ok := b.claims[key]; ok && now.Before(exp) {
		return false, nil
	}
	exp := now.Add(ttl)
	b.claims[key] = exp
	if b.store != nil {
		b.buf.claims[key] = binary.BigEndian.AppendUint64(nil, uint64(exp.UnixMilli()))
		b.work.Signal()
	}
	// Drop expired claims now and then, so that they do not pile up.
	if len(b.claims)%256 == 0 {
		for k, e := range b.claims {
			if !now.Before(e) {
				delete(b.claims, k)
				if b.store != nil {
					b.buf.claims[k] = nil
				}
			}
		}
	}
	return true, nil
}

// WriteSchedulerEntries records a scheduler's entries for ttl (in memory:
// a scheduler cannot outlive the process that owns the store).
func (b *Broker) WriteSchedulerEntries(ctx context.Context, schedulerID string, entries []*base.SchedulerEntry, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if schedulerID == "" || ttl <= 0 {
		return fmt.Errorf("%w: scheduler entries: scheduler %q, ttl %v", base.ErrInvalidArgument, schedulerID, ttl)
	}
	if err := b.begin(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	cp := make([]*base.SchedulerEntry, len(entries))
	for i, e := range entries {
		cp[i] = cloneEntry(e)
		cp[i].SchedulerID = schedulerID
	}
	b.schedulers.put(schedulerID, cp, b.now().Add(ttl))
	return nil
}

// ClearSchedulerEntries removes a scheduler's entries.
func (b *Broker) ClearSchedulerEntries(ctx context.Context, schedulerID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.begin(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	delete(b.schedulers, schedulerID)
	return nil
}

// ListSchedulerEntries returns the entries of every live scheduler.
func (b *Broker) ListSchedulerEntries(ctx context.Context) ([]*base.SchedulerEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.begin(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	var out []*base.SchedulerEntry
	for _, entries := range b.schedulers.live(b.now()) {
		for _, e := range entries {
			out = append(out, cloneEntry(e))
		}
	}
	return out, nil
}

func cloneEntry(e *base.SchedulerEntry) *base.SchedulerEntry {
	c := *e
	c.Payload = slices.Clone(e.Payload)
	c.Options = slices.Clone(e.Options)
	return &c
}
