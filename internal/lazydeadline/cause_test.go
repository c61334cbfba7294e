package lazydeadline

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A CauseContext canceled with a cause reports it through context.Cause, with
// or without Done, and a later cancel of the parent does not change it.
func TestCauseContextCancelCause(t *testing.T) {
	errLost := errors.New("lost")
	for _, done := range []bool{false, true} {
		parent, pc := context.WithCancel(context.Background())
		c := &CauseContext{}
		c.Init(parent)
		c.SetDeadline(time.Now().Add(time.Hour))
		if done {
			c.Done()
		}
		c.Cancel(errLost)
		pc()
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("done=%v: Err() = %v; want context.Canceled", done, err)
		}
		if err := context.Cause(c); !errors.Is(err, errLost) {
			t.Fatalf("done=%v: Cause() = %v; want the cause given to Cancel", done, err)
		}
		<-c.Done()
		c.Cancel(errors.New("second")) // only the first counts
		if err := context.Cause(c); !errors.Is(err, errLost) {
			t.Fatalf("done=%v: Cause() after a second Cancel = %v; want the first cause", done, err)
		}
	}
}

// Without a deadline of its own a CauseContext has its parent's, if any.
func TestCauseContextWithoutDeadline(t *testing.T) {
	c := &CauseContext{}
	c.Init(context.Background())
	if _, ok := c.Deadline(); ok {
		t.Fatal("Deadline() reports one under a parent without deadline")
	}
	parent, pc := context.WithTimeout(context.Background(), time.Minute)
	defer pc()
	c = &CauseContext{}
	c.Init(parent)
	pd, _ := parent.Deadline()
	if dl, ok := c.Deadline(); !ok || !dl.Equal(pd) {
		t.Fatalf("Deadline() = %v, %v; want the parent's %v", dl, ok, pd)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("Err() = %v; want nil", err)
	}
	c.Cancel(nil)
	if err := context.Cause(c); !errors.Is(err, context.Canceled) {
		t.Fatalf("Cause() after Cancel(nil) = %v; want context.Canceled", err)
	}
}

// A deadline seen to have passed is what Err keeps reporting, even once
// the context is canceled after it; ErrAt sees it by the time given.
func TestCauseContextDeadlineThenCancel(t *testing.T) {
	c := &CauseContext{}
	c.Init(context.Background())
	dl := time.Now().Add(-time.Second)
	c.SetDeadline(dl)
	if err := c.ErrAt(dl.Add(-time.Millisecond)); err != nil {
		t.Fatalf("ErrAt(before the deadline) = %v; want nil", err)
	}
	if err := c.ErrAt(dl); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ErrAt(the deadline) = %v; want context.DeadlineExceeded", err)
	}
	c.Cancel(errors.New("late"))
	if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err() = %v; want context.DeadlineExceeded", err)
	}
	if err := context.Cause(c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Cause() = %v; want context.DeadlineExceeded", err)
	}
}

// The point of CauseContext: a user that reads only Deadline and Err and then
// cancels allocates nothing beyond the Context itself.
func TestCauseContextAllocations(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		c := &CauseContext{}
		c.Init(context.Background())
		c.SetDeadline(time.Now().Add(time.Hour))
		c.Deadline()
		_ = c.Err()
		c.Cancel(nil)
	})
	if allocs > 1 {
		t.Fatalf("%v allocations per context; want at most 1 (no timer, no standard context)", allocs)
	}
}

// Canceling twice, and reading Err after, makes no standard context.
func TestCauseContextCancelTwiceStaysLazy(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		c := &CauseContext{}
		c.Init(context.Background())
		c.SetDeadline(time.Now().Add(time.Hour))
		c.Cancel(nil)
		c.Cancel(nil)
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatal("Err() after Cancel is not context.Canceled")
		}
	})
	if allocs > 1 {
		t.Fatalf("%v allocations; want at most 1 (the Context)", allocs)
	}
}
