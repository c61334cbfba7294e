package lazydeadline

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDeadlineWithoutTimer(t *testing.T) {
	before := time.Now()
	ctx, cancel := WithTimeout(context.Background(), time.Hour)
	defer cancel()
	dl, ok := ctx.Deadline()
	if !ok || dl.Before(before.Add(time.Hour)) || dl.After(time.Now().Add(time.Hour)) {
		t.Fatalf("Deadline() = %v, %v; want about an hour from now", dl, ok)
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("Err() = %v before the deadline", err)
	}
	if ctx.(*Context).inner != nil {
		t.Fatal("a timer context was made though nothing called Done")
	}
}

func TestParentDeadlineEarlier(t *testing.T) {
	parent, pc := context.WithTimeout(context.Background(), time.Minute)
	defer pc()
	ctx, cancel := WithTimeout(parent, time.Hour)
	defer cancel()
	pd, _ := parent.Deadline()
	if dl, ok := ctx.Deadline(); !ok || !dl.Equal(pd) {
		t.Fatalf("Deadline() = %v, %v; want the parent's %v", dl, ok, pd)
	}
}

func TestDeadlinePassedWithoutDone(t *testing.T) {
	ctx, cancel := WithTimeout(context.Background(), 0)
	defer cancel()
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err() = %v; want context.DeadlineExceeded", err)
	}
	<-ctx.Done() // armed late, closes at once
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err() after Done = %v; want context.DeadlineExceeded", err)
	}
}

// context.Cause finds a cause through Value: it must agree with Err even
// when nothing called Done, under a parent that can be canceled.
func TestCauseWithoutDone(t *testing.T) {
	parent, pc := context.WithCancel(context.Background())
	defer pc()
	ctx, cancel := WithTimeout(parent, 0)
	defer cancel()
	if err := context.Cause(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Cause() = %v past the deadline; want context.DeadlineExceeded", err)
	}
	live, cancelLive := WithTimeout(parent, time.Hour)
	defer cancelLive()
	if err := context.Cause(live); err != nil {
		t.Fatalf("Cause() = %v before the deadline; want nil", err)
	}
	cancelLive()
	if err := context.Cause(live); !errors.Is(err, context.Canceled) {
		t.Fatalf("Cause() = %v after cancel; want context.Canceled", err)
	}
}

func TestDoneClosesAtDeadline(t *testing.T) {
	ctx, cancel := WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	child, cc := context.WithCancel(ctx) // asks for Done: arms the timer
	defer cc()
	select {
	case <-child.Done():
	case <-time.After(10 * time.Second): // a bound on a broken timer, not a speed check
		t.Fatal("the child of a context past its deadline was not canceled")
	}
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err() = %v; want context.DeadlineExceeded", err)
	}
	if err := context.Cause(child); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Cause(child) = %v; want context.DeadlineExceeded", err)
	}
}

func TestCancel(t *testing.T) {
	t.Run("before Done", func(t *testing.T) {
		ctx, cancel := WithTimeout(context.Background(), time.Hour)
		cancel()
		if err := ctx.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err() = %v; want context.Canceled", err)
		}
		<-ctx.Done()
		if err := ctx.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err() after Done = %v; want context.Canceled", err)
		}
	})
	t.Run("after Done", func(t *testing.T) {
		ctx, cancel := WithTimeout(context.Background(), time.Hour)
		done := ctx.Done()
		cancel()
		<-done
		if err := ctx.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err() = %v; want context.Canceled", err)
		}
		cancel() // a second call is harmless
	})
	t.Run("parent", func(t *testing.T) {
		parent, pc := context.WithCancel(context.Background())
		ctx, cancel := WithTimeout(parent, time.Hour)
		defer cancel()
		pc()
		if err := ctx.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err() = %v; want the parent's context.Canceled", err)
		}
		<-ctx.Done()
	})
}

func TestValueFromParent(t *testing.T) {
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	ctx, cancel := WithTimeout(parent, time.Hour)
	defer cancel()
	if got := ctx.Value(key{}); got != "v" {
		t.Fatalf("Value = %v before Done; want the parent's", got)
	}
	ctx.Done()
	if got := ctx.Value(key{}); got != "v" {
		t.Fatalf("Value = %v after Done; want the parent's", got)
	}
}

// The point of the package: a call that reads only Deadline and Err
// allocates the context itself and its cancel function, no timer.
func TestAllocations(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		ctx, cancel := WithTimeout(context.Background(), time.Hour)
		ctx.Deadline()
		_ = ctx.Err()
		cancel()
	})
	if allocs > 2 {
		t.Fatalf("%v allocations per call; want at most 2 (no timer)", allocs)
	}
	allocs = testing.AllocsPerRun(100, func() {
		c := New(context.Background(), time.Hour)
		c.Deadline()
		_ = c.Err()
		c.Cancel()
	})
	if allocs > 1 {
		t.Fatalf("New: %v allocations per call; want 1 (the context)", allocs)
	}
}

// Done, Err, Value and cancel may be called from several goroutines at
// once (run with -race): every caller gets the one same channel.
func TestConcurrentDone(t *testing.T) {
	ctx, cancel := WithTimeout(context.Background(), time.Hour)
	chans := make(chan (<-chan struct{}), 8)
	for range 8 {
		go func() {
			_ = ctx.Err()
			_ = ctx.Value(struct{}{})
			chans <- ctx.Done()
		}()
	}
	first := <-chans
	for range 7 {
		if c := <-chans; c != first {
			t.Fatal("Done returned two different channels")
		}
	}
	cancel()
	<-first
}

// A lazy context under another (the broker's call deadline under the
// Client's RetryFor deadline): waiting on the inner one arms it alone, and
// it still ends with every ancestor.
func TestNested(t *testing.T) {
	t.Run("outer canceled", func(t *testing.T) {
		outer := New(context.Background(), time.Hour)
		inner := New(outer, time.Hour)
		defer inner.Cancel()
		done := inner.Done()
		if outer.inner != nil {
			t.Fatal("waiting on the inner context armed the outer one")
		}
		outer.Cancel()
		<-done
		if err := inner.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("inner Err() = %v; want context.Canceled", err)
		}
	})
	t.Run("outer canceled before Done", func(t *testing.T) {
		outer := New(context.Background(), time.Hour)
		inner := New(outer, time.Hour)
		defer inner.Cancel()
		outer.Cancel()
		if err := inner.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("inner Err() = %v; want context.Canceled", err)
		}
		<-inner.Done()
	})
	t.Run("outer deadline earlier", func(t *testing.T) {
		outer := New(context.Background(), 20*time.Millisecond)
		defer outer.Cancel()
		inner := New(outer, time.Hour)
		defer inner.Cancel()
		od, _ := outer.Deadline()
		if d, _ := inner.Deadline(); !d.Equal(od) {
			t.Fatalf("inner Deadline() = %v; want the outer's %v", d, od)
		}
		select {
		case <-inner.Done():
		case <-time.After(10 * time.Second): // a bound on a broken timer, not a speed check
			t.Fatal("the inner context did not end at the outer one's deadline")
		}
		if err := context.Cause(inner); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Cause(inner) = %v; want context.DeadlineExceeded", err)
		}
	})
	t.Run("root canceled with a cause", func(t *testing.T) {
		type key struct{}
		root, cancelRoot := context.WithCancelCause(context.WithValue(context.Background(), key{}, "v"))
		outer := New(root, time.Hour)
		defer outer.Cancel()
		inner := New(outer, time.Hour)
		defer inner.Cancel()
		done := inner.Done()
		boom := errors.New("boom")
		cancelRoot(boom)
		<-done
		if err := inner.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("inner Err() = %v; want context.Canceled", err)
		}
		if err := context.Cause(inner); !errors.Is(err, boom) {
			t.Fatalf("Cause(inner) = %v; want the root's cause", err)
		}
		if v := inner.Value(key{}); v != "v" {
			t.Fatalf("Value = %v once done; want the root's", v)
		}
	})
}
