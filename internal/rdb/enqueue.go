package rdb

import (
	"context"
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Enqueue stores a new task; see broker.Broker.
func (b *Broker) Enqueue(ctx context.Context, p broker.EnqueueParams) error {
	var buf callBuf // on the stack: the call's keys and arguments
	k, c, err := b.enqueueCall(p, &buf)
	if err != nil {
		return err
	}
	var res rueidis.RedisResult
	var waitErr error
	if k.needsRegister() {
		rs, werrs := b.runMultiAcked(ctx, []rueidis.Completed{b.registerCmd(k)}, []call{c})
		if rs[0].Error() == nil {
			k.markRegistered()
		}
		res, waitErr = rs[1], firstErr(werrs[1], werrs[0])
	} else {
		res, waitErr = b.runAcked(ctx, c)
	}
	if err := b.enqueueResult(p.Msg, res); err != nil {
		return err
	}
	if waitErr != nil { // the name is built only when it is needed
		return waitFailed("enqueue "+p.Msg.Queue+"/"+p.Msg.ID, waitErr)
	}
	return nil
}

// callBuf holds the keys and arguments of one script call, for a caller
// that keeps them on its stack.
type callBuf struct {
	keys [8]string
	args [14]string
}

// Chunks of EnqueueBatch: one enqueue_batch call holds tasks of one
// queue, up to enqueueChunkTasks of them and, past the first task, up to
// about enqueueChunkBytes of messages (a script runs alone on Redis, so a
// chunk bounds how long it blocks other clients: about 1 to 3 ms for
// 1,000 small tasks).
var (
	enqueueChunkTasks = 1000
	enqueueChunkBytes = 1 << 20
)

// EnqueueBatch stores many tasks in one round trip: they are grouped by
// queue into chunks, each one enqueue_batch script call, all sent in one
// pipeline. A chunk decides its tasks in order, as single Enqueues one
// after the other would (each task is stored whole or not at all), so
// Redis runs one script per chunk instead of one per task. See
// broker.Broker.
func (b *Broker) EnqueueBatch(ctx context.Context, ps []broker.EnqueueParams) []error {
	errs := make([]error, len(ps))
	bt := enqueueBatch{b: b, ps: ps}
	var k *queueKeys
	for i := range ps {
		var err error
		if k, err = b.enqueueCheck(ps[i].Msg, k); err != nil {
			errs[i] = err
			continue
		}
		bt.add(k, i, len(ps)-i)
	}
	if len(bt.chunks) == 0 {
		return errs
	}
	var extra []rueidis.Completed
	var reg []*queueKeys
	calls := make([]call, len(bt.chunks))
	for j, c := range bt.chunks {
		if c.k.needsRegister() && !containsKeys(reg, c.k) {
			reg = append(reg, c.k)
			extra = append(extra, b.registerCmd(c.k))
		}
		calls[j] = c.call()
	}
	res, waitErrs := b.runMultiAcked(ctx, extra, calls)
	var regErr error // a registration the wait did not confirm
	for j, k := range reg {
		if res[j].Error() == nil {
			k.markRegistered()
		}
		regErr = firstErr(regErr, waitErrs[j])
	}
	for j, c := range bt.chunks {
		b.enqueueBatchResult(ps, errs, c, res[len(extra)+j], firstErr(waitErrs[len(extra)+j], regErr))
	}
	return errs
}

// enqueueBatch gathers the chunks of one EnqueueBatch.
type enqueueBatch struct {
	b      *Broker
	ps     []broker.EnqueueParams
	chunks []*enqueueChunk    // in order of creation
	open   []openChunk        // per queue, in order of first appearance
	byKeys map[*queueKeys]int // queue -> index in open, once open is long
	slab   []byte             // messages and numbers are encoded here
	block  int                // size of the next slab block
}

// openChunk is a queue of the batch and the chunk being filled for it
// (nil once full).
type openChunk struct {
	k *queueKeys
	c *enqueueChunk
}

// enqueueChunk is one enqueue_batch call: tasks of one queue.
type enqueueChunk struct {
	k     *queueKeys
	idx   []int    // task j of the chunk is ps[idx[j]]
	kinds []byte   // ARGV[4]: '.' plain, 'r' plain with a retention (plainEnqueue), 'x' other
	args  []string // ARGV[1..5], then the IDs (ARGV[4] is set by call)
	msgs  []string // the messages, after the IDs
	ext   []string // the arguments of the 'r' and 'x' tasks, after the messages
	bytes int
}

// add puts ps[i] (validated, in queue k) into the open chunk of its queue;
// left is how many tasks of the batch are left, ps[i] included.
func (bt *enqueueBatch) add(k *queueKeys, i int, left int) {
	b, p := bt.b, &bt.ps[i]
	o := bt.slot(k)
	c := o.c
	if c == nil {
		n := min(enqueueChunkTasks, left)
		c = &enqueueChunk{k: k, idx: make([]int, 0, n), kinds: make([]byte, 0, n), msgs: make([]string, 0, n)}
		c.args = append(make([]string, 0, 5+2*n), b.nowArg(), channelEvents, k.name, "", b.logLen)
		o.c = c
		bt.chunks = append(bt.chunks, c)
	}
	m := p.Msg
	msg := bt.encode(m)
	c.idx = append(c.idx, i)
	c.args = append(c.args, m.ID)
	c.msgs = append(c.msgs, msg)
	c.bytes += len(msg)
	if plainEnqueue(*p) {
		if r := ms(m.Retention); r > 0 {
			c.kinds = append(c.kinds, 'r')
			c.ext = append(c.ext, bt.itoa(r))
		} else {
			c.kinds = append(c.kinds, '.')
		}
	} else {
		var at, uttl, upx int64
		if !p.ProcessAt.IsZero() {
			at = ceilMS(p.ProcessAt)
		}
		if m.UniqueKey != "" {
			uttl = ms(m.UniqueTTL)
			upx = uttl + b.lockSlackMS
		}
		c.kinds = append(c.kinds, 'x')
		c.ext = append(c.ext, bt.itoa(at), m.UniqueKey, bt.itoa(uttl), bt.itoa(upx), m.GroupKey, bt.itoa(ms(m.Retention)),
			priorityArg(m.Priority), m.Key)
	}
	if len(c.idx) >= enqueueChunkTasks || c.bytes >= enqueueChunkBytes {
		o.c = nil // the next task of the queue opens a new chunk
	}
}

// slot returns the open entry of queue k, adding one for a new queue.
func (bt *enqueueBatch) slot(k *queueKeys) *openChunk {
	if bt.byKeys != nil {
		if j, ok := bt.byKeys[k]; ok {
			return &bt.open[j]
		}
		bt.byKeys[k] = len(bt.open)
	} else {
		for j := range bt.open {
			if bt.open[j].k == k {
				return &bt.open[j]
			}
		}
		if len(bt.open) == 8 { // many queues: index them
			bt.byKeys = make(map[*queueKeys]int, 32)
			for j, o := range bt.open {
				bt.byKeys[o.k] = j
			}
			bt.byKeys[k] = len(bt.open)
		}
	}
	bt.open = append(bt.open, openChunk{k: k})
	return &bt.open[len(bt.open)-1]
}

// reserve makes room for n more bytes in the slab. A full slab is left as
// it is (the strings made from it stay valid: its bytes are never written
// again) and a new block is started.
func (bt *enqueueBatch) reserve(n int) {
	if cap(bt.slab)-len(bt.slab) >= n {
		return
	}
	if bt.block == 0 {
		bt.block = 4 << 10
	}
	bt.slab = make([]byte, 0, max(n, bt.block))
	bt.block = min(2*bt.block, 256<<10)
}

// encode encodes m's immutable fields into the slab and returns them as a
// string sharing its bytes.
func (bt *enqueueBatch) encode(m *base.TaskMessage) string {
	bt.reserve(100 + len(m.Type) + len(m.Payload) + len(m.UniqueKey) + len(m.GroupKey)) // fixed part: at most 97 bytes
	start := len(bt.slab)
	bt.slab = encodeMessage(bt.slab, m)
	return unsafe.String(&bt.slab[start], len(bt.slab)-start)
}

// itoa formats n into the slab.
func (bt *enqueueBatch) itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	bt.reserve(20)
	start := len(bt.slab)
	bt.slab = strconv.AppendInt(bt.slab, n, 10)
	return unsafe.String(&bt.slab[start], len(bt.slab)-start)
}

// call returns the chunk's script call.
func (c *enqueueChunk) call() call {
	c.args[3] = string(c.kinds)
	c.args = append(c.args, c.msgs...)
	c.args = append(c.args, c.ext...)
	k := c.k
	return call{
		s:    scriptEnqBatch,
		keys: []string{k.pending, k.scheduled, k.task, k.unique, k.group, k.groups, k.events, k.settings},
		args: c.args,
	}
}

// enqueueBatchResult sets the errors of the chunk's tasks from the
// script's answer, one code per task, and waitErr: the error of the wait
// that covers the tasks the chunk stored.
func (b *Broker) enqueueBatchResult(ps []broker.EnqueueParams, errs []error, c *enqueueChunk, r rueidis.RedisResult, waitErr error) {
	codes, err := r.ToString()
	if err == nil && len(codes) != len(c.idx) {
		err = fmt.Errorf("unexpected reply of %d codes for %d tasks", len(codes), len(c.idx))
	}
	for j, i := range c.idx {
		m := ps[i].Msg
		if err != nil {
			errs[i] = b.wrap("enqueue "+m.Queue+"/"+m.ID, err)
			continue
		}
		switch codes[j] {
		case '2', '3', '7', '=': // '=': stored by an earlier attempt
			errs[i] = waitFailed("enqueue "+m.Queue+"/"+m.ID, waitErr)
		case 'i':
			errs[i] = fmt.Errorf("rdb: enqueue %s/%s: %w", m.Queue, m.ID, base.ErrTaskIDConflict)
		case 'u':
			errs[i] = fmt.Errorf("rdb: enqueue %s/%s: unique key %q: %w", m.Queue, m.ID, m.UniqueKey, base.ErrDuplicateTask)
		default:
			errs[i] = fmt.Errorf("rdb: enqueue %s/%s: unexpected code %q", m.Queue, m.ID, codes[j])
		}
	}
}

func containsKeys(ks []*queueKeys, k *queueKeys) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// registerCmd adds the queue to the set of queues.
func (b *Broker) registerCmd(k *queueKeys) rueidis.Completed {
	return b.c.B().Sadd().Key(keyQueues).Member(k.name).Build()
}

// enqueueCheck validates m and returns the keys of its queue; last, when
// not nil, is the previous task's (a batch's tasks mostly share a queue).
func (b *Broker) enqueueCheck(m *base.TaskMessage, last *queueKeys) (*queueKeys, error) {
	if m == nil {
		return nil, fmt.Errorf("rdb: enqueue: %w: nil message", base.ErrInvalidArgument)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("rdb: enqueue %s/%s: %w", m.Queue, m.ID, err)
	}
	if err := base.RefuseWorkflowTask(m); err != nil {
		return nil, fmt.Errorf("rdb: enqueue %s/%s: %w", m.Queue, m.ID, err)
	}
	if last != nil && last.name == m.Queue && !b.closed.Load() {
		return last, nil
	}
	return b.check("enqueue", m.Queue)
}

// enqueueCall validates p and builds its script call, whose keys and
// arguments are kept in buf.
func (b *Broker) enqueueCall(p broker.EnqueueParams, buf *callBuf) (*queueKeys, call, error) {
	m := p.Msg
	k, err := b.enqueueCheck(m, nil)
	if err != nil {
		return nil, call{}, err
	}
	msg, key := encodeTask(m, k.task)
	if plainTask(p) {
		// As few arguments as the call needs (enqueue_plain.lua).
		buf.keys[0], buf.keys[1], buf.keys[2] = key, k.pending, k.events
		nkeys := 3
		args := append(buf.args[:0], msg, m.ID, k.name, b.logLen)
		due := !p.ProcessAt.IsZero()
		if r := ms(m.Retention); r > 0 || b.clock != nil || due {
			args = append(args, itoa(r))
		}
		if b.clock != nil || due {
			args = append(args, b.nowArg())
		}
		if due {
			args = append(args, itoa(ceilMS(p.ProcessAt)))
			buf.keys[3] = k.scheduled
			nkeys = 4
		}
		return k, call{s: scriptEnqPlain, keys: buf.keys[:nkeys], args: args}, nil
	}
	var at int64
	if !p.ProcessAt.IsZero() {
		at = ceilMS(p.ProcessAt)
	}
	var uttl, upx int64
	if m.UniqueKey != "" {
		uttl = ms(m.UniqueTTL)
		upx = uttl + b.lockSlackMS
	}
	buf.keys = [8]string{key, k.pending, k.scheduled, k.unique, k.group, k.groups, k.events, k.settings}
	buf.args = [14]string{
		b.nowArg(), m.ID, msg,
		itoa(at), m.UniqueKey, itoa(uttl), itoa(upx), m.GroupKey, itoa(ms(m.Retention)),
		channelEvents, k.name, b.logLen, priorityArg(m.Priority), m.Key,
	}
	return k, call{s: scriptEnqueue, keys: buf.keys[:], args: buf.args[:]}, nil
}

// plainTask tells whether p is the common Enqueue that enqueue_plain.lua
// stores: a task with no unique key, group, priority or fair-sharing key
// (a due time and a retention are allowed).
func plainTask(p broker.EnqueueParams) bool {
	m := p.Msg
	return m.UniqueKey == "" && m.GroupKey == "" && m.Priority == 0 && m.Key == ""
}

// plainEnqueue tells whether p is a plain task (plainTask) that goes to
// pending at once: a '.' or 'r' task of enqueue_batch.lua.
func plainEnqueue(p broker.EnqueueParams) bool {
	return plainTask(p) && p.ProcessAt.IsZero()
}

// priorityArg is the script argument of priority p: "" for 0.
func priorityArg(p int) string {
	if p == 0 {
		return ""
	}
	return strconv.Itoa(p)
}

// encodeString encodes m's immutable fields as a string (see encodeTask).
func encodeString(m *base.TaskMessage) string {
	msg, _ := encodeTask(m, "")
	return msg
}

// encodeTask encodes m's immutable fields and names m's key (prefix, the
// queue's task key prefix, then the ID), both in one allocation and
// without copying the encoding a second time (the bytes are never written
// again).
func encodeTask(m *base.TaskMessage, prefix string) (msg, key string) {
	n := len(prefix) + len(m.ID)
	buf := make([]byte, 0, n+32+len(m.Type)+len(m.Payload)+len(m.UniqueKey)+len(m.GroupKey))
	buf = append(append(buf, prefix...), m.ID...)
	buf = encodeMessage(buf, m)
	s := unsafe.String(unsafe.SliceData(buf), len(buf))
	return s[n:], s[:n]
}

// enqueueResult maps the script's answer to an error: a new state, or 0
// (the task was stored by an earlier attempt), is success.
func (b *Broker) enqueueResult(m *base.TaskMessage, r rueidis.RedisResult) error {
	n, err := r.AsInt64()
	if err != nil {
		return b.wrap("enqueue "+m.Queue+"/"+m.ID, err)
	}
	switch n {
	case -1:
		return fmt.Errorf("rdb: enqueue %s/%s: %w", m.Queue, m.ID, base.ErrTaskIDConflict)
	case -2:
		return fmt.Errorf("rdb: enqueue %s/%s: unique key %q: %w", m.Queue, m.ID, m.UniqueKey, base.ErrDuplicateTask)
	}
	return nil
}

// ceilMS is t in Unix milliseconds rounded up, so that a due time kept at
// millisecond resolution is never before the instant the caller asked for
// (the storage clock's now is read rounded down).
func ceilMS(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.UnixNano()%int64(time.Millisecond) > 0 {
		ms++
	}
	return ms
}
