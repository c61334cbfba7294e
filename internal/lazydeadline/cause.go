package lazydeadline

import (
	"context"
	"sync"
	"time"
)

// CauseContext is a context that may be canceled with a cause and may
// have a deadline, like context.WithCancelCause with context.WithDeadline
// under it, but that makes those contexts (and the deadline's timer) only
// when Done is first called or when it is done and a value is looked up:
// what a Server's handler gets (Context is for call deadlines, nested
// and without a cause).
//
// The two stay apart because each would cost the other's use: Context's
// nesting (the lazy ancestor, the root, the armed descendants: 48 bytes)
// would ride in every leased task's context, and a cause would make
// Context's Done arm two standard contexts (WithCancelCause under the
// deadline's) where it arms one (none on Timers), on every pipelined
// Redis call.
// Until then Err reads the parent, the cancel and the clock. It is meant
// to be embedded in a larger context type (which may answer some Value
// keys itself), so that one allocation makes the whole context; Init it
// before use, and do not copy it after.
type CauseContext struct {
	parent context.Context

	mu          sync.Mutex
	deadline    time.Time       // zero: none of its own
	inner       context.Context // the real context, once made
	innerCancel context.CancelCauseFunc
	canceled    bool // Cancel was called before inner was made
	cause       error
}

// Init makes c a child of parent, without a deadline and not canceled.
func (c *CauseContext) Init(parent context.Context) { c.parent = parent }

// SetDeadline gives c the deadline d. It takes effect only if the real
// contexts have not been made yet (Done was not called and c is not done),
// which holds when it is called before c is handed to anyone who waits.
func (c *CauseContext) SetDeadline(d time.Time) {
	c.mu.Lock()
	if c.inner == nil && !c.canceled {
		c.deadline = d
	}
	c.mu.Unlock()
}

// Deadline returns the deadline given to SetDeadline, or the parent's when
// it is earlier or c has none.
func (c *CauseContext) Deadline() (time.Time, bool) {
	c.mu.Lock()
	d := c.deadline
	c.mu.Unlock()
	pd, ok := c.parent.Deadline()
	if d.IsZero() || ok && pd.Before(d) {
		return pd, ok
	}
	return d, true
}

// Done makes the real contexts on its first call and returns their
// channel.
func (c *CauseContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.makeInner()
	return c.inner.Done()
}

// Err returns nil until c is done, then context.Canceled after Cancel, the
// parent's error, or context.DeadlineExceeded once the deadline has
// passed, whichever came first as far as anyone could see: the first
// call that finds c done makes the real contexts, which keep that answer.
func (c *CauseContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errLocked()
}

func (c *CauseContext) errLocked() error {
	if c.deadline.IsZero() {
		return c.errAtLocked(time.Time{})
	}
	return c.errAtLocked(time.Now())
}

// ErrAt is Err for a caller that has just read the clock: it compares the
// deadline with now instead of reading the clock again (time.Now costs
// hundreds of nanoseconds on some virtual machines).
func (c *CauseContext) ErrAt(now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errAtLocked(now)
}

func (c *CauseContext) errAtLocked(now time.Time) error {
	switch {
	case c.inner != nil:
		return c.inner.Err()
	case c.canceled:
		return context.Canceled // nothing changes it now
	case c.parent.Err() == nil && (c.deadline.IsZero() || now.Before(c.deadline)):
		return nil
	}
	c.makeInner()
	return c.inner.Err()
}

// Value looks key up in the real contexts once they exist (so that
// context.Cause and children find them), else in the parent. A context
// that is done makes them first, so that context.Cause, which finds the
// cause through Value, agrees with Err.
func (c *CauseContext) Value(key any) any {
	c.mu.Lock()
	if c.errLocked() != nil {
		c.makeInner()
	}
	inner := c.inner
	c.mu.Unlock()
	if inner != nil {
		return inner.Value(key)
	}
	return c.parent.Value(key)
}

// Cancel cancels c with cause (context.Canceled when nil), as a
// context.CancelCauseFunc does; it releases the timer, if one was armed.
// Only the first call counts, and only if nothing found c done before
// (Err, Done or Value): a deadline that passed unseen before Cancel is
// not looked for, since no one can have seen it.
func (c *CauseContext) Cancel(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.canceled && c.inner == nil:
		// Canceled already.
	case c.inner == nil && c.parent.Err() == nil:
		c.canceled, c.cause = true, cause
	default:
		c.innerCancel(cause) // does nothing when done already
	}
}

// makeInner makes the real contexts, unless they exist. A context canceled
// before gets contexts canceled with its cause, detached from the parent
// so that a later cancel of the parent does not change the answer.
func (c *CauseContext) makeInner() {
	if c.inner != nil {
		return
	}
	if c.canceled {
		c.inner, c.innerCancel = context.WithCancelCause(context.WithoutCancel(c.parent))
		c.innerCancel(c.cause)
		return
	}
	c.inner, c.innerCancel = context.WithCancelCause(c.parent)
	if !c.deadline.IsZero() {
		var stop context.CancelFunc
		c.inner, stop = context.WithDeadline(c.inner, c.deadline)
		// Canceling the deadline context's parent releases its timer too.
		cancel := c.innerCancel
		c.innerCancel = func(cause error) { cancel(cause); stop() }
	}
}

// String names the context for debugging, as the standard ones do.
func (c *CauseContext) String() string { return "lazydeadline.CauseContext" }
