package htq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestSchedulersEnqueueEachTickOnce runs three Schedulers with the same
// entry, @every 1s, through a minute of a shared fake clock: each of the 60
// ticks is enqueued exactly once.
func TestSchedulersEnqueueEachTickOnce(t *testing.T) {
	st := openTestStorage(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var scheds []*Scheduler
	for i := 0; i < 3; i++ {
		s := NewScheduler(st, &SchedulerOpts{Logger: discardLogger(), clock: clock, HeartbeatInterval: time.Hour})
		if _, err := s.Register("@every 1s", NewTask("tick", nil), Queue("cron")); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
	}
	defer func() {
		for _, s := range scheds {
			s.Shutdown()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Each scheduler waits on a timer and a heartbeat ticker.
	waiters := 2 * len(scheds)
	for i := 0; i < 60; i++ {
		if err := clock.BlockUntilContext(ctx, waiters); err != nil {
			t.Fatalf("tick %d: schedulers not waiting: %v", i, err)
		}
		clock.Advance(time.Second)
	}
	if err := clock.BlockUntilContext(ctx, waiters); err != nil {
		t.Fatal(err)
	}
	insp := NewInspector(st)
	qi, err := insp.GetQueueInfo("cron")
	if err != nil {
		t.Fatal(err)
	}
	if qi.Pending != 60 {
		t.Fatalf("%d tasks enqueued for 60 ticks by 3 schedulers", qi.Pending)
	}
	entries, err := insp.SchedulerEntries()
	if err != nil || len(entries) != 3 || entries[0].ID != entries[1].ID || entries[0].Spec != "@every 1s" || entries[0].Task.Type() != "tick" {
		t.Fatalf("entries: %+v %v", entries, err)
	}
	last := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	for _, e := range entries {
		if !e.Prev.Equal(last) || !e.Next.Equal(last.Add(time.Second)) {
			t.Fatalf("entry %s: prev %v next %v, want %v and a second later", e.ID, e.Prev, e.Next, last)
		}
	}
	// The history keeps the last 20 ticks, newest first, each with the
	// task its claimer enqueued.
	hist, err := insp.ListSchedulerEnqueueEvents(entries[0].ID)
	if err != nil || len(hist) != 20 {
		t.Fatalf("history: %d events, %v; want 20", len(hist), err)
	}
	for k, ev := range hist {
		if want := last.Add(-time.Duration(k) * time.Second); !ev.Tick.Equal(want) || ev.Error != "" || ev.SchedulerID == "" {
			t.Fatalf("history[%d] = %+v, want tick %v", k, ev, want)
		}
		if ti, err := insp.GetTaskInfo("cron", ev.TaskID); err != nil || ti.Type != "tick" {
			t.Fatalf("history[%d]: task %q: %v", k, ev.TaskID, err)
		}
	}
	if hist, err := insp.ListSchedulerEnqueueEvents("never-fired"); err != nil || len(hist) != 0 {
		t.Fatalf("history of an entry that never fired: %v, %v", hist, err)
	}
	if _, err := insp.ListSchedulerEnqueueEvents(""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("history of an empty entry ID: %v", err)
	}
}

func TestSchedulerBadSpecNamesField(t *testing.T) {
	st := openTestStorage(t)
	s := NewScheduler(st, nil)
	for spec, want := range map[string]string{
		"61 * * * *":   "minute",
		"* 25 * * *":   "hour",
		"* * 0 * *":    "day-of-month",
		"* * * 13 *":   "month",
		"* * * * mon2": "day-of-week",
		"* * *":        "5 (minute hour",
		"@yearly2":     "@yearly2",
		"@every -1s":   "@every",
	} {
		_, err := s.Register(spec, NewTask("t", nil))
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Errorf("Register(%q) = %v; want ErrInvalidArgument mentioning %q", spec, err, want)
		}
	}
	if _, err := s.Register("*/5 * * * *", NewTask("", nil)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("empty task type accepted: %v", err)
	}
	id, err := s.Register("@daily", NewTask("t", nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Unregister(id); err != nil {
		t.Fatal(err)
	}
	if err := s.Unregister(id); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("second Unregister: %v", err)
	}
}

func TestNextTickAlignsIntervals(t *testing.T) {
	sched, err := parseCronSpec("@every 30s")
	if err != nil {
		t.Fatal(err)
	}
	a := nextTick(sched, time.Date(2026, 1, 1, 0, 0, 7, 0, time.UTC))
	b := nextTick(sched, time.Date(2026, 1, 1, 0, 0, 21, 500, time.UTC))
	if !a.Equal(b) || a.Second() != 30 {
		t.Fatalf("schedulers started apart disagree: %v vs %v", a, b)
	}
}
