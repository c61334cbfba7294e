package rdb

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// bulkBatch is how many tasks one script call of DeleteAll, RunAll,
// ArchiveAll and DeleteQueue changes.
const bulkBatch = 1000

// taskOpResult maps the answer of a script on one task (-1 no such task,
// -2 wrong state) to an error.
func taskOpResult(op, queue, id string, n int64, state string) error {
	switch n {
	case -1:
		return fmt.Errorf("rdb: %s %s/%s: %w", op, queue, id, base.ErrTaskNotFound)
	case -2:
		return fmt.Errorf("rdb: %s %s/%s: it is %s: %w", op, queue, id, state, base.ErrWrongState)
	}
	return nil
}

// RunTask moves a scheduled, retry, archived or aggregating task to
// pending; see broker.Admin.
func (b *Broker) RunTask(ctx context.Context, queue, id string) error {
	k, err := b.check("run task", queue)
	if err != nil {
		return err
	}
	res, waitErr := b.runAcked(ctx, call{
		s: scriptRunTask,
		keys: []string{k.taskKey(id), k.pending, k.scheduled, k.retry, k.archived,
			k.group, k.groups, k.leases, k.events, k.settings},
		args: []string{b.nowArg(), id, channelEvents, k.name, b.logLen},
	})
	n, err := res.AsInt64()
	if err != nil {
		return b.wrap("run task "+queue+"/"+id, err)
	}
	if err := taskOpResult("run task", queue, id, n, "pending, active, completed or being aggregated"); err != nil {
		return err
	}
	return waitFailed("run task "+queue+"/"+id, waitErr)
}

// ArchiveTask moves a pending, scheduled, retry or aggregating task to
// archived; see broker.Admin. Archiving a pending task costs O(pending)
// in Redis (LREM).
func (b *Broker) ArchiveTask(ctx context.Context, queue, id string) error {
	k, err := b.check("archive task", queue)
	if err != nil {
		return err
	}
	res, waitErr := b.runAcked(ctx, call{
		s: scriptArchiveTask,
		keys: []string{k.taskKey(id), k.pending, k.scheduled, k.retry, k.archived,
			k.group, k.groups, k.leases, k.task, k.unique, k.events, k.settings, k.waiting},
		args: []string{b.nowArg(), id, b.archiveMax, b.archiveAge, b.logLen, channelEvents},
	})
	n, err := res.AsInt64()
	if err != nil {
		return b.wrap("archive task "+queue+"/"+id, err)
	}
	if err := taskOpResult("archive task", queue, id, n, "active, completed or being aggregated"); err != nil {
		return err
	}
	return waitFailed("archive task "+queue+"/"+id, waitErr)
}

// DeleteAll deletes every task of the queue in state (of group, for
// aggregating tasks), in batches of 1,000 each atomic; see broker.Admin.
func (b *Broker) DeleteAll(ctx context.Context, queue string, state base.TaskState, group string) (int, error) {
	return b.bulk(ctx, "delete all", "d", queue, state, group)
}

// RunAll moves every scheduled, retry, archived or aggregating (of group)
// task of the queue to pending, in batches of 1,000 each atomic; see
// broker.Admin.
func (b *Broker) RunAll(ctx context.Context, queue string, state base.TaskState, group string) (int, error) {
	return b.bulk(ctx, "run all", "r", queue, state, group)
}

// ArchiveAll archives every pending, scheduled, retry or aggregating (of
// group) task of the queue, in batches of 1,000 each atomic; see
// broker.Admin. Archived tasks are left as they are (0 changed).
func (b *Broker) ArchiveAll(ctx context.Context, queue string, state base.TaskState, group string) (int, error) {
	return b.bulk(ctx, "archive all", "a", queue, state, group)
}

// bulk runs bulk.lua until the structure of state is empty or as many
// entries as it held at the first batch were taken (so that tasks added
// meanwhile cannot keep it going forever).
func (b *Broker) bulk(ctx context.Context, op, code, queue string, state base.TaskState, group string) (int, error) {
	k, err := b.check(op, queue)
	if err != nil {
		return 0, err
	}
	wrongState := func() (int, error) {
		return 0, fmt.Errorf("rdb: %s %s: %w: %v tasks", op, queue, base.ErrWrongState, state)
	}
	var key, kind, gkey, must string
	switch state {
	case base.StateActive:
		return wrongState()
	case base.StatePending:
		if code == "r" {
			return wrongState()
		}
		key, kind = k.pending, "p"
	case base.StateScheduled:
		key, kind = k.scheduled, "z"
	case base.StateRetry:
		key, kind = k.retry, "z"
	case base.StateArchived:
		if code == "a" {
			return 0, nil // archived tasks stay as they are
		}
		key, kind = k.archived, "z"
	case base.StateCompleted:
		if code != "d" {
			return wrongState()
		}
		key, kind = k.completed, "z"
	case base.StateAggregating:
		if err := base.ValidateGroupKey(group); err != nil {
			return 0, fmt.Errorf("rdb: %s %s: %w", op, queue, err)
		}
		key, kind, gkey = k.groupKey(group), "z", group
	case base.StateWaiting:
		if code == "r" {
			return wrongState()
		}
		key, kind, must = k.waiting, "z", "8"
	default:
		return 0, fmt.Errorf("rdb: %s %s: %w: state %v", op, queue, base.ErrInvalidArgument, state)
	}
	return b.bulkOf(ctx, op, code, k, key, kind, gkey, must)
}

// bulkOf runs bulk.lua on the structure key of the queue of k (kind 'p'
// the pending lanes, 'z' a zset; gkey the group of a group zset; must the
// state digit its tasks must still have, "" for any) until it is empty or
// as many entries as it held at the first batch were taken.
func (b *Broker) bulkOf(ctx context.Context, op, code string, k *queueKeys, key, kind, gkey, must string) (int, error) {
	queue := k.name
	total, budget := 0, -1
	for {
		v, err := b.run(ctx, call{
			s:    scriptBulk,
			keys: []string{key, k.pending, k.archived, k.task, k.unique, k.groups, k.events, k.settings},
			args: []string{b.nowArg(), code, kind, strconv.Itoa(bulkBatch), gkey, channelEvents, k.name,
				b.archiveMax, b.archiveAge, b.logLen, must},
		}).AsIntSlice()
		if err != nil {
			return total, b.wrap(op+" "+queue, err)
		}
		if len(v) != 3 {
			return total, fmt.Errorf("rdb: %s %s: unexpected reply %v", op, queue, v)
		}
		total += int(v[0])
		if budget < 0 {
			budget = int(v[2])
		} else {
			budget -= int(v[1])
		}
		if v[1] < bulkBatch || v[2] == 0 || budget <= 0 {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("rdb: %s %s: %w", op, queue, err)
		}
	}
}

// PauseQueue stops every server from fetching the queue; see
// broker.Admin. The queue is registered (Queues lists it) if it was not.
func (b *Broker) PauseQueue(ctx context.Context, queue string) error {
	k, err := b.check("pause queue", queue)
	if err != nil {
		return err
	}
	res := b.runMulti(ctx, []rueidis.Completed{b.registerCmd(k)}, []call{{
		s:    scriptPause,
		keys: []string{k.paused, k.events},
		args: []string{b.nowArg(), b.logLen},
	}})
	for _, r := range res {
		if err := r.Error(); err != nil {
			return b.wrap("pause queue "+queue, err)
		}
	}
	k.markRegistered()
	return nil
}

// UnpauseQueue lets servers fetch the queue again and wakes them when it
// has pending tasks; see broker.Admin. Unpausing a queue that is not
// paused does nothing.
func (b *Broker) UnpauseQueue(ctx context.Context, queue string) error {
	k, err := b.check("unpause queue", queue)
	if err != nil {
		return err
	}
	err = b.run(ctx, call{
		s:    scriptUnpause,
		keys: []string{k.paused, k.pending, k.events},
		args: []string{channelEvents, k.name, b.nowArg(), b.logLen},
	}).Error()
	if err != nil {
		return b.wrap("unpause queue "+queue, err)
	}
	return nil
}

// maxDeleteRounds bounds how often DeleteQueue starts over when tasks are
// enqueued into the queue while it deletes it.
const maxDeleteRounds = 10

// DeleteQueue deletes a queue with its settings, counters and tasks; see
// broker.Admin. A queue that holds tasks is deleted (with force) in
// batches: the first step checks that none is active and pauses the
// queue, so that no task becomes active meanwhile; the last removes the
// queue's remaining keys and its name from the set of queues. It fails
// with base.ErrQueueNotFound for a queue that does not exist.
func (b *Broker) DeleteQueue(ctx context.Context, queue string, force bool) error {
	k, err := b.check("delete queue", queue)
	if err != nil {
		return err
	}
	ak := k.adminKeys()
	start := call{
		s: scriptDeleteQueue,
		keys: []string{k.pending, k.active, k.leases, k.scheduled, k.retry, k.archived, k.completed,
			k.groups, ak.aggs, k.paused, k.settings, k.processed, k.failed, k.events, k.waiting, k.fetchN},
		args: []string{b.nowArg(), boolArg(force)},
	}
	res := b.runMulti(ctx, b.knownCmds(k), []call{start})
	ok, err := known(res)
	if err != nil {
		return b.wrap("delete queue "+queue, err)
	}
	if !ok {
		return queueNotFound("delete queue", queue)
	}
	left, err := res[2].AsInt64()
	for round := 0; ; round++ {
		switch {
		case err != nil:
			return b.wrap("delete queue "+queue, err)
		case left == -1:
			return fmt.Errorf("rdb: delete queue %s: %w", queue, base.ErrQueueNotEmpty)
		case left == -2:
			return fmt.Errorf("rdb: delete queue %s: it has active tasks: %w", queue, base.ErrQueueNotEmpty)
		case left == 0:
			if err := b.dropFetchRecords(ctx, k); err != nil {
				return err
			}
			return b.unregister(ctx, k)
		case round == maxDeleteRounds:
			return fmt.Errorf("rdb: delete queue %s: tasks keep being enqueued into it; it is paused with its tasks deleted so far", queue)
		}
		if err := b.deleteQueueTasks(ctx, k); err != nil {
			return err
		}
		left, err = b.run(ctx, start).AsInt64()
	}
}

// deleteQueueTasks deletes every task of queue k, which is paused, in
// batches.
func (b *Broker) deleteQueueTasks(ctx context.Context, k *queueKeys) error {
	ak := k.adminKeys()
	for {
		n, err := b.run(ctx, call{
			s: scriptDeleteBatch,
			keys: []string{k.pending, k.scheduled, k.retry, k.archived, k.completed, k.groups, k.group,
				ak.aggs, ak.agg, k.task, k.unique, k.waiting},
			args: []string{strconv.Itoa(bulkBatch)},
		}).AsInt64()
		if err != nil {
			return b.wrap("delete queue "+k.name, err)
		}
		if n == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("rdb: delete queue %s: %w", k.name, err)
		}
	}
}

// dropFetchRecords deletes the fetch records of queue k (lua/fetch.lua):
// a lease group's is deleted with its last lease, but an earlier version's
// outlived its tasks by up to a lease; DeleteQueue found no task active,
// so none of them names a held lease. A SCAN of each node,
// in steps, so that Redis is not blocked on a large keyspace.
func (b *Broker) dropFetchRecords(ctx context.Context, k *queueKeys) error {
	pat := globEscape(k.fetch) + "*"
	for addr, n := range b.c.Nodes() {
		var cursor uint64
		for {
			r := b.nodeDoMulti(ctx, n, n.B().Scan().Cursor(cursor).Match(pat).Count(1000).Build())[0]
			e, err := r.AsScanEntry()
			if err != nil {
				return b.wrap("delete queue "+k.name+": scan "+addr, err)
			}
			if len(e.Elements) > 0 {
				if err := b.do(ctx, b.c.B().Del().Key(e.Elements...).Build()).Error(); err != nil {
					return b.wrap("delete queue "+k.name, err)
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return nil
}

// unregister removes a deleted queue's name from the set of queues.
func (b *Broker) unregister(ctx context.Context, k *queueKeys) error {
	if err := b.do(ctx, b.c.B().Srem().Key(keyQueues).Member(k.name).Build()).Error(); err != nil {
		return b.wrap("delete queue "+k.name, err)
	}
	k.registered.Store(false)
	return nil
}

// SetQueueSettings stores settings that Fetch obeys; see broker.Admin. The
// queue is registered (Queues lists it) if it was not.
func (b *Broker) SetQueueSettings(ctx context.Context, queue string, s broker.QueueSettings) error {
	k, err := b.check("set queue settings", queue)
	if err != nil {
		return err
	}
	switch {
	case s.MaxConcurrency < 0, s.RateBurst < 0, s.LeaseDuration < 0,
		s.RateLimit < 0, math.IsNaN(s.RateLimit), math.IsInf(s.RateLimit, 0),
		s.KeyMaxConcurrency < 0, s.KeyRateBurst < 0,
		s.KeyRateLimit < 0, math.IsNaN(s.KeyRateLimit), math.IsInf(s.KeyRateLimit, 0):
		return fmt.Errorf("rdb: set queue settings %s: %w: %+v (none may be negative)", queue, base.ErrInvalidArgument, s)
	case s.LeaseDuration > 0 && s.LeaseDuration < time.Millisecond:
		return fmt.Errorf("rdb: set queue settings %s: %w: lease %v is shorter than 1ms", queue, base.ErrInvalidArgument, s.LeaseDuration)
	}
	res := b.runMulti(ctx, []rueidis.Completed{b.registerCmd(k)}, []call{{
		s:    scriptSettings,
		keys: []string{k.settings, k.pending},
		args: []string{b.nowArg(), strconv.Itoa(s.MaxConcurrency), strconv.FormatFloat(s.RateLimit, 'g', -1, 64),
			strconv.Itoa(s.RateBurst), itoa(ms(s.LeaseDuration)),
			strconv.Itoa(s.KeyMaxConcurrency), strconv.FormatFloat(s.KeyRateLimit, 'g', -1, 64), strconv.Itoa(s.KeyRateBurst)},
	}})
	for _, r := range res {
		if err := r.Error(); err != nil {
			return b.wrap("set queue settings "+queue, err)
		}
	}
	k.markRegistered()
	return nil
}

// CancelProcessing publishes a cancel event for task id to every
// subscriber; see broker.Admin.
func (b *Broker) CancelProcessing(ctx context.Context, id string) error {
	if b.closed.Load() {
		return fmt.Errorf("rdb: cancel processing: %w", base.ErrStorageClosed)
	}
	if err := base.ValidateTaskID(id); err != nil {
		return fmt.Errorf("rdb: cancel processing: %w", err)
	}
	err := b.do(ctx, b.c.B().Publish().Channel(channelEvents).Message(eventCancelPrefix+id).Build()).Error()
	if err != nil {
		return b.wrap("cancel processing "+id, err)
	}
	return nil
}

// WatchTask marks a task so that completing or archiving it publishes an
// EventDone, and returns its current state; see broker.Admin. Subscribe
// before watching, so that the event cannot be missed.
func (b *Broker) WatchTask(ctx context.Context, queue, id string) (*base.TaskInfo, error) {
	k, err := b.check("watch task", queue)
	if err != nil {
		return nil, err
	}
	return b.taskInfoReply("watch task", queue, id, b.run(ctx, call{
		s:    scriptWatch,
		keys: []string{k.taskKey(id), k.active, k.scheduled, k.retry, k.leases},
		args: []string{b.nowArg(), id},
	}))
}
