// Package lazydeadline gives a context a deadline without arming a timer
// until something waits on the context's Done channel.
//
// context.WithTimeout allocates a timer context and starts a runtime timer
// on every call, and stops it again when the call ends: about 3 µs of CPU
// on this project's machine, paid twice per Enqueue on Redis (the Client's
// RetryFor deadline and the broker's call deadline) by calls that mostly
// end long before their deadline. A Redis call over rueidis that is made
// synchronously (the usual case for one caller) reads only the context's
// Deadline and Err and enforces the deadline on the connection itself, so
// the timer is never needed there. The context returned here reports the
// same deadline, and creates the real timer context (context.WithDeadline)
// only the first time Done is called.
package lazydeadline

import (
	"context"
	"sync"
	"time"
)

// WithTimeout is context.WithTimeout(parent, d), except that no timer is
// armed until the returned context's Done method is first called. The
// returned context follows the context.Context contract: Err reports
// context.DeadlineExceeded once the deadline has passed, or
// context.Canceled after cancel, or the parent's error; Done is closed in
// the same cases (once it has been asked for). Calling cancel releases the
// timer, if one was armed.
func WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c := New(parent, d)
	return c, c.Cancel
}

// New is WithTimeout for the hot paths: the context itself is the one
// allocation (WithTimeout's CancelFunc, a method value, is a second one),
// and its Cancel method is the CancelFunc.
func New(parent context.Context, d time.Duration) *Context {
	return &Context{parent: parent, deadline: time.Now().Add(d)}
}

// Context is the context New and WithTimeout return.
type Context struct {
	parent   context.Context
	deadline time.Time

	mu          sync.Mutex
	inner       context.Context // the real timer context, once Done was called
	innerCancel context.CancelFunc
	canceled    bool // Cancel was called
}

// Deadline returns the deadline given to WithTimeout, or the parent's when
// it is earlier.
func (c *Context) Deadline() (time.Time, bool) {
	if pd, ok := c.parent.Deadline(); ok && pd.Before(c.deadline) {
		return pd, true
	}
	return c.deadline, true
}

// Done arms the timer context on its first call and returns its channel.
func (c *Context) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner == nil {
		c.inner, c.innerCancel = context.WithDeadline(c.parent, c.deadline)
		if c.canceled {
			c.innerCancel()
		}
	}
	return c.inner.Done()
}

// Err returns the timer context's error once it exists; until then the
// parent's error, context.Canceled after cancel, or
// context.DeadlineExceeded once the deadline has passed.
func (c *Context) Err() error {
	c.mu.Lock()
	inner, canceled := c.inner, c.canceled
	c.mu.Unlock()
	if inner != nil {
		return inner.Err()
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if canceled {
		return context.Canceled
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value looks key up in the timer context once it exists (so that
// context.Cause and children find it), else in the parent. A context that
// is done (Err is not nil) arms the timer context first, so that
// context.Cause, which finds the cause through Value, agrees with Err.
func (c *Context) Value(key any) any {
	c.mu.Lock()
	inner := c.inner
	c.mu.Unlock()
	if inner == nil && c.Err() != nil {
		c.Done()
		c.mu.Lock()
		inner = c.inner
		c.mu.Unlock()
	}
	if inner != nil {
		return inner.Value(key)
	}
	return c.parent.Value(key)
}

// Cancel cancels the context and releases its timer, if one was armed
// (the CancelFunc of WithTimeout). It may be called more than once, and
// on a nil *Context, where it does nothing (so that a caller that bounds
// a context only sometimes can always defer Cancel).
func (c *Context) Cancel() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.canceled = true
	if c.innerCancel != nil {
		c.innerCancel()
	}
}
