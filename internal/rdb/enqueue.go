package rdb

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Enqueue stores a new task; see broker.Broker.
func (b *Broker) Enqueue(ctx context.Context, p broker.EnqueueParams) error {
	k, c, err := b.enqueueCall(p)
	if err != nil {
		return err
	}
	var res rueidis.RedisResult
	if k.needsRegister() {
		rs := b.runMulti(ctx, []rueidis.Completed{b.registerCmd(k)}, []call{c})
		if rs[0].Error() == nil {
			k.markRegistered()
		}
		res = rs[1]
	} else {
		res = b.run(ctx, c)
	}
	return b.enqueueResult(p.Msg, res)
}

// EnqueueBatch stores many tasks in one round trip (one pipeline of
// script calls); see broker.Broker.
func (b *Broker) EnqueueBatch(ctx context.Context, ps []broker.EnqueueParams) []error {
	errs := make([]error, len(ps))
	calls := make([]call, 0, len(ps))
	idx := make([]int, 0, len(ps)) // calls[j] is ps[idx[j]]
	var extra []rueidis.Completed
	var reg []*queueKeys
	for i := range ps {
		k, c, err := b.enqueueCall(ps[i])
		if err != nil {
			errs[i] = err
			continue
		}
		if k.needsRegister() && !containsKeys(reg, k) {
			reg = append(reg, k)
			extra = append(extra, b.registerCmd(k))
		}
		calls = append(calls, c)
		idx = append(idx, i)
	}
	if len(calls) == 0 {
		return errs
	}
	res := b.runMulti(ctx, extra, calls)
	for j, k := range reg {
		if res[j].Error() == nil {
			k.markRegistered()
		}
	}
	for j, i := range idx {
		errs[i] = b.enqueueResult(ps[i].Msg, res[len(extra)+j])
	}
	return errs
}

func containsKeys(ks []*queueKeys, k *queueKeys) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// registerCmd adds the queue to the set of queues.
func (b *Broker) registerCmd(k *queueKeys) rueidis.Completed {
	return b.c.B().Sadd().Key(keyQueues).Member(k.name).Build()
}

// enqueueCall validates p and builds its script call.
func (b *Broker) enqueueCall(p broker.EnqueueParams) (*queueKeys, call, error) {
	m := p.Msg
	if m == nil {
		return nil, call{}, fmt.Errorf("rdb: enqueue: %w: nil message", base.ErrInvalidArgument)
	}
	if err := m.Validate(); err != nil {
		return nil, call{}, fmt.Errorf("rdb: enqueue %s/%s: %w", m.Queue, m.ID, err)
	}
	k, err := b.check("enqueue", m.Queue)
	if err != nil {
		return nil, call{}, err
	}
	var at int64
	if !p.ProcessAt.IsZero() {
		at = p.ProcessAt.UnixMilli()
	}
	var uttl, upx int64
	if m.UniqueKey != "" {
		uttl = ms(m.UniqueTTL)
		upx = uttl + b.lockSlackMS
	}
	return k, call{
		s:    scriptEnqueue,
		keys: []string{k.taskKey(m.ID), k.pending, k.scheduled, k.unique, k.group, k.groups},
		args: []string{
			b.nowArg(), m.ID, encodeString(m),
			itoa(at), m.UniqueKey, itoa(uttl), itoa(upx), m.GroupKey, itoa(ms(m.Retention)),
			channelEvents, k.name,
		},
	}, nil
}

// encodeString encodes m's immutable fields as a string without copying
// the encoding a second time (the bytes are never written again).
func encodeString(m *base.TaskMessage) string {
	buf := encodeMessage(make([]byte, 0, 32+len(m.Type)+len(m.Payload)+len(m.UniqueKey)+len(m.GroupKey)), m)
	return unsafe.String(unsafe.SliceData(buf), len(buf))
}

// enqueueResult maps the script's answer to an error.
func (b *Broker) enqueueResult(m *base.TaskMessage, r rueidis.RedisResult) error {
	n, err := r.AsInt64()
	if err != nil {
		return b.wrap("enqueue "+m.Queue+"/"+m.ID, err)
	}
	switch n {
	case -1:
		return fmt.Errorf("rdb: enqueue %s/%s: %w", m.Queue, m.ID, base.ErrTaskIDConflict)
	case -2:
		return fmt.Errorf("rdb: enqueue %s/%s: unique key %q: %w", m.Queue, m.ID, m.UniqueKey, base.ErrDuplicateTask)
	}
	return nil
}
