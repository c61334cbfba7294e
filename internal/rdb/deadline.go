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

// do sends one command within the call deadline (see bound).
func (b *Broker) do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	ctx, cancel := b.bound(ctx, 0)
	defer cancel()
	return unavailableResult(b.c.Do(ctx, cmd))
}

// doMulti sends cmds in one round trip within the call deadline plus
// extra (the time a WAIT in cmds may block on Redis).
func (b *Broker) doMulti(ctx context.Context, extra time.Duration, cmds ...rueidis.Completed) []rueidis.RedisResult {
	ctx, cancel := b.bound(ctx, extra)
	defer cancel()
	return unavailableResults(b.c.DoMulti(ctx, cmds...))
}

// nodeDoMulti is doMulti on one node of the deployment.
func (b *Broker) nodeDoMulti(ctx context.Context, n rueidis.Client, cmds ...rueidis.Completed) []rueidis.RedisResult {
	ctx, cancel := b.bound(ctx, 0)
	defer cancel()
	return unavailableResults(n.DoMulti(ctx, cmds...))
}

// bound returns ctx with the call deadline, Options.Timeout plus extra
// from now, unless ctx ends sooner (or the Broker has no timeout).
func (b *Broker) bound(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	if b.timeout <= 0 {
		return ctx, func() {}
	}
	d := b.timeout + extra
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
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
