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
//
// Under a root that cannot be canceled (its Done is nil: context.Background,
// context.WithoutCancel), a context made with NewOn arms no runtime timer
// of its own either: its Timers close the Done channels of all the
// contexts whose deadlines fall in the same tick with one timer, at most
// a tick late (htq serve's enqueues, whose storage call waits on Done on
// both backends).
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
		c.up, c.root, c.timers = up, up.root, up.timers
		if up.deadline.Before(c.deadline) {
			c.deadline = up.deadline
		}
	}
	return c
}

// NewOn is New with the Timers that arm its deadline, and those of the
// lazy contexts made under it, when Done is asked for under a root that
// cannot be canceled (see Timers). A nil t is New.
func NewOn(t *Timers, parent context.Context, d time.Duration) *Context {
	c := New(parent, d)
	if t != nil {
		c.timers = t
	}
	return c
}

// Context is the context New and WithTimeout return.
type Context struct {
	parent   context.Context
	up       *Context        // parent, when it is one of these
	root     context.Context // the nearest ancestor that is not one of these
	deadline time.Time       // the earlier of its own and up's

	timers *Timers // from NewOn or a lazy ancestor; nil: none

	mu          sync.Mutex
	inner       context.Context // context.WithDeadline(root, deadline), once Done was called
	innerCancel context.CancelFunc
	// Armed on timers instead (the root cannot be canceled): done is the
	// Done channel, closed with err (context.DeadlineExceeded by the
	// timers, context.Canceled by Cancel).
	done     chan struct{}
	err      error
	kids     []*Context // armed descendants to cancel with it
	canceled bool       // Cancel was called

	slot *slot // the timers' slot holding it, guarded by timers.mu
	idx  int   // its index in slot.ctxs
}

// Deadline returns the deadline given to New (or WithTimeout), or an
// ancestor's when it is earlier.
func (c *Context) Deadline() (time.Time, bool) {
	if pd, ok := c.root.Deadline(); ok && pd.Before(c.deadline) {
		return pd, true
	}
	return c.deadline, true
}

// Done arms the timer context (or, with Timers under a root that cannot
// be canceled, its place in the timers) on its first call and returns its
// channel.
func (c *Context) Done() <-chan struct{} {
	c.mu.Lock()
	switch {
	case c.inner != nil:
		defer c.mu.Unlock()
		return c.inner.Done()
	case c.done != nil:
		defer c.mu.Unlock()
		return c.done
	case c.timers != nil && c.root.Done() == nil:
		c.done = make(chan struct{})
		switch {
		case c.canceled:
			c.err = context.Canceled
		case !time.Now().Before(c.deadline):
			c.err = context.DeadlineExceeded
		}
		if c.err != nil {
			close(c.done)
		} else {
			c.timers.add(c) // locks timers.mu under c.mu: never the other way
		}
	default:
		c.inner, c.innerCancel = context.WithDeadline(c.root, c.deadline)
		if c.canceled {
			c.innerCancel()
		}
	}
	var done <-chan struct{} = c.done
	if c.inner != nil {
		done = c.inner.Done()
	}
	c.mu.Unlock()
	// The lazy ancestors cancel it with them (locked one at a time, never
	// with c.mu held: Cancel locks an ancestor, then its kids).
	for a := c.up; a != nil; a = a.up {
		a.mu.Lock()
		if a.canceled {
			a.mu.Unlock()
			c.cancelArmed()
			break
		}
		a.kids = append(a.kids, c)
		a.mu.Unlock()
	}
	return done
}

// cancelArmed cancels c, whose Done was asked for.
func (c *Context) cancelArmed() {
	c.mu.Lock()
	cancel := c.innerCancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		return
	}
	c.closeDone(context.Canceled)
}

// closeDone closes done (armed on timers) with err, unless it is closed
// already, and takes c out of its timers.
func (c *Context) closeDone(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
	c.mu.Unlock()
	if err == context.Canceled {
		c.timers.remove(c)
	}
}

// Err returns the timer context's error once it exists; until then the
// root's error, context.Canceled after Cancel (its own or a lazy
// ancestor's), or context.DeadlineExceeded once the deadline has passed.
func (c *Context) Err() error {
	c.mu.Lock()
	inner, canceled, done, err := c.inner, c.canceled, c.done, c.err
	c.mu.Unlock()
	if inner != nil {
		return inner.Err()
	}
	if done != nil {
		return err // nil until done is closed, as the contract wants
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
// context, a child of the root, finds the same ones.) One armed on Timers
// looks in the parent: its root cannot be canceled, so context.Cause
// finds no cancel context there and answers Err.
func (c *Context) Value(key any) any {
	c.mu.Lock()
	inner, onTimers := c.inner, c.done != nil
	c.mu.Unlock()
	if onTimers {
		return c.parent.Value(key)
	}
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
	kids, cancel, onTimers := c.kids, c.innerCancel, c.done != nil
	c.kids = nil
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if onTimers {
		c.closeDone(context.Canceled)
	}
	for _, k := range kids {
		k.cancelArmed() // armed: it registered after arming
	}
}

// Timers close the Done channels of the contexts armed on them (NewOn)
// with one runtime timer per tick of deadlines: a context's channel closes
// at the first tick at or after its deadline, so at most a tick late. A
// context canceled before leaves its tick at once. Arming one costs a
// channel, a map lookup and an append under a mutex, where a timer
// context costs a runtime timer's insertion and removal and three more
// allocations (BenchmarkDone). A Timers is safe for concurrent use and
// needs no closing: a tick's timer ends when it fires.
type Timers struct {
	tick  int64 // ns
	mu    sync.Mutex
	slots map[int64]*slot // by tick number (Unix time / tick)
}

// slot holds the contexts armed for one tick.
type slot struct {
	ctxs  []*Context
	fired bool // its timer took ctxs: no more changes
}

// NewTimers returns Timers with the given tick (at least a millisecond).
func NewTimers(tick time.Duration) *Timers {
	return &Timers{tick: int64(max(tick, time.Millisecond)), slots: make(map[int64]*slot)}
}

// add arms c (c.mu held): into the slot of the first tick at or after
// its deadline, whose timer is started by the first context of the tick.
func (t *Timers) add(c *Context) {
	dl := c.deadline.UnixNano()
	n := (dl + t.tick - 1) / t.tick
	t.mu.Lock()
	s := t.slots[n]
	if s == nil {
		s = &slot{}
		t.slots[n] = s
		// time.Until reads the monotonic clock; the rest rounds up.
		time.AfterFunc(time.Until(c.deadline)+time.Duration(n*t.tick-dl), func() { t.fire(n) })
	}
	c.slot, c.idx = s, len(s.ctxs)
	s.ctxs = append(s.ctxs, c)
	t.mu.Unlock()
}

// remove takes c out of its slot, if its timer has not fired.
func (t *Timers) remove(c *Context) {
	t.mu.Lock()
	if s := c.slot; s != nil && !s.fired {
		last := len(s.ctxs) - 1
		moved := s.ctxs[last]
		s.ctxs[c.idx], moved.idx = moved, c.idx
		s.ctxs[last] = nil
		s.ctxs = s.ctxs[:last]
	}
	c.slot = nil
	t.mu.Unlock()
}

// fire closes the Done channels of tick n's contexts.
func (t *Timers) fire(n int64) {
	t.mu.Lock()
	s := t.slots[n]
	delete(t.slots, n)
	s.fired = true
	ctxs := s.ctxs
	t.mu.Unlock()
	for _, c := range ctxs {
		c.closeDone(context.DeadlineExceeded)
	}
}
