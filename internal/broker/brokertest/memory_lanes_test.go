package brokertest_test

import (
	"cmp"
	"context"
	"math"
	"slices"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// The reference's reading of priorities and fair sharing (Broker.Fetch's
// doc): q.pending holds the pending tasks in the order they became pending
// (a requeued task first). A task of priority p > 0 waits in the lane of
// p; a task of priority 0 in the lane of its key ("" for none). Every
// lane is in q.pending order; nothing is indexed.

// memFair is the rotation state of a queue.
type memFair struct {
	ring    []string             // lanes in turn order; "" is the lane without a key
	waiting map[string]time.Time // keys out of the rotation until a token is due
	held    map[string]int       // active tasks per key
	buckets map[string]memBucket // rate buckets per key (absent: full)
}

type memBucket struct {
	tokens float64
	at     time.Time
}

func (f *memFair) init() {
	if f.waiting == nil {
		f.waiting, f.held, f.buckets = map[string]time.Time{}, map[string]int{}, map[string]memBucket{}
	}
}

// laneOf names the lane of t: its key, or for priority p > 0, "\x00p"
// (no key holds a control character).
func laneOf(t *memTask) string {
	if t.msg.Priority > 0 {
		return "\x00" + string(rune('0'+t.msg.Priority))
	}
	return t.msg.Key
}

// laneTasks returns the pending tasks of lane, in fetch order.
func (q *memQueue) laneTasks(lane string) []*memTask {
	var out []*memTask
	for _, id := range q.pending {
		if t := q.tasks[id]; laneOf(t) == lane {
			out = append(out, t)
		}
	}
	return out
}

// keyedPending tells whether a task with a key is pending.
func (q *memQueue) keyedPending() bool {
	for _, id := range q.pending {
		if t := q.tasks[id]; t.msg.Priority == 0 && t.msg.Key != "" {
			return true
		}
	}
	return false
}

func (q *memQueue) inRing(lane string) bool { return slices.Contains(q.fair.ring, lane) }

func (q *memQueue) leaveRing(lane string) {
	q.fair.ring = slices.DeleteFunc(q.fair.ring, func(s string) bool { return s == lane })
}

// join puts key k's lane at the back of the rotation, after the lane
// without a key when that one holds tasks and is out of it.
func (q *memQueue) join(k string) {
	q.fair.init()
	if q.inRing(k) {
		return
	}
	if k != "" && !q.inRing("") && len(q.laneTasks("")) > 0 {
		q.fair.ring = append(q.fair.ring, "")
	}
	q.fair.ring = append(q.fair.ring, k)
}

// pushed is called when t became pending: a keyed lane that got its first
// task joins the rotation.
func (q *memQueue) pushed(t *memTask) {
	if t.msg.Priority == 0 && t.msg.Key != "" && len(q.laneTasks(t.msg.Key)) == 1 {
		q.join(t.msg.Key)
	}
}

// removePending takes pending task id out of q.pending; a keyed lane left
// without tasks leaves the rotation, and with the last keyed task the
// rotation is cleared.
func (q *memQueue) removePending(id string) {
	t := q.tasks[id]
	q.pending = slices.DeleteFunc(q.pending, func(s string) bool { return s == id })
	q.emptied(t)
}

func (q *memQueue) emptied(t *memTask) {
	q.fair.init()
	if t.msg.Priority != 0 || len(q.laneTasks(t.msg.Key)) > 0 {
		return
	}
	if t.msg.Key == "" {
		q.leaveRing("")
	} else {
		q.leaveRing(t.msg.Key)
		delete(q.fair.waiting, t.msg.Key)
	}
	if !q.keyedPending() {
		q.fair.ring = nil
	}
}

// release is called when active task t ends: its key's slot is free, and
// a key held back by its limit whose lane holds tasks rejoins.
func (b *memBroker) release(q *memQueue, name string, t *memTask) {
	k := t.msg.Key
	if k == "" {
		return
	}
	q.fair.init()
	if q.fair.held[k]--; q.fair.held[k] <= 0 {
		delete(q.fair.held, k)
	}
	if len(q.laneTasks(k)) > 0 && !q.inRing(k) {
		if _, waits := q.fair.waiting[k]; !waits {
			q.join(k)
			b.publish(broker.EventReady, name)
		}
	}
}

// tokens returns key k's bucket at now.
func (q *memQueue) keyTokens(k string, now time.Time) float64 {
	s := q.settings
	burst := float64(max(s.KeyRateBurst, 1))
	bk, ok := q.fair.buckets[k]
	if !ok {
		return burst
	}
	return min(burst, bk.tokens+max(0, now.Sub(bk.at).Seconds())*s.KeyRateLimit)
}

// takeNext takes the task fetched next out of q.pending and returns its
// ID; false when none may be taken. wait is set (for a ThrottledError)
// when keyed tasks are pending but their keys' limits hold them all back.
func (q *memQueue) takeNext(now time.Time) (id string, ok bool, wait time.Duration) {
	q.fair.init()
	best := -1
	for i, id := range q.pending {
		if p := q.tasks[id].msg.Priority; p > 0 && (best < 0 || p > q.tasks[q.pending[best]].msg.Priority) {
			best = i
		}
	}
	if best >= 0 {
		id := q.pending[best]
		q.pending = slices.Delete(q.pending, best, best+1)
		return id, true, 0
	}
	if !q.keyedPending() {
		if lane := q.laneTasks(""); len(lane) > 0 {
			q.removePending(lane[0].msg.ID)
			return lane[0].msg.ID, true, 0
		}
		return "", false, 0
	}
	// Keys whose token is due rejoin, by due time then name.
	var due []string
	for k, at := range q.fair.waiting {
		if !at.After(now) {
			due = append(due, k)
		}
	}
	q.sortWaiting(due)
	for _, k := range due {
		delete(q.fair.waiting, k)
		q.join(k)
	}
	if !q.inRing("") && len(q.laneTasks("")) > 0 {
		q.fair.ring = append(q.fair.ring, "")
	}
	s := q.settings
	for len(q.fair.ring) > 0 {
		k := q.fair.ring[0]
		q.fair.ring = q.fair.ring[1:]
		if k != "" && s.KeyMaxConcurrency > 0 && q.fair.held[k] >= s.KeyMaxConcurrency {
			continue // held back until a task of k ends
		}
		if k != "" && s.KeyRateLimit > 0 {
			if tk := q.keyTokens(k, now); tk < 1 {
				ms := math.Ceil((1 - tk) * 1000 / s.KeyRateLimit)
				q.fair.waiting[k] = now.Add(time.Duration(ms) * time.Millisecond)
				continue
			} else {
				q.fair.buckets[k] = memBucket{tokens: tk - 1, at: now}
			}
		}
		t := q.laneTasks(k)[0]
		q.pending = slices.DeleteFunc(q.pending, func(s string) bool { return s == t.msg.ID })
		if k != "" {
			q.fair.held[k]++
		}
		if len(q.laneTasks(k)) > 0 {
			q.fair.ring = append(q.fair.ring, k)
		} else {
			q.emptied(t)
		}
		return t.msg.ID, true, 0
	}
	if !q.keyedPending() {
		return "", false, 0
	}
	for _, at := range q.fair.waiting {
		if d := max(at.Sub(now), time.Millisecond); wait == 0 || d < wait {
			wait = d
		}
	}
	for k := range q.fair.held {
		if _, waits := q.fair.waiting[k]; !waits && len(q.laneTasks(k)) > 0 && (wait == 0 || wait > 100*time.Millisecond) {
			wait = 100 * time.Millisecond // held back by KeyMaxConcurrency
		}
	}
	return "", false, wait
}

// sortWaiting sorts waiting keys by the time their token is due, then by
// name: the order in which they rejoin the rotation.
func (q *memQueue) sortWaiting(keys []string) {
	slices.SortFunc(keys, func(a, c string) int {
		return cmp.Or(q.fair.waiting[a].Compare(q.fair.waiting[c]), cmp.Compare(a, c))
	})
}

// settingsChanged lets keys back into the rotation under the new settings s:
// those a raised or removed KeyMaxConcurrency made room for, by name, and
// every waiting key when KeyRateLimit is removed, by due time then name.
func (q *memQueue) settingsChanged(s broker.QueueSettings) {
	q.fair.init()
	if s.KeyRateLimit == 0 {
		var keys []string
		for k := range q.fair.waiting {
			keys = append(keys, k)
		}
		q.sortWaiting(keys)
		for _, k := range keys {
			delete(q.fair.waiting, k)
			q.join(k)
		}
		q.fair.buckets = map[string]memBucket{}
	}
	var keys []string
	for k, n := range q.fair.held {
		if _, waits := q.fair.waiting[k]; !waits && !q.inRing(k) && len(q.laneTasks(k)) > 0 &&
			(s.KeyMaxConcurrency == 0 || n < s.KeyMaxConcurrency) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		q.join(k)
	}
}

// pendingInListOrder returns q's pending tasks in the order ListTasks
// gives them: by priority, highest first; then the tasks without a key;
// then each key's, keys by name; each lane in fetch order.
func (q *memQueue) pendingInListOrder() []*memTask {
	out := make([]*memTask, len(q.pending))
	for i, id := range q.pending {
		out[i] = q.tasks[id]
	}
	slices.SortStableFunc(out, func(a, c *memTask) int {
		return cmp.Or(c.msg.Priority-a.msg.Priority, cmp.Compare(a.msg.Key, c.msg.Key))
	})
	return out
}

// oldestPending returns the earliest time a task at the head of its lane
// became pending, or the zero time.
func (q *memQueue) oldestPending() time.Time {
	var oldest time.Time
	seen := map[string]bool{}
	for _, id := range q.pending {
		t := q.tasks[id]
		if seen[laneOf(t)] {
			continue
		}
		seen[laneOf(t)] = true
		if oldest.IsZero() || t.since.Before(oldest) {
			oldest = t.since
		}
	}
	return oldest
}

func (b *memBroker) ListKeys(_ context.Context, queue string) ([]broker.KeyStats, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if err := base.ValidateQueueName(queue); err != nil {
		return nil, err
	}
	q := b.queues[queue]
	if q == nil {
		return nil, nil
	}
	by := map[string]*broker.KeyStats{}
	for _, t := range q.tasks {
		k := t.msg.Key
		if k == "" || (t.state != base.StatePending && t.state != base.StateActive) {
			continue
		}
		if by[k] == nil {
			by[k] = &broker.KeyStats{Key: k}
		}
		if t.state == base.StatePending {
			by[k].Pending++
		} else {
			by[k].Active++
		}
	}
	out := make([]broker.KeyStats, 0, len(by))
	for _, s := range by {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, c broker.KeyStats) int { return cmp.Compare(a.Key, c.Key) })
	return out, nil
}
