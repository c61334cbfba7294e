package embedded

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// The event log (broker.EventLog) of the embedded store: one ring of
// events per queue in memory, appended under b.mu by the very operation
// that changes the state, so it is in step with the store. One process
// owns the data, so the log lives and dies with it: it is not written to
// disk and starts empty at each Open. IDs are "<ms>-<n>" over the storage
// clock, increasing across every queue of the Broker.

// eventRing holds the last events of one queue, oldest first from head.
type eventRing struct {
	queue  string
	events []logEntry // a ring of cap = the log's size
	head   int        // index of the oldest event
	// dropped is the ID of the newest event dropped to make room (valid
	// when hasDropped).
	dropped    [2]uint64
	hasDropped bool
}

// logEntry is one event as the ring keeps it: its ID as numbers, its
// strings shared with the task (the LogEvent is built when read).
type logEntry struct {
	ms, n  uint64
	kind   broker.LogKind
	state  base.TaskState
	taskID string
	err    string
	at     time.Time
}

func (e *logEntry) id() string { return broker.FormatEventID(e.ms, e.n, 0) }

// add appends ev, dropping the oldest event when the ring is full.
func (r *eventRing) add(ev logEntry) {
	if len(r.events) < cap(r.events) {
		r.events = append(r.events, ev)
		return
	}
	r.dropped, r.hasDropped = [2]uint64{r.events[r.head].ms, r.events[r.head].n}, true
	r.events[r.head] = ev
	r.head = (r.head + 1) % len(r.events)
}

// at returns the i-th event, oldest first.
func (r *eventRing) at(i int) broker.LogEvent {
	e := &r.events[(r.head+i)%len(r.events)]
	return broker.LogEvent{ID: e.id(), Queue: r.queue, Kind: e.kind, TaskID: e.taskID, State: e.state, Time: e.at, Error: e.err}
}

// cmpAt compares the i-th event's ID with the valid ID c.
func (r *eventRing) cmpAt(i int, c string) int {
	e := &r.events[(r.head+i)%len(r.events)]
	ms, n, k, _ := broker.ParseEventID(c)
	if c := cmp.Compare(e.ms, ms); c != 0 {
		return c
	}
	if c := cmp.Compare(e.n, n); c != 0 {
		return c
	}
	return cmp.Compare(0, k)
}

// after returns up to limit events after cursor c (a valid ID or
// broker.CursorStart) and whether events after c were dropped.
func (r *eventRing) after(c string, limit int) (evs []broker.LogEvent, truncated bool) {
	n := len(r.events)
	start := 0
	if c != broker.CursorStart {
		start = sort.Search(n, func(i int) bool { return r.cmpAt(i, c) > 0 })
		truncated = r.hasDropped && broker.CompareEventIDs(c, broker.FormatEventID(r.dropped[0], r.dropped[1], 0)) < 0
	}
	for i := start; i < n && len(evs) < limit; i++ {
		evs = append(evs, r.at(i))
	}
	return evs, truncated
}

// last returns the ID of the newest event, "0-0" when there is none.
func (r *eventRing) last() string {
	if len(r.events) == 0 {
		return "0-0"
	}
	return r.events[(r.head+len(r.events)-1)%len(r.events)].id()
}

// logEvent appends an event to the log of queue q. The caller holds b.mu.
func (b *Broker) logEvent(q string, kind broker.LogKind, id string, state base.TaskState, errMsg string, now time.Time) {
	if b.logSize <= 0 {
		return
	}
	ms := uint64(max(now.UnixMilli(), 0))
	if ms <= b.logMS {
		ms, b.logN = b.logMS, b.logN+1
	} else {
		b.logMS, b.logN = ms, 0
	}
	r := b.logs[q]
	if r == nil {
		r = &eventRing{queue: q, events: make([]logEntry, 0, min(b.logSize, 64))}
		b.logs[q] = r
	}
	if len(r.events) == cap(r.events) && cap(r.events) < b.logSize {
		// Not yet wrapped around (head is 0): grow, to exactly logSize at
		// most, so that a quiet queue's log stays small.
		grown := make([]logEntry, len(r.events), min(b.logSize, 2*cap(r.events)))
		copy(grown, r.events)
		r.events = grown
	}
	r.add(logEntry{ms: ms, n: b.logN, kind: kind, state: state, taskID: id, err: errMsg, at: now})
	if b.logWaiters > 0 {
		close(b.logged)
		b.logged = make(chan struct{})
	}
}

// ReadEvents reads the queues' event logs; see broker.EventLog. A wait is
// woken by the next event of any queue.
func (b *Broker) ReadEvents(ctx context.Context, p broker.ReadEventsParams) (*broker.EventBatch, error) {
	if err := broker.CheckReadEvents(p); err != nil {
		return nil, err
	}
	out := &broker.EventBatch{Cursors: make(map[string]string, len(p.Cursors))}
	queues := make([]string, 0, len(p.Cursors))
	for q, c := range p.Cursors {
		out.Cursors[q] = c
		queues = append(queues, q)
	}
	sort.Strings(queues)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read events: %w", err)
		}
		if err := b.begin(); err != nil {
			return nil, err
		}
		for _, q := range queues {
			r := b.logs[q]
			c := out.Cursors[q]
			switch {
			case c == broker.CursorEnd && r == nil:
				out.Cursors[q] = "0-0"
			case c == broker.CursorEnd:
				out.Cursors[q] = r.last()
			case r != nil:
				evs, truncated := r.after(c, p.Limit)
				if truncated {
					out.Truncated = append(out.Truncated, q)
				}
				if len(evs) > 0 {
					out.Events = append(out.Events, evs...)
					out.Cursors[q] = evs[len(evs)-1].ID
				}
			}
		}
		if len(out.Events) > 0 || p.Wait == 0 {
			b.mu.Unlock()
			return out, nil
		}
		logged := b.logged
		b.logWaiters++
		b.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(p.Wait)
		}
		var done bool
		select {
		case <-logged:
		case <-timer.C:
			done = true
		case <-ctx.Done():
		}
		b.mu.Lock()
		b.logWaiters--
		b.mu.Unlock()
		if done {
			return out, nil
		}
	}
}
