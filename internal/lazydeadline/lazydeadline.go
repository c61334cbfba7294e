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
// same deadline, and arms a timer only the first time Done is called.
//
// When Done is called (a pipelined Redis call, the embedded store's wait
// for its commit), the context arms one timer context
// (context.WithDeadline) under the nearest ancestor that is not one of
// these contexts; the lazy contexts between (the Client's RetryFor
// deadline under the broker's call deadline) stay unarmed and cancel it
// when they are canceled: one timer context per wait, not one per level
// (BenchmarkDone).
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
	c := &Context{parent: parent, root: parent, deadline: time.Now().Add(d)}
	if up, ok := parent.(*Context); ok {
		c.up, c.root = up, up.root
		if up.deadline.Before(c.deadline) {
			c.deadline = up.deadline
		}
	}
	return c
}

// Context is the context New and WithTimeout return.
type Context struct {
	parent   context.Context
	up       *Context        // parent, when it is one of these
	root     context.Context // the nearest ancestor that is not one of these
	deadline time.Time       // the earlier of its own and up's

	mu          sync.Mutex
	inner       context.Context // context.WithDeadline(root, deadline), once Done was called
	innerCancel context.CancelFunc
	kids        []*Context // armed descendants to cancel with it
	canceled    bool       // Cancel was called
}

// Deadline returns the deadline given to New (or WithTimeout), or an
// ancestor's when it is earlier.
func (c *Context) Deadline() (time.Time, bool) {
	if pd, ok := c.root.Deadline(); ok && pd.Before(c.deadline) {
		return pd, true
	}
	return c.deadline, true
}

// Done arms the timer context on its first call and returns its channel.
func (c *Context) Done() <-chan struct{} {
	c.mu.Lock()
	if c.inner != nil {
		defer c.mu.Unlock()
		return c.inner.Done()
	}
	c.inner, c.innerCancel = context.WithDeadline(c.root, c.deadline)
	if c.canceled {
		c.innerCancel()
	}
	done, cancel := c.inner.Done(), c.innerCancel
	c.mu.Unlock()
	// The lazy ancestors cancel it with them (locked one at a time, never
	// with c.mu held: Cancel locks an ancestor, then its kids).
	for a := c.up; a != nil; a = a.up {
		a.mu.Lock()
		if a.canceled {
			a.mu.Unlock()
			cancel()
			break
		}
		a.kids = append(a.kids, c)
		a.mu.Unlock()
	}
	return done
}

// Err returns the timer context's error once it exists; until then the
// root's error, context.Canceled after Cancel (its own or a lazy
// ancestor's), or context.DeadlineExceeded once the deadline has passed.
func (c *Context) Err() error {
	c.mu.Lock()
	inner, canceled := c.inner, c.canceled
	c.mu.Unlock()
	if inner != nil {
		return inner.Err()
	}
	if err := c.root.Err(); err != nil {
		return err
	}
	if canceled {
		return context.Canceled
	}
	for a := c.up; a != nil; a = a.up {
		a.mu.Lock()
		canceled := a.canceled
		a.mu.Unlock()
		if canceled {
			return context.Canceled
		}
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
// (The contexts between it and its root hold no values: the timer
// context, a child of the root, finds the same ones.)
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

// Cancel cancels the context and its armed descendants, and releases its
// timer, if one was armed (the CancelFunc of WithTimeout). It may be
// called more than once, and on a nil *Context, where it does nothing (so
// that a caller that bounds a context only sometimes can always defer
// Cancel).
func (c *Context) Cancel() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.canceled = true
	kids, cancel := c.kids, c.innerCancel
	c.kids = nil
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	for _, k := range kids {
		k.mu.Lock()
		cancel := k.innerCancel // armed: it registered after arming
		k.mu.Unlock()
		cancel()
	}
}
