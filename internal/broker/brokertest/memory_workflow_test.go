package brokertest_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// The broker.Workflows part of memBroker, the suite's reference: a
// straightforward reading of broker.Workflows' doc comment. Outcomes are
// applied recursively; nothing is indexed.

var _ broker.Workflows = (*memBroker)(nil)

type memWorkflow struct {
	w        *base.Workflow
	digest   string
	created  time.Time
	finished time.Time
	canceled bool
	left     int
	tasks    map[string]*memWFTask
}

type memEdge struct {
	to     string
	policy base.DependencyPolicy
}

type memWFTask struct {
	spec      *base.WorkflowTask
	remaining int
	succ      []memEdge
	outcome   base.Outcome
	err       string
	result    []byte
	finished  time.Time
}

// task returns the live task of wt, or nil when it no longer exists.
func (b *memBroker) wfLive(w *memWorkflow, wt *memWFTask) (*memQueue, *memTask) {
	q := b.queues[wt.spec.Msg.Queue]
	if q == nil {
		return nil, nil
	}
	t := q.tasks[wt.spec.Msg.ID]
	if t == nil || t.msg.Workflow != w.w.ID {
		return nil, nil
	}
	return q, t
}

func (b *memBroker) EnqueueWorkflow(_ context.Context, w *base.Workflow) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	if w == nil {
		return base.ErrInvalidArgument
	}
	if err := w.Validate(); err != nil {
		return err
	}
	digest := w.Digest()
	if old := b.workflows[w.ID]; old != nil {
		if old.digest == digest {
			return nil
		}
		return base.ErrWorkflowIDConflict
	}
	now := b.clock.Now()
	type qk struct{ q, k string }
	locks := map[qk]bool{}
	for _, t := range w.Tasks {
		m := t.Msg
		if q := b.queues[m.Queue]; q != nil {
			if q.tasks[m.ID] != nil {
				return &base.WorkflowError{Err: base.ErrTaskIDConflict, Tasks: []string{t.ID}, Detail: "taken"}
			}
			if l, ok := q.locks[m.UniqueKey]; ok && m.UniqueKey != "" && now.Before(l.expires) {
				return &base.WorkflowError{Err: base.ErrDuplicateTask, Tasks: []string{t.ID}, Detail: "locked"}
			}
		}
		if m.UniqueKey != "" {
			if locks[qk{m.Queue, m.UniqueKey}] {
				return &base.WorkflowError{Err: base.ErrDuplicateTask, Tasks: []string{t.ID}, Detail: "locked"}
			}
			locks[qk{m.Queue, m.UniqueKey}] = true
		}
	}
	mw := &memWorkflow{digest: digest, created: now, left: len(w.Tasks), tasks: map[string]*memWFTask{},
		w: &base.Workflow{ID: w.ID, Retention: w.KeepFor()}}
	for _, t := range w.Tasks {
		c := *t
		c.Msg = cloneMsg(t.Msg)
		c.DependsOn = slices.Clone(t.DependsOn)
		mw.w.Tasks = append(mw.w.Tasks, &c)
		mw.tasks[t.ID] = &memWFTask{spec: &c, remaining: len(t.DependsOn)}
	}
	for _, t := range w.Tasks {
		for _, d := range t.DependsOn {
			mw.tasks[d.Task].succ = append(mw.tasks[d.Task].succ, memEdge{t.ID, d.Policy})
		}
	}
	b.workflows[w.ID] = mw
	for _, st := range mw.w.Tasks {
		q := b.queue(st.Msg.Queue)
		t := &memTask{msg: cloneMsg(st.Msg)}
		t.since, t.seq = now, b.nextSeq()
		q.tasks[st.Msg.ID] = t
		if st.Msg.UniqueKey != "" {
			q.locks[st.Msg.UniqueKey] = memLock{id: st.Msg.ID, expires: now.Add(st.Msg.UniqueTTL)}
		}
		if len(st.DependsOn) > 0 {
			t.state = base.StateWaiting
		} else {
			b.wfStart(q, t, st.ProcessAt)
		}
		b.logEvent(st.Msg.Queue, broker.LogEnqueued, st.Msg.ID, t.state, "")
	}
	return nil
}

// wfStart makes t pending, or scheduled until at.
func (b *memBroker) wfStart(q *memQueue, t *memTask, at time.Time) {
	now := b.clock.Now()
	if at.After(now) {
		t.state, t.due = base.StateScheduled, at
		b.publish(broker.EventScheduled, t.msg.Queue)
		return
	}
	t.state, t.since = base.StatePending, now
	b.pushPending(q, t.msg.Queue, t, false)
}

// wfFinish applies the outcome of t, if it is a workflow task that has not
// finished yet.
func (b *memBroker) wfFinish(t *memTask, o base.Outcome, errMsg string, result []byte) {
	if t.msg.Workflow == "" {
		return
	}
	if w := b.workflows[t.msg.Workflow]; w != nil {
		b.finishNode(w, t.msg.WorkflowTask, o, errMsg, result)
	}
}

func (b *memBroker) finishNode(w *memWorkflow, id string, o base.Outcome, errMsg string, result []byte) {
	n := w.tasks[id]
	if n == nil || n.outcome != base.OutcomeNone {
		return
	}
	now := b.clock.Now()
	n.outcome, n.err, n.finished = o, errMsg, now
	if o == base.OutcomeSucceeded {
		n.result = slices.Clone(result)
	}
	w.left--
	if w.left == 0 {
		w.finished = now
	}
	for _, e := range n.succ {
		s := w.tasks[e.to]
		if s.outcome != base.OutcomeNone {
			continue
		}
		if o == base.OutcomeSucceeded || e.policy == base.RunOnFailure {
			s.remaining--
			if s.remaining == 0 {
				if q, t := b.wfLive(w, s); t != nil && t.state == base.StateWaiting {
					b.wfStart(q, t, s.spec.ProcessAt)
					b.logEvent(t.msg.Queue, broker.LogReleased, t.msg.ID, t.state, "")
				}
			}
			continue
		}
		msg := base.CanceledByDependency(id, o)
		b.wfCancelTask(w, s, msg)
		b.finishNode(w, e.to, base.OutcomeCanceled, msg, nil)
	}
}

// wfCancelTask archives the task of s with LastErr msg when it is not
// active; it reports whether it did.
func (b *memBroker) wfCancelTask(w *memWorkflow, s *memWFTask, msg string) bool {
	q, t := b.wfLive(w, s)
	if t == nil || t.state == base.StateActive || t.state == base.StateArchived || t.state == base.StateCompleted {
		return false
	}
	b.toArchived(q, t)
	t.msg.LastErr, t.msg.LastFailedAt = msg, b.clock.Now()
	q.unlock(t)
	b.logEvent(t.msg.Queue, broker.LogCanceled, t.msg.ID, base.StateArchived, msg)
	return true
}

func (b *memBroker) GetWorkflow(_ context.Context, id string) (*base.WorkflowInfo, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	w := b.workflows[id]
	if w == nil {
		return nil, base.ErrWorkflowNotFound
	}
	wi := &base.WorkflowInfo{ID: id, CreatedAt: w.created, FinishedAt: w.finished, Retention: w.w.Retention, Canceled: w.canceled}
	for _, st := range w.w.Tasks {
		n := w.tasks[st.ID]
		ti := &base.WorkflowTaskInfo{ID: st.ID, Queue: st.Msg.Queue, TaskID: st.Msg.ID, DependsOn: slices.Clone(st.DependsOn),
			Outcome: n.outcome, LastErr: n.err, Result: slices.Clone(n.result), FinishedAt: n.finished}
		if _, t := b.wfLive(w, n); t != nil {
			ti.State = t.state
		}
		wi.Tasks = append(wi.Tasks, ti)
	}
	return wi, nil
}

func (b *memBroker) CancelWorkflow(_ context.Context, id string) (int, error) {
	if err := b.lock(); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	w := b.workflows[id]
	if w == nil {
		return 0, base.ErrWorkflowNotFound
	}
	w.canceled = true
	now := b.clock.Now()
	n := 0
	for _, st := range w.w.Tasks {
		wt := w.tasks[st.ID]
		if wt.outcome != base.OutcomeNone {
			continue
		}
		if _, t := b.wfLive(w, wt); t != nil && t.state == base.StateActive {
			b.publishEvent(broker.Event{Kind: broker.EventCancel, Queue: st.Msg.Queue, TaskID: st.Msg.ID})
			continue
		}
		if b.wfCancelTask(w, wt, base.CanceledByWorkflow()) {
			n++
		}
		wt.outcome, wt.err, wt.finished = base.OutcomeCanceled, base.CanceledByWorkflow(), now
		w.left--
		if w.left == 0 {
			w.finished = now
		}
	}
	return n, nil
}

func (b *memBroker) DependencyResults(_ context.Context, l broker.LeaseRef) ([]base.DependencyResult, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	_, t, err := b.held(l)
	if err != nil {
		return nil, err
	}
	w := b.workflows[t.msg.Workflow]
	if t.msg.Workflow == "" || w == nil {
		return nil, nil
	}
	var out []base.DependencyResult
	for _, d := range w.tasks[t.msg.WorkflowTask].spec.DependsOn {
		n := w.tasks[d.Task]
		out = append(out, base.DependencyResult{ID: d.Task, Queue: n.spec.Msg.Queue, TaskID: n.spec.Msg.ID, Policy: d.Policy,
			Outcome: n.outcome, LastErr: n.err, Result: slices.Clone(n.result)})
	}
	return out, nil
}

func (b *memBroker) DeleteExpiredWorkflows(_ context.Context, queue string, limit int) (int, error) {
	if err := b.lock(); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	if err := checkArgs(queue, limit); err != nil {
		return 0, err
	}
	now := b.clock.Now()
	var due []*memWorkflow
	for _, w := range b.workflows {
		if w.w.Tasks[0].Msg.Queue == queue && !w.finished.IsZero() && !now.Before(w.finished.Add(w.w.Retention)) {
			due = append(due, w)
		}
	}
	slices.SortFunc(due, func(a, c *memWorkflow) int {
		return cmp.Or(a.finished.Add(a.w.Retention).Compare(c.finished.Add(c.w.Retention)), cmp.Compare(a.w.ID, c.w.ID))
	})
	due = due[:min(len(due), limit)]
	for _, w := range due {
		delete(b.workflows, w.w.ID)
	}
	return len(due), nil
}

// refuseWorkflowMsg refuses a plain Enqueue of a workflow task's message.
func refuseWorkflowMsg(m *base.TaskMessage) error {
	if m.Workflow != "" || m.WorkflowTask != "" {
		return fmt.Errorf("%w: task %q names workflow %q: workflow tasks are stored by EnqueueWorkflow", base.ErrInvalidArgument, m.ID, m.Workflow)
	}
	return nil
}
