package brokertest_test

import (
	"context"
	"sort"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// The broker.EventLog of memBroker: each queue's events in a slice of at
// most broker.DefaultEventLogSize, the oldest dropped first.

var _ broker.EventLog = (*memBroker)(nil)

// memLog is one queue's log.
type memLog struct {
	events  []broker.LogEvent
	dropped string // the ID of the newest event dropped, "" when none
}

// memLogs is what memBroker keeps for the event log.
type memLogs struct {
	logs       map[string]*memLog
	lastMS     uint64
	lastN      uint64
	logWritten chan struct{} // closed and replaced at each event
}

func newMemLogs() memLogs {
	return memLogs{logs: map[string]*memLog{}, logWritten: make(chan struct{})}
}

// logEvent appends an event to queue's log. The caller holds b.mu.
func (b *memBroker) logEvent(queue string, kind broker.LogKind, id string, state base.TaskState, errMsg string) {
	now := b.clock.Now()
	ms := uint64(now.UnixMilli())
	if ms <= b.lastMS {
		ms, b.lastN = b.lastMS, b.lastN+1
	} else {
		b.lastMS, b.lastN = ms, 0
	}
	l := b.logs[queue]
	if l == nil {
		l = &memLog{}
		b.logs[queue] = l
	}
	l.events = append(l.events, broker.LogEvent{ID: broker.FormatEventID(ms, b.lastN, 0), Queue: queue, Kind: kind,
		TaskID: id, State: state, Time: now, Error: errMsg})
	if len(l.events) > broker.DefaultEventLogSize {
		l.dropped = l.events[0].ID
		l.events = l.events[1:]
	}
	close(b.logWritten)
	b.logWritten = make(chan struct{})
}

func (b *memBroker) ReadEvents(ctx context.Context, p broker.ReadEventsParams) (*broker.EventBatch, error) {
	if err := broker.CheckReadEvents(p); err != nil {
		return nil, err
	}
	out := &broker.EventBatch{Cursors: map[string]string{}}
	queues := make([]string, 0, len(p.Cursors))
	for q, c := range p.Cursors {
		out.Cursors[q] = c
		queues = append(queues, q)
	}
	sort.Strings(queues)
	deadline := time.After(p.Wait)
	for {
		if err := b.lock(); err != nil {
			return nil, err
		}
		for _, q := range queues {
			l := b.logs[q]
			if l == nil {
				l = &memLog{}
			}
			c := out.Cursors[q]
			if c == broker.CursorEnd {
				out.Cursors[q] = "0-0"
				if len(l.events) > 0 {
					out.Cursors[q] = l.events[len(l.events)-1].ID
				}
				continue
			}
			if c != broker.CursorStart && l.dropped != "" && broker.CompareEventIDs(c, l.dropped) < 0 {
				out.Truncated = append(out.Truncated, q)
			}
			n := 0
			for _, ev := range l.events {
				if n < p.Limit && broker.CompareEventIDs(ev.ID, c) > 0 {
					out.Events = append(out.Events, ev)
					out.Cursors[q] = ev.ID
					n++
				}
			}
		}
		written := b.logWritten
		b.mu.Unlock()
		if len(out.Events) > 0 || p.Wait == 0 {
			return out, nil
		}
		select {
		case <-written:
		case <-deadline:
			return out, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
