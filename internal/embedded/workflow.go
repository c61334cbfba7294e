package embedded

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Workflows (broker.Workflows). A workflow is held in memory with its
// graph linked both ways; each of its tasks is an ordinary task whose
// message names it. Every change of a workflow happens under b.mu in the
// same operation, and so in the same batch and bbolt transaction, as the
// task change that caused it: a completion and the release it causes
// reach the disk together or not at all.

// workflow is one stored workflow.
type workflow struct {
	id        string
	home      string // the queue of its first task
	digest    string
	created   time.Time
	finished  time.Time // when its last task finished; zero until then
	retention time.Duration
	canceled  bool
	left      int // tasks that have not finished
	tasks     []*wfTask
	byID      map[string]*wfTask
}

// wfTask is one task of a workflow.
type wfTask struct {
	id            string
	queue, taskID string
	processAt     time.Time
	deps          []base.Dependency
	succ          []wfEdge
	// remaining counts the dependencies that have not finished.
	remaining int
	outcome   base.Outcome
	err       string
	result    []byte
	finished  time.Time
}

// wfEdge leads from a task to one that depends on it.
type wfEdge struct {
	to     *wfTask
	policy base.DependencyPolicy
}

var _ broker.Workflows = (*Broker)(nil)

// EnqueueWorkflow stores w whole, or nothing, and returns once it is on
// disk.
func (b *Broker) EnqueueWorkflow(ctx context.Context, w *base.Workflow) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if w == nil {
		return fmt.Errorf("%w: enqueue workflow: no workflow", base.ErrInvalidArgument)
	}
	if err := w.Validate(); err != nil {
		return fmt.Errorf("enqueue workflow: %w", err)
	}
	digest := w.Digest()
	msgs := make([]*base.TaskMessage, len(w.Tasks))
	for i, t := range w.Tasks {
		msgs[i] = cloneMsg(t.Msg)
		msgs[i].Deadline = normTime(msgs[i].Deadline)
		msgs[i].LastFailedAt = normTime(msgs[i].LastFailedAt)
	}
	if err := b.begin(); err != nil {
		return err
	}
	now := b.now()
	if old := b.workflows[w.ID]; old != nil {
		var err error
		if old.digest != digest {
			err = fmt.Errorf("enqueue workflow: %w: workflow %q holds other tasks", base.ErrWorkflowIDConflict, w.ID)
		}
		t := b.settled()
		b.mu.Unlock()
		if err != nil {
			return err
		}
		return wait(ctx, t)
	}
	if err := b.checkWorkflowTasks(w, now); err != nil {
		b.mu.Unlock()
		return fmt.Errorf("enqueue workflow %q: %w", w.ID, err)
	}
	wf := &workflow{id: w.ID, home: w.Tasks[0].Msg.Queue, digest: digest, created: now, retention: w.KeepFor(),
		left: len(w.Tasks), byID: make(map[string]*wfTask, len(w.Tasks))}
	for _, t := range w.Tasks {
		wt := &wfTask{id: t.ID, queue: t.Msg.Queue, taskID: t.Msg.ID, processAt: normTime(t.ProcessAt),
			deps: slices.Clone(t.DependsOn), remaining: len(t.DependsOn)}
		wf.tasks = append(wf.tasks, wt)
		wf.byID[t.ID] = wt
	}
	wf.link()
	b.workflows[wf.id] = wf
	b.putWorkflow(wf)
	for i, wt := range wf.tasks {
		q := b.registerQueue(wt.queue)
		t := &task{seq: b.nextSeq, m: *msgs[i], at: now}
		t.msg = &t.m
		b.nextSeq++
		if t.msg.UniqueKey != "" {
			if old := q.unique[t.msg.UniqueKey]; old != nil {
				old.uniqueUntil = time.Time{} // its lock has expired
				b.putTask(old)
			}
			t.uniqueUntil = now.Add(t.msg.UniqueTTL)
			q.unique[t.msg.UniqueKey] = t
		}
		q.tasks[t.msg.ID] = t
		if len(wt.deps) > 0 {
			t.state = base.StateWaiting
			q.index(t)
			b.putTask(t)
		} else {
			b.startTask(q, t, wt.processAt, now)
		}
		b.logEvent(q.name, broker.LogEnqueued, t.msg.ID, t.state, "", now)
	}
	tk := b.durable()
	b.mu.Unlock()
	return wait(ctx, tk)
}

// checkWorkflowTasks checks that every task of w can be stored: its task
// ID is free in its queue and its uniqueness key (if any) is not locked,
// by another task or by one of w before it. The caller holds b.mu.
func (b *Broker) checkWorkflowTasks(w *base.Workflow, now time.Time) error {
	type lockKey struct{ queue, key string }
	locks := make(map[lockKey]bool)
	for _, t := range w.Tasks {
		m := t.Msg
		if q := b.queues[m.Queue]; q != nil {
			if q.tasks[m.ID] != nil {
				return &base.WorkflowError{Err: base.ErrTaskIDConflict, Tasks: []string{t.ID},
					Detail: fmt.Sprintf("task %q: queue %q holds a task with ID %q", t.ID, m.Queue, m.ID)}
			}
			if m.UniqueKey != "" && q.lockHolder(m.UniqueKey, now) != nil {
				return &base.WorkflowError{Err: base.ErrDuplicateTask, Tasks: []string{t.ID},
					Detail: fmt.Sprintf("task %q: uniqueness key %q of queue %q is locked", t.ID, m.UniqueKey, m.Queue)}
			}
		}
		if m.UniqueKey != "" {
			k := lockKey{m.Queue, m.UniqueKey}
			if locks[k] {
				return &base.WorkflowError{Err: base.ErrDuplicateTask, Tasks: []string{t.ID},
					Detail: fmt.Sprintf("task %q: an earlier task of the workflow holds uniqueness key %q of queue %q", t.ID, m.UniqueKey, m.Queue)}
			}
			locks[k] = true
		}
	}
	return nil
}

// link fills the successor lists from the dependencies.
func (wf *workflow) link() {
	for _, wt := range wf.tasks {
		for _, d := range wt.deps {
			dep := wf.byID[d.Task]
			dep.succ = append(dep.succ, wfEdge{to: wt, policy: d.Policy})
		}
	}
}

// startTask makes t (new, or leaving the waiting state) pending, or
// scheduled until at. The caller holds b.mu.
func (b *Broker) startTask(q *queue, t *task, at, now time.Time) {
	if at.After(now) {
		t.state = base.StateScheduled
		t.at = at
		q.index(t)
		b.putTask(t)
		b.emitScheduled(q, t)
		return
	}
	before := q.pending.Len()
	t.state = base.StatePending
	t.at = now // pending since
	q.pending.pushBack(t)
	b.putTask(t)
	b.readyIfFirst(q, before)
}

// renumber gives t, which is in no index, a new record number, so that
// Fetch hands it out only once the batch that released it is on disk (it
// waits for the record number's batch, see Broker.enqueueDurable): a
// crash cannot undo a release after the released task started. The
// caller holds b.mu.
func (b *Broker) renumber(t *task) {
	b.delTask(t)
	t.seq = b.nextSeq
	b.nextSeq++
}

// liveTask returns the task of wt and its queue, or nil when it no longer
// exists. The caller holds b.mu.
func (b *Broker) liveTask(wf *workflow, wt *wfTask) (*queue, *task) {
	q := b.queues[wt.queue]
	if q == nil {
		return nil, nil
	}
	t := q.tasks[wt.taskID]
	if t == nil || t.msg.Workflow != wf.id || t.msg.WorkflowTask != wt.id {
		return nil, nil
	}
	return q, t
}

// workflowOf returns the workflow task t belongs to, or nil. The caller
// holds b.mu.
func (b *Broker) workflowOf(t *task) (*workflow, *wfTask) {
	if t.msg.Workflow == "" {
		return nil, nil
	}
	wf := b.workflows[t.msg.Workflow]
	if wf == nil {
		return nil, nil // its record was deleted after its retention
	}
	wt := wf.byID[t.msg.WorkflowTask]
	if wt == nil {
		return nil, nil
	}
	return wf, wt
}

// finish applies outcome o of task t (see broker.Workflows): the first
// outcome of a workflow task is recorded, and released or canceled what
// depends on it. Tasks outside workflows are left alone. The caller holds
// b.mu.
func (b *Broker) finish(t *task, o base.Outcome, errMsg string, result []byte, now time.Time) {
	if wf, wt := b.workflowOf(t); wt != nil {
		b.finishTask(wf, wt, o, errMsg, result, now)
	}
}

// finishTask records the outcome of wt unless it has one, and applies it
// to its dependents, breadth first (a chain of 20,000 cancellations
// recurses nowhere). The caller holds b.mu.
func (b *Broker) finishTask(wf *workflow, wt *wfTask, o base.Outcome, errMsg string, result []byte, now time.Time) {
	if wt.outcome != base.OutcomeNone {
		return
	}
	b.setOutcome(wf, wt, o, errMsg, result, now)
	todo := []*wfTask{wt}
	for len(todo) > 0 {
		done := todo[0]
		todo = todo[1:]
		for _, e := range done.succ {
			s := e.to
			if s.outcome != base.OutcomeNone {
				continue
			}
			if done.outcome == base.OutcomeSucceeded || e.policy == base.RunOnFailure {
				s.remaining--
				if s.remaining == 0 {
					if q, t := b.liveTask(wf, s); t != nil && t.state == base.StateWaiting {
						q.unindex(t)
						b.renumber(t)
						b.startTask(q, t, s.processAt, now)
						b.logEvent(q.name, broker.LogReleased, t.msg.ID, t.state, "", now)
					}
				}
				continue
			}
			msg := base.CanceledByDependency(done.id, done.outcome)
			b.cancelTask(wf, s, msg, now)
			b.setOutcome(wf, s, base.OutcomeCanceled, msg, nil, now)
			todo = append(todo, s)
		}
	}
}

// setOutcome records how wt finished. The caller holds b.mu.
func (b *Broker) setOutcome(wf *workflow, wt *wfTask, o base.Outcome, errMsg string, result []byte, now time.Time) {
	wt.outcome, wt.err, wt.finished = o, errMsg, now
	if o == base.OutcomeSucceeded {
		wt.result = slices.Clone(result)
	}
	b.putOutcome(wf, wt)
	wf.left--
	if wf.left == 0 {
		wf.finished = now
		b.putWorkflowState(wf)
		m := b.doneWorkflows[wf.home]
		if m == nil {
			m = make(map[string]*workflow)
			b.doneWorkflows[wf.home] = m
		}
		m[wf.id] = wf
	}
}

// cancelTask archives the task of wt, with LastErr msg, unless it is
// active or has finished; it reports whether it did. The caller holds
// b.mu.
func (b *Broker) cancelTask(wf *workflow, wt *wfTask, msg string, now time.Time) bool {
	q, t := b.liveTask(wf, wt)
	if t == nil {
		return false
	}
	switch t.state {
	case base.StateWaiting, base.StatePending, base.StateScheduled, base.StateRetry:
	default:
		return false
	}
	q.unindex(t)
	t.state = base.StateArchived
	t.at = now
	t.msg.LastErr = msg
	t.msg.LastFailedAt = now
	q.releaseLock(t)
	q.index(t)
	b.putTask(t)
	b.logEvent(q.name, broker.LogCanceled, t.msg.ID, base.StateArchived, msg, now)
	return true
}

// GetWorkflow returns a workflow with its tasks' states and outcomes.
func (b *Broker) GetWorkflow(ctx context.Context, id string) (*base.WorkflowInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.begin(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	wf := b.workflows[id]
	if wf == nil {
		return nil, fmt.Errorf("get workflow: %w: %q", base.ErrWorkflowNotFound, id)
	}
	wi := &base.WorkflowInfo{ID: id, CreatedAt: wf.created, FinishedAt: wf.finished, Retention: wf.retention,
		Canceled: wf.canceled, Tasks: make([]*base.WorkflowTaskInfo, len(wf.tasks))}
	for i, wt := range wf.tasks {
		ti := &base.WorkflowTaskInfo{ID: wt.id, Queue: wt.queue, TaskID: wt.taskID, DependsOn: slices.Clone(wt.deps),
			Outcome: wt.outcome, LastErr: wt.err, Result: slices.Clone(wt.result), FinishedAt: wt.finished}
		if _, t := b.liveTask(wf, wt); t != nil {
			ti.State = t.state
		}
		wi.Tasks[i] = ti
	}
	return wi, nil
}

// CancelWorkflow cancels the workflow's tasks that have not finished and
// returns once that is on disk.
func (b *Broker) CancelWorkflow(ctx context.Context, id string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := b.begin(); err != nil {
		return 0, err
	}
	wf := b.workflows[id]
	if wf == nil {
		b.mu.Unlock()
		return 0, fmt.Errorf("cancel workflow: %w: %q", base.ErrWorkflowNotFound, id)
	}
	now := b.now()
	if !wf.canceled {
		wf.canceled = true
		b.putWorkflowState(wf)
	}
	n := 0
	msg := base.CanceledByWorkflow()
	for _, wt := range wf.tasks {
		if wt.outcome != base.OutcomeNone {
			continue
		}
		if _, t := b.liveTask(wf, wt); t != nil && t.state == base.StateActive {
			b.send(broker.Event{Kind: broker.EventCancel, Queue: wt.queue, TaskID: wt.taskID})
			continue
		}
		if b.cancelTask(wf, wt, msg, now) {
			n++
		}
		// Its dependents are canceled by this loop too: no rule applies.
		b.setOutcome(wf, wt, base.OutcomeCanceled, msg, nil, now)
	}
	tk := b.durable()
	b.mu.Unlock()
	return n, wait(ctx, tk)
}

// DependencyResults returns the outcomes of the dependencies of the task
// l holds.
func (b *Broker) DependencyResults(ctx context.Context, l broker.LeaseRef) ([]base.DependencyResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.begin(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	_, t, err := b.held(l)
	if err != nil {
		return nil, fmt.Errorf("dependency results: %w", err)
	}
	wf, wt := b.workflowOf(t)
	if wt == nil || len(wt.deps) == 0 {
		return nil, nil
	}
	out := make([]base.DependencyResult, len(wt.deps))
	for i, d := range wt.deps {
		dep := wf.byID[d.Task]
		out[i] = base.DependencyResult{ID: dep.id, Queue: dep.queue, TaskID: dep.taskID, Policy: d.Policy,
			Outcome: dep.outcome, LastErr: dep.err, Result: slices.Clone(dep.result)}
	}
	return out, nil
}

// DeleteExpiredWorkflows deletes the records of finished workflows homed in
// queue whose retention has run out. It does not wait for the disk: a
// crash leaves them to be deleted again.
func (b *Broker) DeleteExpiredWorkflows(ctx context.Context, queue string, limit int) (int, error) {
	if err := b.beginSweep(ctx, "delete expired workflows", queue, limit); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	now := b.now()
	var due []*workflow
	for _, wf := range b.doneWorkflows[queue] {
		if !now.Before(wf.finished.Add(wf.retention)) {
			due = append(due, wf)
		}
	}
	slices.SortFunc(due, func(a, c *workflow) int {
		return a.finished.Add(a.retention).Compare(c.finished.Add(c.retention))
	})
	due = due[:min(len(due), limit)]
	for _, wf := range due {
		delete(b.workflows, wf.id)
		delete(b.doneWorkflows[queue], wf.id)
		b.dropWorkflow(wf)
	}
	return len(due), nil
}
