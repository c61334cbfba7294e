package rdb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Fetch moves up to p.Max pending tasks to active under fresh leases; see
// broker.Broker. One script call whatever p.Max.
func (b *Broker) Fetch(ctx context.Context, p broker.FetchParams) ([]*broker.Lease, error) {
	k, err := b.check("fetch", p.Queue)
	if err != nil {
		return nil, err
	}
	if p.Max < 1 {
		return nil, fmt.Errorf("rdb: fetch %s: %w: Max %d is less than 1", p.Queue, base.ErrInvalidArgument, p.Max)
	}
	if p.LeaseDuration <= 0 {
		return nil, fmt.Errorf("rdb: fetch %s: %w: LeaseDuration %v is not positive", p.Queue, base.ErrInvalidArgument, p.LeaseDuration)
	}
	prefix, again := k.takeRefetch(p.ServerID), "1"
	if prefix == "" {
		prefix, again = tokenPrefix(p.ServerID), "0"
	}
	// Large messages are read outside the script when the fetch may carry
	// enough tasks to pay for the second round trip (keys.go's msgSizes).
	ext := p.Max >= extMinBatch && k.msgs.external()
	for {
		c := call{
			s:    scriptFetch,
			keys: []string{k.pending, k.active, k.leases, k.paused, k.task, k.settings, k.events, k.fetch + prefix, k.fetchN},
			args: []string{b.nowArg(), strconv.Itoa(p.Max), itoa(ms(p.LeaseDuration)), prefix, b.logLen, again, boolArg(ext)},
		}
		vals, err := b.run(ctx, c).ToArray()
		if err != nil {
			if outcomeUnknown(err) {
				// The script may have leased tasks whose reply was lost: a
				// next Fetch of the queue calls with this prefix again and
				// gets them (lua/fetch.lua's record).
				k.keepRefetch(prefix)
			}
			return nil, b.wrap("fetch "+p.Queue, err)
		}
		if again == "1" && len(vals) == 2 {
			if d, err := vals[0].AsInt64(); err == nil && d == -2 {
				// A call again with nothing to answer: lease afresh, under a
				// token never used (a token used again could fence a task
				// its earlier lease had).
				prefix, again = tokenPrefix(p.ServerID), "0"
				continue
			}
		}
		return b.fetched(ctx, k, p, prefix, again, ext, vals)
	}
}

// fetched reads the reply vals of fetch.lua, called with token prefix
// (again "1": a call again).
func (b *Broker) fetched(ctx context.Context, k *queueKeys, p broker.FetchParams, prefix, again string, ext bool, vals []rueidis.RedisMessage) ([]*broker.Lease, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	deadline, err := vals[0].AsInt64()
	if err != nil || len(vals) < 2 {
		return nil, fmt.Errorf("rdb: fetch %s: unexpected reply", p.Queue)
	}
	leaseMS, err := vals[1].AsInt64()
	if err != nil {
		return nil, fmt.Errorf("rdb: fetch %s: unexpected reply", p.Queue)
	}
	if deadline == -1 {
		return nil, &broker.ThrottledError{Queue: p.Queue, RetryIn: time.Duration(leaseMS) * time.Millisecond}
	}
	if len(vals) < 3 {
		return nil, fmt.Errorf("rdb: fetch %s: unexpected reply", p.Queue)
	}
	// form (lua/fetch.lua): 0 a fetch, 3 a fetch of plain tasks only
	// (the IDs and the messages as two arrays), 1 a call again, 2 the
	// same, the record keeping tasks for the next Fetch. Every lease of
	// the call has the token prefix, which the reply leaves out.
	form, err := vals[2].ToInt64()
	if err != nil || form < 0 || form > 4 {
		return nil, fmt.Errorf("rdb: fetch %s: unexpected reply", p.Queue)
	}

	if ext && form == 0 {
		// The batch held a task in the hash form: its type checks were
		// spent for nothing.
		k.msgs.missed()
	}
	if form == 2 && again == "1" {
		// A fetch again handed out only p.Max of the tasks its record
		// holds: the next Fetch takes the prefix for the others.
		k.keepRefetch(prefix)
	}
	var ids, msgs []rueidis.RedisMessage
	switch {
	case form == 4:
		// Plain tasks whose messages the script left out: read here, so
		// that they do not pass through Lua (lua/fetch.lua's ext).
		if len(vals) != 4 {
			return nil, fmt.Errorf("rdb: fetch %s: unexpected reply", p.Queue)
		}
		if ids, msgs, err = b.readMessages(ctx, k, vals[3]); err != nil {
			// The tasks are leased under prefix; the next Fetch calls
			// with it again and gets them (lua/fetch.lua's record).
			k.keepRefetch(prefix)
			return nil, b.wrap("fetch "+p.Queue, err)
		}
		vals = nil
	case form == 3:
		if len(vals) != 5 {
			return nil, fmt.Errorf("rdb: fetch %s: unexpected reply", p.Queue)
		}
		ids, err = vals[3].ToArray()
		if err == nil {
			msgs, err = vals[4].ToArray()
		}
		if err != nil || len(ids) != len(msgs) {
			return nil, fmt.Errorf("rdb: fetch %s: unexpected reply", p.Queue)
		}
		vals = nil
	default:
		vals = vals[3:]
	}
	// A lease and its message are allocated together, for the batch.
	ls := make([]leased, 0, len(ids)+len(vals)/2)
	out := make([]*broker.Lease, 0, cap(ls))
	dl := time.UnixMilli(deadline)
	dur := time.Duration(leaseMS) * time.Millisecond
	var firstErr error
	msgBytes, plain := 0, len(ids)
	for len(vals) > 0 || len(ids) > 0 {
		// f: id, m[, n, e, f]; an ID is a bulk string, never an integer.
		var f []rueidis.RedisMessage
		switch {
		case len(ids) > 0:
		case vals[0].IsInt64() && len(vals) >= 6:
			f, vals = vals[1:6], vals[6:]
		case len(vals) >= 2:
			f, vals = vals[:2], vals[2:]
		default:
			return nil, fmt.Errorf("rdb: fetch %s: unexpected reply", p.Queue)
		}
		ls = append(ls, leased{m: base.TaskMessage{Queue: p.Queue}})
		x := &ls[len(ls)-1]
		m := &x.m
		switch len(f) {
		case 0:
			if s, e := msgs[0].ToString(); e == nil {
				msgBytes += len(s)
			}
			err = decodePlainTask(ids[0], msgs[0], m)
			ids, msgs = ids[1:], msgs[1:]
		case 2:
			err = decodePlainTask(f[0], f[1], m)
		default:
			err = decodeTask(f[0], f[1], f[2], f[3], f[4], m)
		}
		if err != nil {
			// The task is active under a lease nobody holds; the
			// Recoverer will find it when the lease runs out.
			b.log.Error("rdb: fetched a task that cannot be decoded", "queue", p.Queue, "id", m.ID, "err", err)
			if firstErr == nil {
				firstErr = corruptError(p.Queue, m.ID)
			}
			continue
		}
		x.l = broker.Lease{Msg: m, Token: prefix, Deadline: dl, Duration: dur}
		out = append(out, &x.l)
	}
	if plain > 0 {
		k.msgs.observe(msgBytes, plain)
	}
	if len(out) == 0 && firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// readMessages reads the messages of the plain tasks whose IDs are ids
// (fetch.lua's form 4) with one MGET. A task gone since the script (nil:
// its queue deleted, leases and all) is left out.
func (b *Broker) readMessages(ctx context.Context, k *queueKeys, ids rueidis.RedisMessage) (idv, msgs []rueidis.RedisMessage, err error) {
	idv, err = ids.ToArray()
	if err != nil {
		return nil, nil, errors.New("unexpected reply")
	}
	keys := make([]string, len(idv))
	for i := range idv {
		id, err := idv[i].ToString()
		if err != nil {
			return nil, nil, errors.New("unexpected reply")
		}
		keys[i] = k.task + id
	}
	if len(keys) == 0 {
		return nil, nil, nil
	}
	msgs, err = b.do(ctx, b.c.B().Mget().Key(keys...).Build()).ToArray()
	if err != nil {
		return nil, nil, err
	}
	if len(msgs) != len(idv) {
		return nil, nil, errors.New("unexpected reply")
	}
	kept := 0
	for i := range idv {
		if msgs[i].IsNil() {
			continue
		}
		idv[kept], msgs[kept] = idv[i], msgs[i]
		kept++
	}
	return idv[:kept], msgs[:kept], nil
}

// leased is a lease and its message, allocated together per batch.
type leased struct {
	l broker.Lease
	m base.TaskMessage
}

// outcomeUnknown tells whether a call that failed with err may have run
// on Redis: anything but an error reply (a connection closed or reset, a
// timeout after the request was sent).
func outcomeUnknown(err error) bool {
	var re *rueidis.RedisError
	return !errors.As(err, &re)
}

// minToken is the least length of a lease token: longer than Redis's
// hash-max-listpack-value (64 by default), so that a queue's leases hash
// is a hash table from its first entry on. In the compact listpack
// encoding, which Redis keeps up to 128 entries, every HSET, HMGET and
// HDEL of a field scans the whole hash: that cost Fetch and Complete about
// 2 µs of Redis CPU per task with 60 to 120 tasks active
// (BenchmarkProcessCost, docs/performance.md).
const minToken = 65

// tokenPrefix returns a fresh token for the leases of one fetch:
// "<server ID>/<random>", the random part (base 36) at least 13
// characters and long enough for the token to have minToken bytes. Every
// lease of the fetch carries it (lua/fetch.lua): the random part makes it
// unique per fetch, and a fetch leases a task at most once, so that queue,
// ID and token name one lease; the server ID is kept for the Inspector
// (broker.ServerOfToken).
func tokenPrefix(serverID string) string {
	var sb strings.Builder
	sb.Grow(max(minToken, len(serverID)+14))
	sb.WriteString(serverID)
	sb.WriteByte('/')
	for first := true; first || sb.Len() < minToken; first = false {
		sb.WriteString(strconv.FormatUint(rand.Uint64()|1<<63, 36))
	}
	return sb.String()
}

// decodeTask fills m from the reply fields id, m, n, e, f.
func decodeTask(id, blob, retried, lastErr, failedAt rueidis.RedisMessage, m *base.TaskMessage) error {
	s, err := id.ToString()
	if err != nil {
		return errCorrupt
	}
	return decodeTaskFields(s, blob, retried, lastErr, failedAt, m)
}

// decodePlainTask fills m from the reply fields id and m of a task that
// has no n, e or f field.
func decodePlainTask(id, blob rueidis.RedisMessage, m *base.TaskMessage) error {
	s, err := id.ToString()
	if err != nil {
		return errCorrupt
	}
	m.ID = s
	if s, err = blob.ToString(); err != nil {
		return errCorrupt
	}
	return decodeMessage(s, m)
}

// decodeTaskFields fills m from its ID and the hash fields m, n, e, f.
func decodeTaskFields(id string, blob, retried, lastErr, failedAt rueidis.RedisMessage, m *base.TaskMessage) error {
	m.ID = id
	s, err := blob.ToString()
	if err != nil {
		return errCorrupt
	}
	if err := decodeMessage(s, m); err != nil {
		return err
	}
	if !retried.IsNil() {
		v, err := retried.AsInt64()
		if err != nil {
			return errCorrupt
		}
		m.Retried = int(v)
	}
	if !lastErr.IsNil() {
		if m.LastErr, err = lastErr.ToString(); err != nil {
			return errCorrupt
		}
	}
	if !failedAt.IsNil() {
		v, err := failedAt.AsInt64()
		if err != nil {
			return errCorrupt
		}
		m.LastFailedAt = time.UnixMilli(v)
	}
	return nil
}

// Complete finishes active tasks that succeeded, with one script call per
// queue of the batch, all in one round trip; see broker.Broker.
func (b *Broker) Complete(ctx context.Context, leases []broker.LeaseRef) []error {
	errs := make([]error, len(leases))
	if len(leases) == 0 {
		return errs
	}
	if b.closed.Load() {
		for i := range errs {
			errs[i] = fmt.Errorf("rdb: complete: %w", base.ErrStorageClosed)
		}
		return errs
	}
	// Group by queue, keeping the order of first appearance. The common
	// case, one queue, needs no map.
	type group struct {
		k   *queueKeys
		idx []int
	}
	var groups []group
	now := b.nowArg()
	grace := itoa(broker.WatchGrace.Milliseconds())
	for i, l := range leases {
		k, err := b.check("complete", l.Queue)
		if err != nil {
			errs[i] = err
			continue
		}
		g := -1
		for j := range groups {
			if groups[j].k == k {
				g = j
				break
			}
		}
		if g < 0 {
			groups = append(groups, group{k: k, idx: make([]int, 0, len(leases))})
			g = len(groups) - 1
		}
		groups[g].idx = append(groups[g].idx, i)
	}
	if len(groups) == 0 {
		return errs
	}
	calls := make([]call, len(groups))
	for j := range groups {
		g := &groups[j]
		g.idx = b.completable(leases, g.idx, errs)
		n := len(g.idx)
		args := make([]string, 6+n, 6+n+2*4)
		args[0], args[1], args[2], args[3], args[4], args[5] = now, channelEvents, g.k.name, grace, b.logLen, strconv.Itoa(n)
		// The tokens follow the IDs as runs, a count and a token: the
		// leases of one fetch share theirs (lua/complete.lua).
		run := 0 // where the current run starts
		for x, i := range g.idx {
			args[6+x] = leases[i].ID
			if x > 0 && leases[i].Token != leases[g.idx[x-1]].Token {
				args = append(args, strconv.Itoa(x-run), leases[g.idx[x-1]].Token)
				run = x
			}
		}
		if n > 0 {
			args = append(args, strconv.Itoa(n-run), leases[g.idx[n-1]].Token)
		}
		calls[j] = call{
			s:    scriptComplete,
			keys: []string{g.k.active, g.k.leases, g.k.completed, g.k.task, g.k.unique, g.k.processed, g.k.events, g.k.pending, g.k.fetchN, g.k.fetch},
			args: args,
		}
	}
	var res []rueidis.RedisResult
	var waitErrs []error // nil unless Options.Wait: a completion is an acknowledged write
	switch {
	case b.wait != nil:
		res, waitErrs = b.runMultiAcked(ctx, nil, calls)
	case len(calls) == 1:
		res = []rueidis.RedisResult{b.run(ctx, calls[0])}
	default:
		res = b.runMulti(ctx, nil, calls)
	}
	for j, g := range groups {
		vals, err := res[j].ToString() // one digit a task (lua/complete.lua)
		if err == nil && len(vals) != len(g.idx) {
			err = fmt.Errorf("unexpected reply")
		}
		for n, i := range g.idx {
			switch {
			case err != nil:
				errs[i] = b.wrap("complete "+leases[i].Queue+"/"+leases[i].ID, err)
			case vals[n] != '1':
				errs[i] = leaseLost("complete", leases[i])
			case waitErrs != nil:
				errs[i] = waitFailed("complete "+leases[i].Queue+"/"+leases[i].ID, waitErrs[j])
			}
		}
	}
	return errs
}

// completable returns idx, indexes into leases of one queue, without
// those complete.lua must not see, whose errs it sets to a lost lease: a
// lease that repeats the ID of an earlier one (broker.Broker.Complete: a
// repeat completes nothing), so that the script needs no set of its own
// to find them, and a lease without a token (no lease has an empty one:
// it cannot hold). The set of IDs seen is taken from b.seen
// and given back empty: a call allocates none.
func (b *Broker) completable(leases []broker.LeaseRef, idx []int, errs []error) []int {
	var seen map[string]struct{}
	if len(idx) > 1 {
		seen, _ = b.seen.Get().(map[string]struct{})
		if seen == nil {
			seen = make(map[string]struct{}, len(idx))
		}
	}
	out := idx[:0]
	for _, i := range idx {
		id := leases[i].ID
		if _, ok := seen[id]; ok {
			errs[i] = leaseLost("complete", leases[i])
			continue
		}
		if seen != nil {
			seen[id] = struct{}{}
		}
		if leases[i].Token == "" {
			errs[i] = leaseLost("complete", leases[i])
			continue
		}
		out = append(out, i)
	}
	if seen != nil && len(seen) <= maxSeenKept {
		clear(seen)
		b.seen.Put(seen)
	}
	return out
}

// maxSeenKept is the largest set of IDs completable keeps for the next
// call: a map does not shrink, and a rare huge batch should not stay.
const maxSeenKept = 4096

func leaseLost(op string, l broker.LeaseRef) error {
	return fmt.Errorf("rdb: %s %s/%s: %w", op, l.Queue, l.ID, base.ErrLeaseLost)
}

func boolArg(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

// fenced runs a script that answers 1 (done) or 0 (lease lost); acked
// marks an acknowledged write (see WaitOptions).
func (b *Broker) fenced(ctx context.Context, op string, l broker.LeaseRef, c call, acked bool) error {
	var res rueidis.RedisResult
	var waitErr error
	if acked {
		res, waitErr = b.runAcked(ctx, c)
	} else {
		res = b.run(ctx, c)
	}
	n, err := res.AsInt64()
	if err != nil {
		return b.wrap(op+" "+l.Queue+"/"+l.ID, err)
	}
	if n == 2 {
		return errWorkflowCanceled
	}
	if n != 1 {
		return leaseLost(op, l)
	}
	return waitFailed(op+" "+l.Queue+"/"+l.ID, waitErr)
}

// Retry moves an active task to retry; see broker.Broker.
func (b *Broker) Retry(ctx context.Context, p broker.RetryParams) error {
	l := p.Lease
	k, err := b.check("retry", l.Queue)
	if err != nil {
		return err
	}
	if p.Delay < 0 {
		return fmt.Errorf("rdb: retry %s/%s: %w: Delay %v is negative", l.Queue, l.ID, base.ErrInvalidArgument, p.Delay)
	}
	err = b.fenced(ctx, "retry", l, call{
		s:    scriptRetry,
		keys: []string{k.taskKey(l.ID), k.active, k.leases, k.retry, k.processed, k.failed, k.events, k.pending, k.fetchN, k.fetch},
		args: []string{b.nowArg(), l.ID, l.Token, itoa(ms(p.Delay)), p.ErrMsg, boolArg(p.IsFailure),
			boolArg(p.RequireExpired), channelEvents, k.name, b.logLen},
	}, true)
	if errors.Is(err, errWorkflowCanceled) {
		// Nothing was written and the lease still holds: a canceled
		// workflow runs no further attempt, so the task is archived.
		return b.Archive(ctx, broker.ArchiveParams{Lease: l, ErrMsg: p.ErrMsg, RequireExpired: p.RequireExpired})
	}
	return err
}

// errWorkflowCanceled is fenced's error for retry.lua's answer 2.
var errWorkflowCanceled = errors.New("rdb: the task's workflow was canceled")

// Archive moves an active task to archived; see broker.Broker.
func (b *Broker) Archive(ctx context.Context, p broker.ArchiveParams) error {
	l := p.Lease
	k, err := b.check("archive", l.Queue)
	if err != nil {
		return err
	}
	return b.fenced(ctx, "archive", l, call{
		s:    scriptArchive,
		keys: []string{k.taskKey(l.ID), k.active, k.leases, k.archived, k.task, k.unique, k.processed, k.failed, k.events, k.pending, k.fetchN, k.fetch},
		args: []string{b.nowArg(), l.ID, l.Token, p.ErrMsg, boolArg(p.RequireExpired), b.archiveMax, b.archiveAge,
			channelEvents, k.name, b.logLen},
	}, true)
}

// Requeue moves an active task back to the head of pending; see
// broker.Broker.
func (b *Broker) Requeue(ctx context.Context, l broker.LeaseRef) error {
	k, err := b.check("requeue", l.Queue)
	if err != nil {
		return err
	}
	return b.fenced(ctx, "requeue", l, call{
		s:    scriptRequeue,
		keys: []string{k.taskKey(l.ID), k.active, k.leases, k.pending, k.events, k.settings, k.fetchN, k.fetch},
		args: []string{l.ID, l.Token, channelEvents, k.name, b.nowArg(), b.logLen},
	}, false)
}

// WriteResult stores the result of an active task; see broker.Broker.
func (b *Broker) WriteResult(ctx context.Context, l broker.LeaseRef, data []byte) error {
	k, err := b.check("write result", l.Queue)
	if err != nil {
		return err
	}
	return b.fenced(ctx, "write result", l, call{
		s:    scriptResult,
		keys: []string{k.taskKey(l.ID), k.leases},
		args: []string{l.ID, l.Token, string(data)},
	}, false)
}

// ExtendLeases pushes the deadlines of still-held leases of one queue, in
// one script call; see broker.Broker. A lease whose deadline has already
// passed is lost (it may be being recovered).
func (b *Broker) ExtendLeases(ctx context.Context, queue string, leases []broker.LeaseRef, d time.Duration) ([]string, error) {
	k, err := b.check("extend leases", queue)
	if err != nil {
		return nil, err
	}
	if d <= 0 {
		return nil, fmt.Errorf("rdb: extend leases %s: %w: duration %v is not positive", queue, base.ErrInvalidArgument, d)
	}
	if len(leases) == 0 {
		return nil, nil
	}
	args := make([]string, 2, 2+2*len(leases))
	args[0], args[1] = b.nowArg(), itoa(ms(d))
	var lost []string
	for _, l := range leases {
		if l.Queue != queue {
			lost = append(lost, l.ID) // not a lease of this queue
			continue
		}
		args = append(args, l.ID, l.Token)
	}
	vals, err := b.run(ctx, call{s: scriptExtend, keys: []string{k.active, k.leases, k.fetchN, k.fetch}, args: args}).AsStrSlice()
	if err != nil {
		return nil, b.wrap("extend leases "+queue, err)
	}
	if len(vals) > 1 {
		lost = append(lost, vals[1:]...)
	}
	return lost, nil
}

// ExpiredLeases lists active tasks of queue whose lease ran out; see
// broker.Broker.
func (b *Broker) ExpiredLeases(ctx context.Context, queue string, limit int) ([]*broker.Lease, error) {
	k, err := b.check("expired leases", queue)
	if err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("rdb: expired leases %s: %w: limit %d is less than 1", queue, base.ErrInvalidArgument, limit)
	}
	vals, err := b.run(ctx, call{
		s:    scriptExpired,
		keys: []string{k.active, k.leases, k.task, k.fetchN, k.fetch},
		args: []string{b.nowArg(), strconv.Itoa(limit)},
	}).ToArray()
	if err != nil {
		return nil, b.wrap("expired leases "+queue, err)
	}
	if len(vals)%7 != 0 {
		return nil, fmt.Errorf("rdb: expired leases %s: unexpected reply", queue)
	}
	out := make([]*broker.Lease, 0, len(vals)/7)
	for i := 0; i < len(vals); i += 7 {
		f := vals[i : i+7]
		m := &base.TaskMessage{Queue: queue}
		if err := decodeTask(f[0], f[3], f[4], f[5], f[6], m); err != nil {
			// Hand it over anyway (ID and queue are known), so that the
			// Recoverer can archive it instead of leaving it active.
			b.log.Error("rdb: expired task cannot be decoded", "queue", queue, "id", m.ID, "err", err)
		}
		tok, _ := f[1].ToString()
		dl, _ := f[2].AsInt64()
		out = append(out, &broker.Lease{Msg: m, Token: tok, Deadline: time.UnixMilli(dl)})
	}
	return out, nil
}
