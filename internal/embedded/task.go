package embedded

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// task is one task as the broker holds it in memory. Its persistent fields
// are exactly what encodeTask writes; the links and heap index are rebuilt
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
	// when it was archived, when it was enqueued (aggregating). One field
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

	// in-memory state, not persisted
	prev, next *task   // pending list
	set        *aggSet // the aggregation set holding this aggregating task
	heapIdx    int32   // position in the heap of its state, -1 when in none
	watched    bool    // WatchTask: completing or archiving sends EventDone
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
	pending   pendingList
	active    *taskHeap // by lease deadline (task.at, as in every heap)
	scheduled *taskHeap // by due time
	retry     *taskHeap // by due time
	archived  *taskHeap // by archive time
	completed *taskHeap // by end of retention
	groups    map[string]map[string]*task
	unique    map[string]*task // uniqueness key → task holding the lock
}

// newQueue returns an empty queue with room for size tasks.
func newQueue(name string, size int) *queue {
	return &queue{
		name:      name,
		tasks:     make(map[string]*task, size),
		active:    &taskHeap{},
		scheduled: &taskHeap{},
		retry:     &taskHeap{},
		archived:  &taskHeap{},
		completed: &taskHeap{},
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
// then max concurrency, rate limit (float64 bits), burst and lease.
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
	return binary.AppendVarint(b, int64(q.settings.LeaseDuration))
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

// heapOf returns the heap that holds tasks of state s, or nil for the states
// kept elsewhere (pending, aggregating).
func (q *queue) heapOf(s base.TaskState) *taskHeap {
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
	}
	return nil
}

// index puts t into the structure of its state (a pending task at the back
// of the list, with a new order).
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
		heap.Push(q.heapOf(t.state), t)
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
		heap.Remove(q.heapOf(t.state), int(t.heapIdx))
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

// pendingList is a doubly linked list of pending tasks in fetch order. The
// orders it hands out keep front <= every order <= back, increasing from head
// to tail.
type pendingList struct {
	head, tail  *task
	n           int
	front, back int64
}

// pushBack appends t with an order after every other.
func (l *pendingList) pushBack(t *task) {
	l.back++
	t.order = l.back
	l.link(t)
}

// appendLoaded appends t keeping the order it was stored with; the caller
// appends in increasing order (used at open).
func (l *pendingList) appendLoaded(t *task) {
	l.front = min(l.front, t.order)
	l.back = max(l.back, t.order)
	l.link(t)
}

func (l *pendingList) link(t *task) {
	t.prev, t.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = t
	} else {
		l.head = t
	}
	l.tail = t
	l.n++
}

// pushFront prepends t with an order before every other.
func (l *pendingList) pushFront(t *task) {
	l.front--
	t.order = l.front
	t.prev, t.next = nil, l.head
	if l.head != nil {
		l.head.prev = t
	} else {
		l.tail = t
	}
	l.head = t
	l.n++
}

func (l *pendingList) remove(t *task) {
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		l.head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else {
		l.tail = t.prev
	}
	t.prev, t.next = nil, nil
	l.n--
}

// taskHeap is a min-heap of tasks by task.at, ties broken by sequence
// number so that the order is total and the same after a reopen.
type taskHeap struct {
	items []*task
}

func (h *taskHeap) Len() int           { return len(h.items) }
func (h *taskHeap) Less(i, j int) bool { return h.cmp(h.items[i], h.items[j]) < 0 }

// cmp orders a and b by at, then by sequence number.
func (h *taskHeap) cmp(a, b *task) int {
	if c := a.at.Compare(b.at); c != 0 {
		return c
	}
	return cmpSeq(a, b)
}
func (h *taskHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].heapIdx = int32(i)
	h.items[j].heapIdx = int32(j)
}

// Push implements heap.Interface; use heap.Push.
func (h *taskHeap) Push(x any) {
	t := x.(*task)
	t.heapIdx = int32(len(h.items))
	h.items = append(h.items, t)
}

// Pop implements heap.Interface; use heap.Pop.
func (h *taskHeap) Pop() any {
	n := len(h.items) - 1
	t := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	t.heapIdx = -1
	return t
}

// peek returns the smallest task or nil.
func (h *taskHeap) peek() *task {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

// fix restores the heap after the key of t changed.
func (h *taskHeap) fix(t *task) { heap.Fix(h, int(t.heapIdx)) }

// ascending calls f for tasks in key order while f returns true, without
// changing the heap. It costs O(k log k) for k visited tasks.
func (h *taskHeap) ascending(f func(*task) bool) {
	if len(h.items) == 0 {
		return
	}
	// A small heap of candidate positions in h.items.
	c := &idxHeap{h: h, idx: []int{0}}
	for c.Len() > 0 {
		i := heap.Pop(c).(int)
		if !f(h.items[i]) {
			return
		}
		for _, child := range [2]int{2*i + 1, 2*i + 2} {
			if child < len(h.items) {
				heap.Push(c, child)
			}
		}
	}
}

type idxHeap struct {
	h   *taskHeap
	idx []int
}

func (c *idxHeap) Len() int           { return len(c.idx) }
func (c *idxHeap) Less(i, j int) bool { return c.h.Less(c.idx[i], c.idx[j]) }
func (c *idxHeap) Swap(i, j int)      { c.idx[i], c.idx[j] = c.idx[j], c.idx[i] }
func (c *idxHeap) Push(x any)         { c.idx = append(c.idx, x.(int)) }
func (c *idxHeap) Pop() any {
	n := len(c.idx) - 1
	x := c.idx[n]
	c.idx = c.idx[:n]
	return x
}

// cloneMsg returns a deep copy of m, so that callers never share memory with
// the broker.
func cloneMsg(m *base.TaskMessage) *base.TaskMessage {
	c := *m
	if m.Payload != nil {
		c.Payload = append([]byte(nil), m.Payload...)
	}
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

// init orders the heap after its items were appended directly (at open).
func (h *taskHeap) init() { heap.Init(h) }
