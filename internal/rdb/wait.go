package rdb

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
)

// DefaultWaitTimeout is WaitOptions.Timeout's default.
const DefaultWaitTimeout = time.Second

// WaitOptions makes the writes that callers rely on wait, before they
// return, until more copies of them exist than the primary's memory:
// replicas that received them (WAIT), the primary's append-only file
// fsynced (WAITAOF, Redis 7.2 and later). The zero value waits for
// nothing: Redis replicates asynchronously and a Sentinel or Cluster
// failover loses the writes the promoted replica had not received,
// acknowledged ones included.
//
// The writes that wait, because their caller takes success as "this is
// kept":
//   - Enqueue and EnqueueBatch: a task lost in a failover is never run,
//     and nothing would ever tell.
//   - Complete, Retry and Archive, a run's outcome: lost, the task comes
//     back active on the new primary, is recovered when its lease runs out
//     and runs again (a completed task twice; an archived one, that was
//     not to be retried, once more), and the retry count and error are
//     lost.
//   - DeleteTask, RunTask and ArchiveTask (an operator's decision on one
//     task), and PutMeta, PutMetaIfAbsent and DeleteMeta (htq serve's
//     queue definitions, schedules and generated secrets): rare, so the
//     wait costs nothing that shows.
//
// The writes that do not wait, because what a failover undoes is redone
// from the state it leaves, and waiting would slow every fetch or
// heartbeat: Fetch (the task is pending again and runs later), ExtendLeases
// (renewed at the next heartbeat), Requeue (the lease runs out and the task
// is recovered), WriteResult (the Complete that follows it waits, and a
// replica applies one ordered stream, so it covers the result too),
// Forward, the Recoverer's and Janitor's sweeps, aggregation, presence
// records and the bulk and queue-level admin commands.
//
// A wait that is not met within Timeout fails the call with an error
// wrapping base.ErrReplicationTimeout, never a silent success; the write
// itself was made on the primary and stays there, and a caller that
// retries may write it twice. WAIT makes no write "strongly consistent"
// (a replica that received a write may still be the one that is not
// promoted); it narrows the loss of a failover to writes that failed with
// that error. docs/operations.md says what to configure and what each
// setting costs.
type WaitOptions struct {
	// Replicas is how many replicas must have received each write
	// (WAIT numreplicas); 0 waits for none.
	Replicas int
	// AOFLocal makes each write wait until the primary has fsynced it to
	// its append-only file (WAITAOF 1 0): needs Redis 7.2 or later with
	// appendonly yes; Open refuses an older server.
	AOFLocal bool
	// Timeout bounds each wait; 0 means DefaultWaitTimeout. Keep it well
	// under the callers' context deadlines, or those fire first and the
	// call fails with the context's error instead.
	Timeout time.Duration
}

// Enabled tells whether w waits for anything.
func (w WaitOptions) Enabled() bool { return w.Replicas > 0 || w.AOFLocal }

// Validate reports a bad field, naming its URL parameter; the error wraps
// base.ErrInvalidArgument.
func (w WaitOptions) Validate() error {
	if w.Replicas < 0 {
		return fmt.Errorf("rdb: wait_replicas %d is negative: %w", w.Replicas, base.ErrInvalidArgument)
	}
	if w.Timeout < 0 {
		return fmt.Errorf("rdb: wait_timeout %v is negative: %w", w.Timeout, base.ErrInvalidArgument)
	}
	if w.Timeout > 0 && w.Timeout < time.Millisecond {
		return fmt.Errorf("rdb: wait_timeout %v is under Redis's resolution of 1ms: %w", w.Timeout, base.ErrInvalidArgument)
	}
	return nil
}

// waiter appends the wait commands to acknowledged writes and reads their
// replies. A Broker without WaitOptions has none.
type waiter struct {
	replicas  int64
	aofLocal  bool
	timeout   time.Duration
	timeoutMS int64
	cluster   bool // group writes by slot (one node each)
}

func newWaiter(w WaitOptions, cluster bool) *waiter {
	if !w.Enabled() {
		return nil
	}
	t := w.Timeout
	if t <= 0 { // WAIT 0 would block for ever
		t = DefaultWaitTimeout
	}
	return &waiter{replicas: int64(w.Replicas), aofLocal: w.AOFLocal, timeout: t, timeoutMS: ms(t), cluster: cluster}
}

// cmds returns the wait commands, built anew for each call (rueidis
// recycles a command once sent).
func (w *waiter) cmds(bd rueidis.Builder) []rueidis.Completed {
	out := make([]rueidis.Completed, 0, 2)
	if w.replicas > 0 {
		out = append(out, bd.Wait().Numreplicas(w.replicas).Timeout(w.timeoutMS).Build())
	}
	if w.aofLocal {
		out = append(out, bd.Waitaof().Numlocal(1).Numreplicas(0).Timeout(w.timeoutMS).Build())
	}
	return out
}

// check reads the replies of cmds; nil means every wait was met.
func (w *waiter) check(rs []rueidis.RedisResult) error {
	i := 0
	if w.replicas > 0 {
		n, err := rs[i].AsInt64()
		if err != nil {
			return fmt.Errorf("written on the primary, but WAIT failed: %w: %w", base.ErrReplicationTimeout, err)
		}
		if n < w.replicas {
			return fmt.Errorf("written on the primary, but %d of the %d replicas asked for (wait_replicas) confirmed it within %v: %w",
				n, w.replicas, w.timeout, base.ErrReplicationTimeout)
		}
		i++
	}
	if w.aofLocal {
		v, err := rs[i].AsIntSlice()
		if err == nil && len(v) != 2 {
			err = fmt.Errorf("unexpected reply %v", v)
		}
		if err != nil {
			return fmt.Errorf("written on the primary, but WAITAOF failed: %w: %w", base.ErrReplicationTimeout, err)
		}
		if v[0] < 1 {
			return fmt.Errorf("written on the primary, but not fsynced to its append-only file (wait_aof_local) within %v: %w",
				w.timeout, base.ErrReplicationTimeout)
		}
	}
	return nil
}

// doAcked sends cmds, writes whose success the caller relies on, each
// group of them that goes to one node followed by the wait commands on
// the same connection. WAIT only covers the writes made earlier on its own
// connection, and rueidis sends a DoMulti that holds a blocking command
// (WAIT and WAITAOF are) whole, in order, on one dedicated connection,
// where shared pipelines would interleave other callers' commands on
// other connections. A Cluster gets one group per slot (a DoMulti mixing
// slots with a keyless command would be refused), sent concurrently.
//
// It returns the commands' results and, per command, nil or the error of
// the wait that covers it (wrapping base.ErrReplicationTimeout).
func (b *Broker) doAcked(ctx context.Context, cmds []rueidis.Completed) ([]rueidis.RedisResult, []error) {
	w := b.wait
	errs := make([]error, len(cmds))
	if !w.cluster {
		all := append(cmds[:len(cmds):len(cmds)], w.cmds(b.c.B())...)
		rs := b.doMulti(ctx, w.timeout, all...)
		if err := w.check(rs[len(cmds):]); err != nil {
			for i := range errs {
				errs[i] = err
			}
		}
		return rs[:len(cmds)], errs
	}
	var groups [][]int // indexes into cmds, one group per slot
	slots := make(map[uint16]int)
	for i := range cmds {
		s := cmds[i].Slot()
		g, ok := slots[s]
		if !ok {
			g = len(groups)
			slots[s] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	res := make([]rueidis.RedisResult, len(cmds))
	var wg sync.WaitGroup
	for _, idx := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			part := make([]rueidis.Completed, 0, len(idx)+2)
			for _, i := range idx {
				part = append(part, cmds[i])
			}
			part = append(part, w.cmds(b.c.B())...)
			rs := b.doMulti(ctx, w.timeout, part...)
			err := w.check(rs[len(idx):])
			for j, i := range idx {
				res[i], errs[i] = rs[j], err
			}
		}()
	}
	wg.Wait()
	return res, errs
}

// runAcked runs one script call that is an acknowledged write (see
// WaitOptions): without WaitOptions it is run, with them it is followed by
// the wait, and the second result is nil or the wait's error.
func (b *Broker) runAcked(ctx context.Context, c call) (rueidis.RedisResult, error) {
	if b.wait == nil {
		return b.run(ctx, c), nil
	}
	res, errs := b.runMultiAcked(ctx, nil, []call{c})
	return res[0], errs[0]
}

// runMultiAcked is runMulti for acknowledged writes: the results, and per
// result nil or the error of the wait that covers it (all nil without
// WaitOptions).
func (b *Broker) runMultiAcked(ctx context.Context, extra []rueidis.Completed, calls []call) ([]rueidis.RedisResult, []error) {
	if b.wait == nil {
		return b.runMulti(ctx, extra, calls), make([]error, len(extra)+len(calls))
	}
	return b.runMultiWith(ctx, extra, calls, true)
}

// doAckedOne sends one command that is an acknowledged write (not a
// script) and returns its result and nil or the wait's error.
func (b *Broker) doAckedOne(ctx context.Context, cmd rueidis.Completed) (rueidis.RedisResult, error) {
	if b.wait == nil {
		return b.do(ctx, cmd), nil
	}
	rs, errs := b.doAcked(ctx, []rueidis.Completed{cmd})
	return rs[0], errs[0]
}

// waitFailed names the operation in the error of a wait that was not met;
// nil stays nil.
func waitFailed(op string, waitErr error) error {
	if waitErr == nil {
		return nil
	}
	return fmt.Errorf("rdb: %s: %w", op, waitErr)
}

// firstErr returns the first error that is not nil.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
