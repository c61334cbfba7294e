package broker

import (
	"context"

	"github.com/htqueue/htq/internal/base"
)

// Workflows is the part of the storage seam that keeps workflows (DAGs of
// tasks, base.Workflow). Its rules, which every backend keeps and the
// conformance suite checks (docs/state-machine.md draws them):
//
//   - A workflow is stored whole or not at all. Each of its tasks is a task
//     of its queue like any other, with Msg.Workflow and Msg.WorkflowTask
//     set; a task with dependencies waits in base.StateWaiting until they
//     have all finished, the others start as Enqueue would start them.
//   - A task finishes once, with the first of these that happens to it:
//     Complete (OutcomeSucceeded, its result kept with the workflow),
//     Archive or ArchiveTask (OutcomeFailed, with its LastErr), DeleteTask
//     or DeleteAll before it finished (OutcomeDeleted), or cancellation
//     (OutcomeCanceled). What happens to it later (RunTask of an archived
//     task, say) runs it alone and changes nothing in its workflow.
//   - The same atomic step that finishes a task applies its outcome to
//     every task that depends on it: with base.RunOnFailure, or when the
//     task succeeded, the dependency counts as done, and a waiting task
//     whose last dependency is done becomes pending (or scheduled, until
//     its ProcessAt) in that step, exactly once; with base.CancelOnFailure
//     and any other outcome, the dependent is canceled in that step: a
//     waiting task becomes archived with LastErr
//     base.CanceledByDependency, its uniqueness lock released, and the
//     rule applies to its own dependents in turn. So no crash can come
//     between a completion and a release, and two completions of a task's
//     last two dependencies release it once.
//   - Retry of a task whose workflow was canceled archives it instead
//     (OutcomeFailed with the attempt's error): a canceled workflow runs
//     no attempt that had not started.
//   - DeleteQueue removes a queue's tasks without these rules: cancel the
//     workflows first. Tasks of a workflow whose record was deleted after
//     its retention are plain tasks.
type Workflows interface {
	// EnqueueWorkflow stores w (which must pass w.Validate) in one atomic
	// step. It fails, writing nothing, with a *base.WorkflowError wrapping
	// base.ErrTaskIDConflict or base.ErrDuplicateTask naming the task
	// whose task ID is taken or whose uniqueness key is locked, and with
	// base.ErrWorkflowIDConflict when a workflow with w.ID and another
	// digest (base.Workflow.Digest) is stored. A workflow stored with the
	// same digest makes the call a success that writes nothing (a retry
	// of an enqueue whose answer was lost). A backend that cannot store
	// w atomically (a Redis Cluster where w's queues live in different
	// hash slots) fails with an ErrInvalidArgument error saying so.
	EnqueueWorkflow(ctx context.Context, w *base.Workflow) error
	// GetWorkflow returns a stored workflow with each task's state and
	// outcome, or an error wrapping base.ErrWorkflowNotFound.
	GetWorkflow(ctx context.Context, id string) (*base.WorkflowInfo, error)
	// CancelWorkflow cancels every task of the workflow that has not
	// finished and is not active, in one atomic step: each becomes
	// archived with OutcomeCanceled and LastErr base.CanceledByWorkflow.
	// Active tasks get an EventCancel (as CancelProcessing sends) and
	// finish as their handlers decide, but are not retried (see above).
	// It reports how many tasks it canceled; canceling a workflow again,
	// or one whose tasks have all finished, cancels nothing and is not an
	// error. An unknown ID fails with base.ErrWorkflowNotFound.
	CancelWorkflow(ctx context.Context, id string) (int, error)
	// DependencyResults returns the outcomes of the dependencies of an
	// active workflow task held by l, in the order of its DependsOn. A
	// task that is not in a workflow, or has no dependencies, has none.
	// It fails with base.ErrLeaseLost when l does not hold the task.
	DependencyResults(ctx context.Context, l LeaseRef) ([]base.DependencyResult, error)
	// DeleteExpiredWorkflows deletes up to limit records of workflows whose
	// first task is in queue, whose tasks have all finished, and whose
	// retention has run out, and reports how many it deleted.
	DeleteExpiredWorkflows(ctx context.Context, queue string, limit int) (int, error)
}
