package base

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A workflow is a set of tasks with dependencies between them (a DAG): a
// task starts only once every task it depends on has finished, and what a
// dependency's failure does is chosen per dependency. docs/state-machine.md
// describes the rules; the broker.Workflows contract is the one that
// backends implement.

// MaxWorkflowTasks is the most tasks one workflow may hold. A workflow is
// stored by one atomic write, which on Redis is one script that blocks
// the server while it runs.
const MaxWorkflowTasks = 20_000

// DefaultWorkflowRetention is how long a workflow's record (its tasks'
// outcomes) is kept after its last task finished, when none is given.
const DefaultWorkflowRetention = 24 * time.Hour

// Workflow errors. The first three mark a workflow that cannot be stored
// as given and wrap ErrInvalidArgument; a *WorkflowError carrying them
// names the tasks at fault.
var (
	// ErrWorkflowCycle means the dependencies form a cycle.
	ErrWorkflowCycle = fmt.Errorf("%w: workflow dependencies form a cycle", ErrInvalidArgument)
	// ErrDependencyNotFound means a task depends on a task ID the
	// workflow does not hold.
	ErrDependencyNotFound = fmt.Errorf("%w: workflow task depends on a task the workflow does not hold", ErrInvalidArgument)
	// ErrDuplicateWorkflowTask means two tasks of a workflow share an ID
	// (or a task ID in one queue).
	ErrDuplicateWorkflowTask = fmt.Errorf("%w: two workflow tasks share an ID", ErrInvalidArgument)
	// ErrWorkflowNotFound means no workflow has that ID (it may have been
	// deleted after its retention).
	ErrWorkflowNotFound = errors.New("htq: workflow not found")
	// ErrWorkflowIDConflict means a workflow with that ID and other
	// content (tasks, dependencies, options) is stored. Nothing was
	// written. The same workflow enqueued again is not an error.
	ErrWorkflowIDConflict = errors.New("htq: workflow ID conflicts with another workflow")
)

// WorkflowError is an error about some tasks of a workflow: Tasks names
// them (workflow task IDs, in the order the workflow holds them, or along
// the cycle). It wraps Err, so errors.Is(err, ErrWorkflowCycle) and the
// like work on it.
type WorkflowError struct {
	// Err is the sentinel (ErrWorkflowCycle, ErrDependencyNotFound,
	// ErrDuplicateWorkflowTask, ErrTaskIDConflict, ErrDuplicateTask, or
	// an ErrInvalidArgument error about one task).
	Err error
	// Tasks names the tasks at fault.
	Tasks []string
	// Detail says what is wrong with them.
	Detail string
}

// Error describes the fault with the tasks it names.
func (e *WorkflowError) Error() string {
	return fmt.Sprintf("%v: %s", e.Err, e.Detail)
}

// Unwrap returns Err.
func (e *WorkflowError) Unwrap() error { return e.Err }

// DependencyPolicy says what the failure of a dependency does to the task
// that depends on it.
type DependencyPolicy uint8

// The dependency policies.
const (
	// CancelOnFailure (the default) cancels the dependent task, and in
	// turn whatever depends on it by this policy, when the dependency
	// fails for good (archived), is canceled or is deleted.
	CancelOnFailure DependencyPolicy = iota
	// RunOnFailure runs the dependent task once the dependency has
	// finished, whatever its outcome; the task reads the outcome.
	RunOnFailure
)

// String returns "cancel" or "run", as the HTTP API names the policies.
func (p DependencyPolicy) String() string {
	switch p {
	case CancelOnFailure:
		return "cancel"
	case RunOnFailure:
		return "run"
	}
	return fmt.Sprintf("DependencyPolicy(%d)", uint8(p))
}

// ParseDependencyPolicy returns the policy named s ("cancel" or "run").
func ParseDependencyPolicy(s string) (DependencyPolicy, error) {
	switch s {
	case "cancel":
		return CancelOnFailure, nil
	case "run":
		return RunOnFailure, nil
	}
	return 0, fmt.Errorf("%w: dependency failure policy %q is not \"cancel\" or \"run\"", ErrInvalidArgument, s)
}

// Dependency is one edge of a workflow: the task depends on Task.
type Dependency struct {
	// Task is the workflow task ID of the dependency.
	Task string
	// Policy says what the dependency's failure does.
	Policy DependencyPolicy
}

// WorkflowTask is one task of a workflow as the storage keeps it.
type WorkflowTask struct {
	// ID names the task within its workflow ("a", "resize"); dependencies
	// refer to it.
	ID string
	// Msg is the task itself. Msg.Workflow and Msg.WorkflowTask name the
	// workflow and ID; Msg.GroupKey, Msg.Priority and Msg.Key must be
	// empty.
	Msg *TaskMessage
	// ProcessAt, when after the storage clock's now at the moment the
	// task becomes ready (at enqueue for a task without dependencies,
	// when its last dependency finishes for the others), makes it
	// scheduled until then instead of pending.
	ProcessAt time.Time
	// DependsOn lists the tasks that must finish before this one starts.
	DependsOn []Dependency
}

// Workflow is a workflow as the storage keeps it.
type Workflow struct {
	// ID names the workflow.
	ID string
	// Retention is how long the workflow's record is kept after its last
	// task finished; 0 means DefaultWorkflowRetention.
	Retention time.Duration
	// Tasks are the workflow's tasks, in the order the caller gave them.
	Tasks []*WorkflowTask
}

// KeepFor returns the retention in effect (Retention or its default).
func (w *Workflow) KeepFor() time.Duration {
	if w.Retention > 0 {
		return w.Retention
	}
	return DefaultWorkflowRetention
}

// ValidateWorkflowID checks a workflow ID: the rules of task IDs.
func ValidateWorkflowID(id string) error {
	if err := ValidateTaskID(id); err != nil {
		return fmt.Errorf("workflow ID: %w", err)
	}
	return nil
}

// Validate checks everything a backend needs to store w whole: the ID,
// each task's ID and message, that no two tasks share an ID (or a queue
// and task ID), that every dependency names a task of the workflow, and
// that the dependencies form no cycle. The error names the tasks at
// fault (*WorkflowError).
func (w *Workflow) Validate() error {
	if err := ValidateWorkflowID(w.ID); err != nil {
		return err
	}
	if w.Retention < 0 {
		return fmt.Errorf("%w: workflow retention %v is negative", ErrInvalidArgument, w.Retention)
	}
	switch {
	case len(w.Tasks) == 0:
		return fmt.Errorf("%w: workflow %q has no task", ErrInvalidArgument, w.ID)
	case len(w.Tasks) > MaxWorkflowTasks:
		return fmt.Errorf("%w: workflow %q has %d tasks; the limit is %d", ErrInvalidArgument, w.ID, len(w.Tasks), MaxWorkflowTasks)
	}
	index := make(map[string]int, len(w.Tasks))
	type qid struct{ queue, id string }
	taskIDs := make(map[qid]string, len(w.Tasks))
	for i, t := range w.Tasks {
		if t == nil || t.Msg == nil {
			return fmt.Errorf("%w: workflow task %d has no task", ErrInvalidArgument, i)
		}
		if err := ValidateTaskID(t.ID); err != nil {
			return fmt.Errorf("workflow task %d: %w", i, err)
		}
		if _, dup := index[t.ID]; dup {
			return &WorkflowError{Err: ErrDuplicateWorkflowTask, Tasks: []string{t.ID}, Detail: fmt.Sprintf("task ID %q appears twice", t.ID)}
		}
		index[t.ID] = i
		if err := t.Msg.Validate(); err != nil {
			return &WorkflowError{Err: err, Tasks: []string{t.ID}, Detail: fmt.Sprintf("task %q", t.ID)}
		}
		if t.Msg.GroupKey != "" {
			return &WorkflowError{Err: ErrInvalidArgument, Tasks: []string{t.ID},
				Detail: fmt.Sprintf("task %q has a group: a workflow task cannot be aggregated", t.ID)}
		}
		if t.Msg.Workflow != w.ID || t.Msg.WorkflowTask != t.ID {
			return &WorkflowError{Err: ErrInvalidArgument, Tasks: []string{t.ID},
				Detail: fmt.Sprintf("task %q: its message names workflow %q task %q", t.ID, t.Msg.Workflow, t.Msg.WorkflowTask)}
		}
		k := qid{t.Msg.Queue, t.Msg.ID}
		if other, dup := taskIDs[k]; dup {
			return &WorkflowError{Err: ErrDuplicateWorkflowTask, Tasks: []string{other, t.ID},
				Detail: fmt.Sprintf("tasks %q and %q both have task ID %q in queue %q", other, t.ID, k.id, k.queue)}
		}
		taskIDs[k] = t.ID
	}
	for _, t := range w.Tasks {
		seen := make(map[string]bool, len(t.DependsOn))
		for _, d := range t.DependsOn {
			if _, ok := index[d.Task]; !ok {
				return &WorkflowError{Err: ErrDependencyNotFound, Tasks: []string{t.ID, d.Task},
					Detail: fmt.Sprintf("task %q depends on %q, which the workflow does not hold", t.ID, d.Task)}
			}
			if seen[d.Task] {
				return &WorkflowError{Err: ErrInvalidArgument, Tasks: []string{t.ID},
					Detail: fmt.Sprintf("task %q lists dependency %q twice", t.ID, d.Task)}
			}
			if d.Policy > RunOnFailure {
				return &WorkflowError{Err: ErrInvalidArgument, Tasks: []string{t.ID},
					Detail: fmt.Sprintf("task %q: unknown policy %d for dependency %q", t.ID, d.Policy, d.Task)}
			}
			seen[d.Task] = true
		}
	}
	if cycle := w.findCycle(index); cycle != nil {
		return &WorkflowError{Err: ErrWorkflowCycle, Tasks: cycle[:len(cycle)-1],
			Detail: "cycle " + strings.Join(quoteAll(cycle), " → ")}
	}
	return nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// findCycle returns one cycle of the dependency graph as the task IDs
// along it, the first repeated at the end ("a", "b", "a": a depends on b,
// b on a), or nil when there is none. Every dependency names a task.
func (w *Workflow) findCycle(index map[string]int) []string {
	const (
		unseen = iota
		onPath
		done
	)
	mark := make([]uint8, len(w.Tasks))
	// An explicit stack: a chain of 20,000 tasks would be as deep a
	// recursion.
	type frame struct{ task, next int }
	for start := range w.Tasks {
		if mark[start] != unseen {
			continue
		}
		stack := []frame{{start, 0}}
		mark[start] = onPath
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			deps := w.Tasks[f.task].DependsOn
			if f.next == len(deps) {
				mark[f.task] = done
				stack = stack[:len(stack)-1]
				continue
			}
			d := index[deps[f.next].Task]
			f.next++
			switch mark[d] {
			case onPath:
				var cycle []string
				for i := len(stack) - 1; i >= 0; i-- {
					cycle = append(cycle, w.Tasks[stack[i].task].ID)
					if stack[i].task == d {
						break
					}
				}
				slices.Reverse(cycle)
				return append(cycle, w.Tasks[d].ID)
			case unseen:
				mark[d] = onPath
				stack = append(stack, frame{d, 0})
			}
		}
	}
	return nil
}

// Digest returns a fingerprint of what the caller gave for w: its ID and
// retention, each task's ID, dependencies and the message fields
// TaskMessage.SameEnqueue compares. A backend that finds a workflow with
// w's ID stored treats an enqueue of w as already done when the digests
// are equal, and as ErrWorkflowIDConflict otherwise. ProcessAt is left
// out, as Enqueue leaves it out of the comparison.
func (w *Workflow) Digest() string {
	h := sha256.New()
	var buf []byte
	str := func(s string) {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	num := func(v int64) { buf = binary.AppendVarint(buf, v) }
	str(w.ID)
	num(int64(w.KeepFor()))
	for _, t := range w.Tasks {
		m := t.Msg
		str(t.ID)
		num(int64(len(t.DependsOn)))
		for _, d := range t.DependsOn {
			str(d.Task)
			num(int64(d.Policy))
		}
		str(m.ID)
		str(m.Queue)
		str(m.Type)
		if m.Payload == nil {
			num(-1)
		} else {
			str(string(m.Payload))
		}
		num(int64(m.MaxRetry))
		num(int64(m.Timeout))
		if m.Deadline.IsZero() {
			num(0)
		} else {
			num(1)
			num(m.Deadline.UnixNano())
		}
		str(m.UniqueKey)
		if m.UniqueKey != "" {
			num(int64(m.UniqueTTL))
		}
		num(int64(m.Retention))
		h.Write(buf)
		buf = buf[:0]
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Outcome is how a workflow task finished.
type Outcome uint8

// The outcomes.
const (
	// OutcomeNone: the task has not finished.
	OutcomeNone Outcome = iota
	// OutcomeSucceeded: the task completed.
	OutcomeSucceeded
	// OutcomeFailed: the task was archived (its last attempt failed, or
	// someone archived it).
	OutcomeFailed
	// OutcomeCanceled: the task will never run: a dependency of it failed
	// with the CancelOnFailure policy, or the workflow was canceled.
	OutcomeCanceled
	// OutcomeDeleted: the task was deleted before it finished.
	OutcomeDeleted
)

var outcomeNames = [...]string{
	OutcomeNone:      "",
	OutcomeSucceeded: "succeeded",
	OutcomeFailed:    "failed",
	OutcomeCanceled:  "canceled",
	OutcomeDeleted:   "deleted",
}

// String returns the outcome's name ("succeeded", …; "" for none).
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// ParseOutcome returns the outcome named s (as String writes it).
func ParseOutcome(s string) (Outcome, error) {
	for i, name := range outcomeNames {
		if name == s {
			return Outcome(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown outcome %q", ErrInvalidArgument, s)
}

// The LastErr of tasks canceled by workflow rules. Backends write exactly
// these texts, so that every backend reports the same.
const workflowCanceledMsg = "htq: canceled: the workflow was canceled"

// CanceledByWorkflow is the LastErr of a task canceled with its workflow.
func CanceledByWorkflow() string { return workflowCanceledMsg }

// CanceledByDependency is the LastErr of a task canceled because its
// dependency dep ended with outcome o (failed, canceled or deleted).
func CanceledByDependency(dep string, o Outcome) string {
	return `htq: canceled: dependency "` + dep + `" ` + o.String()
}

// WorkflowTaskInfo describes one task of a stored workflow.
type WorkflowTaskInfo struct {
	// ID is the task's ID within the workflow.
	ID string
	// Queue and TaskID name the task in its queue.
	Queue, TaskID string
	// DependsOn lists its dependencies.
	DependsOn []Dependency
	// State is the task's current state; 0 when the task no longer exists
	// (deleted, or completed without retention).
	State TaskState
	// Outcome is how it finished (OutcomeNone while it has not).
	Outcome Outcome
	// LastErr is the error it failed with or the reason it was canceled.
	LastErr string
	// Result is what it wrote with its ResultWriter, kept with the
	// workflow when it succeeded.
	Result []byte
	// FinishedAt is when it finished (zero while it has not).
	FinishedAt time.Time
}

// WorkflowInfo describes a stored workflow.
type WorkflowInfo struct {
	ID string
	// CreatedAt is when it was enqueued (storage clock).
	CreatedAt time.Time
	// FinishedAt is when its last task finished (zero while some has
	// not).
	FinishedAt time.Time
	// Retention is how long the record is kept after FinishedAt.
	Retention time.Duration
	// Canceled is set once CancelWorkflow was called.
	Canceled bool
	// Tasks are its tasks, in the order they were given.
	Tasks []*WorkflowTaskInfo
}

// WorkflowState sums up a workflow.
type WorkflowState string

// The workflow states.
const (
	// WorkflowRunning: some task has not finished.
	WorkflowRunning WorkflowState = "running"
	// WorkflowSucceeded: every task succeeded.
	WorkflowSucceeded WorkflowState = "succeeded"
	// WorkflowFailed: every task finished, some did not succeed.
	WorkflowFailed WorkflowState = "failed"
	// WorkflowCanceled: CancelWorkflow was called (tasks that were
	// running then may still be finishing).
	WorkflowCanceled WorkflowState = "canceled"
)

// State sums up the workflow from its tasks' outcomes.
func (w *WorkflowInfo) State() WorkflowState {
	if w.Canceled {
		return WorkflowCanceled
	}
	state := WorkflowSucceeded
	for _, t := range w.Tasks {
		switch t.Outcome {
		case OutcomeNone:
			return WorkflowRunning
		case OutcomeSucceeded:
		default:
			state = WorkflowFailed
		}
	}
	return state
}

// DependencyResult is the outcome of one dependency of a workflow task,
// as the task reads it when it runs.
type DependencyResult struct {
	// ID is the dependency's ID within the workflow.
	ID string
	// Queue and TaskID name its task.
	Queue, TaskID string
	// Policy is the dependent's policy for it.
	Policy DependencyPolicy
	// Outcome is how it finished.
	Outcome Outcome
	// LastErr is its error or the reason it was canceled.
	LastErr string
	// Result is what it wrote with its ResultWriter (succeeded tasks).
	Result []byte
}

// RefuseWorkflowTask returns an ErrInvalidArgument error when m names a
// workflow: Enqueue and EnqueueBatch store plain tasks only, workflow
// tasks are stored by EnqueueWorkflow.
func RefuseWorkflowTask(m *TaskMessage) error {
	if m.Workflow == "" && m.WorkflowTask == "" {
		return nil
	}
	return fmt.Errorf("%w: task %q names workflow %q: workflow tasks are stored by EnqueueWorkflow", ErrInvalidArgument, m.ID, m.Workflow)
}
