package rdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Forward moves due scheduled and retry tasks of queue to pending, in due
// order, in one script call; see broker.Broker.
func (b *Broker) Forward(ctx context.Context, queue string, limit int) (broker.ForwardResult, error) {
	k, err := b.check("forward", queue)
	if err != nil {
		return broker.ForwardResult{}, err
	}
	if limit < 1 {
		return broker.ForwardResult{}, fmt.Errorf("rdb: forward %s: %w: limit %d is less than 1", queue, base.ErrInvalidArgument, limit)
	}
	v, err := b.run(ctx, call{
		s:    scriptForward,
		keys: []string{k.scheduled, k.retry, k.pending, k.task, k.events, k.settings},
		args: []string{b.nowArg(), strconv.Itoa(limit), channelEvents, k.name, b.logLen},
	}).AsIntSlice()
	if err != nil {
		return broker.ForwardResult{}, b.wrap("forward "+queue, err)
	}
	if len(v) != 3 {
		return broker.ForwardResult{}, fmt.Errorf("rdb: forward %s: unexpected reply %v", queue, v)
	}
	return broker.ForwardResult{
		Moved:   int(v[0]),
		HasNext: v[1] == 1,
		NextIn:  time.Duration(v[2]) * time.Millisecond,
	}, nil
}

// DeleteExpiredCompleted deletes completed tasks past their retention; see
// broker.Broker.
func (b *Broker) DeleteExpiredCompleted(ctx context.Context, queue string, limit int) (int, error) {
	k, err := b.check("delete expired completed", queue)
	if err != nil {
		return 0, err
	}
	if limit < 1 {
		return 0, fmt.Errorf("rdb: delete expired completed %s: %w: limit %d is less than 1", queue, base.ErrInvalidArgument, limit)
	}
	n, err := b.run(ctx, call{
		s:    scriptPurge,
		keys: []string{k.completed, k.task},
		args: []string{b.nowArg(), strconv.Itoa(limit)},
	}).AsInt64()
	if err != nil {
		return 0, b.wrap("delete expired completed "+queue, err)
	}
	return int(n), nil
}

// GetTaskInfo reads one task; see broker.Broker.
func (b *Broker) GetTaskInfo(ctx context.Context, queue, id string) (*base.TaskInfo, error) {
	k, err := b.check("get task", queue)
	if err != nil {
		return nil, err
	}
	return b.taskInfoReply("get task", queue, id, b.run(ctx, call{
		s:    scriptInfo,
		keys: []string{k.taskKey(id), k.active, k.scheduled, k.retry, k.leases},
		args: []string{b.nowArg(), id},
	}))
}

// taskInfoReply builds a TaskInfo from the reply of info.lua or watch.lua:
// false (no such task) or {m, s, n, e, f, r, c, score or false, now ms}.
func (b *Broker) taskInfoReply(op, queue, id string, r rueidis.RedisResult) (*base.TaskInfo, error) {
	vals, err := r.ToArray()
	if rueidis.IsRedisNil(err) || (err == nil && len(vals) == 0) {
		return nil, fmt.Errorf("rdb: %s %s/%s: %w", op, queue, id, base.ErrTaskNotFound)
	}
	if err != nil {
		return nil, b.wrap(op+" "+queue+"/"+id, err)
	}
	if len(vals) != 9 {
		return nil, fmt.Errorf("rdb: %s %s/%s: unexpected reply", op, queue, id)
	}
	m := &base.TaskMessage{Queue: queue}
	if err := decodeTaskFields(id, vals[0], vals[2], vals[3], vals[4], m); err != nil {
		return nil, corruptError(queue, id)
	}
	st, err := vals[1].AsInt64()
	if err != nil || st < int64(base.StateActive) || st > int64(base.MaxState) {
		return nil, corruptError(queue, id)
	}
	now, err := vals[8].AsInt64()
	if err != nil {
		return nil, fmt.Errorf("rdb: %s %s/%s: unexpected reply", op, queue, id)
	}
	ti := &base.TaskInfo{Message: m, State: base.TaskState(st)}
	fillInfo(ti, vals[7], vals[5], vals[6], now)
	return ti, nil
}

// DeleteTask deletes a task that is not active; see broker.Broker.
func (b *Broker) DeleteTask(ctx context.Context, queue, id string) error {
	k, err := b.check("delete task", queue)
	if err != nil {
		return err
	}
	res, waitErr := b.runAcked(ctx, call{
		s: scriptDelete,
		keys: []string{k.taskKey(id), k.pending, k.scheduled, k.retry, k.archived, k.completed,
			k.unique, k.group, k.groups, k.leases, k.events, k.settings, k.waiting},
		args: []string{id, b.nowArg(), b.logLen, channelEvents},
	})
	n, err := res.AsInt64()
	if err != nil {
		return b.wrap("delete task "+queue+"/"+id, err)
	}
	switch n {
	case -1:
		return fmt.Errorf("rdb: delete task %s/%s: %w", queue, id, base.ErrTaskNotFound)
	case -2:
		return fmt.Errorf("rdb: delete task %s/%s: it is active: %w", queue, id, base.ErrWrongState)
	}
	return waitFailed("delete task "+queue+"/"+id, waitErr)
}

// Queues lists every queue ever enqueued into, sorted.
func (b *Broker) Queues(ctx context.Context) ([]string, error) {
	if b.closed.Load() {
		return nil, fmt.Errorf("rdb: queues: %w", base.ErrStorageClosed)
	}
	qs, err := b.do(ctx, b.c.B().Smembers().Key(keyQueues).Build()).AsStrSlice()
	if err != nil {
		return nil, b.wrap("queues", err)
	}
	slices.Sort(qs)
	return qs, nil
}

// WriteServerState records a server's presence for ttl; see broker.Broker.
func (b *Broker) WriteServerState(ctx context.Context, info *base.ServerInfo, ttl time.Duration) error {
	if info == nil || info.ID == "" {
		return fmt.Errorf("rdb: write server state: %w: no server ID", base.ErrInvalidArgument)
	}
	if ttl <= 0 {
		return fmt.Errorf("rdb: write server state %s: %w: ttl %v is not positive", info.ID, base.ErrInvalidArgument, ttl)
	}
	data, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("rdb: write server state %s: %w", info.ID, err)
	}
	now, err := b.Now(ctx)
	if err != nil {
		return err
	}
	nowMS := now.UnixMilli()
	bd := b.c.B()
	res := b.doMulti(ctx, 0,
		bd.Set().Key(serverKey(info.ID)).Value(string(data)).PxMilliseconds(ms(ttl)).Build(),
		bd.Zadd().Key(keyServers).ScoreMember().ScoreMember(float64(nowMS+ms(ttl)), info.ID).Build(),
		bd.Zremrangebyscore().Key(keyServers).Min("-inf").Max("("+itoa(nowMS)).Build(),
	)
	for _, r := range res {
		if err := r.Error(); err != nil {
			return b.wrap("write server state "+info.ID, err)
		}
	}
	return nil
}

// ClearServerState removes a server's presence record.
func (b *Broker) ClearServerState(ctx context.Context, serverID string) error {
	if b.closed.Load() {
		return fmt.Errorf("rdb: clear server state: %w", base.ErrStorageClosed)
	}
	return b.clearRecord(ctx, "clear server state "+serverID, serverKey(serverID), keyServers, serverID)
}

// clearRecord deletes a presence record (a server's or a scheduler's):
// its key and its member in the zset that indexes the live ones.
func (b *Broker) clearRecord(ctx context.Context, op, key, index, member string) error {
	bd := b.c.B()
	res := b.doMulti(ctx, 0,
		bd.Del().Key(key).Build(),
		bd.Zrem().Key(index).Member(member).Build(),
	)
	for _, r := range res {
		if err := r.Error(); err != nil {
			return b.wrap(op, err)
		}
	}
	return nil
}

// CheckInvariants reads every key of every queue and reports each
// violation of the storage invariants: a task in no structure or in
// two, a structure entry without a task, a state field that disagrees
// with the structure holding the task, an active task without a lease
// token or without an active-zset entry. Each queue is checked atomically
// (one script); nil means consistent. It is meant for tests and operators:
// it reads whole queues.
func (b *Broker) CheckInvariants(ctx context.Context) error {
	qs, err := b.Queues(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, q := range qs {
		k, err := b.keys(q)
		if err != nil {
			errs = append(errs, fmt.Errorf("queue %q: bad name in %s: %w", q, keyQueues, err))
			continue
		}
		ak := k.adminKeys()
		bad, err := b.run(ctx, call{
			s: scriptInvariants,
			keys: []string{k.task, k.pending, k.active, k.scheduled, k.retry,
				k.archived, k.completed, k.groups, k.group, k.leases, ak.aggs, ak.agg, k.settings, k.waiting, k.fetchN, k.fetch},
			args: []string{k.taskPattern},
		}).AsStrSlice()
		if err != nil {
			return b.wrap("check invariants "+q, err)
		}
		for _, v := range bad {
			errs = append(errs, fmt.Errorf("queue %s: %s", q, v))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("rdb: %d invariant violations: %w", len(errs), errors.Join(errs...))
	}
	return nil
}
