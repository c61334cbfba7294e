package embedded

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// task is one task as the broker holds it in memory. Its persistent fields
// are exactly what encodeTask writes; the links and subtree size are rebuilt
// at open.
type task struct {
	seq   uint64 // record key in the tasks bucket, fixed for the task's life
	msg   *base.TaskMessage
	state base.TaskState
	// m holds the message of a task read from disk (msg points to it), so
	// that loading allocates one object where it would allocate two.
	m base.TaskMessage

	// order places a pending task in its queue's pending list (smaller is
	// fetched first).
	order int64
	// at is the one time that matters in the task's state, the key of its
	// index: when it became pending, when it is due (scheduled, retry),
	// its lease deadline (active), the end of its retention (completed),
	// when it was archived, when it was enqueued (aggregating, waiting). One field
	// for all of them keeps a million tasks in less memory.
	at time.Time
	// token fences the lease of an active task: "<server ID>/<random>".
	token string
	// completedAt is when a completed task succeeded.
	completedAt time.Time
	// result is what the handler wrote (WriteResult).
	result []byte
	// uniqueUntil is when the task's uniqueness lock expires; zero when the
	// task holds no lock (none asked for, or released).
	uniqueUntil time.Time

	// In-memory state, not persisted. l and r link the task into the
	// treap of its state (the pendingList, or the taskTree of active,
	// scheduled, retry, archived or completed tasks): its left and right
	// children, with n the size of its subtree. A task is in one structure
	// at most, so they share the fields.
	l, r    *task
	set     *aggSet // the aggregation set holding this aggregating task
	n       int32
	watched bool // WatchTask: completing or archiving sends EventDone
}

// queue holds the indexes of one queue. Every task of the queue is in tasks
// and in exactly one of the structures below, the one of its state.
type queue struct {
	name     string
	paused   bool
	listed   bool // enqueued into at least once (Queues lists it)
	settings broker.QueueSettings
	// tokens is the rate limit's bucket: tokens available at tokensAt
	// (kept in memory only: a restart refills it).
	tokens   float64
	tokensAt time.Time
	// counters holds processed and failed counts by day (allTime for the
	// totals).
	counters map[uint64]*[2]int64
	// sets are the aggregation sets taken from groups (TakeGroup), by ID.
	sets map[string]*aggSet

	tasks     map[string]*task
	pending   lanes
	active    *taskTree // by lease deadline (task.at, as in every tree)
	scheduled *taskTree // by due time
	retry     *taskTree // by due time
	archived  *taskTree // by archive time
	completed *taskTree // by end of retention
	waiting   *taskTree // by enqueue time: workflow tasks waiting for dependencies
	groups    map[string]map[string]*task
	unique    map[string]*task // uniqueness key → task holding the lock
}

// newQueue returns an empty queue with room for size tasks.
func newQueue(name string, size int) *queue {
	return &queue{
		name:      name,
		tasks:     make(map[string]*task, size),
		active:    &taskTree{},
		scheduled: &taskTree{},
		retry:     &taskTree{},
		archived:  &taskTree{},
		completed: &taskTree{},
		waiting:   &taskTree{},
		groups:    make(map[string]map[string]*task),
		unique:    make(map[string]*task),
		counters:  make(map[uint64]*[2]int64),
		sets:      make(map[string]*aggSet),
	}
}

// aggSet is a set of aggregating tasks an aggregator took from a group. Its
// tasks stay aggregating; they are out of the group until the set is
// finished (deleted) or reclaimed (back into the group). Sets live in memory
// only: after a restart every aggregating task is back in its group.
type aggSet struct {
	id, token string
	group     string
	deadline  time.Time
	tasks     []*task
}

// remove takes t out of the set.
func (a *aggSet) remove(t *task) {
	for i, x := range a.tasks {
		if x == t {
			a.tasks = append(a.tasks[:i], a.tasks[i+1:]...)
			break
		}
	}
	t.set = nil
}

// entry encodes q's persistent part, the value of its queues entry: flags,
// then max concurrency, rate limit (float64 bits), burst and lease, and
// when one is set the per-key limits: max concurrency, rate (float64
// bits), burst.
func (q *queue) entry() []byte {
	var flags byte
	if q.paused {
		flags |= flagPaused
	}
	if q.listed {
		flags |= flagListed
	}
	b := []byte{flags}
	b = binary.AppendUvarint(b, uint64(q.settings.MaxConcurrency))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(q.settings.RateLimit))
	b = binary.AppendUvarint(b, uint64(q.settings.RateBurst))
	b = binary.AppendVarint(b, int64(q.settings.LeaseDuration))
	if s := q.settings; s.KeyMaxConcurrency != 0 || s.KeyRateLimit != 0 || s.KeyRateBurst != 0 {
		b = binary.AppendUvarint(b, uint64(s.KeyMaxConcurrency))
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(s.KeyRateLimit))
		b = binary.AppendUvarint(b, uint64(s.KeyRateBurst))
	}
	return b
}

// setEntry reads an entry written by entry. An entry of one byte (flags
// only) has no settings.
func (q *queue) setEntry(b []byte) error {
	if len(b) == 0 {
		return errors.New("empty queue entry")
	}
	q.paused = b[0]&flagPaused != 0
	q.listed = b[0]&flagListed != 0
	if len(b) == 1 {
		return nil
	}
	d := decoder{b: b[1:]}
	q.settings.MaxConcurrency = int(d.uvarint())
	rl := d.raw(8)
	if len(rl) == 8 {
		q.settings.RateLimit = math.Float64frombits(binary.BigEndian.Uint64(rl))
	}
	q.settings.RateBurst = int(d.uvarint())
	q.settings.LeaseDuration = time.Duration(d.varint())
	if d.err == nil && len(d.b) > 0 {
		q.settings.KeyMaxConcurrency = int(d.uvarint())
		if kr := d.raw(8); len(kr) == 8 {
			q.settings.KeyRateLimit = math.Float64frombits(binary.BigEndian.Uint64(kr))
		}
		q.settings.KeyRateBurst = int(d.uvarint())
	}
	return d.err
}

// count adds to one of q's counters (kind 0 processed, 1 failed).
func (q *queue) count(day uint64, kind int, n int64) {
	c := q.counters[day]
	if c == nil {
		c = new([2]int64)
		q.counters[day] = c
	}
	c[kind] += n
}

// treeOf returns the tree that holds tasks of state s, or nil for the states
// kept elsewhere (pending, aggregating).
func (q *queue) treeOf(s base.TaskState) *taskTree {
	switch s {
	case base.StateActive:
		return q.active
	case base.StateScheduled:
		return q.scheduled
	case base.StateRetry:
		return q.retry
	case base.StateArchived:
		return q.archived
	case base.StateCompleted:
		return q.completed
	case base.StateWaiting:
		return q.waiting
	}
	return nil
}

// index puts t into the structure of its state (a pending task at the back
// of its lane, with a new order).
func (q *queue) index(t *task) {
	switch t.state {
	case base.StatePending:
		q.pending.pushBack(t)
	case base.StateAggregating:
		g := q.groups[t.msg.GroupKey]
		if g == nil {
			g = make(map[string]*task)
			q.groups[t.msg.GroupKey] = g
		}
		g[t.msg.ID] = t
	default:
		q.treeOf(t.state).insert(t)
	}
}

// unindex takes t out of the structure of its state.
func (q *queue) unindex(t *task) {
	switch t.state {
	case base.StatePending:
		q.pending.remove(t)
	case base.StateAggregating:
		if t.set != nil {
			t.set.remove(t)
			return
		}
		g := q.groups[t.msg.GroupKey]
		delete(g, t.msg.ID)
		if len(g) == 0 {
			delete(q.groups, t.msg.GroupKey)
		}
	default:
		q.treeOf(t.state).remove(t)
	}
}

// lockHolder returns the task holding the uniqueness lock key at now, if any.
func (q *queue) lockHolder(key string, now time.Time) *task {
	t := q.unique[key]
	if t == nil || !now.Before(t.uniqueUntil) {
		return nil
	}
	return t
}

// releaseLock ends t's uniqueness lock, if it holds one.
func (q *queue) releaseLock(t *task) {
	if t.uniqueUntil.IsZero() {
		return
	}
	if q.unique[t.msg.UniqueKey] == t {
		delete(q.unique, t.msg.UniqueKey)
	}
	t.uniqueUntil = time.Time{}
}

// pendingList holds a queue's pending tasks in fetch order: an
// order-statistic treap like taskTree, threaded through the same fields
// (task.l, task.r, task.n) and with the same priorities, but ordered by
// (task.order, seq). Tasks join at either end only: pushBack gives a task
// an order after every other (Enqueue, Forward, RunTask), pushFront one
// before every other (Requeue), so that front <= every order <= back. Both,
// and popFront (Fetch), walk one spine of the tree: O(log n) without a
// comparison; removing any task (DeleteTask, ArchiveTask) and reaching the
// task of any rank (a page of the Inspector) cost O(log n) too.
type pendingList struct {
	root        *task
	front, back int64
}

// cmpOrder orders pending tasks by order, then by sequence number, so that
// the order is total even if two records stored the same order.
func cmpOrder(a, b *task) int {
	switch {
	case a.order < b.order:
		return -1
	case a.order > b.order:
		return 1
	}
	return cmpSeq(a, b)
}

// Len returns how many tasks the list holds.
func (l *pendingList) Len() int { return int(size(l.root)) }

// first returns the task fetched next, or nil.
func (l *pendingList) first() *task { return leftmost(l.root) }

// pushBack appends x, which is in no structure, with an order after every
// other: x goes down the right spine to where its priority belongs, and the
// rest of the spine, every task before it, becomes its left subtree.
func (l *pendingList) pushBack(x *task) {
	l.back++
	x.order = l.back
	x.l, x.r, x.n = nil, nil, 1
	p := &l.root
	for t := *p; t != nil && prio(t) > prio(x); t = *p {
		t.n++
		p = &t.r
	}
	x.l = *p
	x.resize()
	*p = x
}

// pushFront prepends x, which is in no structure, with an order before every
// other (pushBack's mirror image, on the left spine).
func (l *pendingList) pushFront(x *task) {
	l.front--
	x.order = l.front
	x.l, x.r, x.n = nil, nil, 1
	p := &l.root
	for t := *p; t != nil && prio(t) > prio(x); t = *p {
		t.n++
		p = &t.l
	}
	x.r = *p
	x.resize()
	*p = x
}

// popFront takes out the first task and returns it, or nil: the last task
// of the left spine, whose place its right subtree takes.
func (l *pendingList) popFront() *task {
	t := l.root
	if t == nil {
		return nil
	}
	p := &l.root
	for t.l != nil {
		t.n--
		p = &t.l
		t = t.l
	}
	*p = t.r
	t.l, t.r, t.n = nil, nil, 0
	return t
}

// remove takes x out, found by its key (order, seq). Like taskTree.remove
// it does nothing when x is not there.
func (l *pendingList) remove(x *task) {
	for t := l.root; t != x; {
		if t == nil {
			return
		}
		if cmpOrder(x, t) < 0 {
			t = t.l
		} else {
			t = t.r
		}
	}
	p := &l.root
	for t := *p; t != x; t = *p {
		t.n--
		if cmpOrder(x, t) < 0 {
			p = &t.l
		} else {
			p = &t.r
		}
	}
	*p = merge(x.l, x.r)
	x.l, x.r, x.n = nil, nil, 0
}

// build replaces the list with the tasks of sorted (by cmpOrder, each in no
// structure), keeping the orders they were stored with (used at open).
func (l *pendingList) build(sorted []*task) {
	l.root = buildTree(sorted)
	if len(sorted) > 0 {
		l.front = min(l.front, sorted[0].order)
		l.back = max(l.back, sorted[len(sorted)-1].order)
	}
}

// ascendFrom calls f for the tasks from rank k (0 is fetched next) on, in
// fetch order, while f returns true: O(log n) to reach rank k.
func (l *pendingList) ascendFrom(k int, f func(*task) bool) { ascendFrom(l.root, k, f) }

// check walks the whole list (see taskTree.check).
func (l *pendingList) check(f func(*task)) error { return checkTree(l.root, cmpOrder, f) }

// taskTree is an ordered set of tasks by (task.at, seq) with subtree sizes,
// so that the smallest task, insertion, removal and the task of any rank
// all cost O(log n): a treap whose nodes are the tasks themselves (task.l,
// task.r, task.n), with a priority derived from the sequence number. Listing
// a page of a million tasks costs as little as listing the first page.
type taskTree struct {
	root *task
}

// cmpTask orders tasks by at, then by sequence number (unique), so that the
// order is total and the same after a reopen.
func cmpTask(a, b *task) int {
	if c := a.at.Compare(b.at); c != 0 {
		return c
	}
	return cmpSeq(a, b)
}

// prio is the treap priority of t: a fixed hash of its sequence number.
func prio(t *task) uint64 { return (t.seq + 1) * 0x9E3779B97F4A7C15 }

func size(t *task) int32 {
	if t == nil {
		return 0
	}
	return t.n
}

func (t *task) resize() { t.n = 1 + size(t.l) + size(t.r) }

// Len returns how many tasks the tree holds.
func (tr *taskTree) Len() int { return int(size(tr.root)) }

// split divides t into the tasks ordered before k and the others.
func split(t, k *task) (before, after *task) {
	if t == nil {
		return nil, nil
	}
	if cmpTask(t, k) < 0 {
		t.r, after = split(t.r, k)
		t.resize()
		return t, after
	}
	before, t.l = split(t.l, k)
	t.resize()
	return before, t
}

// merge joins a and b, every task of a ordered before every task of b.
func merge(a, b *task) *task {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case prio(a) > prio(b):
		a.r = merge(a.r, b)
		a.resize()
		return a
	}
	b.l = merge(a, b.l)
	b.resize()
	return b
}

func insert(t, x *task) *task {
	if t == nil {
		return x
	}
	if prio(x) > prio(t) {
		x.l, x.r = split(t, x)
		x.resize()
		return x
	}
	if cmpTask(x, t) < 0 {
		t.l = insert(t.l, x)
	} else {
		t.r = insert(t.r, x)
	}
	t.resize()
	return t
}

func remove(t, x *task) *task {
	if t == nil {
		return nil
	}
	if t == x {
		m := merge(t.l, t.r)
		x.l, x.r, x.n = nil, nil, 0
		return m
	}
	if cmpTask(x, t) < 0 {
		t.l = remove(t.l, x)
	} else {
		t.r = remove(t.r, x)
	}
	t.resize()
	return t
}

// insert adds x, which is in no structure.
func (tr *taskTree) insert(x *task) {
	x.l, x.r, x.n = nil, nil, 1
	tr.root = insert(tr.root, x)
}

// remove takes x out. x's key (at, seq) must be the one it was inserted
// with: change t.at only while t is out of its tree.
func (tr *taskTree) remove(x *task) { tr.root = remove(tr.root, x) }

// min returns the first task, or nil.
func (tr *taskTree) min() *task { return leftmost(tr.root) }

// leftmost returns the first task of the tree rooted at t, or nil.
func leftmost(t *task) *task {
	for t != nil && t.l != nil {
		t = t.l
	}
	return t
}

// contains reports whether x is in the tree (found by its key).
func (tr *taskTree) contains(x *task) bool {
	for t := tr.root; t != nil; {
		switch c := cmpTask(x, t); {
		case t == x:
			return true
		case c < 0:
			t = t.l
		default:
			t = t.r
		}
	}
	return false
}

// ascending calls f for every task in order while f returns true.
func (tr *taskTree) ascending(f func(*task) bool) { ascendFrom(tr.root, 0, f) }

// ascendFrom calls f for the tasks from rank k (0 is the first) on, in
// order, while f returns true: O(log n) to reach rank k.
func (tr *taskTree) ascendFrom(k int, f func(*task) bool) { ascendFrom(tr.root, k, f) }

// ascendFrom calls f for the tasks of the tree rooted at root from rank k
// on, in order, while f returns true. It uses only the links and sizes, so
// it serves every tree whatever its key.
func ascendFrom(root *task, k int, f func(*task) bool) {
	var stack []*task // tasks still to visit, the next one on top
	for t := root; t != nil; {
		switch ls := int(size(t.l)); {
		case k < ls:
			stack = append(stack, t)
			t = t.l
		case k == ls:
			stack = append(stack, t)
			t = nil
		default:
			k -= ls + 1
			t = t.r
		}
	}
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !f(t) {
			return
		}
		for c := t.r; c != nil; c = c.l {
			stack = append(stack, c)
		}
	}
}

// descendFrom calls f for the tasks from rank k counted from the last (0 is
// the last) backwards, while f returns true.
func (tr *taskTree) descendFrom(k int, f func(*task) bool) {
	var stack []*task
	for t := tr.root; t != nil; {
		switch rs := int(size(t.r)); {
		case k < rs:
			stack = append(stack, t)
			t = t.r
		case k == rs:
			stack = append(stack, t)
			t = nil
		default:
			k -= rs + 1
			t = t.l
		}
	}
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !f(t) {
			return
		}
		for c := t.l; c != nil; c = c.r {
			stack = append(stack, c)
		}
	}
}

// build replaces the tree with the tasks of sorted (in order, each in no
// structure), balanced, in O(n). The priorities then do not form a heap,
// which costs nothing but the treap's balance guarantee for the tasks
// loaded; later inserts and removals keep the order right either way.
func (tr *taskTree) build(sorted []*task) { tr.root = buildTree(sorted) }

// buildTree links the tasks of sorted into a balanced tree in O(n) and
// returns its root.
func buildTree(sorted []*task) *task {
	var b func(ts []*task) *task
	b = func(ts []*task) *task {
		if len(ts) == 0 {
			return nil
		}
		m := len(ts) / 2
		t := ts[m]
		t.l, t.r = b(ts[:m]), b(ts[m+1:])
		t.resize()
		return t
	}
	return b(sorted)
}

// check walks the whole tree and reports the first inconsistency: an order
// or a size that is wrong. f is called for every task in order.
func (tr *taskTree) check(f func(*task)) error { return checkTree(tr.root, cmpTask, f) }

// checkTree is check for the tree rooted at root, ordered by cmp.
func checkTree(root *task, cmp func(a, b *task) int, f func(*task)) error {
	var prev *task
	var walk func(t *task) (int32, error)
	walk = func(t *task) (int32, error) {
		if t == nil {
			return 0, nil
		}
		nl, err := walk(t.l)
		if err != nil {
			return 0, err
		}
		if prev != nil && cmp(prev, t) >= 0 {
			return 0, fmt.Errorf("task %q after %q out of order", t.msg.ID, prev.msg.ID)
		}
		prev = t
		f(t)
		nr, err := walk(t.r)
		if err != nil {
			return 0, err
		}
		if t.n != 1+nl+nr {
			return 0, fmt.Errorf("task %q has size %d, its subtree %d", t.msg.ID, t.n, 1+nl+nr)
		}
		return t.n, nil
	}
	_, err := walk(root)
	return err
}

// cloneMsg returns a deep copy of m, so that callers never share memory with
// the broker.
func cloneMsg(m *base.TaskMessage) *base.TaskMessage {
	c := *m
	c.Payload = bytes.Clone(m.Payload) // keeps an empty payload apart from nil
	return &c
}

// normTime strips the monotonic reading and the location of t, so that a time
// held in memory is the same value as one decoded from disk.
func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.Unix(t.Unix(), int64(t.Nanosecond()))
}
