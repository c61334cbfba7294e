package rdb

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Each queue's event log is a stream, htq:{queue}:events, in the queue's
// hash slot: the scripts that change a task's state append to it with
// XADD MAXLEN ~ (lib.lua's log_event) in the same call, so the log holds
// exactly the changes that happened, in the order Redis applied them.

// logKinds maps the kind letters of the log entries to broker.LogKind.
var logKinds = map[string]broker.LogKind{
	"e": broker.LogEnqueued, "s": broker.LogStarted, "d": broker.LogSucceeded,
	"f": broker.LogFailed, "r": broker.LogRetried, "a": broker.LogArchived,
	"x": broker.LogDeleted, "p": broker.LogPaused, "u": broker.LogResumed,
	"l": broker.LogReleased, "c": broker.LogCanceled,
}

// eventPoll is how often ReadEvents looks again while it waits on Redis
// Cluster, where one XREAD cannot block on the streams of several queues
// (they live in different hash slots).
const eventPoll = 100 * time.Millisecond

// ReadEvents reads the queues' event logs; see broker.EventLog. One
// pipelined XRANGE per queue (XREVRANGE to resolve broker.CursorEnd);
// waiting is one XREAD BLOCK over every stream on a standalone or
// Sentinel Redis, and a look every 100 ms on a Cluster.
func (b *Broker) ReadEvents(ctx context.Context, p broker.ReadEventsParams) (*broker.EventBatch, error) {
	if b.closed.Load() {
		return nil, fmt.Errorf("rdb: read events: %w", base.ErrStorageClosed)
	}
	if err := broker.CheckReadEvents(p); err != nil {
		return nil, fmt.Errorf("rdb: %w", err)
	}
	queues := make([]string, 0, len(p.Cursors))
	keys := make(map[string]string, len(p.Cursors)) // stream key -> queue
	out := &broker.EventBatch{Cursors: make(map[string]string, len(p.Cursors))}
	for q, c := range p.Cursors {
		k, err := b.keys(q)
		if err != nil {
			return nil, fmt.Errorf("rdb: read events: %w", err)
		}
		queues = append(queues, q)
		keys[k.events] = q
		out.Cursors[q] = c
	}
	slices.Sort(queues)
	deadline := time.Now().Add(p.Wait)
	for {
		if err := b.readLogs(ctx, queues, p.Limit, out); err != nil {
			return nil, err
		}
		wait := time.Until(deadline)
		if len(out.Events) > 0 || len(queues) == 0 || wait <= 0 {
			return out, nil
		}
		if b.c.Mode() == rueidis.ClientModeCluster {
			t := time.NewTimer(min(eventPoll, wait))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("rdb: read events: %w", ctx.Err())
			case <-t.C:
			}
			continue
		}
		return out, b.blockLogs(ctx, queues, keys, p.Limit, wait, out)
	}
}

// readLogs reads each queue's log after its cursor in out.Cursors, in one
// pipeline, and adds what it found to out.
func (b *Broker) readLogs(ctx context.Context, queues []string, limit int, out *broker.EventBatch) error {
	cmds := make([]rueidis.Completed, len(queues))
	bd := b.c.B()
	for i, q := range queues {
		k, _ := b.keys(q)
		switch c := out.Cursors[q]; c {
		case broker.CursorEnd:
			cmds[i] = bd.Xrevrange().Key(k.events).End("+").Start("-").Count(1).Build()
		case broker.CursorStart:
			cmds[i] = bd.Xrange().Key(k.events).Start("-").End("+").Count(int64(limit)).Build()
		default:
			// From the cursor's entry itself: finding it tells that
			// nothing after it was trimmed away.
			cmds[i] = bd.Xrange().Key(k.events).Start(entryOf(c)).End("+").Count(int64(limit) + 1).Build()
		}
	}
	for i, r := range b.c.DoMulti(ctx, cmds...) {
		q := queues[i]
		entries, err := r.AsXRange()
		if err != nil && !rueidis.IsRedisNil(err) {
			return b.wrap("read events of "+q, err)
		}
		c := out.Cursors[q]
		skip := 0 // events of the first entry read before
		switch {
		case c == broker.CursorEnd:
			out.Cursors[q] = "0-0"
			if len(entries) > 0 {
				evs, err := decodeLogEntry(q, entries[0])
				if err != nil {
					return err
				}
				out.Cursors[q] = evs[len(evs)-1].ID
			}
			continue
		case c == broker.CursorStart || len(entries) == 0:
		case entries[0].ID == entryOf(c):
			_, _, k, _ := broker.ParseEventID(c)
			skip = int(k) + 1
		case c != "0-0":
			out.Truncated = append(out.Truncated, q)
		}
		if err := addEntries(q, entries, skip, limit, out); err != nil {
			return err
		}
	}
	return nil
}

// entryOf returns the ID of the log entry that holds event id.
func entryOf(id string) string {
	entry, _, _ := strings.Cut(id, ".")
	return entry
}

// blockLogs waits up to wait for an event after the cursors with one
// XREAD BLOCK over every queue's stream. The cursors are at the end of
// their entries: readLogs found no more events.
func (b *Broker) blockLogs(ctx context.Context, queues []string, keys map[string]string, limit int, wait time.Duration, out *broker.EventBatch) error {
	streams := make([]string, len(queues))
	ids := make([]string, len(queues))
	for i, q := range queues {
		k, _ := b.keys(q)
		streams[i], ids[i] = k.events, entryOf(out.Cursors[q])
	}
	cmd := b.c.B().Xread().Count(int64(limit)).Block(max(ms(wait), 1)).Streams().Key(streams...).Id(ids...).Build()
	res, err := b.c.Do(ctx, cmd).AsXRead()
	if rueidis.IsRedisNil(err) {
		return nil // nothing came
	}
	if err != nil {
		return b.wrap("read events", err)
	}
	for key, entries := range res {
		if q, ok := keys[key]; ok {
			if err := addEntries(q, entries, 0, limit, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// addEntries decodes the log entries of queue q into out, leaving out the
// first skip events and stopping at limit events, and moves the queue's
// cursor past them.
func addEntries(q string, entries []rueidis.XRangeEntry, skip, limit int, out *broker.EventBatch) error {
	n := 0
	for _, e := range entries {
		evs, err := decodeLogEntry(q, e)
		if err != nil {
			return err
		}
		if skip > 0 {
			evs = evs[min(skip, len(evs)):]
			skip = 0
		}
		for _, ev := range evs {
			if n == limit {
				return nil
			}
			out.Events = append(out.Events, ev)
			out.Cursors[q] = ev.ID
			n++
		}
	}
	return nil
}

// decodeLogEntry turns a stream entry written by log_event or log_events
// (lib.lua: one pair kind → states and task IDs, E the error, T the time)
// into its events.
func decodeLogEntry(q string, e rueidis.XRangeEntry) ([]broker.LogEvent, error) {
	bad := func(what string) ([]broker.LogEvent, error) {
		return nil, fmt.Errorf("rdb: event log of %s: entry %s: %s", q, e.ID, what)
	}
	ms, n, _, err := broker.ParseEventID(e.ID)
	if err != nil {
		return bad("bad ID")
	}
	var letter, body string
	pairs := 0
	for field, value := range e.FieldValues {
		if field != "E" && field != "T" {
			letter, body = field, value
			pairs++
		}
	}
	kind, ok := logKinds[letter]
	if pairs != 1 || !ok {
		return bad(fmt.Sprintf("no kind, or an unknown one: %v", slices.Sorted(maps.Keys(e.FieldValues))))
	}
	at := time.UnixMilli(int64(ms))
	if t := e.FieldValues["T"]; t != "" {
		tms, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return bad("bad time")
		}
		at = time.UnixMilli(tms)
	}
	ev := broker.LogEvent{ID: e.ID, Queue: q, Kind: kind, Error: e.FieldValues["E"], Time: at}
	if body == "" {
		return []broker.LogEvent{ev}, nil // a queue's own event
	}
	states, ids, _ := strings.Cut(body, "\n")
	tasks := strings.Split(ids, "\n")
	if len(states) != len(tasks) {
		return bad(fmt.Sprintf("%d task IDs but %d states", len(tasks), len(states)))
	}
	evs := make([]broker.LogEvent, len(tasks))
	for i, id := range tasks {
		ev.ID, ev.TaskID = broker.FormatEventID(ms, n, uint64(i)), id
		ev.State = base.TaskState(states[i] - '0')
		if states[i] < '0' || states[i] > '0'+byte(base.MaxState) {
			return bad("bad state")
		}
		evs[i] = ev
	}
	return evs, nil
}
