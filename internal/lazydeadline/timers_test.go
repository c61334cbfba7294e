package lazydeadline

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A context armed on Timers: Done closes once its deadline has passed,
// with context.DeadlineExceeded, and no timer context is made.
func TestTimersDeadline(t *testing.T) {
	ts := NewTimers(5 * time.Millisecond)
	c := NewOn(ts, context.WithoutCancel(context.Background()), 30*time.Millisecond)
	defer c.Cancel()
	done := c.Done()
	if c.inner != nil {
		t.Fatal("a timer context was made under a root that cannot be canceled")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a bound on a broken timer, not a speed check
		t.Fatal("Done was not closed after the deadline")
	}
	if dl, _ := c.Deadline(); time.Now().Before(dl) {
		t.Fatalf("Done closed before the deadline %v", dl)
	}
	if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err() = %v; want context.DeadlineExceeded", err)
	}
	if err := context.Cause(c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Cause() = %v; want context.DeadlineExceeded", err)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.slots) != 0 {
		t.Fatalf("%d slots left after the tick fired", len(ts.slots))
	}
}

// Many contexts in one tick, half canceled before it: each canceled one
// leaves its slot at once and ends with context.Canceled, the others end
// at the tick with context.DeadlineExceeded.
func TestTimersCancel(t *testing.T) {
	ts := NewTimers(time.Hour) // one tick for them all
	root := context.Background()
	var cs []*Context
	for range 100 {
		c := NewOn(ts, root, 50*time.Millisecond)
		if err := c.Err(); err != nil {
			t.Fatal(err)
		}
		c.Done()
		cs = append(cs, c)
	}
	for i := 0; i < len(cs); i += 2 {
		cs[i].Cancel()
		<-cs[i].Done()
		if err := cs[i].Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("context %d: Err() = %v after Cancel; want context.Canceled", i, err)
		}
	}
	ts.mu.Lock()
	if len(ts.slots) != 1 {
		t.Fatalf("%d slots for deadlines within one tick, want 1", len(ts.slots))
	}
	for _, s := range ts.slots {
		if len(s.ctxs) != 50 {
			t.Fatalf("the slot holds %d contexts after 50 of 100 were canceled", len(s.ctxs))
		}
		for j, c := range s.ctxs {
			if c.idx != j || c.canceled {
				t.Fatalf("slot entry %d: index %d, canceled %v", j, c.idx, c.canceled)
			}
		}
	}
	ts.mu.Unlock()
	// Fire the tick by hand: an hour's tick is not waited for.
	var n int64
	for k := range ts.slots {
		n = k
	}
	ts.fire(n)
	for i := 1; i < len(cs); i += 2 {
		<-cs[i].Done()
		if err := cs[i].Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("context %d: Err() = %v after its tick; want context.DeadlineExceeded", i, err)
		}
		cs[i].Cancel() // after the tick: harmless
	}
}

// A lazy context under one made with NewOn arms on the same Timers and
// ends with it; under a root that can be canceled, NewOn makes the timer
// context as New does.
func TestTimersNestedAndCancelableRoot(t *testing.T) {
	ts := NewTimers(time.Millisecond)
	outer := NewOn(ts, context.Background(), time.Hour)
	inner := New(outer, time.Hour)
	defer inner.Cancel()
	done := inner.Done()
	if inner.inner != nil || outer.done != nil {
		t.Fatal("waiting on the inner context made a timer context or armed the outer one")
	}
	outer.Cancel()
	<-done
	if err := inner.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("inner Err() = %v; want context.Canceled", err)
	}

	parent, cancelParent := context.WithCancel(context.Background())
	c := NewOn(ts, parent, time.Hour)
	defer c.Cancel()
	done = c.Done()
	if c.inner == nil {
		t.Fatal("no timer context under a root that can be canceled")
	}
	cancelParent()
	<-done
	if err := c.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err() = %v after the root's cancel; want context.Canceled", err)
	}
}

// Arming on Timers allocates the Done channel and nothing per context
// beyond it once the tick's slot exists.
func TestTimersAllocations(t *testing.T) {
	ts := NewTimers(time.Hour)
	root := context.Background()
	keep := NewOn(ts, root, time.Minute) // the tick's slot, and room in it
	keep.Done()
	defer keep.Cancel()
	allocs := testing.AllocsPerRun(100, func() {
		c := NewOn(ts, root, time.Minute)
		c.Done()
		c.Cancel()
	})
	if allocs > 2 {
		t.Fatalf("%v allocations per context armed on Timers; want 2 (the context, its channel)", allocs)
	}
}
