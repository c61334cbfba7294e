package htq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// nextEvent waits for the next event of ch that is not of another queue
// than queue ("" for any).
func nextEvent(t *testing.T, ch <-chan Event, queue string) Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("event channel closed")
			}
			if queue == "" || ev.Queue == queue {
				return ev
			}
		case <-deadline:
			t.Fatal("no event within 10 s")
		}
	}
}

func wantEvent(t *testing.T, ev Event, kind EventKind, taskID string, state TaskState) {
	t.Helper()
	if ev.Kind != kind || ev.TaskID != taskID || ev.State != state || ev.ID == "" || ev.Time.IsZero() {
		t.Fatalf("event %+v; want %s of %s, state %v", ev, kind, taskID, state)
	}
}

// TestInspectorEvents: a Go Server's work on a task appears in the event
// stream of an Inspector sharing the storage, on both backends; a stream
// resumes after an event's ID; a stream of every queue finds a queue
// created after it began.
func TestInspectorEvents(t *testing.T) {
	for _, backend := range []string{"redis", "embedded"} {
		t.Run(backend, func(t *testing.T) {
			var st *Storage
			if backend == "redis" {
				st = openTestStorage(t)
			} else {
				var err error
				if st, err = Open("mem:"); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			insp := NewInspector(st)
			events, err := insp.Events(ctx, "jobs")
			if err != nil {
				t.Fatal(err)
			}
			all, err := insp.Events(ctx)
			if err != nil {
				t.Fatal(err)
			}
			client := NewClient(st)
			ok, err := client.Enqueue(NewTask("ok", nil), Queue("jobs"))
			if err != nil {
				t.Fatal(err)
			}
			bad, err := client.Enqueue(NewTask("bad", nil), Queue("jobs"), MaxRetry(0))
			if err != nil {
				t.Fatal(err)
			}
			srv := startServer(t, st, Config{Concurrency: 1, Queues: map[string]int{"jobs": 1}, Logger: discardLogger()},
				HandlerFunc(func(ctx context.Context, task *Task) error {
					if task.Type() == "bad" {
						return errors.New("boom")
					}
					return nil
				}))
			defer srv.Shutdown()

			first := nextEvent(t, events, "")
			wantEvent(t, first, EventEnqueued, ok.ID, TaskStatePending)
			wantEvent(t, nextEvent(t, events, ""), EventEnqueued, bad.ID, TaskStatePending)
			seen := map[string][]EventKind{}
			for range 4 {
				ev := nextEvent(t, events, "")
				seen[ev.TaskID] = append(seen[ev.TaskID], ev.Kind)
				if ev.Kind == EventFailed && (ev.Error != "boom" || ev.State != TaskStateArchived) {
					t.Errorf("failure event %+v", ev)
				}
			}
			if fmt.Sprint(seen[ok.ID]) != "[started succeeded]" || fmt.Sprint(seen[bad.ID]) != "[started failed]" {
				t.Fatalf("events after the enqueues: %v", seen)
			}

			// Resuming after the first event replays the rest.
			again, err := insp.EventsAfter(ctx, first.ID, "jobs")
			if err != nil {
				t.Fatal(err)
			}
			wantEvent(t, nextEvent(t, again, ""), EventEnqueued, bad.ID, TaskStatePending)

			// Every queue: one created after the stream began shows up.
			late, err := client.Enqueue(NewTask("late", nil), Queue("late"))
			if err != nil {
				t.Fatal(err)
			}
			wantEvent(t, nextEvent(t, all, "late"), EventEnqueued, late.ID, TaskStatePending)
			if err := insp.PauseQueue("late"); err != nil {
				t.Fatal(err)
			}
			if ev := nextEvent(t, all, "late"); ev.Kind != EventPaused || ev.TaskID != "" {
				t.Fatalf("pause event %+v", ev)
			}

			for _, bad := range []string{"nocolon", "q:notanid", "a{b:1-0"} {
				if _, err := insp.EventsAfter(ctx, bad); !errors.Is(err, ErrInvalidArgument) {
					t.Errorf("EventsAfter(%q) = %v, want ErrInvalidArgument", bad, err)
				}
			}
			if _, err := insp.Events(ctx, "a:b"); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("Events of a bad queue name: %v", err)
			}
			cancel()
			for range events {
			}
		})
	}
}
