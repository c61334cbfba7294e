package rdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/lazydeadline"
)

// DefaultTimeout is Options.Timeout's default: how long one call to
// Redis may take before it fails with base.ErrUnavailable.
const DefaultTimeout = 5 * time.Second

// Every command the Broker sends goes through do or doMulti, which give it
// the call deadline and turn the errors that say Redis could not be
// reached or did not answer into base.ErrUnavailable. Without a deadline,
// rueidis holds a call on a Redis that stopped answering (SIGSTOP, a cut
// link) until the connection is found dead, and retries read-only
// commands, and those a loading Redis refuses, for as long as the context
// lasts: an API call with no deadline of its own waited for the end of the
// outage.

//
// One wait of rueidis ignores the caller's deadline: a call that finds a
// connection being opened waits for that attempt, which only the dial
// timeout and the deadline of the call that began it bound, and a stopped
// Redis completes the TCP handshake (the kernel does) and never answers
// HELLO. A call with a deadline shorter than the dial timeout, or one the
// Client tries again late in its deadline, ended up to a dial timeout
// after its deadline (measured: 1.3 s for a 1 s deadline with the 1 s
// dial timeout, 4.6 s with rueidis's 5 s). So while Redis is in trouble (a
// call met unavailability less than troubleWindow ago) every call is made
// from a goroutine of its own and abandoned at its deadline (see guarded):
// every call ends in time, and the abandoned one ends with the connection
// attempt, which the dial timeout bounds. In good times calls are made
// directly, with no goroutine per call.

// troubleWindow is how long after a call met unavailability the Broker
// guards its calls.
const troubleWindow = 30 * time.Second

// do sends one command within the call deadline (see bound). It is doOn
// for one command without its slices: the path of every single Enqueue.
func (b *Broker) do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	ctx, lc := b.bound(ctx, 0)
	defer lc.Cancel()
	if !b.troubled() {
		return b.sendOne(ctx, cmd)
	}
	return guarded(ctx, func() rueidis.RedisResult { return b.sendOne(ctx, cmd) }, func(err error) rueidis.RedisResult {
		return unavailableResult(rueidis.NewErrorResult(err))
	})
}

// sendOne is sendOn for one command through b.c.
func (b *Broker) sendOne(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	r := unavailableResult(b.c.Do(ctx, cmd))
	b.noteResult(r)
	return r
}

// doMulti sends cmds in one round trip within the call deadline plus
// extra (the time a WAIT in cmds may block on Redis).
func (b *Broker) doMulti(ctx context.Context, extra time.Duration, cmds ...rueidis.Completed) []rueidis.RedisResult {
	return b.doOn(ctx, b.c, extra, cmds...)
}

// nodeDoMulti is doMulti on one node of the deployment.
func (b *Broker) nodeDoMulti(ctx context.Context, n rueidis.Client, cmds ...rueidis.Completed) []rueidis.RedisResult {
	return b.doOn(ctx, n, 0, cmds...)
}

// doOn sends cmds through c within the call deadline plus extra, guarded
// while Redis is in trouble, and marks the errors that say Redis is
// unavailable.
func (b *Broker) doOn(ctx context.Context, c rueidis.Client, extra time.Duration, cmds ...rueidis.Completed) []rueidis.RedisResult {
	ctx, lc := b.bound(ctx, extra)
	defer lc.Cancel()
	if !b.troubled() {
		return b.sendOn(ctx, c, cmds) // no closure: it would be allocated on every call
	}
	return guarded(ctx, func() []rueidis.RedisResult { return b.sendOn(ctx, c, cmds) }, func(err error) []rueidis.RedisResult {
		rs := make([]rueidis.RedisResult, len(cmds))
		for i := range rs {
			rs[i] = unavailableResult(rueidis.NewErrorResult(err))
		}
		return rs
	})
}

// sendOn sends cmds through c and marks the errors that say Redis is
// unavailable, noting when one did.
func (b *Broker) sendOn(ctx context.Context, c rueidis.Client, cmds []rueidis.Completed) []rueidis.RedisResult {
	var rs []rueidis.RedisResult
	if len(cmds) == 1 {
		rs = []rueidis.RedisResult{c.Do(ctx, cmds[0])}
	} else {
		rs = c.DoMulti(ctx, cmds...)
	}
	rs = unavailableResults(rs)
	b.note(rs)
	return rs
}

// guarded runs call in a goroutine of its own and returns its result, or
// failed(ctx.Err()) when ctx ends first. The call is then abandoned: its
// context being done, it ends as soon as rueidis looks at it again, at the
// latest when the connection attempt it waits for ends.
func guarded[T any](ctx context.Context, call func() T, failed func(error) T) T {
	if ctx.Done() == nil {
		return call() // no deadline to keep
	}
	ch := make(chan T, 1)
	go func() { ch <- call() }()
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return failed(ctx.Err())
	}
}

// note records the time of a result in rs that says Redis is
// unavailable.
func (b *Broker) note(rs []rueidis.RedisResult) {
	for _, r := range rs {
		if b.noteResult(r) {
			return
		}
	}
}

// noteResult is note for one result; it tells whether r said Redis is
// unavailable.
func (b *Broker) noteResult(r rueidis.RedisResult) bool {
	if err := r.Error(); err != nil && errors.Is(err, base.ErrUnavailable) {
		b.trouble.Store(time.Now().UnixNano())
		return true
	}
	return false
}

// troubled tells whether a call met unavailability less than
// troubleWindow ago.
func (b *Broker) troubled() bool {
	t := b.trouble.Load()
	return t != 0 && time.Since(time.Unix(0, t)) < troubleWindow
}

// bound returns ctx with the call deadline, Options.Timeout plus extra
// from now, unless ctx ends sooner (or the Broker has no timeout).
// The caller cancels the second result (nil when ctx is returned as it
// is, which Cancel allows).
func (b *Broker) bound(ctx context.Context, extra time.Duration) (context.Context, *lazydeadline.Context) {
	if b.timeout <= 0 {
		return ctx, nil
	}
	d := b.timeout + extra
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return ctx, nil
	}
	// A synchronous rueidis call reads only Deadline and Err and sets the
	// deadline on the connection: no timer per call (internal/lazydeadline).
	lc := lazydeadline.New(ctx, d)
	return lc, lc
}

func unavailableResults(rs []rueidis.RedisResult) []rueidis.RedisResult {
	for i := range rs {
		rs[i] = unavailableResult(rs[i])
	}
	return rs
}

// unavailableResult replaces the error of r by one that also wraps
// base.ErrUnavailable when it says that Redis could not be reached, did
// not answer in time or cannot serve yet.
func unavailableResult(r rueidis.RedisResult) rueidis.RedisResult {
	err := r.Error()
	if err == nil || !isUnavailable(err) {
		return r
	}
	return rueidis.NewErrorResult(fmt.Errorf("%w: %w", base.ErrUnavailable, err))
}

// isUnavailable tells whether err says that Redis could not be reached
// (a refused or broken connection, no node for a slot), did not answer
// before the deadline, or cannot serve for now: loading its data after a
// restart (LOADING), a replica cut off from its primary (MASTERDOWN), a
// cluster or a failover in progress (CLUSTERDOWN, TRYAGAIN, READONLY from
// a primary just demoted), a script holding it (BUSY). A refusal of the
// command itself (a wrong type, NOSCRIPT, OOM) is not, nor is a closed
// client or a caller's cancellation.
func isUnavailable(err error) bool {
	if errors.Is(err, base.ErrUnavailable) {
		return false // already marked
	}
	if re, ok := rueidis.IsRedisErr(err); ok {
		if re.IsNil() {
			return false
		}
		word, _, _ := strings.Cut(re.Error(), " ")
		switch word {
		case "LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "BUSY":
			return true
		}
		return false
	}
	if errors.Is(err, rueidis.ErrClosing) || errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, rueidis.ErrNoSlot) || errors.Is(err, rueidis.ErrNoAddr)
}
