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
// for its commit), the context arms one timer of its own and watches the
// nearest ancestor that is not one of these contexts; the lazy contexts
// between (the Client's RetryFor deadline under the broker's call
// deadline) stay unarmed and cancel it when they are canceled. That costs
// one timer and a channel instead of a timer context per level
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

	mu       sync.Mutex
	done     chan struct{}   // made by Done
	err      error           // why it is done, once Done made it so
	cause    error           // context.Cause of root, when root ended it
	causeCtx context.Context // what Value answers from once done
	timer    *time.Timer     // the deadline, once armed
	stopRoot func() bool     // stops watching root, once armed
	kids     []*Context      // armed descendants to cancel with it
	canceled bool            // Cancel was called
}

// Deadline returns the deadline given to New (or WithTimeout), or an
// ancestor's when it is earlier.
func (c *Context) Deadline() (time.Time, bool) {
	if pd, ok := c.root.Deadline(); ok && pd.Before(c.deadline) {
		return pd, true
	}
	return c.deadline, true
}

// Done arms the timer on its first call and returns the channel that is
// closed when the context ends.
func (c *Context) Done() <-chan struct{} {
	c.mu.Lock()
	if c.done != nil {
		defer c.mu.Unlock()
		return c.done
	}
	c.done = make(chan struct{})
	done := c.done
	if err, cause := c.endedWith(c.canceled); err != nil {
		c.finishLocked(err, cause)
		c.mu.Unlock()
		return done
	}
	c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.finish(context.DeadlineExceeded, nil) })
	if c.root.Done() != nil {
		c.stopRoot = context.AfterFunc(c.root, func() { c.finish(c.root.Err(), context.Cause(c.root)) })
	}
	c.mu.Unlock()
	// The lazy ancestors cancel it with them (locked one at a time, never
	// with c.mu held: Cancel locks an ancestor, then its kids).
	for a := c.up; a != nil; a = a.up {
		a.mu.Lock()
		if a.canceled {
			a.mu.Unlock()
			c.finish(context.Canceled, nil)
			break
		}
		a.kids = append(a.kids, c)
		a.mu.Unlock()
	}
	return done
}

// ended tells why the context is over without its timer: the root's error
// (and cause), context.Canceled when it or a lazy ancestor was canceled,
// context.DeadlineExceeded past the deadline; nil, nil while it lasts.
// The caller does not hold c.mu.
func (c *Context) ended() (err, cause error) {
	c.mu.Lock()
	canceled := c.canceled
	c.mu.Unlock()
	return c.endedWith(canceled)
}

// endedWith is ended with c.canceled read by the caller (who may hold
// c.mu).
func (c *Context) endedWith(canceled bool) (err, cause error) {
	if err := c.root.Err(); err != nil {
		return err, context.Cause(c.root)
	}
	if canceled {
		return context.Canceled, nil
	}
	for a := c.up; a != nil; a = a.up {
		a.mu.Lock()
		canceled := a.canceled
		a.mu.Unlock()
		if canceled {
			return context.Canceled, nil
		}
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded, nil
	}
	return nil, nil
}

// finish ends an armed context with err (cause: nil means err).
func (c *Context) finish(err, cause error) {
	c.mu.Lock()
	c.finishLocked(err, cause)
	c.mu.Unlock()
}

// finishLocked is finish with c.mu held; a context that ended already is
// left as it is.
func (c *Context) finishLocked(err, cause error) {
	if c.err != nil {
		return
	}
	c.err, c.cause = err, cause
	if c.done != nil {
		close(c.done)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.stopRoot != nil {
		c.stopRoot()
	}
}

// Err returns nil while the context lasts; then the root's error,
// context.Canceled after Cancel (its own or a lazy ancestor's), or
// context.DeadlineExceeded once the deadline has passed.
func (c *Context) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	err, _ = c.ended()
	return err
}

// Value looks key up in the parent while the context lasts. Once it is
// done it answers from a context that holds the same values and is
// canceled with the same cause, so that context.Cause, which finds a
// cause through Value, agrees with Err.
func (c *Context) Value(key any) any {
	c.mu.Lock()
	err, cause := c.err, c.cause
	c.mu.Unlock()
	if err == nil {
		if err, cause = c.ended(); err == nil {
			return c.parent.Value(key)
		}
	}
	c.mu.Lock()
	if c.causeCtx == nil {
		cc, cancel := context.WithCancelCause(context.WithoutCancel(c.parent))
		if cause == nil {
			cause = err
		}
		cancel(cause)
		c.causeCtx = cc
	}
	cc := c.causeCtx
	c.mu.Unlock()
	return cc.Value(key)
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
	kids := c.kids
	c.kids = nil
	if c.done != nil {
		c.finishLocked(context.Canceled, nil)
	}
	c.mu.Unlock()
	for _, k := range kids {
		k.finish(context.Canceled, nil)
	}
}
