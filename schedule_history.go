package htq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// SchedulerEnqueueEvent is one tick of a scheduler entry: the task a
// Scheduler enqueued for it, or the error that prevented it.
type SchedulerEnqueueEvent struct {
	// TaskID is the enqueued task's ID ("" when Error is set).
	TaskID string
	// EnqueuedAt is when the Scheduler enqueued it (its clock).
	EnqueuedAt time.Time
	// Tick is the entry's fire time the task was enqueued for.
	Tick time.Time
	// SchedulerID names the Scheduler that claimed the tick.
	SchedulerID string
	// Error says why the task was not enqueued ("" when it was).
	Error string
}

// recordEnqueue adds the outcome of a claimed tick to the entry's
// history in the storage (the newest base.MaxSchedulerHistory are kept),
// so that every process sharing the storage sees it. Only the Scheduler
// that claimed a tick writes it, and an entry's ticks are at least a
// second apart, so two writers of one history do not overlap.
func (s *Scheduler) recordEnqueue(ctx context.Context, meta broker.MetaStore, e *schedulerEntry, tick time.Time, info *TaskInfo, enqErr error) {
	rec := base.SchedulerEnqueue{Tick: tick, SchedulerID: s.id, EnqueuedAt: s.clock.Now()}
	if enqErr != nil {
		rec.Error = enqErr.Error()
	} else {
		rec.TaskID = info.ID
	}
	hist, err := readSchedulerHistory(ctx, meta, e.id)
	if err == nil {
		hist = append([]base.SchedulerEnqueue{rec}, hist...)
		hist = hist[:min(len(hist), base.MaxSchedulerHistory)]
		var data []byte
		if data, err = json.Marshal(hist); err == nil {
			err = meta.PutMeta(ctx, base.SchedulerHistoryKey(e.id), data)
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.logger.Warn("record the enqueue of a periodic task failed", "entry", e.id, "err", err)
	}
}

// readSchedulerHistory reads an entry's history, newest first (none yet:
// empty).
func readSchedulerHistory(ctx context.Context, meta broker.MetaStore, entryID string) ([]base.SchedulerEnqueue, error) {
	data, err := meta.GetMeta(ctx, base.SchedulerHistoryKey(entryID))
	if errors.Is(err, base.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read history of scheduler entry %s: %w", entryID, err)
	}
	var hist []base.SchedulerEnqueue
	if err := json.Unmarshal(data, &hist); err != nil {
		return nil, fmt.Errorf("history of scheduler entry %s is corrupt: %w", entryID, err)
	}
	return hist, nil
}

// ListSchedulerEnqueueEvents returns the last enqueues of a scheduler
// entry, newest first: up to 20, written by whichever Scheduler claimed
// each tick. An entry that never fired has none.
func (i *Inspector) ListSchedulerEnqueueEvents(entryID string) ([]*SchedulerEnqueueEvent, error) {
	if entryID == "" {
		return nil, fmt.Errorf("%w: empty scheduler entry ID", ErrInvalidArgument)
	}
	hist, err := readSchedulerHistory(context.Background(), brokerOf(i.s), entryID)
	if err != nil {
		return nil, fmt.Errorf("htq: %w", err)
	}
	out := make([]*SchedulerEnqueueEvent, len(hist))
	for k, h := range hist {
		out[k] = &SchedulerEnqueueEvent{TaskID: h.TaskID, EnqueuedAt: h.EnqueuedAt, Tick: h.Tick, SchedulerID: h.SchedulerID, Error: h.Error}
	}
	return out, nil
}
