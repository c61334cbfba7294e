// Package eventlog follows the storage's event logs (broker.EventLog) for
// htq's readers of them: the Inspector's Events, and htq serve's event
// stream (GET /v1/events). A follow reads every queue it follows after a
// cursor of its own, waits for the next event in the storage (no fixed
// poll where the backend can block), discovers the queues created after it
// began when it follows them all, and says when a queue's log dropped
// events it had not read yet (a KindGap event).
//
// Readers name events by a public ID, "<queue>:<log ID>", which tells
// both the queue and the position in its log, so that a reader can resume
// after the last event it saw: that queue resumes exactly after it, every
// other queue from the same moment of the storage's clock on (events of
// that millisecond may come again; their IDs tell them apart).
package eventlog

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// KindGap marks a LogEvent that is not in any log: events of its Queue
// were dropped before the follow could read them (the log is bounded).
const KindGap broker.LogKind = "gap"

// Source is what a follow reads: the storage.
type Source interface {
	ReadEvents(ctx context.Context, p broker.ReadEventsParams) (*broker.EventBatch, error)
	Queues(ctx context.Context) ([]string, error)
}

// How a follow reads.
const (
	// readLimit bounds the events of one read per queue.
	readLimit = 1000
	// waitFor is the longest one read waits for an event.
	waitFor = time.Second
	// discoverEvery is how often a follow of every queue looks for new
	// queues.
	discoverEvery = time.Second
	// retryAfter is the wait after a failed read (doubling to 10 s).
	retryAfter = 100 * time.Millisecond
	// buffer is the capacity of a follow's channel.
	buffer = 1024
)

// ID returns the public ID of an event: "<queue>:<log ID>".
func ID(ev broker.LogEvent) string { return ev.Queue + ":" + ev.ID }

// ParseID splits a public event ID into its queue and log ID.
func ParseID(id string) (queue, logID string, err error) {
	queue, logID, ok := strings.Cut(id, ":")
	if !ok {
		return "", "", fmt.Errorf("%w: event ID %q: want <queue>:<log ID>", base.ErrInvalidArgument, id)
	}
	if err := base.ValidateQueueName(queue); err != nil {
		return "", "", fmt.Errorf("event ID %q: %w", id, err)
	}
	if _, _, _, err := broker.ParseEventID(logID); err != nil {
		return "", "", fmt.Errorf("event ID %q: %w", id, err)
	}
	return queue, logID, nil
}

// A Follower reads the logs of a set of queues from its cursors on.
type Follower struct {
	src    Source
	all    bool // follows every queue, discovering new ones
	logger *slog.Logger

	cursors map[string]string
	// from holds, for the queues read from their log's start after a
	// resume, the first log ID to deliver (earlier ones are skipped).
	from       map[string]string
	discovered time.Time
}

// NewFollower returns a follower of queues (every queue, those created
// later too, when queues is empty), from after the event with public ID
// after, or from now when after is "". Queue names and after are checked.
func NewFollower(ctx context.Context, src Source, after string, queues []string, logger *slog.Logger) (*Follower, error) {
	if logger == nil {
		logger = slog.Default()
	}
	f := &Follower{src: src, all: len(queues) == 0, logger: logger, cursors: map[string]string{}, from: map[string]string{}}
	for _, q := range queues {
		if err := base.ValidateQueueName(q); err != nil {
			return nil, err
		}
	}
	var aq, aid string
	if after != "" {
		var err error
		if aq, aid, err = ParseID(after); err != nil {
			return nil, err
		}
	}
	if f.all {
		var err error
		if queues, err = src.Queues(ctx); err != nil {
			return nil, fmt.Errorf("eventlog: list queues: %w", err)
		}
		f.discovered = time.Now()
	}
	for _, q := range queues {
		f.cursors[q] = broker.CursorEnd
	}
	if after != "" {
		ms, _, _, _ := broker.ParseEventID(aid)
		since := broker.FormatEventID(ms, 0, 0)
		for q := range f.cursors {
			f.cursors[q], f.from[q] = broker.CursorStart, since
		}
		if _, ok := f.cursors[aq]; ok || f.all {
			f.cursors[aq] = aid
			delete(f.from, aq)
		}
		return f, nil
	}
	// "From now" is from this call: the logs' ends are read now.
	if len(f.cursors) > 0 {
		b, err := src.ReadEvents(ctx, broker.ReadEventsParams{Cursors: f.cursors, Limit: 1})
		if err != nil {
			return nil, fmt.Errorf("eventlog: read the logs' ends: %w", err)
		}
		f.cursors = b.Cursors
	}
	return f, nil
}

// Next reads the events after the cursors, waiting up to wait for one
// when there is none, and moves the cursors past them. A queue whose log
// dropped events after its cursor yields a KindGap event first.
func (f *Follower) Next(ctx context.Context, wait time.Duration) ([]broker.LogEvent, error) {
	if f.all && time.Since(f.discovered) >= discoverEvery {
		if err := f.discover(ctx); err != nil {
			return nil, err
		}
	}
	if len(f.cursors) == 0 {
		// Nothing to read (no queue yet): wait as a read would.
		t := time.NewTimer(min(wait, discoverEvery))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			return nil, nil
		}
	}
	b, err := f.src.ReadEvents(ctx, broker.ReadEventsParams{Cursors: f.cursors, Limit: readLimit, Wait: wait})
	if err != nil {
		return nil, err
	}
	var out []broker.LogEvent
	for _, q := range b.Truncated {
		out = append(out, broker.LogEvent{Queue: q, Kind: KindGap, Time: time.Now()})
	}
	for _, ev := range b.Events {
		if from, ok := f.from[ev.Queue]; ok {
			if broker.CompareEventIDs(ev.ID, from) < 0 {
				continue
			}
			delete(f.from, ev.Queue)
		}
		out = append(out, ev)
	}
	for q, c := range b.Cursors {
		if _, ok := f.cursors[q]; ok {
			f.cursors[q] = c
		}
	}
	return out, nil
}

// discover starts following the queues created since the last look, from
// their log's start (a new queue's log holds only new events), and stops
// following those deleted.
func (f *Follower) discover(ctx context.Context) error {
	queues, err := f.src.Queues(ctx)
	if err != nil {
		return fmt.Errorf("eventlog: list queues: %w", err)
	}
	f.discovered = time.Now()
	for _, q := range queues {
		if _, ok := f.cursors[q]; !ok {
			f.cursors[q] = broker.CursorStart
		}
	}
	for q := range f.cursors {
		if !slices.Contains(queues, q) {
			delete(f.cursors, q)
			delete(f.from, q)
		}
	}
	return nil
}

// CatchUp reads everything logged after the cursors so far, without
// waiting: the backlog of a reader that resumes.
func (f *Follower) CatchUp(ctx context.Context) ([]broker.LogEvent, error) {
	var out []broker.LogEvent
	for {
		evs, err := f.Next(ctx, 0)
		if err != nil {
			return out, err
		}
		if len(evs) == 0 {
			return out, nil
		}
		out = append(out, evs...)
	}
}

// Follow runs f until ctx is done, sending what it reads on the channel it
// returns, which it closes at the end. A failed read is logged and tried
// again with backoff; the cursors stay, so nothing is skipped.
func (f *Follower) Follow(ctx context.Context) <-chan broker.LogEvent {
	ch := make(chan broker.LogEvent, buffer)
	go func() {
		defer close(ch)
		backoff := retryAfter
		for ctx.Err() == nil {
			evs, err := f.Next(ctx, waitFor)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				f.logger.Warn("eventlog: read the event logs failed; trying again", "err", err, "retry_in", backoff)
				t := time.NewTimer(backoff)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
				backoff = min(2*backoff, 10*time.Second)
				continue
			}
			backoff = retryAfter
			for _, ev := range evs {
				select {
				case ch <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return ch
}
