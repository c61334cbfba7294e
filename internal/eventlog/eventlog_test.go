package eventlog

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/embedded"
)

func openMemory(t *testing.T, opts embedded.Options) *embedded.Broker {
	t.Helper()
	b, err := embedded.OpenMemory(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func enqueue(t *testing.T, b broker.Broker, queue, id string) {
	t.Helper()
	m := &base.TaskMessage{ID: id, Type: "t", Queue: queue, MaxRetry: 1, Timeout: time.Minute}
	if err := b.Enqueue(context.Background(), broker.EnqueueParams{Msg: m}); err != nil {
		t.Fatal(err)
	}
}

// summary is "<queue>/<task>" per event, "<queue>/gap" for a gap.
func summary(evs []broker.LogEvent) string {
	var out []string
	for _, ev := range evs {
		if ev.Kind == KindGap {
			out = append(out, ev.Queue+"/gap")
			continue
		}
		out = append(out, ev.Queue+"/"+ev.TaskID)
	}
	return fmt.Sprint(out)
}

// TestResume: after an event of queue a, a resumes right after it and
// every other queue from that event's millisecond on.
func TestResume(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Unix(1000, 0))
	b := openMemory(t, embedded.Options{Clock: clock})
	ctx := context.Background()
	for _, e := range []string{"a/a1", "b/b1", "a/a2", "b/b2"} {
		enqueue(t, b, e[:1], e[2:])
		clock.Advance(time.Second)
	}
	f, err := NewFollower(ctx, b, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if evs, _ := f.CatchUp(ctx); len(evs) != 0 {
		t.Fatalf("a follow from now read %s", summary(evs))
	}
	all, err := NewFollower(ctx, b, "", []string{"a", "b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	enqueue(t, b, "a", "a3")
	evs, err := all.CatchUp(ctx)
	if err != nil || summary(evs) != "[a/a3]" {
		t.Fatalf("after the follow began: %s, %v", summary(evs), err)
	}
	// The IDs of a1 and a2.
	fromStart, _ := NewFollower(ctx, b, "a:0-0", []string{"a"}, nil)
	aEvs, _ := fromStart.CatchUp(ctx)
	if summary(aEvs) != "[a/a1 a/a2 a/a3]" {
		t.Fatalf("queue a from its start: %s", summary(aEvs))
	}
	for _, tc := range []struct {
		after  broker.LogEvent
		queues []string
		want   string
	}{
		{aEvs[0], []string{"a", "b"}, "[a/a2 a/a3 b/b1 b/b2]"},
		{aEvs[1], []string{"a", "b"}, "[a/a3 b/b2]"},
		{aEvs[1], nil, "[a/a3 b/b2]"},
		{aEvs[1], []string{"b"}, "[b/b2]"},
	} {
		f, err := NewFollower(ctx, b, ID(tc.after), tc.queues, nil)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := f.CatchUp(ctx)
		if err != nil || summary(evs) != tc.want {
			t.Errorf("after %s of %v: %s, %v; want %s", ID(tc.after), tc.queues, summary(evs), err, tc.want)
		}
	}
}

// TestGap: a follow that falls behind a log's size is told so, then reads
// on from the oldest event kept.
func TestGap(t *testing.T) {
	b := openMemory(t, embedded.Options{EventLogSize: 3})
	ctx := context.Background()
	f, err := NewFollower(ctx, b, "", []string{"q"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	enqueue(t, b, "q", "t1")
	if evs, _ := f.CatchUp(ctx); summary(evs) != "[q/t1]" {
		t.Fatalf("first read: %s", summary(evs))
	}
	for i := 2; i <= 6; i++ {
		enqueue(t, b, "q", fmt.Sprint("t", i))
	}
	if evs, _ := f.CatchUp(ctx); summary(evs) != "[q/gap q/t4 q/t5 q/t6]" {
		t.Fatalf("after falling behind: %s", summary(evs))
	}
}

// TestFollowWaitsAndDiscovers: Follow delivers an event as it is logged,
// of a queue created after it began too, and closes its channel at the
// end.
func TestFollowWaitsAndDiscovers(t *testing.T) {
	b := openMemory(t, embedded.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	f, err := NewFollower(ctx, b, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := f.Follow(ctx)
	enqueue(t, b, "new", "n1")
	select {
	case ev := <-ch:
		if ev.Queue != "new" || ev.TaskID != "n1" || ev.Kind != broker.LogEnqueued {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5 s of the enqueue into a new queue")
	}
	cancel()
	for range ch {
	}
}

func TestParseID(t *testing.T) {
	q, id, err := ParseID("jobs:1700000000000-2.5")
	if err != nil || q != "jobs" || id != "1700000000000-2.5" {
		t.Errorf("ParseID = %q, %q, %v", q, id, err)
	}
	for _, bad := range []string{"", "jobs", "jobs:", ":1-0", "jobs:x-1", "jobs:1-0.0", "a{b:1-0"} {
		if _, _, err := ParseID(bad); !errors.Is(err, base.ErrInvalidArgument) {
			t.Errorf("ParseID(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}
