package rdb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Aggregation sets: TakeGroup moves a group's oldest tasks out of the
// group zset into a hash htq:{q}:agg:<set ID> (fields "i:<task ID>" = the
// task's group score, "t" = the set's token, "g" = the group), leased in
// the zset htq:{q}:aggs (score = lease deadline). The tasks keep s = 7.
// FinishAggregation deletes them and enqueues their replacement;
// ReclaimAggregations puts the tasks of sets whose lease ran out back
// into their groups.

// reclaimBatch is how many aggregation sets one script call gives back.
const reclaimBatch = 100

// ListGroups lists the groups of a queue that hold aggregating tasks,
// sorted by name, with their sizes, in one script call; see broker.Admin.
func (b *Broker) ListGroups(ctx context.Context, queue string) ([]broker.GroupStats, error) {
	k, err := b.check("list groups", queue)
	if err != nil {
		return nil, err
	}
	vals, err := b.run(ctx, call{s: scriptGroups, keys: []string{k.groups, k.group}}).ToArray()
	if err != nil {
		return nil, b.wrap("list groups "+queue, err)
	}
	if len(vals)%2 != 0 {
		return nil, fmt.Errorf("rdb: list groups %s: unexpected reply", queue)
	}
	out := make([]broker.GroupStats, 0, len(vals)/2)
	for i := 0; i < len(vals); i += 2 {
		g, err1 := vals[i].ToString()
		n, err2 := vals[i+1].AsInt64()
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("rdb: list groups %s: unexpected reply", queue)
		}
		out = append(out, broker.GroupStats{Group: g, Size: int(n)})
	}
	slices.SortFunc(out, func(a, b broker.GroupStats) int { return strings.Compare(a.Group, b.Group) })
	return out, nil
}

// ListKeys lists the fair-sharing keys of a queue with pending or active
// tasks, sorted by key, with one script call (O(keys)); see broker.Admin.
func (b *Broker) ListKeys(ctx context.Context, queue string) ([]broker.KeyStats, error) {
	k, err := b.check("list keys", queue)
	if err != nil {
		return nil, err
	}
	vals, err := b.run(ctx, call{s: scriptKeys, keys: []string{k.pending}}).ToArray()
	if err != nil {
		return nil, b.wrap("list keys "+queue, err)
	}
	if len(vals)%3 != 0 {
		return nil, fmt.Errorf("rdb: list keys %s: unexpected reply", queue)
	}
	out := make([]broker.KeyStats, 0, len(vals)/3)
	for i := 0; i < len(vals); i += 3 {
		key, err1 := vals[i].ToString()
		pending, err2 := vals[i+1].AsInt64()
		active, err3 := vals[i+2].AsInt64()
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("rdb: list keys %s: unexpected reply", queue)
		}
		out = append(out, broker.KeyStats{Key: key, Pending: int(pending), Active: int(active)})
	}
	return out, nil
}

// TakeGroup moves up to p.MaxSize of a ready group's oldest tasks into a
// new aggregation set leased for p.Lease, in one script call; see
// broker.Admin. p.MaxSize must be at least 1, p.Lease positive; a zero
// MaxDelay means no such condition and a zero GracePeriod makes any
// non-empty group ready.
func (b *Broker) TakeGroup(ctx context.Context, p broker.TakeGroupParams) (*broker.Aggregation, error) {
	k, err := b.check("take group", p.Queue)
	if err != nil {
		return nil, err
	}
	if err := base.ValidateGroupKey(p.Group); err != nil {
		return nil, fmt.Errorf("rdb: take group %s: %w", p.Queue, err)
	}
	if p.MaxSize < 1 || p.MaxDelay < 0 || p.GracePeriod < 0 || p.Lease <= 0 {
		return nil, fmt.Errorf("rdb: take group %s/%s: %w: MaxSize %d (at least 1), MaxDelay %v, GracePeriod %v (not negative), Lease %v (positive)",
			p.Queue, p.Group, base.ErrInvalidArgument, p.MaxSize, p.MaxDelay, p.GracePeriod, p.Lease)
	}
	ak := k.adminKeys()
	setID := strconv.FormatUint(rand.Uint64(), 36) + strconv.FormatUint(rand.Uint64(), 36)
	token := strconv.FormatUint(rand.Uint64(), 36) + strconv.FormatUint(rand.Uint64(), 36)
	vals, err := b.run(ctx, call{
		s:    scriptTakeGroup,
		keys: []string{k.groupKey(p.Group), k.groups, ak.aggs, ak.agg + setID, k.task},
		args: []string{b.nowArg(), p.Group, strconv.Itoa(p.MaxSize), itoa(ms(p.MaxDelay)), itoa(ms(p.GracePeriod)),
			itoa(ms(p.Lease)), setID, token},
	}).ToArray()
	if err != nil {
		return nil, b.wrap("take group "+p.Queue+"/"+p.Group, err)
	}
	if len(vals) == 0 {
		return nil, nil
	}
	if (len(vals)-1)%5 != 0 {
		return nil, fmt.Errorf("rdb: take group %s/%s: unexpected reply", p.Queue, p.Group)
	}
	n := (len(vals) - 1) / 5
	a := &broker.Aggregation{Queue: p.Queue, Group: p.Group, SetID: setID, Token: token, Msgs: make([]*base.TaskMessage, n)}
	msgs := make([]base.TaskMessage, n)
	for i := range n {
		f := vals[1+5*i : 6+5*i] // id, m, n, e, f
		m := &msgs[i]
		m.Queue = p.Queue
		if err := decodeTask(f[0], f[1], f[2], f[3], f[4], m); err != nil {
			// The set is leased: it goes back to the group when the lease
			// runs out, so nothing is lost by failing here.
			return nil, corruptError(p.Queue, m.ID)
		}
		a.Msgs[i] = m
	}
	return a, nil
}

// FinishAggregation deletes the tasks of an aggregation set and enqueues
// msg, in the same queue, as pending, in one script call; see
// broker.Admin. msg may have a unique key and a retention, but no group.
func (b *Broker) FinishAggregation(ctx context.Context, a *broker.Aggregation, msg *base.TaskMessage) error {
	if a == nil || msg == nil {
		return fmt.Errorf("rdb: finish aggregation: %w: nil aggregation or message", base.ErrInvalidArgument)
	}
	k, err := b.check("finish aggregation", a.Queue)
	if err != nil {
		return err
	}
	if err := msg.Validate(); err != nil {
		return fmt.Errorf("rdb: finish aggregation %s/%s: %w", a.Queue, a.Group, err)
	}
	switch {
	case msg.Queue != a.Queue:
		return fmt.Errorf("rdb: finish aggregation %s/%s: %w: the new task is for queue %s", a.Queue, a.Group, base.ErrInvalidArgument, msg.Queue)
	case msg.GroupKey != "":
		return fmt.Errorf("rdb: finish aggregation %s/%s: %w: the new task has group %q", a.Queue, a.Group, base.ErrInvalidArgument, msg.GroupKey)
	case a.SetID == "" || a.Token == "":
		return fmt.Errorf("rdb: finish aggregation %s/%s: %w: no set ID or token", a.Queue, a.Group, base.ErrInvalidArgument)
	}
	var uttl, upx int64
	if msg.UniqueKey != "" {
		uttl = ms(msg.UniqueTTL)
		upx = uttl + b.lockSlackMS
	}
	ak := k.adminKeys()
	n, err := b.run(ctx, call{
		s:    scriptFinishAgg,
		keys: []string{ak.aggs, ak.agg + a.SetID, k.taskKey(msg.ID), k.pending, k.task, k.unique, k.events, k.settings},
		args: []string{b.nowArg(), a.SetID, a.Token, msg.ID, encodeString(msg), msg.UniqueKey, itoa(uttl), itoa(upx),
			itoa(ms(msg.Retention)), channelEvents, k.name, b.logLen, priorityArg(msg.Priority), msg.Key},
	}).AsInt64()
	if err != nil {
		return b.wrap("finish aggregation "+a.Queue+"/"+a.Group, err)
	}
	switch n {
	case 0:
		return fmt.Errorf("rdb: finish aggregation %s/%s (set %s): %w", a.Queue, a.Group, a.SetID, base.ErrLeaseLost)
	case -1:
		return fmt.Errorf("rdb: finish aggregation %s/%s: new task %s: %w", a.Queue, a.Group, msg.ID, base.ErrTaskIDConflict)
	case -2:
		return fmt.Errorf("rdb: finish aggregation %s/%s: new task %s, unique key %q: %w", a.Queue, a.Group, msg.ID, msg.UniqueKey, base.ErrDuplicateTask)
	}
	return nil
}

// ReclaimAggregations gives the tasks of aggregation sets whose lease ran
// out back to their groups, 100 sets per script call, and reports how
// many tasks it gave back; see broker.Admin.
func (b *Broker) ReclaimAggregations(ctx context.Context, queue string) (int, error) {
	k, err := b.check("reclaim aggregations", queue)
	if err != nil {
		return 0, err
	}
	ak := k.adminKeys()
	total := 0
	for {
		v, err := b.run(ctx, call{
			s:    scriptReclaimAggs,
			keys: []string{ak.aggs, ak.agg, k.group, k.groups, k.task},
			args: []string{b.nowArg(), strconv.Itoa(reclaimBatch)},
		}).AsIntSlice()
		if err != nil {
			return total, b.wrap("reclaim aggregations "+queue, err)
		}
		if len(v) != 2 {
			return total, fmt.Errorf("rdb: reclaim aggregations %s: unexpected reply %v", queue, v)
		}
		total += int(v[1])
		if v[0] < reclaimBatch {
			return total, nil
		}
	}
}
