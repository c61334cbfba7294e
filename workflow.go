package htq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Workflow is a set of tasks with dependencies between them (a DAG):
// chains (a → b → c), fan-out and fan-in (a → {b1 … bn} → c) or any
// graph without cycles. A task starts only once every task it depends on
// has finished; the workflow succeeds when all its tasks have.
//
//	wf := htq.NewWorkflow()
//	wf.Add("fetch", htq.NewTask("fetch", url))
//	wf.Add("resize", htq.NewTask("resize", nil), htq.DependsOn("fetch"))
//	wf.Add("notify", htq.NewTask("notify", nil), htq.DependsOn("resize"),
//		htq.OnDependencyFailure(htq.RunAnyway))
//	info, err := client.EnqueueWorkflow(ctx, wf)
//
// What a dependency's failure does is chosen per dependency: by default
// (CancelDependents) a dependency that fails for good (archived), is
// canceled or is deleted cancels the task that depends on it, and in turn
// what depends on that; with RunAnyway the task runs once the dependency
// has finished, whatever its outcome. A handler reads its dependencies'
// outcomes and results with Dependencies(ctx). A task waiting for its
// dependencies is in TaskStateWaiting. docs/state-machine.md draws the
// rules.
//
// Each task's options are those of Enqueue (Queue, MaxRetry, Timeout,
// ProcessIn, Retention, TaskID, Unique, Priority, Key, …) but Group: a
// workflow task cannot be aggregated into another task. A released task
// waits in the lane of its Priority or Key like any other; ProcessAt and
// ProcessIn of a task with dependencies delay it after they have
// finished, if the time has not passed by then. Without TaskID a task's ID
// is "<workflow ID>.<task ID>" (a digest of both when that is too long),
// so that enqueuing the same workflow again stores nothing twice.
//
// Add records the first bad option, which EnqueueWorkflow returns.
type Workflow struct {
	id        string
	retention time.Duration
	tasks     []*workflowTask
	err       error
}

type workflowTask struct {
	id   string
	task *Task
	opts []Option
}

// WorkflowOption configures a Workflow (NewWorkflow).
type WorkflowOption interface {
	// String describes the option, e.g. `WorkflowID("order-42")`.
	String() string
	applyWorkflow(*Workflow) error
}

type workflowOption struct {
	desc string
	fn   func(*Workflow) error
}

func (o workflowOption) String() string                  { return o.desc }
func (o workflowOption) applyWorkflow(w *Workflow) error { return o.fn(w) }

// WorkflowID gives the workflow this ID instead of a random one. A
// workflow enqueued again under its ID, with the same tasks and options,
// is stored once; with others, EnqueueWorkflow fails with
// ErrWorkflowIDConflict.
func WorkflowID(id string) WorkflowOption {
	return workflowOption{fmt.Sprintf("WorkflowID(%q)", id), func(w *Workflow) error {
		if err := base.ValidateWorkflowID(id); err != nil {
			return err
		}
		w.id = id
		return nil
	}}
}

// WorkflowRetention keeps the workflow's record (its tasks' outcomes and
// results) for d after its last task finished (default 24 h).
func WorkflowRetention(d time.Duration) WorkflowOption {
	return workflowOption{fmt.Sprintf("WorkflowRetention(%v)", d), func(w *Workflow) error {
		if d <= 0 {
			return fmt.Errorf("%w: WorkflowRetention(%v) is not positive", ErrInvalidArgument, d)
		}
		w.retention = d
		return nil
	}}
}

// NewWorkflow returns an empty workflow with a random ID (or the one
// WorkflowID gives).
func NewWorkflow(opts ...WorkflowOption) *Workflow {
	w := &Workflow{id: newTaskID()}
	for _, o := range opts {
		if o == nil {
			w.fail(fmt.Errorf("%w: nil WorkflowOption", ErrInvalidArgument))
			continue
		}
		if err := o.applyWorkflow(w); err != nil {
			w.fail(err)
		}
	}
	return w
}

func (w *Workflow) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// ID returns the workflow's ID.
func (w *Workflow) ID() string { return w.id }

// Add adds task to the workflow under id, which names it within the
// workflow (dependencies refer to it). opts override the task's own
// options; DependsOn and OnDependencyFailure say what it waits for. It
// returns w, so that calls chain.
func (w *Workflow) Add(id string, task *Task, opts ...Option) *Workflow {
	if task == nil {
		w.fail(fmt.Errorf("%w: workflow task %q: nil task", ErrInvalidArgument, id))
		return w
	}
	w.tasks = append(w.tasks, &workflowTask{id: id, task: task, opts: slices.Clone(opts)})
	return w
}

// DependencyFailure says what the failure of a dependency does to a
// workflow task that depends on it.
type DependencyFailure int

// The dependency failure policies.
const (
	// CancelDependents (the default) cancels the task when the dependency
	// fails for good, is canceled or is deleted: it is archived with an
	// error naming the dependency, and what depends on it is treated in
	// turn as its own policies say.
	CancelDependents DependencyFailure = iota
	// RunAnyway runs the task once the dependency has finished, whatever
	// its outcome; the task reads it with Dependencies.
	RunAnyway
)

// String returns "cancel" or "run", as the HTTP API names the policies.
func (p DependencyFailure) String() string { return base.DependencyPolicy(p).String() }

// workflowOptions are the options of a workflow task: its dependencies
// in order, and the policy of each dependency named by
// OnDependencyFailure ("" for all of them).
type workflowOptions struct {
	dependsOn []string
	onFailure map[string]DependencyFailure
}

// workflow returns o's workflow options, making them on first use.
func (o *taskOptions) workflow() *workflowOptions {
	if o.wf == nil {
		o.wf = &workflowOptions{}
	}
	return o.wf
}

// DependsOn makes a workflow task wait until the tasks of its workflow
// with these IDs have finished.
func DependsOn(ids ...string) Option { return dependsOnOption(ids) }

type dependsOnOption []string

func (d dependsOnOption) String() string { return fmt.Sprintf("DependsOn(%q)", []string(d)) }
func (d dependsOnOption) apply(o *taskOptions) error {
	if len(d) == 0 {
		return fmt.Errorf("%w: DependsOn() names no task", ErrInvalidArgument)
	}
	for _, id := range d {
		if err := base.ValidateTaskID(id); err != nil {
			return fmt.Errorf("DependsOn: %w", err)
		}
	}
	w := o.workflow()
	w.dependsOn = append(w.dependsOn, d...)
	return nil
}

// OnDependencyFailure sets what the failure of the dependencies named by
// ids (of all of the task's dependencies, when none is named) does to a
// workflow task: CancelDependents (the default) or RunAnyway.
func OnDependencyFailure(p DependencyFailure, ids ...string) Option {
	return onFailureOption{policy: p, ids: ids}
}

type onFailureOption struct {
	policy DependencyFailure
	ids    []string
}

func (f onFailureOption) String() string {
	return fmt.Sprintf("OnDependencyFailure(%v, %q)", f.policy, f.ids)
}
func (f onFailureOption) apply(o *taskOptions) error {
	if f.policy != CancelDependents && f.policy != RunAnyway {
		return fmt.Errorf("%w: OnDependencyFailure: unknown policy %d", ErrInvalidArgument, int(f.policy))
	}
	w := o.workflow()
	if w.onFailure == nil {
		w.onFailure = make(map[string]DependencyFailure)
	}
	if len(f.ids) == 0 {
		w.onFailure[""] = f.policy
	}
	for _, id := range f.ids {
		w.onFailure[id] = f.policy
	}
	return nil
}

// workflowTaskID is the task ID of workflow task id of workflow wf when
// none was given: "<wf>.<id>", or a digest of both when that is longer
// than a task ID may be.
func workflowTaskID(wf, id string) string {
	if s := wf + "." + id; len(s) <= base.MaxIDLen {
		return s
	}
	sum := sha256.Sum256([]byte(wf + "\x00" + id))
	return "wf-" + hex.EncodeToString(sum[:])
}

// EnqueueWorkflow stores the workflow and all its tasks in one atomic
// step: all of them or none. It checks the graph first and fails, with
// nothing written, with an error naming the tasks at fault (*WorkflowError,
// errors.As): ErrWorkflowCycle, ErrDependencyNotFound or
// ErrDuplicateWorkflowTask (all ErrInvalidArgument), ErrTaskIDConflict or
// ErrDuplicateTask; and with ErrWorkflowIDConflict when another workflow
// holds its ID. On a Redis Cluster, a workflow whose tasks are in queues of
// different hash slots is refused (ErrInvalidArgument): keep a workflow
// in one queue there. Like Enqueue it tries again while the storage
// cannot be reached (ClientOptions.RetryFor); the same workflow found
// stored is success. Every task carries the trace context of ctx, as
// Enqueue's does.
func (c *Client) EnqueueWorkflow(ctx context.Context, w *Workflow) (_ *WorkflowInfo, err error) {
	if w == nil {
		return nil, fmt.Errorf("%w: nil workflow", ErrInvalidArgument)
	}
	bw, info, err := c.buildWorkflow(w, c.now())
	if err != nil {
		return nil, fmt.Errorf("htq: enqueue workflow %s: %w", w.id, err)
	}
	queue := bw.Tasks[0].Msg.Queue
	for _, t := range bw.Tasks {
		if t.Msg.Queue != queue {
			queue = "" // several queues
		}
	}
	ctx, span := c.tr.startEnqueue(ctx, queue, len(bw.Tasks))
	defer func() { endSpan(span, err) }()
	if h := c.tr.headers(ctx); h != nil {
		for _, t := range bw.Tasks {
			t.Msg.Headers = h
		}
	}
	ctx, lc := c.bound(ctx)
	defer lc.Cancel()
	b := brokerOf(c.s)
	for attempt := 0; ; attempt++ {
		err = b.EnqueueWorkflow(ctx, bw)
		if err == nil || !c.again(ctx, attempt, err) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("htq: enqueue workflow %s: %w", w.id, err)
	}
	return info, nil
}

// Validate checks the workflow as EnqueueWorkflow does before it writes
// anything: every task's options, the graph (no cycle, no missing or
// duplicate task), and returns the error EnqueueWorkflow would.
func (w *Workflow) Validate() error {
	_, _, err := (&Client{now: time.Now}).buildWorkflow(w, time.Now())
	return err
}

// buildWorkflow checks w and builds what the storage stores and what
// EnqueueWorkflow returns.
func (c *Client) buildWorkflow(w *Workflow, now time.Time) (*base.Workflow, *WorkflowInfo, error) {
	if w.err != nil {
		return nil, nil, w.err
	}
	bw := &base.Workflow{ID: w.id, Retention: w.retention}
	info := &WorkflowInfo{ID: w.id, State: WorkflowRunning, CreatedAt: now, Retention: bw.KeepFor()}
	for _, wt := range w.tasks {
		o, err := composeOptions(wt.task.opts, wt.opts)
		if err != nil {
			return nil, nil, &base.WorkflowError{Err: err, Tasks: []string{wt.id}, Detail: fmt.Sprintf("task %q", wt.id)}
		}
		if o.taskID == "" {
			o.taskID = workflowTaskID(w.id, wt.id)
		}
		p, ti, err := c.build(wt.task, o)
		if err != nil {
			return nil, nil, &base.WorkflowError{Err: err, Tasks: []string{wt.id}, Detail: fmt.Sprintf("task %q", wt.id)}
		}
		p.Msg.Workflow, p.Msg.WorkflowTask = w.id, wt.id
		t := &base.WorkflowTask{ID: wt.id, Msg: p.Msg, ProcessAt: p.ProcessAt}
		var wo workflowOptions
		if o.wf != nil {
			wo = *o.wf
		}
		for _, d := range wo.dependsOn {
			policy, ok := wo.onFailure[d]
			if !ok {
				policy = wo.onFailure[""]
			}
			t.DependsOn = append(t.DependsOn, base.Dependency{Task: d, Policy: base.DependencyPolicy(policy)})
		}
		for d := range wo.onFailure {
			if d != "" && !slices.Contains(wo.dependsOn, d) {
				return nil, nil, &base.WorkflowError{Err: ErrInvalidArgument, Tasks: []string{wt.id},
					Detail: fmt.Sprintf("task %q: OnDependencyFailure names %q, which is not one of its dependencies", wt.id, d)}
			}
		}
		bw.Tasks = append(bw.Tasks, t)
		ti.Workflow, ti.WorkflowTask = w.id, wt.id
		if len(t.DependsOn) > 0 {
			ti.State, ti.NextProcessAt = TaskStateWaiting, time.Time{}
		}
		info.Tasks = append(info.Tasks, &WorkflowTaskInfo{ID: wt.id, Queue: ti.Queue, TaskID: ti.ID,
			DependsOn: dependencies(t.DependsOn), State: ti.State})
	}
	if err := bw.Validate(); err != nil {
		return nil, nil, err
	}
	return bw, info, nil
}

func dependencies(ds []base.Dependency) []Dependency {
	out := make([]Dependency, len(ds))
	for i, d := range ds {
		out[i] = Dependency{ID: d.Task, OnFailure: DependencyFailure(d.Policy)}
	}
	return out
}

// Dependency is one dependency of a workflow task.
type Dependency struct {
	// ID names the task depended on within the workflow.
	ID string
	// OnFailure is what its failure does to the dependent task.
	OnFailure DependencyFailure
}

// Outcome is how a workflow task finished.
type Outcome int

// The outcomes of workflow tasks.
const (
	// OutcomeNone: the task has not finished.
	OutcomeNone = Outcome(base.OutcomeNone)
	// OutcomeSucceeded: the task completed.
	OutcomeSucceeded = Outcome(base.OutcomeSucceeded)
	// OutcomeFailed: the task was archived: its last attempt failed (or
	// someone archived it).
	OutcomeFailed = Outcome(base.OutcomeFailed)
	// OutcomeCanceled: the task never ran: a dependency failed (with
	// CancelDependents), or the workflow was canceled.
	OutcomeCanceled = Outcome(base.OutcomeCanceled)
	// OutcomeDeleted: the task was deleted before it finished.
	OutcomeDeleted = Outcome(base.OutcomeDeleted)
)

// String returns the outcome's name: "succeeded", "failed", "canceled",
// "deleted", or "" for none.
func (o Outcome) String() string { return base.Outcome(o).String() }

// WorkflowState sums up a workflow.
type WorkflowState string

// The workflow states.
const (
	// WorkflowRunning: some task has not finished.
	WorkflowRunning = WorkflowState(base.WorkflowRunning)
	// WorkflowSucceeded: every task succeeded.
	WorkflowSucceeded = WorkflowState(base.WorkflowSucceeded)
	// WorkflowFailed: every task finished and some did not succeed.
	WorkflowFailed = WorkflowState(base.WorkflowFailed)
	// WorkflowCanceled: the workflow was canceled (tasks that were
	// running then may still be finishing).
	WorkflowCanceled = WorkflowState(base.WorkflowCanceled)
)

// WorkflowInfo describes a workflow.
type WorkflowInfo struct {
	// ID names the workflow.
	ID string
	// State sums it up.
	State WorkflowState
	// CreatedAt is when it was enqueued.
	CreatedAt time.Time
	// FinishedAt is when its last task finished (zero until then).
	FinishedAt time.Time
	// Retention is how long its record is kept after FinishedAt.
	Retention time.Duration
	// Tasks are its tasks, in the order they were added.
	Tasks []*WorkflowTaskInfo
}

// WorkflowTaskInfo describes one task of a workflow.
type WorkflowTaskInfo struct {
	// ID names the task within the workflow.
	ID string
	// Queue and TaskID name the task in its queue (Inspector.GetTaskInfo).
	Queue, TaskID string
	// DependsOn lists its dependencies.
	DependsOn []Dependency
	// State is the task's state; 0 once the task no longer exists
	// (deleted, or completed without Retention).
	State TaskState
	// Outcome is how it finished (OutcomeNone until it has).
	Outcome Outcome
	// LastErr is the error it failed with, or why it was canceled.
	LastErr string
	// Result is what it wrote with its ResultWriter, when it succeeded.
	Result []byte
	// FinishedAt is when it finished (zero until then).
	FinishedAt time.Time
}

func newWorkflowInfo(wi *base.WorkflowInfo) *WorkflowInfo {
	out := &WorkflowInfo{ID: wi.ID, State: WorkflowState(wi.State()), CreatedAt: wi.CreatedAt, FinishedAt: wi.FinishedAt,
		Retention: wi.Retention, Tasks: make([]*WorkflowTaskInfo, len(wi.Tasks))}
	for i, t := range wi.Tasks {
		out.Tasks[i] = &WorkflowTaskInfo{ID: t.ID, Queue: t.Queue, TaskID: t.TaskID, DependsOn: dependencies(t.DependsOn),
			State: TaskState(t.State), Outcome: Outcome(t.Outcome), LastErr: t.LastErr, Result: t.Result, FinishedAt: t.FinishedAt}
	}
	return out
}

// GetWorkflow returns a workflow with each task's state and outcome, or
// an error wrapping ErrWorkflowNotFound (also once its record was deleted
// after its retention).
func (i *Inspector) GetWorkflow(id string) (*WorkflowInfo, error) {
	wi, err := brokerOf(i.s).GetWorkflow(context.Background(), id)
	if err != nil {
		return nil, fmt.Errorf("htq: workflow %s: %w", id, err)
	}
	return newWorkflowInfo(wi), nil
}

// CancelWorkflow cancels every task of the workflow that has not finished:
// tasks not running are archived at once (Outcome canceled); running ones
// have their handler's ctx canceled (as CancelProcessing does) and are not
// retried if they fail. It returns how many tasks it archived. Canceling a
// workflow again is not an error.
func (i *Inspector) CancelWorkflow(id string) (int, error) {
	n, err := brokerOf(i.s).CancelWorkflow(context.Background(), id)
	if err != nil {
		return n, fmt.Errorf("htq: cancel workflow %s: %w", id, err)
	}
	return n, nil
}

// DependencyResult is the outcome of one dependency of a workflow task, as
// the task's handler reads it (Dependencies).
type DependencyResult struct {
	// ID names the dependency within the workflow.
	ID string
	// Queue and TaskID name its task.
	Queue, TaskID string
	// OnFailure is the dependent's policy for it.
	OnFailure DependencyFailure
	// Outcome is how it finished. With CancelDependents it is always
	// OutcomeSucceeded (the task would not run otherwise); with RunAnyway
	// it may be any.
	Outcome Outcome
	// LastErr is its error, or why it was canceled.
	LastErr string
	// Result is what it wrote with its ResultWriter (when it succeeded).
	Result []byte
}

// depsLoader reads a workflow task's dependency results from the storage
// the first time a handler asks for them.
type depsLoader struct {
	b     broker.Workflows
	lease broker.LeaseRef

	mu   sync.Mutex
	done bool
	res  []*DependencyResult
}

func (d *depsLoader) load(ctx context.Context) ([]*DependencyResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done {
		return d.res, nil
	}
	rs, err := d.b.DependencyResults(ctx, d.lease)
	if err != nil {
		return nil, fmt.Errorf("htq: dependencies of task %s: %w", d.lease.ID, err)
	}
	d.res = make([]*DependencyResult, len(rs))
	for i, r := range rs {
		d.res[i] = &DependencyResult{ID: r.ID, Queue: r.Queue, TaskID: r.TaskID, OnFailure: DependencyFailure(r.Policy),
			Outcome: Outcome(r.Outcome), LastErr: r.LastErr, Result: r.Result}
	}
	d.done = true
	return d.res, nil
}

// Dependencies returns the outcomes of the dependencies of the workflow
// task a handler's ctx belongs to, in the order of its DependsOn, with the
// results they wrote. It reads them from the storage on the first call
// (and fails then with the storage's error); a task of no workflow, or
// with no dependencies, has none.
func Dependencies(ctx context.Context) ([]*DependencyResult, error) {
	md, ok := metadata(ctx)
	if !ok || md.deps == nil {
		return nil, nil
	}
	return md.deps.load(ctx)
}

// GetWorkflowID returns the ID of the workflow the task of a handler's
// ctx belongs to, and the task's ID within it. ok is false for a task of
// no workflow, or a context that did not come from a Server.
func GetWorkflowID(ctx context.Context) (workflow, task string, ok bool) {
	md, ok := metadata(ctx)
	if !ok || md.msg.Workflow == "" {
		return "", "", false
	}
	return md.msg.Workflow, md.msg.WorkflowTask, true
}
