package rdb

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

var _ broker.Admin = (*Broker)(nil)

// memorySamples is the SAMPLES of the MEMORY USAGE calls of QueueStats:
// few, so that a queue of millions of tasks is measured in microseconds.
const memorySamples = "5"

// maxHistoryDays bounds History (ten years; day counters live 90 days).
const maxHistoryDays = 3660

// knownCmds are the commands that tell whether queue k exists: it is in
// keyQueues, or one of its keys exists (a queue deleted while another
// process, which had registered it before, enqueued into it).
func (b *Broker) knownCmds(k *queueKeys) []rueidis.Completed {
	ak := k.adminKeys()
	bd := b.c.B()
	return []rueidis.Completed{
		bd.Sismember().Key(keyQueues).Member(k.name).Build(),
		bd.Exists().Key(k.pending, k.leases, k.scheduled, k.retry, k.archived, k.completed,
			k.groups, ak.aggs, k.processed, k.failed, k.paused, k.settings).Build(),
	}
}

// known reads the replies of knownCmds.
func known(res []rueidis.RedisResult) (bool, error) {
	member, err := res[0].AsBool()
	if err != nil {
		return false, err
	}
	n, err := res[1].AsInt64()
	if err != nil {
		return false, err
	}
	return member || n > 0, nil
}

func queueNotFound(op, queue string) error {
	return fmt.Errorf("rdb: %s %s: %w", op, queue, base.ErrQueueNotFound)
}

// QueueStats reports the sizes, counters and settings of a queue in one
// round trip (one script, O(groups), and the queue's registration); see
// broker.Admin. MemoryBytes is Redis's MEMORY USAGE of the queue's
// structures plus the average size of a few tasks times the number
// of tasks.
func (b *Broker) QueueStats(ctx context.Context, queue string) (*broker.QueueStats, error) {
	k, err := b.check("queue stats", queue)
	if err != nil {
		return nil, err
	}
	ak := k.adminKeys()
	bd := b.c.B()
	res := b.runMulti(ctx, []rueidis.Completed{bd.Sismember().Key(keyQueues).Member(queue).Build(), bd.Zcard().Key(k.waiting).Build()}, []call{{
		s: scriptStats,
		keys: []string{k.pending, k.active, k.leases, k.scheduled, k.retry, k.archived, k.completed,
			k.groups, k.group, ak.aggs, ak.agg, k.processed, k.failed, k.paused, k.settings, k.task},
		args: []string{b.nowArg(), memorySamples},
	}})
	member, err := res[0].AsBool()
	if err != nil {
		return nil, b.wrap("queue stats "+queue, err)
	}
	waiting, err := res[1].AsInt64()
	if err != nil {
		return nil, b.wrap("queue stats "+queue, err)
	}
	vals, err := res[2].ToArray()
	if err != nil {
		return nil, b.wrap("queue stats "+queue, err)
	}
	if len(vals) != 24 {
		return nil, fmt.Errorf("rdb: queue stats %s: unexpected reply of %d values", queue, len(vals))
	}
	n := make([]int64, 24)
	for i, v := range vals {
		if i >= 15 && i <= 18 || i >= 21 {
			continue // settings: strings or nil
		}
		if n[i], err = v.AsInt64(); err != nil {
			return nil, fmt.Errorf("rdb: queue stats %s: unexpected reply: %w", queue, err)
		}
	}
	if !member && n[20] == 0 && waiting == 0 {
		return nil, queueNotFound("queue stats", queue)
	}
	settings, err := parseSettings(append(vals[15:19:19], vals[21:24]...))
	if err != nil {
		return nil, fmt.Errorf("rdb: queue stats %s: %w", queue, err)
	}
	st := &broker.QueueStats{
		Queue:   queue,
		Now:     time.UnixMilli(n[0]),
		Pending: int(n[1]), Active: int(n[2]), Scheduled: int(n[3]), Retry: int(n[4]),
		Archived: int(n[5]), Completed: int(n[6]), Aggregating: int(n[7]), Groups: int(n[8]), Waiting: int(waiting),
		Processed: n[9], Failed: n[10], ProcessedTotal: n[11], FailedTotal: n[12],
		Paused:      n[14] == 1,
		MemoryBytes: n[19],
		Settings:    settings,
	}
	if n[13] > 0 {
		st.OldestPending = time.UnixMilli(n[13])
	}
	return st, nil
}

// parseSettings reads the settings hash fields mc, rl, rb, ld, kc, kr, kb
// (nil when unset).
func parseSettings(f []rueidis.RedisMessage) (broker.QueueSettings, error) {
	var s broker.QueueSettings
	str := func(m rueidis.RedisMessage) (string, bool) {
		if m.IsNil() {
			return "", false
		}
		v, err := m.ToString()
		return v, err == nil
	}
	if v, ok := str(f[0]); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return s, fmt.Errorf("bad max concurrency %q", v)
		}
		s.MaxConcurrency = n
	}
	if v, ok := str(f[1]); ok {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return s, fmt.Errorf("bad rate limit %q", v)
		}
		s.RateLimit = x
	}
	if v, ok := str(f[2]); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return s, fmt.Errorf("bad rate burst %q", v)
		}
		s.RateBurst = n
	}
	if v, ok := str(f[3]); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return s, fmt.Errorf("bad lease %q", v)
		}
		s.LeaseDuration = time.Duration(n) * time.Millisecond
	}
	if v, ok := str(f[4]); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return s, fmt.Errorf("bad key max concurrency %q", v)
		}
		s.KeyMaxConcurrency = n
	}
	if v, ok := str(f[5]); ok {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return s, fmt.Errorf("bad key rate limit %q", v)
		}
		s.KeyRateLimit = x
	}
	if v, ok := str(f[6]); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return s, fmt.Errorf("bad key rate burst %q", v)
		}
		s.KeyRateBurst = n
	}
	return s, nil
}

// History reports the processed and failed counts of the last days days,
// today first, in one round trip; see broker.Admin.
func (b *Broker) History(ctx context.Context, queue string, days int) ([]broker.DailyStats, error) {
	k, err := b.check("history", queue)
	if err != nil {
		return nil, err
	}
	if days < 1 || days > maxHistoryDays {
		return nil, fmt.Errorf("rdb: history %s: %w: days %d is not between 1 and %d", queue, base.ErrInvalidArgument, days, maxHistoryDays)
	}
	res := b.runMulti(ctx, b.knownCmds(k), []call{{
		s:    scriptHistory,
		keys: []string{k.processed, k.failed},
		args: []string{b.nowArg(), strconv.Itoa(days)},
	}})
	ok, err := known(res)
	if err != nil {
		return nil, b.wrap("history "+queue, err)
	}
	if !ok {
		return nil, queueNotFound("history", queue)
	}
	v, err := res[2].AsIntSlice()
	if err != nil {
		return nil, b.wrap("history "+queue, err)
	}
	if len(v) != 1+2*days {
		return nil, fmt.Errorf("rdb: history %s: unexpected reply of %d values", queue, len(v))
	}
	out := make([]broker.DailyStats, days)
	for d := range out {
		out[d] = broker.DailyStats{
			Date:      time.UnixMilli((v[0] - int64(d)) * 86400000).UTC(),
			Processed: v[1+2*d],
			Failed:    v[2+2*d],
		}
	}
	return out, nil
}

// ListTasks returns one page of a queue's tasks in one state with one
// script call: LRANGE or ZRANGE by rank, then one HMGET per task; see
// broker.Admin. A queue that does not exist has no tasks.
func (b *Broker) ListTasks(ctx context.Context, p broker.ListParams) ([]*base.TaskInfo, error) {
	k, err := b.check("list tasks", p.Queue)
	if err != nil {
		return nil, err
	}
	if p.Limit < 1 || p.Offset < 0 || p.Offset > 1<<40 || p.Limit > 1<<20 {
		return nil, fmt.Errorf("rdb: list tasks %s: %w: offset %d and limit %d (at least 0 and 1)", p.Queue, base.ErrInvalidArgument, p.Offset, p.Limit)
	}
	var key, kind string
	switch p.State {
	case base.StatePending:
		key, kind = k.pending, "p"
	case base.StateActive:
		key, kind = k.active, "a"
	case base.StateScheduled:
		key, kind = k.scheduled, "z"
	case base.StateRetry:
		key, kind = k.retry, "z"
	case base.StateArchived:
		key, kind = k.archived, "r"
	case base.StateCompleted:
		key, kind = k.completed, "z"
	case base.StateAggregating:
		if err := base.ValidateGroupKey(p.Group); err != nil {
			return nil, fmt.Errorf("rdb: list tasks %s: %w", p.Queue, err)
		}
		key, kind = k.groupKey(p.Group), "z"
	case base.StateWaiting:
		key, kind = k.waiting, "z"
	default:
		return nil, fmt.Errorf("rdb: list tasks %s: %w: state %v", p.Queue, base.ErrInvalidArgument, p.State)
	}
	vals, err := b.run(ctx, call{
		s:    scriptList,
		keys: []string{key, k.task, k.leases, k.fetch},
		args: []string{b.nowArg(), kind, strconv.Itoa(p.Offset), strconv.Itoa(p.Limit)},
	}).ToArray()
	if err != nil {
		return nil, b.wrap("list tasks "+p.Queue, err)
	}
	if len(vals) < 1 || (len(vals)-1)%8 != 0 {
		return nil, fmt.Errorf("rdb: list tasks %s: unexpected reply of %d values", p.Queue, len(vals))
	}
	now, err := vals[0].AsInt64()
	if err != nil {
		return nil, fmt.Errorf("rdb: list tasks %s: unexpected reply: %w", p.Queue, err)
	}
	n := (len(vals) - 1) / 8
	infos := make([]base.TaskInfo, n)
	msgs := make([]base.TaskMessage, n)
	out := make([]*base.TaskInfo, n)
	for i := range n {
		f := vals[1+8*i : 9+8*i] // id, score, m, n, e, f, r, c
		m := &msgs[i]
		m.Queue = p.Queue
		if err := decodeTask(f[0], f[2], f[3], f[4], f[5], m); err != nil {
			// Listed with what is known, so that one bad task does not
			// hide a page; GetTaskInfo reports it as corrupt.
			b.log.Error("rdb: listed task cannot be decoded", "queue", p.Queue, "id", m.ID, "err", err)
		}
		ti := &infos[i]
		ti.Message, ti.State = m, p.State
		fillInfo(ti, f[1], f[6], f[7], now)
		out[i] = ti
	}
	return out, nil
}

// fillInfo sets the times and result of ti (whose State is set) from a
// structure's score and the task's r and c fields.
func fillInfo(ti *base.TaskInfo, score, result, completed rueidis.RedisMessage, now int64) {
	if !result.IsNil() {
		if s, err := result.ToString(); err == nil {
			ti.Result = []byte(s)
		}
	}
	if !completed.IsNil() {
		if c, err := completed.AsInt64(); err == nil {
			ti.CompletedAt = time.UnixMilli(c)
		}
	}
	var at time.Time
	if !score.IsNil() {
		if f, err := score.AsFloat64(); err == nil {
			at = time.UnixMilli(int64(f))
		}
	}
	switch ti.State {
	case base.StateActive:
		ti.LeaseDeadline = at
	case base.StateScheduled, base.StateRetry:
		ti.NextProcessAt = at
	case base.StatePending:
		ti.NextProcessAt = time.UnixMilli(now)
	}
}

// ListServers returns the presence records that have not expired on the
// storage clock (the zset's scores decide; the records' PX ttl, on Redis's
// clock, only cleans up), sorted by server ID.
func (b *Broker) ListServers(ctx context.Context) ([]*base.ServerInfo, error) {
	var out []*base.ServerInfo
	err := b.listLive(ctx, "list servers", keyServers, serverKey, func(id, data string) error {
		var info base.ServerInfo
		if err := json.Unmarshal([]byte(data), &info); err != nil {
			return fmt.Errorf("server %s: %w", id, err)
		}
		out = append(out, &info)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// listLive reads the records of the live members of zset (score = expiry
// ms, storage clock), in member order, calling fn with each member and its
// record (members whose record is gone are skipped). The records are read
// with one GET each in one pipeline (they may be on several Cluster nodes).
func (b *Broker) listLive(ctx context.Context, op, zset string, key func(string) string, fn func(id, data string) error) error {
	if b.closed.Load() {
		return fmt.Errorf("rdb: %s: %w", op, base.ErrStorageClosed)
	}
	now, err := b.Now(ctx)
	if err != nil {
		return err
	}
	bd := b.c.B()
	ids, err := b.do(ctx, bd.Zrange().Key(zset).Min("("+itoa(now.UnixMilli())).Max("+inf").Byscore().Build()).AsStrSlice()
	if err != nil {
		return b.wrap(op, err)
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	cmds := make([]rueidis.Completed, len(ids))
	for i, id := range ids {
		cmds[i] = bd.Get().Key(key(id)).Build()
	}
	for i, r := range b.doMulti(ctx, 0, cmds...) {
		data, err := r.ToString()
		if rueidis.IsRedisNil(err) {
			continue // expired on Redis's clock meanwhile
		}
		if err != nil {
			return b.wrap(op, err)
		}
		if err := fn(ids[i], data); err != nil {
			return fmt.Errorf("rdb: %s: %w", op, err)
		}
	}
	return nil
}
