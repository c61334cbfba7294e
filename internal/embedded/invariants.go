package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/htqueue/htq/internal/base"
)

// CheckInvariants verifies that the broker's state is whole: every task is
// in exactly the index of its state, an active task has a lease and only an
// active task has one, every index entry belongs to a task of its queue,
// uniqueness locks belong to the tasks that hold them, and (for a file
// store) the file holds exactly the records memory describes. It waits for
// pending writes first. The conformance suite calls it after each test.
func (b *Broker) CheckInvariants(ctx context.Context) error {
	for {
		if err := b.begin(); err != nil {
			return err
		}
		t := b.settled()
		if t == nil {
			break // b.mu is held
		}
		b.mu.Unlock()
		if err := wait(ctx, t); err != nil {
			return err
		}
	}
	defer b.mu.Unlock()
	// The file is compared with memory: bring its checkpoint up to the
	// log first.
	if err := b.checkpointLocked(); err != nil {
		return err
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	seqs := make(map[uint64]*task)
	for name, q := range b.queues {
		if q.name != name {
			bad("queue %q indexed as %q", q.name, name)
		}
		seen := 0
		for id, t := range q.tasks {
			if t.msg.ID != id || t.msg.Queue != name {
				bad("task %q/%q indexed as %q/%q", t.msg.Queue, t.msg.ID, name, id)
			}
			if other := seqs[t.seq]; other != nil {
				bad("tasks %q and %q share record %d", other.msg.ID, id, t.seq)
			}
			seqs[t.seq] = t
			if t.seq >= b.nextSeq {
				bad("task %q has record %d beyond the next sequence number %d", id, t.seq, b.nextSeq)
			}
			if (t.state == base.StateActive) != (t.token != "") {
				bad("task %q in state %v has lease token %q", id, t.state, t.token)
			}
			if t.at.IsZero() {
				bad("task %q in state %v has no time (due, lease deadline, …)", id, t.state)
			}
			if (t.state == base.StateCompleted) == t.completedAt.IsZero() {
				bad("task %q in state %v has completion time %v", id, t.state, t.completedAt)
			}
			switch t.state {
			case base.StatePending:
				// checked by the walk of the pending list below
			case base.StateAggregating:
				if t.set != nil {
					if q.sets[t.set.id] != t.set || !slices.Contains(t.set.tasks, t) || t.set.group != t.msg.GroupKey {
						bad("aggregating task %q missing from its aggregation set", id)
					}
				} else if q.groups[t.msg.GroupKey][id] != t {
					bad("aggregating task %q missing from group %q", id, t.msg.GroupKey)
				}
			case base.StateActive, base.StateScheduled, base.StateRetry, base.StateArchived, base.StateCompleted, base.StateWaiting:
				if !q.treeOf(t.state).contains(t) {
					bad("task %q in state %v missing from its index", id, t.state)
				}
			default:
				bad("task %q has unknown state %d", id, t.state)
			}
			if !t.uniqueUntil.IsZero() && t.msg.UniqueKey == "" {
				bad("task %q holds a uniqueness lock without a key", id)
			}
		}
		// The pending lanes: each ordered by strictly increasing order,
		// sizes right, all pending tasks, each in its own lane.
		var prev *task
		var prevLane *pendingList
		if err := q.pending.check(func(l *pendingList, t *task) {
			seen++
			if q.tasks[t.msg.ID] != t || t.state != base.StatePending {
				bad("pending list of %q holds %q in state %v", name, t.msg.ID, t.state)
			}
			if l != q.pending.laneOf(t) {
				bad("pending task %q of %q is in another lane than its own", t.msg.ID, name)
			}
			if prev != nil && prevLane == l && prev.order >= t.order {
				bad("pending list of %q: %q has order %d after order %d", name, t.msg.ID, t.order, prev.order)
			}
			if t.order < l.front || t.order > l.back {
				bad("pending task %q has order %d outside [%d, %d]", t.msg.ID, t.order, l.front, l.back)
			}
			prev, prevLane = t, l
		}); err != nil {
			bad("pending list of %q: %v", name, err)
		}
		for state, tr := range map[base.TaskState]*taskTree{base.StateActive: q.active, base.StateScheduled: q.scheduled,
			base.StateRetry: q.retry, base.StateArchived: q.archived, base.StateCompleted: q.completed, base.StateWaiting: q.waiting} {
			if err := tr.check(func(t *task) {
				seen++
				if t.state != state || q.tasks[t.msg.ID] != t {
					bad("%v index of %q holds %q (state %v)", state, name, t.msg.ID, t.state)
				}
			}); err != nil {
				bad("%v index of %q: %v", state, name, err)
			}
		}
		for g, members := range q.groups {
			if len(members) == 0 {
				bad("group %q of %q is empty", g, name)
			}
			for id, t := range members {
				seen++
				if q.tasks[id] != t || t.state != base.StateAggregating || t.msg.GroupKey != g {
					bad("group %q of %q holds %q wrongly", g, name, id)
				}
			}
		}
		for sid, set := range q.sets {
			for _, t := range set.tasks {
				seen++
				if q.tasks[t.msg.ID] != t || t.state != base.StateAggregating || t.set != set || set.id != sid {
					bad("aggregation set %q of %q holds %q wrongly", sid, name, t.msg.ID)
				}
			}
		}
		if seen != len(q.tasks) {
			bad("queue %q has %d tasks but %d index entries", name, len(q.tasks), seen)
		}
		for key, t := range q.unique {
			if q.tasks[t.msg.ID] != t || t.msg.UniqueKey != key || t.uniqueUntil.IsZero() {
				bad("uniqueness lock %q of %q held by %q wrongly", key, name, t.msg.ID)
			}
		}
		q.pending.checkKeys(name, q.tasks, bad)
	}
	b.checkWorkflows(bad)
	if b.store != nil && len(errs) == 0 {
		recs, specs, err := b.store.workflowRecords()
		if err != nil {
			return err
		}
		stored, err := loadWorkflows(recs, specs)
		if err != nil {
			bad("workflow records: %v", err)
		}
		for id, wf := range b.workflows {
			if s := stored[id]; s == nil || !sameWorkflow(s, wf) {
				bad("workflow %q differs in the file", id)
			}
			delete(stored, id)
		}
		for id := range stored {
			bad("workflow %q is in the file but not in memory", id)
		}
	}
	if b.store != nil && len(errs) == 0 {
		recs, err := b.store.records()
		if err != nil {
			return err
		}
		for seq, t := range seqs {
			rec, ok := recs[seq]
			switch {
			case !ok:
				bad("task %q of %q (record %d) is not in the file", t.msg.ID, t.msg.Queue, seq)
			case !bytes.Equal(rec, encodeTask(t)):
				bad("task %q of %q (record %d) differs in the file", t.msg.ID, t.msg.Queue, seq)
			}
			delete(recs, seq)
		}
		for seq := range recs {
			bad("record %d is in the file but no task in memory", seq)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("htq: embedded broker invariants broken: %w", errors.Join(errs...))
	}
	return nil
}

// checkWorkflows checks that each workflow's counts agree with its
// outcomes, that a task with unfinished dependencies is waiting, and that
// a finished workflow is listed as such. The caller holds b.mu.
func (b *Broker) checkWorkflows(bad func(string, ...any)) {
	for id, wf := range b.workflows {
		left := 0
		for _, wt := range wf.tasks {
			if wt.outcome != base.OutcomeNone {
				continue
			}
			left++
			remaining := 0
			for _, d := range wt.deps {
				if wf.byID[d.Task].outcome == base.OutcomeNone {
					remaining++
				}
			}
			if remaining != wt.remaining {
				bad("workflow %q task %q counts %d dependencies left, its outcomes say %d", id, wt.id, wt.remaining, remaining)
			}
			if _, t := b.liveTask(wf, wt); t != nil && (remaining > 0) != (t.state == base.StateWaiting) && !wf.canceled {
				bad("workflow %q task %q is %v with %d dependencies left", id, wt.id, t.state, remaining)
			}
		}
		if left != wf.left || (left == 0) == wf.finished.IsZero() {
			bad("workflow %q counts %d tasks left (finished %v), its outcomes say %d", id, wf.left, wf.finished, left)
		}
		if (b.doneWorkflows[wf.home][id] == wf) != (left == 0) {
			bad("workflow %q with %d tasks left is listed as finished: %v", id, left, left != 0)
		}
	}
}

// sameWorkflow tells whether two workflows hold the same record: spec,
// state and outcomes.
func sameWorkflow(a, c *workflow) bool {
	if a.id != c.id || a.home != c.home || a.digest != c.digest || !a.created.Equal(c.created) ||
		a.retention != c.retention || a.canceled != c.canceled || !a.finished.Equal(c.finished) ||
		a.left != c.left || len(a.tasks) != len(c.tasks) {
		return false
	}
	for i, x := range a.tasks {
		y := c.tasks[i]
		if x.id != y.id || x.queue != y.queue || x.taskID != y.taskID || !x.processAt.Equal(y.processAt) ||
			!slices.Equal(x.deps, y.deps) || (x.outcome == base.OutcomeNone && x.remaining != y.remaining) || x.outcome != y.outcome ||
			x.err != y.err || !bytes.Equal(x.result, y.result) || !x.finished.Equal(y.finished) {
			return false
		}
	}
	return true
}
