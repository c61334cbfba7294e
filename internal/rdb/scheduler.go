package rdb

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/htqueue/htq/internal/base"
)

// maxEntryIDLen bounds the scheduler and entry IDs that name keys.
const maxEntryIDLen = 256

func validateSchedID(what, id string) error {
	if id == "" || len(id) > maxEntryIDLen {
		return fmt.Errorf("%w: %s %q must have 1 to %d bytes", base.ErrInvalidArgument, what, id, maxEntryIDLen)
	}
	return nil
}

// ClaimTick records that a scheduler enqueues entry's task for tick,
// unless another did; see broker.Admin. The claim's expiry, on the
// storage clock, is stored in it (ticks are named by their Unix ms).
func (b *Broker) ClaimTick(ctx context.Context, entryID string, tick time.Time, ttl time.Duration) (bool, error) {
	if b.closed.Load() {
		return false, fmt.Errorf("rdb: claim tick: %w", base.ErrStorageClosed)
	}
	if err := validateSchedID("entry ID", entryID); err != nil {
		return false, fmt.Errorf("rdb: claim tick: %w", err)
	}
	if ttl <= 0 {
		return false, fmt.Errorf("rdb: claim tick %s: %w: ttl %v is not positive", entryID, base.ErrInvalidArgument, ttl)
	}
	n, err := b.run(ctx, call{
		s:    scriptClaimTick,
		keys: []string{claimKey(entryID, tick.UnixMilli())},
		args: []string{b.nowArg(), itoa(ms(ttl)), itoa(ms(ttl) + b.lockSlackMS)},
	}).AsInt64()
	if err != nil {
		return false, b.wrap("claim tick "+entryID, err)
	}
	return n == 1, nil
}

// WriteSchedulerEntries records (or renews) a scheduler's entries for ttl
// on the storage clock; see broker.Admin.
func (b *Broker) WriteSchedulerEntries(ctx context.Context, schedulerID string, entries []*base.SchedulerEntry, ttl time.Duration) error {
	if err := validateSchedID("scheduler ID", schedulerID); err != nil {
		return fmt.Errorf("rdb: write scheduler entries: %w", err)
	}
	if ttl <= 0 {
		return fmt.Errorf("rdb: write scheduler entries %s: %w: ttl %v is not positive", schedulerID, base.ErrInvalidArgument, ttl)
	}
	list := make([]base.SchedulerEntry, 0, len(entries))
	for _, e := range entries {
		if e == nil {
			return fmt.Errorf("rdb: write scheduler entries %s: %w: nil entry", schedulerID, base.ErrInvalidArgument)
		}
		c := *e
		c.SchedulerID = schedulerID
		list = append(list, c)
	}
	data, err := json.Marshal(list)
	if err != nil {
		return fmt.Errorf("rdb: write scheduler entries %s: %w", schedulerID, err)
	}
	now, err := b.Now(ctx)
	if err != nil {
		return err
	}
	nowMS := now.UnixMilli()
	bd := b.c.B()
	res := b.doMulti(ctx, 0,
		bd.Set().Key(schedulerKey(schedulerID)).Value(string(data)).PxMilliseconds(ms(ttl)+b.lockSlackMS).Build(),
		bd.Zadd().Key(keySchedulers).ScoreMember().ScoreMember(float64(nowMS+ms(ttl)), schedulerID).Build(),
		bd.Zremrangebyscore().Key(keySchedulers).Min("-inf").Max("("+itoa(nowMS)).Build(),
	)
	for _, r := range res {
		if err := r.Error(); err != nil {
			return b.wrap("write scheduler entries "+schedulerID, err)
		}
	}
	return nil
}

// ClearSchedulerEntries removes a scheduler's entries; see broker.Admin.
func (b *Broker) ClearSchedulerEntries(ctx context.Context, schedulerID string) error {
	if b.closed.Load() {
		return fmt.Errorf("rdb: clear scheduler entries: %w", base.ErrStorageClosed)
	}
	return b.clearRecord(ctx, "clear scheduler entries "+schedulerID, schedulerKey(schedulerID), keySchedulers, schedulerID)
}

// ListSchedulerEntries returns the entries of every scheduler whose
// record has not expired on the storage clock, by scheduler ID, each
// scheduler's in the order it wrote them; see broker.Admin.
func (b *Broker) ListSchedulerEntries(ctx context.Context) ([]*base.SchedulerEntry, error) {
	var out []*base.SchedulerEntry
	err := b.listLive(ctx, "list scheduler entries", keySchedulers, schedulerKey, func(id, data string) error {
		var list []*base.SchedulerEntry
		if err := json.Unmarshal([]byte(data), &list); err != nil {
			return fmt.Errorf("scheduler %s: %w", id, err)
		}
		for _, e := range list {
			e.SchedulerID = id
		}
		out = append(out, list...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
