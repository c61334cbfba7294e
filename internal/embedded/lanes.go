package embedded

import (
	"cmp"
	"container/heap"
	"container/list"
	"math"
	"slices"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// lanes holds a queue's pending tasks, each in the lane it waits in (see
// broker.Broker.Fetch): one pendingList per priority above 0, and at
// priority 0 one for the tasks without a fair-sharing key and one per key.
// A fetch takes from the highest priority that has a task; at priority 0,
// while any task with a key is pending, it serves the lanes in turn (the
// rotation, ring), within each key's limits. A queue whose tasks have
// neither priority nor key only ever touches plain.
type lanes struct {
	plain pendingList
	// levels[p-1] holds the tasks of priority p; nil until one came.
	levels [base.MaxPriority]*pendingList
	// keys holds the state of every key that has pending or active tasks
	// or a rate bucket not yet full.
	keys map[string]*keyLane
	// keyed counts the pending tasks with a key.
	keyed int
	// ring is the rotation: *keyLane values, unkeyed standing for plain.
	ring list.List
	// unkeyed is plain's place in the rotation.
	unkeyed keyLane
	// waiting holds the keys out of the rotation until a token is due.
	waiting waitHeap
}

// keyLane is one key's lane and limits.
type keyLane struct {
	key     string
	pending pendingList
	// held counts the key's active tasks (KeyMaxConcurrency).
	held int
	// tokens is the rate bucket: tokens at tokensAt (zero time: full).
	tokens   float64
	tokensAt time.Time
	// elem is the lane's place in the ring, nil when out of it.
	elem *list.Element
	// waitUntil is when a waiting key gets its token; index its place in
	// the waiting heap (-1 when not waiting; unused for the lane without a
	// key, which never waits).
	waitUntil time.Time
	index     int
}

// listOf returns the tasks of lane kl: plain for the lane without a key.
func (ls *lanes) listOf(kl *keyLane) *pendingList {
	if kl == &ls.unkeyed {
		return &ls.plain
	}
	return &kl.pending
}

// key returns key k's lane, creating it.
func (ls *lanes) key(k string) *keyLane {
	if ls.keys == nil {
		ls.keys = make(map[string]*keyLane)
	}
	kl := ls.keys[k]
	if kl == nil {
		kl = &keyLane{key: k, index: -1}
		ls.keys[k] = kl
	}
	return kl
}

// laneOf returns the list t waits in (or would), creating it.
func (ls *lanes) laneOf(t *task) *pendingList {
	p := t.msg.Priority
	switch {
	case p > 0:
		if ls.levels[p-1] == nil {
			ls.levels[p-1] = &pendingList{}
		}
		return ls.levels[p-1]
	case t.msg.Key != "":
		return &ls.key(t.msg.Key).pending
	}
	return &ls.plain
}

// each calls f for every lane in list order (the highest priority first,
// then plain, then the keys by name) while f returns true.
func (ls *lanes) each(f func(l *pendingList) bool) {
	for p := base.MaxPriority; p >= 1; p-- {
		if l := ls.levels[p-1]; l != nil && !f(l) {
			return
		}
	}
	if !f(&ls.plain) || ls.keyed == 0 {
		return
	}
	names := make([]string, 0, len(ls.keys))
	for k, kl := range ls.keys {
		if kl.pending.Len() > 0 {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		if !f(&ls.keys[k].pending) {
			return
		}
	}
}

// Len returns how many tasks the lanes hold.
func (ls *lanes) Len() int {
	n := ls.plain.Len() + ls.keyed
	for _, l := range ls.levels {
		if l != nil {
			n += l.Len()
		}
	}
	return n
}

// pushBack appends t to its lane (see pendingList.pushBack); a key's lane
// that gets its first task joins the rotation.
func (ls *lanes) pushBack(t *task) {
	ls.laneOf(t).pushBack(t)
	ls.pushed(t)
}

// pushFront puts t at the head of its lane (see pendingList.pushFront).
func (ls *lanes) pushFront(t *task) {
	ls.laneOf(t).pushFront(t)
	ls.pushed(t)
}

func (ls *lanes) pushed(t *task) {
	if t.msg.Priority != 0 || t.msg.Key == "" {
		return
	}
	ls.keyed++
	if kl := ls.keys[t.msg.Key]; kl.pending.Len() == 1 {
		ls.join(kl)
	}
}

// join puts kl at the back of the rotation, after the lane without a key
// when that one holds tasks and is out of it.
func (ls *lanes) join(kl *keyLane) {
	if kl.elem != nil {
		return
	}
	if kl != &ls.unkeyed && ls.unkeyed.elem == nil && ls.plain.Len() > 0 {
		ls.unkeyed.elem = ls.ring.PushBack(&ls.unkeyed)
	}
	kl.elem = ls.ring.PushBack(kl)
}

// leave takes kl out of the rotation and of the waiting keys.
func (ls *lanes) leave(kl *keyLane) {
	if kl.elem != nil {
		ls.ring.Remove(kl.elem)
		kl.elem = nil
	}
	if kl != &ls.unkeyed && kl.index >= 0 {
		heap.Remove(&ls.waiting, kl.index)
	}
}

// remove takes t out of its lane; it does nothing when t is not there.
func (ls *lanes) remove(t *task) {
	l := ls.laneOf(t)
	n := l.Len()
	l.remove(t)
	if l.Len() < n {
		ls.taken(t)
	}
}

// taken updates the rotation after t left its lane: a lane left without
// tasks leaves the rotation, and with the last task with a key the
// rotation is cleared.
func (ls *lanes) taken(t *task) {
	if t.msg.Priority != 0 {
		return
	}
	if t.msg.Key == "" {
		if ls.plain.Len() == 0 {
			ls.leave(&ls.unkeyed)
		}
		return
	}
	ls.keyed--
	kl := ls.keys[t.msg.Key]
	if kl.pending.Len() == 0 {
		ls.leave(kl)
		if ls.keyed == 0 {
			ls.ring.Init()
			ls.unkeyed.elem = nil
		}
	}
}

// release frees the slot of active task t's key and reports whether its
// key, held back by its limit with tasks pending, rejoined the rotation.
func (ls *lanes) release(t *task, s *broker.QueueSettings, now time.Time) bool {
	if t.msg.Key == "" {
		return false
	}
	kl := ls.keys[t.msg.Key]
	kl.held--
	if kl.pending.Len() > 0 && kl.elem == nil && kl.index < 0 {
		ls.join(kl)
		return true
	}
	ls.forget(kl, s, now)
	return false
}

// forget drops kl's state when it holds nothing worth keeping: no task
// pending or active and a full rate bucket.
func (ls *lanes) forget(kl *keyLane, s *broker.QueueSettings, now time.Time) {
	if kl.pending.Len() == 0 && kl.held == 0 && kl.elem == nil && kl.index < 0 &&
		(s.KeyRateLimit == 0 || kl.bucket(s, now) >= float64(max1(s.KeyRateBurst))) {
		delete(ls.keys, kl.key)
	}
}

// bucket returns kl's rate tokens at now.
func (kl *keyLane) bucket(s *broker.QueueSettings, now time.Time) float64 {
	burst := float64(max1(s.KeyRateBurst))
	if kl.tokensAt.IsZero() {
		return burst
	}
	return min(burst, kl.tokens+max(0, now.Sub(kl.tokensAt).Seconds())*s.KeyRateLimit)
}

// popFront takes out the task fetched next and returns it, or nil; when
// tasks with a key are pending but their keys' limits (s) hold them all
// back, wait is how long until one may be fetched.
func (ls *lanes) popFront(s *broker.QueueSettings, now time.Time) (t *task, wait time.Duration) {
	for p := base.MaxPriority; p >= 1; p-- {
		if l := ls.levels[p-1]; l != nil {
			if t := l.popFront(); t != nil {
				return t, 0
			}
		}
	}
	if ls.keyed == 0 {
		t := ls.plain.popFront()
		if t != nil {
			ls.taken(t)
		}
		return t, 0
	}
	// Keys whose token is due rejoin, by due time then name.
	for ls.waiting.Len() > 0 && !ls.waiting[0].waitUntil.After(now) {
		ls.join(heap.Pop(&ls.waiting).(*keyLane))
	}
	if ls.plain.Len() > 0 {
		ls.join(&ls.unkeyed)
	}
	for e := ls.ring.Front(); e != nil; e = ls.ring.Front() {
		kl := e.Value.(*keyLane)
		ls.ring.Remove(e)
		kl.elem = nil
		if kl != &ls.unkeyed {
			if s.KeyMaxConcurrency > 0 && kl.held >= s.KeyMaxConcurrency {
				continue // held back until a task of the key ends
			}
			if s.KeyRateLimit > 0 {
				tokens := kl.bucket(s, now)
				if tokens < 1 {
					ms := math.Ceil((1 - tokens) * 1000 / s.KeyRateLimit)
					kl.waitUntil = now.Add(time.Duration(ms) * time.Millisecond)
					heap.Push(&ls.waiting, kl)
					continue
				}
				kl.tokens, kl.tokensAt = tokens-1, now
			}
			kl.held++
		}
		l := ls.listOf(kl)
		t := l.popFront()
		if l.Len() > 0 {
			kl.elem = ls.ring.PushBack(kl)
		}
		ls.taken(t)
		return t, 0
	}
	if ls.keyed == 0 {
		return nil, 0
	}
	if ls.waiting.Len() > 0 {
		wait = max(ls.waiting[0].waitUntil.Sub(now), time.Millisecond)
	}
	for _, kl := range ls.keys {
		if kl.pending.Len() > 0 && kl.index < 0 && (wait == 0 || wait > heldBackWait) {
			wait = heldBackWait
			break
		}
	}
	return nil, wait
}

// heldBackWait is the RetryIn of a fetch whose keys are all held back by
// KeyMaxConcurrency (a task's end sends an EventReady sooner).
const heldBackWait = 100 * time.Millisecond

// settingsChanged lets keys back into the rotation after s replaced old:
// every waiting key when KeyRateLimit is gone (by due time, then name),
// and those a raised or removed KeyMaxConcurrency made room for (by name).
func (ls *lanes) settingsChanged(s *broker.QueueSettings, now time.Time) {
	if s.KeyRateLimit == 0 {
		for ls.waiting.Len() > 0 {
			ls.join(heap.Pop(&ls.waiting).(*keyLane))
		}
		for _, kl := range ls.keys {
			kl.tokens, kl.tokensAt = 0, time.Time{}
		}
	}
	var back []*keyLane
	for _, kl := range ls.keys {
		if kl.pending.Len() > 0 && kl.elem == nil && kl.index < 0 &&
			(s.KeyMaxConcurrency == 0 || kl.held < s.KeyMaxConcurrency) {
			back = append(back, kl)
		}
	}
	slices.SortFunc(back, func(a, c *keyLane) int { return cmp.Compare(a.key, c.key) })
	for _, kl := range back {
		ls.join(kl)
	}
	for _, kl := range ls.keys {
		ls.forget(kl, s, now)
	}
}

// oldestHead returns, of the tasks at the head of their lane, the one that
// became pending first, or nil. (A requeued task counts from its requeue.)
func (ls *lanes) oldestHead() *task {
	var oldest *task
	ls.each(func(l *pendingList) bool {
		if h := l.first(); h != nil && (oldest == nil || h.at.Before(oldest.at)) {
			oldest = h
		}
		return true
	})
	return oldest
}

// ascendFrom calls f for the tasks from rank k on, in list order (lanes
// in the order of each, each from its head), while f returns true.
func (ls *lanes) ascendFrom(k int, f func(*task) bool) {
	more := true
	ls.each(func(l *pendingList) bool {
		if n := l.Len(); k >= n {
			k -= n
			return true
		}
		l.ascendFrom(k, func(t *task) bool {
			more = f(t)
			return more
		})
		k = 0
		return more
	})
}

// ascending calls f for every task in list order while f returns true.
func (ls *lanes) ascending(f func(*task) bool) { ls.ascendFrom(0, f) }

// build replaces the lanes with the tasks of sorted (by cmpOrder, each in
// no structure), keeping the orders they were stored with (used at open).
// The keys join the rotation in the order of their oldest task.
func (ls *lanes) build(sorted []*task) {
	by := map[*pendingList][]*task{}
	var joined []*keyLane
	for _, t := range sorted {
		l := ls.laneOf(t)
		if t.msg.Priority == 0 && t.msg.Key != "" {
			ls.keyed++
			if len(by[l]) == 0 {
				joined = append(joined, ls.keys[t.msg.Key])
			}
		}
		by[l] = append(by[l], t)
	}
	for l, ts := range by {
		l.build(ts)
	}
	for _, kl := range joined {
		ls.join(kl)
	}
}

// check walks every lane (see taskTree.check); f is called for every task
// with its lane, in list order.
func (ls *lanes) check(f func(l *pendingList, t *task)) error {
	var err error
	ls.each(func(l *pendingList) bool {
		err = l.check(func(t *task) { f(l, t) })
		return err == nil
	})
	return err
}

// waitHeap orders the waiting keys by due time, then name.
type waitHeap []*keyLane

func (h waitHeap) Len() int { return len(h) }
func (h waitHeap) Less(i, j int) bool {
	return cmp.Or(h[i].waitUntil.Compare(h[j].waitUntil), cmp.Compare(h[i].key, h[j].key)) < 0
}
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waitHeap) Push(x any) {
	kl := x.(*keyLane)
	kl.index = len(*h)
	*h = append(*h, kl)
}
func (h *waitHeap) Pop() any {
	old := *h
	kl := old[len(old)-1]
	old[len(old)-1] = nil
	kl.index = -1
	*h = old[:len(old)-1]
	return kl
}

// checkKeys reports to bad what is wrong with the fair-sharing state of
// queue name, whose tasks are tasks: each key's count of active tasks, the
// count of pending tasks with a key, and the rotation (every key lane with
// tasks is in it, waiting for a token or held back by its limit; no lane
// in it or waiting is empty).
func (ls *lanes) checkKeys(name string, tasks map[string]*task, bad func(format string, args ...any)) {
	held := map[string]int{}
	for _, t := range tasks {
		if t.state == base.StateActive && t.msg.Key != "" {
			held[t.msg.Key]++
		}
	}
	keyed := 0
	for k, kl := range ls.keys {
		keyed += kl.pending.Len()
		if kl.key != k || kl.held != held[k] {
			bad("key %q of %q counts %d active tasks, it has %d", k, name, kl.held, held[k])
		}
		delete(held, k)
		if kl.pending.Len() > 0 && kl.elem == nil && kl.index < 0 && kl.held == 0 {
			bad("key %q of %q has pending tasks but is neither in the rotation, waiting nor held back", k, name)
		}
		if kl.index >= 0 && (ls.waiting[kl.index] != kl || kl.pending.Len() == 0) {
			bad("key %q of %q waits wrongly", k, name)
		}
	}
	for k, n := range held {
		bad("key %q of %q has %d active tasks and no state", k, name, n)
	}
	if keyed != ls.keyed {
		bad("queue %q counts %d pending tasks with a key, it has %d", name, ls.keyed, keyed)
	}
	for e := ls.ring.Front(); e != nil; e = e.Next() {
		kl := e.Value.(*keyLane)
		if kl.elem != e || ls.listOf(kl).Len() == 0 || (kl != &ls.unkeyed && ls.keys[kl.key] != kl) {
			bad("the rotation of %q holds key %q wrongly", name, kl.key)
		}
	}
	if ls.keyed == 0 && ls.ring.Len() > 0 {
		bad("the rotation of %q holds %d lanes and no task with a key is pending", name, ls.ring.Len())
	}
}
