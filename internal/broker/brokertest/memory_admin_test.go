package brokertest_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// The broker.Admin half of memBroker, the suite's in-memory reference: a
// straightforward reading of the doc comments of broker.Admin and of what
// the suite pins down (admin.go). Everything is computed from the tasks
// map; nothing is indexed.

var _ broker.Admin = (*memBroker)(nil)

// memAdminTask is what the management operations keep per task.
type memAdminTask struct {
	since      time.Time     // when it became pending (aggregating: enqueued)
	seq        int64         // enqueue order
	watched    bool          // WatchTask
	keep       time.Duration // completed: how long it is kept
	archivedAt time.Time
	aggSet     string // the aggregation set holding it
}

// memAdminQueue is what the management operations keep per queue.
type memAdminQueue struct {
	paused         bool
	settings       broker.QueueSettings
	bucket         bool // tokens and tokensAt hold the rate limit's bucket
	tokens         float64
	tokensAt       time.Time
	processed      map[int64]int64 // by day (Unix ms / 86,400,000)
	failed         map[int64]int64
	processedTotal int64
	failedTotal    int64
	sets           map[string]*memSet
}

func newMemAdminQueue() memAdminQueue {
	return memAdminQueue{processed: map[int64]int64{}, failed: map[int64]int64{}, sets: map[string]*memSet{}}
}

// memSet is an aggregation set.
type memSet struct {
	token, group string
	deadline     time.Time
	ids          []string
}

// memRecord is a presence record that lives until expires.
type memRecord[T any] struct {
	v       T
	expires time.Time
}

// memAdminBroker is what the management operations keep per broker.
type memAdminBroker struct {
	seq        int64
	servers    map[string]memRecord[*base.ServerInfo]
	schedulers map[string]memRecord[[]*base.SchedulerEntry]
	claims     map[string]time.Time
}

func newMemAdminBroker() memAdminBroker {
	return memAdminBroker{servers: map[string]memRecord[*base.ServerInfo]{},
		schedulers: map[string]memRecord[[]*base.SchedulerEntry]{}, claims: map[string]time.Time{}}
}

func (b *memBroker) nextSeq() int64 {
	b.seq++
	return b.seq
}

func day(t time.Time) int64 { return t.UnixMilli() / 86400000 }

// count records one finished attempt.
func (q *memQueue) count(now time.Time, failed bool) {
	q.processed[day(now)]++
	q.processedTotal++
	if failed {
		q.failed[day(now)]++
		q.failedTotal++
	}
}

func cloneServer(s *base.ServerInfo) *base.ServerInfo {
	c := *s
	c.ActiveTasks = slices.Clone(s.ActiveTasks)
	return &c
}

// bucketTokens returns the tokens of q's rate limit now.
func (b *memBroker) bucketTokens(q *memQueue) float64 {
	burst := float64(max(q.settings.RateBurst, 1))
	if !q.bucket {
		return burst
	}
	return min(burst, q.tokens+b.clock.Now().Sub(q.tokensAt).Seconds()*q.settings.RateLimit)
}

// allowed applies q's settings to a fetch: how many tasks it may take and
// for how long, or a ThrottledError.
func (b *memBroker) allowed(q *memQueue, p broker.FetchParams) (int, time.Duration, error) {
	n, lease := p.Max, p.LeaseDuration
	s := q.settings
	if s.LeaseDuration > 0 {
		lease = s.LeaseDuration
	}
	if len(q.pending) == 0 {
		return n, lease, nil
	}
	var wait time.Duration
	if s.MaxConcurrency > 0 {
		active := 0
		for _, t := range q.tasks {
			if t.state == base.StateActive {
				active++
			}
		}
		if room := s.MaxConcurrency - active; room <= 0 {
			wait = 50 * time.Millisecond
		} else {
			n = min(n, room)
		}
	}
	if s.RateLimit > 0 {
		if tokens := b.bucketTokens(q); tokens < 1 {
			wait = max(wait, time.Duration(math.Ceil((1-tokens)*1000/s.RateLimit))*time.Millisecond)
		} else {
			n = min(n, int(tokens))
		}
	}
	if wait > 0 {
		return 0, 0, &broker.ThrottledError{Queue: p.Queue, RetryIn: wait}
	}
	return n, lease, nil
}

// spend takes n tokens from q's rate limit.
func (b *memBroker) spend(q *memQueue, n int) {
	if q.settings.RateLimit > 0 {
		q.tokens, q.tokensAt, q.bucket = b.bucketTokens(q)-float64(n), b.clock.Now(), true
	}
}

// infoOf describes t as GetTaskInfo does.
func (b *memBroker) infoOf(t *memTask) *base.TaskInfo {
	ti := &base.TaskInfo{Message: cloneMsg(t.msg), State: t.state, Result: slices.Clone(t.result)}
	switch t.state {
	case base.StatePending:
		ti.NextProcessAt = b.clock.Now()
	case base.StateScheduled, base.StateRetry:
		ti.NextProcessAt = t.due
	case base.StateActive:
		ti.LeaseDeadline = t.deadline
	case base.StateCompleted:
		ti.CompletedAt = t.completedAt
	}
	return ti
}

// inState returns q's tasks in state (of group, not taken, for
// aggregating tasks) in the state's natural order.
func (q *memQueue) inState(state base.TaskState, group string) []*memTask {
	if state == base.StatePending {
		return q.pendingInListOrder()
	}
	var out []*memTask
	for _, t := range q.tasks {
		if t.state == state && (state != base.StateAggregating || (t.msg.GroupKey == group && t.aggSet == "")) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, c *memTask) int {
		var r int
		switch state {
		case base.StateActive:
			r = a.deadline.Compare(c.deadline)
		case base.StateScheduled, base.StateRetry:
			r = a.due.Compare(c.due)
		case base.StateArchived:
			r = c.archivedAt.Compare(a.archivedAt)
			if r == 0 {
				return cmp.Compare(c.seq, a.seq)
			}
		case base.StateCompleted:
			r = a.completedAt.Add(a.keep).Compare(c.completedAt.Add(c.keep))
		}
		return cmp.Or(r, cmp.Compare(a.seq, c.seq))
	})
	return out
}

func (b *memBroker) QueueStats(_ context.Context, queue string) (*broker.QueueStats, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if err := base.ValidateQueueName(queue); err != nil {
		return nil, err
	}
	q := b.queues[queue]
	if q == nil {
		return nil, base.ErrQueueNotFound
	}
	now := b.clock.Now()
	st := &broker.QueueStats{Queue: queue, Now: now, Paused: q.paused, MemoryBytes: -1, Settings: q.settings,
		Processed: q.processed[day(now)], Failed: q.failed[day(now)],
		ProcessedTotal: q.processedTotal, FailedTotal: q.failedTotal}
	groups := map[string]bool{}
	for _, t := range q.tasks {
		switch t.state {
		case base.StatePending:
			st.Pending++
		case base.StateActive:
			st.Active++
		case base.StateScheduled:
			st.Scheduled++
		case base.StateRetry:
			st.Retry++
		case base.StateArchived:
			st.Archived++
		case base.StateCompleted:
			st.Completed++
		case base.StateAggregating:
			st.Aggregating++
			if t.aggSet == "" {
				groups[t.msg.GroupKey] = true
			}
		case base.StateWaiting:
			st.Waiting++
		}
	}
	st.Groups = len(groups)
	st.OldestPending = q.oldestPending()
	return st, nil
}

func (b *memBroker) History(_ context.Context, queue string, days int) ([]broker.DailyStats, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if err := base.ValidateQueueName(queue); err != nil {
		return nil, err
	}
	if days < 1 {
		return nil, base.ErrInvalidArgument
	}
	q := b.queues[queue]
	if q == nil {
		return nil, base.ErrQueueNotFound
	}
	today := day(b.clock.Now())
	out := make([]broker.DailyStats, days)
	for i := range out {
		d := today - int64(i)
		out[i] = broker.DailyStats{Date: time.UnixMilli(d * 86400000).UTC(), Processed: q.processed[d], Failed: q.failed[d]}
	}
	return out, nil
}

func (b *memBroker) ListTasks(_ context.Context, p broker.ListParams) ([]*base.TaskInfo, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if err := base.ValidateQueueName(p.Queue); err != nil {
		return nil, err
	}
	if p.Limit < 1 || p.Offset < 0 || p.State < base.StateActive || p.State > base.MaxState {
		return nil, base.ErrInvalidArgument
	}
	if p.State == base.StateAggregating {
		if err := base.ValidateGroupKey(p.Group); err != nil {
			return nil, err
		}
	}
	q := b.queues[p.Queue]
	if q == nil {
		return nil, nil
	}
	ts := q.inState(p.State, p.Group)
	if p.Offset >= len(ts) {
		return nil, nil
	}
	ts = ts[p.Offset:min(len(ts), p.Offset+p.Limit)]
	out := make([]*base.TaskInfo, len(ts))
	for i, t := range ts {
		out[i] = b.infoOf(t)
	}
	return out, nil
}

// task returns task id of queue for the single-task operations.
func (b *memBroker) task(queue, id string) (*memQueue, *memTask, error) {
	if err := base.ValidateQueueName(queue); err != nil {
		return nil, nil, err
	}
	q := b.queues[queue]
	if q == nil || q.tasks[id] == nil {
		return nil, nil, base.ErrTaskNotFound
	}
	return q, q.tasks[id], nil
}

// runnable tells whether RunTask applies to t.
func runnable(t *memTask) bool {
	switch t.state {
	case base.StateScheduled, base.StateRetry, base.StateArchived:
		return true
	case base.StateAggregating:
		return t.aggSet == ""
	}
	return false
}

// makePending moves t (not pending, not active) to pending.
func (b *memBroker) makePending(q *memQueue, queue string, t *memTask) {
	t.state, t.due, t.since = base.StatePending, time.Time{}, b.clock.Now()
	b.pushPending(q, queue, t, false)
	b.logEvent(queue, broker.LogRetried, t.msg.ID, base.StatePending, "")
}

// archiveTask moves t (not active) to archived and logs it.
func (b *memBroker) archiveTask(q *memQueue, t *memTask) {
	b.toArchived(q, t)
	b.logEvent(t.msg.Queue, broker.LogArchived, t.msg.ID, base.StateArchived, "")
}

// toArchived moves t (not active) to archived.
func (b *memBroker) toArchived(q *memQueue, t *memTask) {
	if t.state == base.StatePending {
		q.removePending(t.msg.ID)
	}
	t.state, t.due, t.archivedAt = base.StateArchived, time.Time{}, b.clock.Now()
}

func (b *memBroker) RunTask(_ context.Context, queue, id string) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	q, t, err := b.task(queue, id)
	if err != nil {
		return err
	}
	if !runnable(t) {
		return base.ErrWrongState
	}
	b.makePending(q, queue, t)
	return nil
}

func (b *memBroker) ArchiveTask(_ context.Context, queue, id string) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	q, t, err := b.task(queue, id)
	if err != nil {
		return err
	}
	switch {
	case t.state == base.StateArchived:
		return nil
	case t.state == base.StatePending || t.state == base.StateWaiting || runnable(t):
		b.archiveTask(q, t)
		b.wfFinish(t, base.OutcomeFailed, t.msg.LastErr, nil)
		return nil
	}
	return base.ErrWrongState
}

// bulk applies fn to every task of queue in state (of group); ok lists the
// states the operation accepts. A task that an earlier one's workflow
// rules moved out of state is left alone.
func (b *memBroker) bulk(queue string, state base.TaskState, group string, ok []base.TaskState,
	fn func(q *memQueue, t *memTask)) (int, error) {
	if err := b.lock(); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	if err := base.ValidateQueueName(queue); err != nil {
		return 0, err
	}
	if state < base.StateActive || state > base.MaxState {
		return 0, base.ErrInvalidArgument
	}
	if !slices.Contains(ok, state) {
		return 0, base.ErrWrongState
	}
	if state == base.StateAggregating {
		if err := base.ValidateGroupKey(group); err != nil {
			return 0, err
		}
	}
	q := b.queues[queue]
	if q == nil {
		return 0, nil
	}
	n := 0
	for _, t := range q.inState(state, group) {
		if t.state == state && q.tasks[t.msg.ID] == t {
			fn(q, t)
			n++
		}
	}
	return n, nil
}

func (b *memBroker) DeleteAll(_ context.Context, queue string, state base.TaskState, group string) (int, error) {
	return b.bulk(queue, state, group, []base.TaskState{base.StatePending, base.StateScheduled, base.StateRetry,
		base.StateArchived, base.StateCompleted, base.StateAggregating, base.StateWaiting}, func(q *memQueue, t *memTask) {
		if t.state == base.StatePending {
			q.removePending(t.msg.ID)
		}
		q.unlock(t)
		delete(q.tasks, t.msg.ID)
		b.logEvent(queue, broker.LogDeleted, t.msg.ID, 0, "")
		b.wfFinish(t, base.OutcomeDeleted, "", nil)
	})
}

func (b *memBroker) RunAll(_ context.Context, queue string, state base.TaskState, group string) (int, error) {
	return b.bulk(queue, state, group, []base.TaskState{base.StateScheduled, base.StateRetry, base.StateArchived,
		base.StateAggregating}, func(q *memQueue, t *memTask) { b.makePending(q, queue, t) })
}

func (b *memBroker) ArchiveAll(_ context.Context, queue string, state base.TaskState, group string) (int, error) {
	if state == base.StateArchived {
		if err := base.ValidateQueueName(queue); err != nil {
			return 0, err
		}
		return 0, nil
	}
	return b.bulk(queue, state, group, []base.TaskState{base.StatePending, base.StateScheduled, base.StateRetry,
		base.StateAggregating, base.StateWaiting}, func(q *memQueue, t *memTask) {
		b.archiveTask(q, t)
		b.wfFinish(t, base.OutcomeFailed, t.msg.LastErr, nil)
	})
}

func (b *memBroker) PauseQueue(_ context.Context, queue string) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	if err := base.ValidateQueueName(queue); err != nil {
		return err
	}
	if q := b.queue(queue); !q.paused {
		q.paused = true
		b.logEvent(queue, broker.LogPaused, "", 0, "")
	}
	return nil
}

func (b *memBroker) UnpauseQueue(_ context.Context, queue string) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	if err := base.ValidateQueueName(queue); err != nil {
		return err
	}
	if q := b.queues[queue]; q != nil && q.paused {
		q.paused = false
		b.logEvent(queue, broker.LogResumed, "", 0, "")
		if len(q.pending) > 0 {
			b.publish(broker.EventReady, queue)
		}
	}
	return nil
}

func (b *memBroker) DeleteQueue(_ context.Context, queue string, force bool) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	if err := base.ValidateQueueName(queue); err != nil {
		return err
	}
	q := b.queues[queue]
	if q == nil {
		return base.ErrQueueNotFound
	}
	for _, t := range q.tasks {
		if t.state == base.StateActive || !force {
			return base.ErrQueueNotEmpty
		}
	}
	delete(b.queues, queue)
	delete(b.logs, queue)
	return nil
}

func (b *memBroker) SetQueueSettings(_ context.Context, queue string, s broker.QueueSettings) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	if err := base.ValidateQueueName(queue); err != nil {
		return err
	}
	if s.MaxConcurrency < 0 || s.RateLimit < 0 || math.IsNaN(s.RateLimit) || math.IsInf(s.RateLimit, 0) ||
		s.RateBurst < 0 || s.LeaseDuration < 0 || s.KeyMaxConcurrency < 0 || s.KeyRateLimit < 0 ||
		math.IsNaN(s.KeyRateLimit) || math.IsInf(s.KeyRateLimit, 0) || s.KeyRateBurst < 0 {
		return base.ErrInvalidArgument
	}
	q := b.queue(queue)
	if s.RateLimit == 0 {
		q.bucket = false
	} else if q.bucket {
		q.tokens, q.tokensAt = min(b.bucketTokens(q), float64(max(s.RateBurst, 1))), b.clock.Now()
	}
	q.settings = s
	q.settingsChanged(s)
	return nil
}

func (b *memBroker) ListServers(context.Context) ([]*base.ServerInfo, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	var out []*base.ServerInfo
	for _, r := range b.servers {
		if b.clock.Now().Before(r.expires) {
			out = append(out, cloneServer(r.v))
		}
	}
	slices.SortFunc(out, func(a, c *base.ServerInfo) int { return cmp.Compare(a.ID, c.ID) })
	return out, nil
}

func (b *memBroker) CancelProcessing(_ context.Context, id string) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	if err := base.ValidateTaskID(id); err != nil {
		return err
	}
	b.publishEvent(broker.Event{Kind: broker.EventCancel, TaskID: id})
	return nil
}

func (b *memBroker) WatchTask(_ context.Context, queue, id string) (*base.TaskInfo, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	_, t, err := b.task(queue, id)
	if err != nil {
		return nil, err
	}
	if t.state != base.StateCompleted && t.state != base.StateArchived {
		t.watched = true
	}
	return b.infoOf(t), nil
}

func (b *memBroker) ListGroups(_ context.Context, queue string) ([]broker.GroupStats, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if err := base.ValidateQueueName(queue); err != nil {
		return nil, err
	}
	q := b.queues[queue]
	if q == nil {
		return nil, nil
	}
	sizes := map[string]int{}
	for _, t := range q.tasks {
		if t.state == base.StateAggregating && t.aggSet == "" {
			sizes[t.msg.GroupKey]++
		}
	}
	var out []broker.GroupStats
	for g, n := range sizes {
		out = append(out, broker.GroupStats{Group: g, Size: n})
	}
	slices.SortFunc(out, func(a, c broker.GroupStats) int { return cmp.Compare(a.Group, c.Group) })
	return out, nil
}

func (b *memBroker) TakeGroup(_ context.Context, p broker.TakeGroupParams) (*broker.Aggregation, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if err := base.ValidateQueueName(p.Queue); err != nil {
		return nil, err
	}
	if err := base.ValidateGroupKey(p.Group); err != nil {
		return nil, err
	}
	if p.MaxSize < 1 || p.MaxDelay < 0 || p.GracePeriod < 0 || p.Lease <= 0 {
		return nil, base.ErrInvalidArgument
	}
	q := b.queues[p.Queue]
	if q == nil {
		return nil, nil
	}
	ts := q.inState(base.StateAggregating, p.Group)
	if len(ts) == 0 {
		return nil, nil
	}
	now := b.clock.Now()
	ready := len(ts) >= p.MaxSize ||
		(p.MaxDelay > 0 && now.Sub(ts[0].since) >= p.MaxDelay) ||
		now.Sub(ts[len(ts)-1].since) >= p.GracePeriod
	if !ready {
		return nil, nil
	}
	ts = ts[:min(len(ts), p.MaxSize)]
	set := &memSet{token: newToken(), group: p.Group, deadline: now.Add(p.Lease)}
	id := newToken()
	a := &broker.Aggregation{Queue: p.Queue, Group: p.Group, SetID: id, Token: set.token}
	for _, t := range ts {
		t.aggSet = id
		set.ids = append(set.ids, t.msg.ID)
		a.Msgs = append(a.Msgs, cloneMsg(t.msg))
	}
	q.sets[id] = set
	return a, nil
}

func (b *memBroker) FinishAggregation(_ context.Context, a *broker.Aggregation, msg *base.TaskMessage) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	if a == nil || msg == nil {
		return base.ErrInvalidArgument
	}
	if err := base.ValidateQueueName(a.Queue); err != nil {
		return err
	}
	if err := msg.Validate(); err != nil {
		return err
	}
	if msg.Queue != a.Queue || msg.GroupKey != "" {
		return base.ErrInvalidArgument
	}
	q := b.queues[a.Queue]
	if q == nil || q.sets[a.SetID] == nil || q.sets[a.SetID].token != a.Token {
		return base.ErrLeaseLost
	}
	if q.tasks[msg.ID] != nil {
		return base.ErrTaskIDConflict
	}
	if l, ok := q.locks[msg.UniqueKey]; msg.UniqueKey != "" && ok && b.clock.Now().Before(l.expires) {
		return base.ErrDuplicateTask
	}
	for _, id := range q.sets[a.SetID].ids {
		if t := q.tasks[id]; t != nil {
			q.unlock(t)
			delete(q.tasks, id)
		}
	}
	delete(q.sets, a.SetID)
	return b.enqueueLocked(broker.EnqueueParams{Msg: msg})
}

func (b *memBroker) ReclaimAggregations(_ context.Context, queue string) (int, error) {
	if err := b.lock(); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	if err := base.ValidateQueueName(queue); err != nil {
		return 0, err
	}
	q := b.queues[queue]
	if q == nil {
		return 0, nil
	}
	n := 0
	for id, set := range q.sets {
		if b.clock.Now().Before(set.deadline) {
			continue
		}
		for _, tid := range set.ids {
			if t := q.tasks[tid]; t != nil {
				t.aggSet = ""
				n++
			}
		}
		delete(q.sets, id)
	}
	return n, nil
}

func (b *memBroker) ClaimTick(_ context.Context, entryID string, tick time.Time, ttl time.Duration) (bool, error) {
	if err := b.lock(); err != nil {
		return false, err
	}
	defer b.mu.Unlock()
	if entryID == "" || ttl <= 0 {
		return false, base.ErrInvalidArgument
	}
	key := fmt.Sprintf("%s@%d", entryID, tick.UnixNano())
	now := b.clock.Now()
	if exp, ok := b.claims[key]; ok && now.Before(exp) {
		return false, nil
	}
	b.claims[key] = now.Add(ttl)
	return true, nil
}

func (b *memBroker) WriteSchedulerEntries(_ context.Context, schedulerID string, entries []*base.SchedulerEntry, ttl time.Duration) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	if schedulerID == "" || ttl <= 0 {
		return base.ErrInvalidArgument
	}
	list := make([]*base.SchedulerEntry, len(entries))
	for i, e := range entries {
		c := *e
		c.SchedulerID = schedulerID
		list[i] = &c
	}
	b.schedulers[schedulerID] = memRecord[[]*base.SchedulerEntry]{v: list, expires: b.clock.Now().Add(ttl)}
	return nil
}

func (b *memBroker) ClearSchedulerEntries(_ context.Context, schedulerID string) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	delete(b.schedulers, schedulerID)
	return nil
}

func (b *memBroker) ListSchedulerEntries(context.Context) ([]*base.SchedulerEntry, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	ids := make([]string, 0, len(b.schedulers))
	for id, r := range b.schedulers {
		if b.clock.Now().Before(r.expires) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []*base.SchedulerEntry
	for _, id := range ids {
		for _, e := range b.schedulers[id].v {
			c := *e
			out = append(out, &c)
		}
	}
	return out, nil
}
