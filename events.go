package htq

import (
	"context"
	"fmt"
	"time"

	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/eventlog"
)

// EventKind says what an Event records.
type EventKind string

// The kinds of Event. Each change of a task's state is one event; State
// tells where the task went.
const (
	// EventEnqueued: a task was stored (pending, scheduled or
	// aggregating), by a client or as a group's aggregated task, or with
	// its workflow (waiting too).
	EventEnqueued EventKind = EventKind(broker.LogEnqueued)
	// EventReleased: the dependencies of a workflow task finished; it may
	// run (pending, or scheduled until its ProcessAt).
	EventReleased EventKind = EventKind(broker.LogReleased)
	// EventStarted: a worker fetched the task (active).
	EventStarted EventKind = EventKind(broker.LogStarted)
	// EventSucceeded: its handler succeeded (completed, or State 0 when
	// the task keeps no result and is gone).
	EventSucceeded EventKind = EventKind(broker.LogSucceeded)
	// EventFailed: an attempt failed (Error); State is retry, or archived
	// when it was the last one (or the error said to skip retries, or its
	// worker vanished for good).
	EventFailed EventKind = EventKind(broker.LogFailed)
	// EventRetried: the task is pending again to run anew: its retry came
	// due, someone ran it by hand, or its worker gave it back at shutdown.
	EventRetried EventKind = EventKind(broker.LogRetried)
	// EventArchived: someone archived the task by hand.
	EventArchived EventKind = EventKind(broker.LogArchived)
	// EventCanceled: the rules of the task's workflow canceled it (a
	// dependency failed, was canceled or deleted), or its workflow was
	// canceled; archived, with the reason as Error.
	EventCanceled EventKind = EventKind(broker.LogCanceled)
	// EventDeleted: someone deleted the task (State 0).
	EventDeleted EventKind = EventKind(broker.LogDeleted)
	// EventPaused and EventResumed: the queue was paused or resumed (no
	// task).
	EventPaused  EventKind = EventKind(broker.LogPaused)
	EventResumed EventKind = EventKind(broker.LogResumed)
	// EventGap: events of Queue were lost before they could be read (each
	// queue's log keeps its last events only, about 1,000 calls' worth);
	// look at the queue itself to know where it stands. It has no ID.
	EventGap EventKind = EventKind(eventlog.KindGap)
)

// Event is one change of a task or a queue, read from the storage's
// event log: what every Client, Server, Inspector and htq serve sharing
// the storage did, on any machine, in the order the storage applied it.
type Event struct {
	// ID names the event: "<queue>:<position in the queue's log>". Give
	// it to EventsAfter to resume after this event.
	ID     string
	Kind   EventKind
	Queue  string
	TaskID string // "" for EventPaused, EventResumed and EventGap
	// State is the task's state after the change; 0 when the task is gone
	// and for queue events.
	State TaskState
	// Time is when it happened, on the storage's clock.
	Time time.Time
	// Error is the failed attempt's error (EventFailed).
	Error string
}

// Events follows the lifecycle events of queues (of every queue when none
// is named, the queues created later included) from now on, until ctx is
// done; then the channel is closed. The events come from the storage,
// written by the same atomic operation as each change, so the tasks of Go
// servers on other machines appear too. Reading waits in the storage (on
// Redis: XREAD BLOCK, or a look every 100 ms on a Cluster); a queue
// created meanwhile is found within about a second. A reader that falls
// behind by more than a queue's log keeps gets an EventGap. A bad queue
// name is an ErrInvalidArgument error. With the storage's event log turned
// off (event_log=0) nothing comes.
func (i *Inspector) Events(ctx context.Context, queues ...string) (<-chan Event, error) {
	return i.EventsAfter(ctx, "", queues...)
}

// EventsAfter is Events resuming after the event with ID lastID (as an
// earlier Event.ID gave it), as far back as the queues' logs go: that
// event's queue resumes right after it, the other queues from the same
// moment on (events of that millisecond may come again; their IDs tell
// them apart). An EventGap says when the log no longer holds what
// followed lastID. A malformed lastID is an ErrInvalidArgument error.
func (i *Inspector) EventsAfter(ctx context.Context, lastID string, queues ...string) (<-chan Event, error) {
	f, err := eventlog.NewFollower(ctx, brokerOf(i.s), lastID, queues, nil)
	if err != nil {
		return nil, fmt.Errorf("htq: events: %w", err)
	}
	in := f.Follow(ctx)
	out := make(chan Event, cap(in))
	go func() {
		defer close(out)
		for ev := range in {
			select {
			case out <- newEvent(ev):
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func newEvent(ev broker.LogEvent) Event {
	e := Event{Kind: EventKind(ev.Kind), Queue: ev.Queue, TaskID: ev.TaskID, State: TaskState(ev.State), Time: ev.Time, Error: ev.Error}
	if ev.Kind != eventlog.KindGap {
		e.ID = eventlog.ID(ev)
	}
	return e
}
