package embedded

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Archive trimming, as on Redis: each archive keeps at most the newest
// maxArchived tasks of the queue and none older than archiveMaxAge.
const (
	maxArchived   = 10_000
	archiveMaxAge = 90 * 24 * time.Hour
)

// Which changes wait for the disk (see the ADR, "What is synced"):
//
//	synced (the call returns after its batch is on disk):
//	  Enqueue, EnqueueBatch, Complete, Retry, Archive, Requeue, DeleteTask
//	not waited for (written with the next batch; a crash undoes them):
//	  Fetch, ExtendLeases, WriteResult, Forward, DeleteExpiredCompleted,
//	  the lease expiry at open
//
// Batches reach the disk in order, so whatever a synced call returns after
// includes every change made before it. Fetch waits for the enqueue of the
// tasks it hands out, not for its own change: no task starts before its
// enqueue is durable.

// Enqueue stores a new task and returns once it is on disk.
func (b *Broker) Enqueue(ctx context.Context, p broker.EnqueueParams) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t, err := checkEnqueue(p)
	if err != nil {
		return err
	}
	if err := b.begin(); err != nil {
		return err
	}
	err = b.enqueue(t, p.ProcessAt, b.now())
	tk := b.settled()
	b.unlockAndWake()
	if err != nil {
		return err
	}
	return wait(ctx, tk)
}

// EnqueueBatch stores each task on its own terms, all of them in one write.
func (b *Broker) EnqueueBatch(ctx context.Context, ps []broker.EnqueueParams) []error {
	errs := make([]error, len(ps))
	if err := ctx.Err(); err != nil {
		fill(errs, err)
		return errs
	}
	ts := make([]*task, len(ps))
	for i, p := range ps {
		ts[i], errs[i] = checkEnqueue(p)
	}
	if err := b.begin(); err != nil {
		fill(errs, err)
		return errs
	}
	now := b.now()
	for i, p := range ps {
		if errs[i] == nil {
			errs[i] = b.enqueue(ts[i], p.ProcessAt, now)
		}
	}
	t := b.settled()
	b.unlockAndWake()
	if err := wait(ctx, t); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	return errs
}

func fill(errs []error, err error) {
	for i := range errs {
		errs[i] = err
	}
}

// checkEnqueue validates p and returns the task to store, its message a
// copy the caller cannot change afterwards: the one allocation of the
// task and its message that the store keeps (enqueue numbers and indexes
// it).
func checkEnqueue(p broker.EnqueueParams) (*task, error) {
	if p.Msg == nil {
		return nil, fmt.Errorf("%w: enqueue: no task message", base.ErrInvalidArgument)
	}
	if err := p.Msg.Validate(); err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	if err := base.RefuseWorkflowTask(p.Msg); err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	t := &task{m: *p.Msg}
	t.msg = &t.m
	m := t.msg
	m.Payload = bytes.Clone(m.Payload) // keeps an empty payload apart from nil
	m.Deadline = normTime(m.Deadline)
	m.LastFailedAt = normTime(m.LastFailedAt)
	return t, nil
}

// enqueue stores t, a task made by checkEnqueue; a task stored with its ID
// and content already (an earlier attempt of the same Enqueue) is left as
// it is, and t with it. The caller holds b.mu, releases it with
// unlockAndWake, and waits for settled() before it reports success.
func (b *Broker) enqueue(t *task, processAt time.Time, now time.Time) error {
	msg := t.msg
	q := b.queues[msg.Queue]
	if q != nil {
		if old := q.tasks[msg.ID]; old != nil {
			if old.msg.SameEnqueue(msg) {
				return nil
			}
			return fmt.Errorf("%w: task %q in queue %q holds other content", base.ErrTaskIDConflict, msg.ID, msg.Queue)
		}
		if msg.UniqueKey != "" && q.lockHolder(msg.UniqueKey, now) != nil {
			return fmt.Errorf("%w: uniqueness key %q of queue %q is locked", base.ErrDuplicateTask, msg.UniqueKey, msg.Queue)
		}
	}
	q = b.registerQueue(msg.Queue)
	msg.Queue = q.name
	t.seq, t.at = b.nextSeq, now
	b.nextSeq++
	if msg.UniqueKey != "" {
		if old := q.unique[msg.UniqueKey]; old != nil {
			// Its lock has expired: it no longer holds it.
			old.uniqueUntil = time.Time{}
			b.putTask(old)
		}
		t.uniqueUntil = now.Add(msg.UniqueTTL)
		q.unique[msg.UniqueKey] = t
	}
	before := q.pending.Len()
	switch {
	case msg.GroupKey != "":
		t.state = base.StateAggregating
	case processAt.After(now):
		t.state = base.StateScheduled
		t.at = normTime(processAt)
	default:
		t.state = base.StatePending // since now
	}
	q.tasks[msg.ID] = t
	q.index(t)
	b.recordTask(t) // the caller wakes the committer
	b.logEvent(q.name, broker.LogEnqueued, msg.ID, t.state, "", now)
	switch t.state {
	case base.StatePending:
		b.readyIfFirst(q, before)
	case base.StateScheduled:
		b.emitScheduled(q, t)
	}
	return nil
}

// Fetch leases up to p.Max pending tasks, oldest first. It does not wait for
// its own change to reach the disk: if the process dies before the batch is
// written, the tasks are pending again on the next open, which is what
// recovery would make of them. It does wait for the enqueue of the tasks
// it leases: a task enqueued in a batch not yet on disk is handed out
// once that batch is, so that no task starts that a crash could undo
// (with its Enqueue, whose caller may then have been told it failed).
// That wait is at most one group commit, which the producer waits for
// anyway; if the batch fails to be written, Fetch fails with its error and
// the tasks are gone with it.
func (b *Broker) Fetch(ctx context.Context, p broker.FetchParams) ([]*broker.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := base.ValidateQueueName(p.Queue); err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	if p.Max < 1 {
		return nil, fmt.Errorf("%w: fetch: Max %d is less than 1", base.ErrInvalidArgument, p.Max)
	}
	if p.LeaseDuration <= 0 {
		return nil, fmt.Errorf("%w: fetch: LeaseDuration %v is not positive", base.ErrInvalidArgument, p.LeaseDuration)
	}
	if err := b.begin(); err != nil {
		return nil, err
	}
	out, newest, err := b.fetch(p)
	var tk *ticket
	if len(out) > 0 {
		tk = b.enqueueDurable(newest)
	}
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := wait(ctx, tk); err != nil {
		return nil, fmt.Errorf("fetch: the tasks' enqueue: %w", err)
	}
	return out, nil
}

// fetch leases the tasks of Fetch and returns them with the highest record
// number among them. The caller holds b.mu.
func (b *Broker) fetch(p broker.FetchParams) (out []*broker.Lease, newest uint64, err error) {
	q := b.queues[p.Queue]
	if q == nil || q.paused || q.pending.Len() == 0 {
		return nil, 0, nil
	}
	now := b.now()
	lease := p.LeaseDuration
	if q.settings.LeaseDuration > 0 {
		lease = q.settings.LeaseDuration
	}
	limit, tokens, err := q.allowance(p.Max, now)
	if err != nil {
		return nil, 0, err
	}
	var held time.Duration // keys' limits hold every pending task back
	// The batch's leases and messages are one array each, as rdb's are:
	// two allocations per fetch instead of two per task.
	n := min(limit, q.pending.Len())
	leases := make([]broker.Lease, 0, n)
	msgs := make([]base.TaskMessage, 0, n)
	out = make([]*broker.Lease, 0, n)
	for len(msgs) < limit {
		t, wait := q.pending.popFront(&q.settings, now)
		if t == nil {
			held = wait
			break
		}
		newest = max(newest, t.seq)
		t.state = base.StateActive
		t.token = b.newLeaseToken(p.ServerID) // names the server for the Inspector
		t.at = now.Add(lease)
		q.active.insert(t)
		b.putTask(t)
		b.logEvent(q.name, broker.LogStarted, t.msg.ID, base.StateActive, "", now)
		msgs = append(msgs, *t.msg)
		leases = append(leases, broker.Lease{Token: t.token, Deadline: t.at, Duration: lease})
	}
	// The payloads are copied into one array too (each capped at its
	// length, so that appending to one never writes over the next).
	var size int
	for i := range msgs {
		size += len(msgs[i].Payload)
	}
	payloads := make([]byte, 0, size)
	for i := range msgs {
		m := &msgs[i]
		if m.Payload != nil { // an empty payload stays apart from nil
			start := len(payloads)
			payloads = append(payloads, m.Payload...)
			m.Payload = payloads[start:len(payloads):len(payloads)]
		}
		leases[i].Msg = m
		out = append(out, &leases[i])
	}
	if q.settings.RateLimit > 0 {
		q.tokens, q.tokensAt = tokens-float64(len(out)), now
	}
	if len(out) == 0 {
		if held > 0 {
			return nil, 0, &broker.ThrottledError{Queue: q.name, RetryIn: held}
		}
		return nil, newest, nil
	}
	return out, newest, nil
}

// allowance applies q's settings to a fetch of up to max tasks: it returns
// how many of limit may start now and the rate limit's tokens before the
// fetch, or a *broker.ThrottledError when none may. q has pending tasks. The caller
// holds b.mu.
func (q *queue) allowance(limit int, now time.Time) (int, float64, error) {
	s := q.settings
	if s.MaxConcurrency > 0 {
		room := s.MaxConcurrency - q.active.Len()
		if room <= 0 {
			// Which lease ends first is unknown; look again soon.
			return 0, 0, &broker.ThrottledError{Queue: q.name, RetryIn: 100 * time.Millisecond}
		}
		limit = min(limit, room)
	}
	var tokens float64
	if s.RateLimit > 0 {
		burst := float64(max1(s.RateBurst))
		tokens = burst
		if !q.tokensAt.IsZero() {
			tokens = min(burst, q.tokens+max(0, now.Sub(q.tokensAt).Seconds())*s.RateLimit)
		}
		if tokens < 1 {
			wait := time.Duration(math.Ceil((1-tokens)*1000/s.RateLimit)) * time.Millisecond
			return 0, 0, &broker.ThrottledError{Queue: q.name, RetryIn: max(wait, time.Millisecond)}
		}
		limit = min(limit, int(tokens))
	}
	return limit, tokens, nil
}

func max1(n int) int { return max(n, 1) }

// newToken returns a fresh random token (32 hex digits). The caller
// holds b.mu (tokens is not safe for concurrent use).
func (b *Broker) newToken() string {
	var text [32]byte
	b.randomHex(&text)
	return string(text[:])
}

// newLeaseToken returns serverID, a '/' and a fresh random token (see
// broker.Lease.Token), in one allocation. The caller holds b.mu.
func (b *Broker) newLeaseToken(serverID string) string {
	var text [32]byte
	b.randomHex(&text)
	var sb strings.Builder
	sb.Grow(len(serverID) + 1 + len(text))
	sb.WriteString(serverID)
	sb.WriteByte('/')
	sb.Write(text[:])
	return sb.String()
}

// randomHex fills text with 16 random bytes in hex. The caller holds b.mu.
func (b *Broker) randomHex(text *[32]byte) {
	var raw [16]byte
	_, _ = b.tokens.Read(raw[:]) // never fails
	hex.Encode(text[:], raw[:])
}

// held returns the active task that l's token holds, or an error wrapping
// base.ErrLeaseLost. The caller holds b.mu.
func (b *Broker) held(l broker.LeaseRef) (*queue, *task, error) {
	q := b.queues[l.Queue]
	if q != nil {
		if t := q.tasks[l.ID]; t != nil && t.state == base.StateActive && t.token == l.Token && l.Token != "" {
			return q, t, nil
		}
	}
	return nil, nil, fmt.Errorf("%w: task %q of queue %q", base.ErrLeaseLost, l.ID, l.Queue)
}

// endLease takes an active task out of the active index and clears its
// lease; its key's slot is free again, and a key that its limit held back
// rejoins the rotation (with an EventReady). The caller holds b.mu.
func (b *Broker) endLease(q *queue, t *task, now time.Time) {
	q.unindex(t)
	t.token, t.at = "", time.Time{}
	if t.msg.Key != "" && q.pending.release(t, &q.settings, now) && !q.paused {
		b.emit(broker.EventReady, q.name)
	}
}

// removeTask deletes t for good, releasing its uniqueness lock. The caller
// holds b.mu and has taken t out of its state's index.
func (b *Broker) removeTask(q *queue, t *task) {
	q.releaseLock(t)
	delete(q.tasks, t.msg.ID)
	b.delTask(t)
}

// Complete finishes succeeded tasks and returns once that is on disk.
func (b *Broker) Complete(ctx context.Context, leases []broker.LeaseRef) []error {
	errs := make([]error, len(leases))
	if err := ctx.Err(); err != nil {
		fill(errs, err)
		return errs
	}
	if err := b.begin(); err != nil {
		fill(errs, err)
		return errs
	}
	now := b.now()
	var done []*task // workflow tasks, whose outcomes apply after the loop
	for i, l := range leases {
		q, t, err := b.held(l)
		if err != nil {
			errs[i] = fmt.Errorf("complete: %w", err)
			continue
		}
		b.endLease(q, t, now)
		q.releaseLock(t)
		b.count(q, statProcessed, now)
		if t.msg.Workflow != "" {
			done = append(done, t)
		}
		keep := t.msg.Retention
		if t.watched {
			// Its watcher reads the result after the EventDone.
			keep = max(keep, broker.WatchGrace)
			b.emitDone(q, t)
		}
		if keep <= 0 {
			b.removeTask(q, t)
			b.logEvent(q.name, broker.LogSucceeded, l.ID, 0, "", now)
			continue
		}
		b.logEvent(q.name, broker.LogSucceeded, l.ID, base.StateCompleted, "", now)
		t.state = base.StateCompleted
		t.completedAt = now
		t.at = now.Add(keep) // end of retention
		q.index(t)
		b.putTask(t)
	}
	// After the completions are logged, as on Redis (complete.lua).
	for _, t := range done {
		b.finish(t, base.OutcomeSucceeded, "", t.result, now)
	}
	tk := b.durable()
	b.mu.Unlock()
	if err := wait(ctx, tk); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	return errs
}

// checkExpired enforces RequireExpired. The caller holds b.mu.
func checkExpired(t *task, require bool, now time.Time) error {
	if require && t.at.After(now) {
		return fmt.Errorf("%w: task %q of queue %q: the lease has not expired", base.ErrLeaseLost, t.msg.ID, t.msg.Queue)
	}
	return nil
}

// Retry moves an active task to retry and returns once that is on disk.
// Retried grows only when the attempt counts as a failure (p.IsFailure).
func (b *Broker) Retry(ctx context.Context, p broker.RetryParams) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.Delay < 0 {
		return fmt.Errorf("%w: retry: Delay %v is negative", base.ErrInvalidArgument, p.Delay)
	}
	if err := b.begin(); err != nil {
		return err
	}
	now := b.now()
	q, t, err := b.held(p.Lease)
	if err == nil {
		err = checkExpired(t, p.RequireExpired, now)
	}
	if err != nil {
		b.mu.Unlock()
		return fmt.Errorf("retry: %w", err)
	}
	if wf, _ := b.workflowOf(t); wf != nil && wf.canceled {
		// A canceled workflow runs no attempt that had not started.
		b.archiveHeld(q, t, p.ErrMsg, now)
		tk := b.durable()
		b.mu.Unlock()
		return wait(ctx, tk)
	}
	b.endLease(q, t, now)
	if p.IsFailure {
		t.msg.Retried++
	}
	t.msg.LastErr = p.ErrMsg
	t.msg.LastFailedAt = now
	t.state = base.StateRetry
	t.at = now.Add(p.Delay)
	q.index(t)
	b.putTask(t)
	b.logEvent(q.name, broker.LogFailed, t.msg.ID, base.StateRetry, p.ErrMsg, now)
	b.count(q, statProcessed, now)
	if p.IsFailure {
		b.count(q, statFailed, now)
	}
	b.emitScheduled(q, t)
	tk := b.durable()
	b.mu.Unlock()
	return wait(ctx, tk)
}

// Archive moves an active task to archived and returns once that is on disk.
func (b *Broker) Archive(ctx context.Context, p broker.ArchiveParams) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.begin(); err != nil {
		return err
	}
	now := b.now()
	q, t, err := b.held(p.Lease)
	if err == nil {
		err = checkExpired(t, p.RequireExpired, now)
	}
	if err != nil {
		b.mu.Unlock()
		return fmt.Errorf("archive: %w", err)
	}
	b.archiveHeld(q, t, p.ErrMsg, now)
	tk := b.durable()
	b.mu.Unlock()
	return wait(ctx, tk)
}

// archiveHeld moves active task t to archived after its last failure.
// The caller holds b.mu.
func (b *Broker) archiveHeld(q *queue, t *task, errMsg string, now time.Time) {
	b.endLease(q, t, now)
	t.msg.LastErr = errMsg
	t.msg.LastFailedAt = now
	t.state = base.StateArchived
	t.at = now // archived
	q.index(t)
	b.putTask(t)
	b.logEvent(q.name, broker.LogFailed, t.msg.ID, base.StateArchived, errMsg, now)
	if t.watched {
		b.emitDone(q, t)
	}
	b.count(q, statProcessed, now)
	b.count(q, statFailed, now)
	b.finish(t, base.OutcomeFailed, errMsg, nil, now)
	b.trimArchived(q, now)
}

// trimArchived deletes the oldest archived tasks of q beyond maxArchived and
// those older than archiveMaxAge. The caller holds b.mu.
func (b *Broker) trimArchived(q *queue, now time.Time) {
	cutoff := now.Add(-archiveMaxAge)
	for {
		t := q.archived.min()
		if t == nil || q.archived.Len() <= maxArchived && !t.at.Before(cutoff) {
			return
		}
		q.archived.remove(t)
		b.removeTask(q, t)
	}
}

// Requeue puts an active task back at the head of its queue's pending list
// and returns once that is on disk.
func (b *Broker) Requeue(ctx context.Context, l broker.LeaseRef) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.begin(); err != nil {
		return err
	}
	q, t, err := b.held(l)
	if err != nil {
		b.mu.Unlock()
		return fmt.Errorf("requeue: %w", err)
	}
	now := b.now()
	b.endLease(q, t, now)
	before := q.pending.Len()
	t.state = base.StatePending
	t.at = now // pending since
	q.pending.pushFront(t)
	b.putTask(t)
	b.logEvent(q.name, broker.LogRetried, t.msg.ID, base.StatePending, "", t.at)
	b.readyIfFirst(q, before)
	tk := b.durable()
	b.mu.Unlock()
	return wait(ctx, tk)
}

// ExtendLeases renews the leases still held. It does not wait for the disk:
// after a crash every lease is expired at open anyway.
func (b *Broker) ExtendLeases(ctx context.Context, queue string, leases []broker.LeaseRef, d time.Duration) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := base.ValidateQueueName(queue); err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
	}
	if d <= 0 {
		return nil, fmt.Errorf("%w: extend leases: duration %v is not positive", base.ErrInvalidArgument, d)
	}
	if err := b.begin(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	now := b.now()
	var lost []string
	for _, l := range leases {
		l.Queue = queue
		q, t, err := b.held(l)
		if err != nil || !now.Before(t.at) {
			// An expired lease stays expired: the Recoverer owns it.
			lost = append(lost, l.ID)
			continue
		}
		q.active.remove(t) // out of the tree while its key changes
		t.at = now.Add(d)
		q.active.insert(t)
		b.putTask(t)
	}
	return lost, nil
}

// ExpiredLeases lists active tasks of queue whose lease has run out.
func (b *Broker) ExpiredLeases(ctx context.Context, queue string, limit int) ([]*broker.Lease, error) {
	if err := b.beginSweep(ctx, "expired leases", queue, limit); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	q := b.queues[queue]
	if q == nil {
		return nil, nil
	}
	now := b.now()
	var out []*broker.Lease
	q.active.ascending(func(t *task) bool {
		if t.at.After(now) {
			return false
		}
		out = append(out, &broker.Lease{Msg: cloneMsg(t.msg), Token: t.token, Deadline: t.at})
		return len(out) < limit
	})
	return out, nil
}

// WriteResult stores the result of an active task. It does not wait for the
// disk: the result matters once Complete (which does wait) has stored it.
func (b *Broker) WriteResult(ctx context.Context, l broker.LeaseRef, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.begin(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	_, t, err := b.held(l)
	if err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	t.result = append([]byte{}, data...)
	b.putTask(t)
	return nil
}

// Forward makes due scheduled and retry tasks pending. It does not wait for
// the disk: a crash leaves them scheduled and due, to be forwarded again.
func (b *Broker) Forward(ctx context.Context, queue string, limit int) (broker.ForwardResult, error) {
	var res broker.ForwardResult
	if err := b.beginSweep(ctx, "forward", queue, limit); err != nil {
		return res, err
	}
	defer b.mu.Unlock()
	q := b.queues[queue]
	if q == nil {
		return res, nil
	}
	now := b.now()
	before := q.pending.Len()
	for {
		t := q.nextDue()
		if t == nil {
			break
		}
		if t.at.After(now) {
			res.HasNext, res.NextIn = true, t.at.Sub(now)
			break
		}
		if res.Moved == limit {
			res.HasNext, res.NextIn = true, 0
			break
		}
		if t.state == base.StateRetry {
			b.logEvent(q.name, broker.LogRetried, t.msg.ID, base.StatePending, "", now)
		}
		q.unindex(t)
		t.state = base.StatePending
		t.at = now // pending since
		q.pending.pushBack(t)
		b.putTask(t)
		res.Moved++
	}
	b.readyIfFirst(q, before)
	return res, nil
}

// DeleteExpiredCompleted deletes completed tasks past their retention. It
// does not wait for the disk: a crash leaves them to be deleted again.
func (b *Broker) DeleteExpiredCompleted(ctx context.Context, queue string, limit int) (int, error) {
	if err := b.beginSweep(ctx, "delete expired completed", queue, limit); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	q := b.queues[queue]
	if q == nil {
		return 0, nil
	}
	now := b.now()
	n := 0
	for n < limit {
		t := q.completed.min()
		if t == nil || t.at.After(now) {
			break
		}
		q.completed.remove(t)
		b.removeTask(q, t)
		n++
	}
	return n, nil
}

// GetTaskInfo returns a task's state and data.
func (b *Broker) GetTaskInfo(ctx context.Context, queue, id string) (*base.TaskInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := base.ValidateQueueName(queue); err != nil {
		return nil, fmt.Errorf("get task info: %w", err)
	}
	if err := b.begin(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	t := b.find(queue, id)
	if t == nil {
		return nil, fmt.Errorf("%w: task %q in queue %q", base.ErrTaskNotFound, id, queue)
	}
	info := &base.TaskInfo{Message: cloneMsg(t.msg), State: t.state}
	switch t.state {
	case base.StatePending:
		info.NextProcessAt = b.now()
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
	return info, nil
}

// find returns the task or nil. The caller holds b.mu.
func (b *Broker) find(queue, id string) *task {
	if q := b.queues[queue]; q != nil {
		return q.tasks[id]
	}
	return nil
}

// DeleteTask deletes a task that is not active and returns once that is on
// disk.
func (b *Broker) DeleteTask(ctx context.Context, queue, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := base.ValidateQueueName(queue); err != nil {
		return fmt.Errorf("delete task: %w", err)
	}
	if err := b.begin(); err != nil {
		return err
	}
	t := b.find(queue, id)
	switch {
	case t == nil:
		b.mu.Unlock()
		return fmt.Errorf("%w: task %q in queue %q", base.ErrTaskNotFound, id, queue)
	case t.state == base.StateActive:
		b.mu.Unlock()
		return fmt.Errorf("%w: task %q in queue %q is active", base.ErrWrongState, id, queue)
	}
	q := b.queues[queue]
	q.unindex(t)
	b.removeTask(q, t)
	b.logEvent(queue, broker.LogDeleted, id, 0, "", b.now())
	b.finish(t, base.OutcomeDeleted, "", nil, b.now())
	tk := b.durable()
	b.mu.Unlock()
	return wait(ctx, tk)
}

// Queues lists every queue ever enqueued into, sorted.
func (b *Broker) Queues(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.begin(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	names := make([]string, 0, len(b.queues))
	for name, q := range b.queues {
		if q.listed {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// WriteServerState records a server's presence for ttl. Presence lives in
// memory only: a server cannot outlive the process that owns the store.
func (b *Broker) WriteServerState(ctx context.Context, info *base.ServerInfo, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if info == nil || info.ID == "" {
		return fmt.Errorf("%w: server state without an ID", base.ErrInvalidArgument)
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: server state TTL %v is not positive", base.ErrInvalidArgument, ttl)
	}
	if err := b.begin(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	b.servers.put(info.ID, cloneServer(info), b.now().Add(ttl))
	return nil
}

// ClearServerState removes a server's presence record.
func (b *Broker) ClearServerState(ctx context.Context, serverID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.begin(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	delete(b.servers, serverID)
	return nil
}

// ListServers returns the presence records that have not expired, by ID.
func (b *Broker) ListServers(ctx context.Context) ([]*base.ServerInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.begin(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	live := b.servers.live(b.now())
	for i, s := range live {
		live[i] = cloneServer(s)
	}
	return live, nil
}

func cloneServer(s *base.ServerInfo) *base.ServerInfo {
	c := *s
	if s.Queues != nil {
		c.Queues = make(map[string]int, len(s.Queues))
		for k, v := range s.Queues {
			c.Queues[k] = v
		}
	}
	c.ActiveTasks = slices.Clone(s.ActiveTasks)
	return &c
}

// beginSweep checks the arguments of an operation that walks up to limit
// tasks of a queue (expired leases, forward, expired completed) and locks
// b for it. On error b is not locked.
func (b *Broker) beginSweep(ctx context.Context, op, queue string, limit int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := base.ValidateQueueName(queue); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if limit < 1 {
		return fmt.Errorf("%w: %s: limit %d is less than 1", base.ErrInvalidArgument, op, limit)
	}
	return b.begin()
}
