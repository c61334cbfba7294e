package brokertest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// The workflow area (broker.Workflows). Besides its doc comment, it pins
// down:
//   - A workflow task's task ID is what its message says; tests name them
//     "<workflow>.<task>".
//   - The record of a workflow is found by ID whatever queues its tasks
//     are in; its home (for DeleteExpiredWorkflows) is its first task's
//     queue, and its retention counts from FinishedAt.
//   - GetWorkflow's State of a task that no longer exists is 0.
//   - A waiting task is listed by ListTasks(StateWaiting) oldest first and
//     counted in QueueStats.Waiting; RunTask and RunAll refuse it,
//     ArchiveTask, ArchiveAll, DeleteTask and DeleteAll take it.
//
// A backend may refuse (ErrInvalidArgument) a workflow whose queues it
// cannot change in one atomic step: on a Redis Cluster, queues in
// different hash slots. So the tests that span queues use queues whose
// names share a Redis Cluster hash slot (sameSlot).

// node describes one task of a test workflow.
type node struct {
	id    string
	queue string   // "" is "default"
	deps  []string // CancelOnFailure
	run   []string // RunOnFailure
	at    time.Time
	uniq  string // unique key ("" none)
	keep  time.Duration
	prio  int    // Priority
	key   string // fair-sharing Key ("" none)
}

// workflow builds a workflow of the given tasks (task IDs
// "<id>.<task>").
func (e *env) workflow(id string, nodes ...node) *base.Workflow {
	w := &base.Workflow{ID: id}
	for _, n := range nodes {
		q := n.queue
		if q == "" {
			q = "default"
		}
		m := &base.TaskMessage{ID: id + "." + n.id, Type: "wf:" + n.id, Payload: []byte(n.id), Queue: q,
			MaxRetry: 2, Timeout: time.Minute, Retention: n.keep, Workflow: id, WorkflowTask: n.id,
			Priority: n.prio, Key: n.key}
		if n.uniq != "" {
			m.UniqueKey, m.UniqueTTL = n.uniq, time.Hour
		}
		t := &base.WorkflowTask{ID: n.id, Msg: m, ProcessAt: n.at}
		for _, d := range n.deps {
			t.DependsOn = append(t.DependsOn, base.Dependency{Task: d})
		}
		for _, d := range n.run {
			t.DependsOn = append(t.DependsOn, base.Dependency{Task: d, Policy: base.RunOnFailure})
		}
		w.Tasks = append(w.Tasks, t)
	}
	return w
}

// enqueueWF stores w and fails the test on error.
func (e *env) enqueueWF(w *base.Workflow) {
	e.Helper()
	if err := w.Validate(); err != nil {
		e.Fatalf("the test's workflow %s is invalid: %v", w.ID, err)
	}
	if err := e.b.EnqueueWorkflow(e.ctx, w); err != nil {
		e.Fatalf("EnqueueWorkflow %s: %v", w.ID, err)
	}
}

// wfInfo returns GetWorkflow of id and fails the test on error.
func (e *env) wfInfo(id string) *base.WorkflowInfo {
	e.Helper()
	wi, err := e.b.GetWorkflow(e.ctx, id)
	if err != nil {
		e.Fatalf("GetWorkflow %s: %v", id, err)
	}
	if wi == nil || wi.ID != id {
		e.Fatalf("GetWorkflow %s returned %+v", id, wi)
	}
	return wi
}

// wfTask returns the task of wi with ID id.
func (e *env) wfTask(wi *base.WorkflowInfo, id string) *base.WorkflowTaskInfo {
	e.Helper()
	for _, t := range wi.Tasks {
		if t.ID == id {
			return t
		}
	}
	e.Fatalf("workflow %s has no task %q", wi.ID, id)
	return nil
}

// wantOutcome fails unless task of workflow wf finished with o and err.
func (e *env) wantOutcome(wf, task string, o base.Outcome, lastErr string) *base.WorkflowTaskInfo {
	e.Helper()
	t := e.wfTask(e.wfInfo(wf), task)
	if t.Outcome != o || t.LastErr != lastErr {
		e.Fatalf("workflow %s task %s: outcome %q, LastErr %q; want %q, %q", wf, task, t.Outcome, t.LastErr, o, lastErr)
	}
	if (o == base.OutcomeNone) != t.FinishedAt.IsZero() {
		e.Fatalf("workflow %s task %s: outcome %q with FinishedAt %v", wf, task, o, fmtTime(t.FinishedAt))
	}
	return t
}

// deps returns DependencyResults of a lease and fails the test on error.
func (e *env) deps(l *broker.Lease) []base.DependencyResult {
	e.Helper()
	rs, err := e.b.DependencyResults(e.ctx, l.Ref())
	if err != nil {
		e.Fatalf("DependencyResults %s: %v", l.Msg.ID, err)
	}
	return rs
}

// wantDeps fails unless rs are, in order, the given "id=outcome" pairs.
func wantDeps(e *env, what string, rs []base.DependencyResult, want ...string) {
	e.Helper()
	got := make([]string, len(rs))
	for i, r := range rs {
		got[i] = r.ID + "=" + r.Outcome.String()
	}
	if !slices.Equal(got, want) {
		e.Fatalf("%s: dependency results %v, want %v", what, got, want)
	}
}

// wantWFState fails unless the workflow sums up to s.
func (e *env) wantWFState(id string, s base.WorkflowState) *base.WorkflowInfo {
	e.Helper()
	wi := e.wfInfo(id)
	if got := wi.State(); got != s {
		e.Fatalf("workflow %s is %s, want %s", id, got, s)
	}
	return wi
}

func workflowTests() []testCase {
	return []testCase{
		{"ChainRunsInOrder", testWorkflowChain},
		{"FanOutFanIn", testWorkflowFanIn},
		{"ResultsReachDependents", testWorkflowResults},
		{"FailureCancelsDownstream", testWorkflowCancelCascade},
		{"RunAnywaySeesFailure", testWorkflowRunAnyway},
		{"DeleteCancelsDownstream", testWorkflowDelete},
		{"ArchiveTaskCancelsDownstream", testWorkflowArchiveTask},
		{"BulkOpsApplyRules", testWorkflowBulk},
		{"CanceledTaskReleasesLock", testWorkflowCanceledLock},
		{"RefusesBadGraphs", testWorkflowValidation},
		{"AllOrNothing", testWorkflowAllOrNothing},
		{"Idempotent", testWorkflowIdempotent},
		{"AcrossQueues", testWorkflowQueues},
		{"ProcessAtOnRelease", testWorkflowProcessAt},
		{"Cancel", testWorkflowCancel},
		{"CanceledNotRetried", testWorkflowCanceledRetry},
		{"Retention", testWorkflowRetention},
		{"WaitingState", testWorkflowWaitingState},
		{"PlainEnqueueRefused", testWorkflowPlainEnqueue},
		{"DependencyResultsNeedLease", testWorkflowDepsLease},
		{"RecoveredTaskFails", testWorkflowRecovered},
		{"ConcurrentLastDependencies", testWorkflowConcurrent},
		{"EventsLogged", testWorkflowEvents},
		{"ReleasedAmongKeys", testWorkflowReleasedAmongKeys},
		{"CanceledAmongKeys", testWorkflowCanceledAmongKeys},
		{"PrioritiesAndKeys", testWorkflowPrioritiesAndKeys},
		{"CanceledInLanes", testWorkflowCanceledInLanes},
	}
}

// testWorkflowEvents: EnqueueWorkflow logs its tasks as enqueued, a
// release is logged as released and a cancellation as canceled (with its
// reason), each after the change that caused it.
func testWorkflowEvents(e *env) {
	e.enqueueWF(e.workflow("ev", node{id: "a"}, node{id: "b", deps: []string{"a"}}, node{id: "c", deps: []string{"b"}},
		node{id: "r", run: []string{"b"}}))
	e.complete(e.fetchID("default", "ev.a").Ref())
	e.archive(e.fetchID("default", "ev.b").Ref(), "x")
	if _, err := e.b.CancelWorkflow(e.ctx, "ev"); err != nil {
		e.Fatal(err)
	}
	b := e.readLog("default", broker.CursorStart, 100)
	e.wantLog("default", b.Events, []logged{
		{broker.LogEnqueued, "ev.a", base.StatePending, "", Epoch},
		{broker.LogEnqueued, "ev.b", base.StateWaiting, "", Epoch},
		{broker.LogEnqueued, "ev.c", base.StateWaiting, "", Epoch},
		{broker.LogEnqueued, "ev.r", base.StateWaiting, "", Epoch},
		{broker.LogStarted, "ev.a", base.StateActive, "", Epoch},
		{broker.LogSucceeded, "ev.a", 0, "", Epoch},
		{broker.LogReleased, "ev.b", base.StatePending, "", Epoch},
		{broker.LogStarted, "ev.b", base.StateActive, "", Epoch},
		{broker.LogFailed, "ev.b", base.StateArchived, "x", Epoch},
		{broker.LogCanceled, "ev.c", base.StateArchived, base.CanceledByDependency("b", base.OutcomeFailed), Epoch},
		{broker.LogReleased, "ev.r", base.StatePending, "", Epoch},
		{broker.LogCanceled, "ev.r", base.StateArchived, base.CanceledByWorkflow(), Epoch},
	})
}

func testWorkflowChain(e *env) {
	e.enqueueWF(e.workflow("w", node{id: "a"}, node{id: "b", deps: []string{"a"}}, node{id: "c", deps: []string{"b"}}))
	ti := e.wantState("default", "w.a", base.StatePending)
	if ti.Message.Workflow != "w" || ti.Message.WorkflowTask != "a" {
		e.Fatalf("task w.a: Workflow %q, WorkflowTask %q; want w, a", ti.Message.Workflow, ti.Message.WorkflowTask)
	}
	e.wantState("default", "w.b", base.StateWaiting)
	e.wantState("default", "w.c", base.StateWaiting)
	wi := e.wantWFState("w", base.WorkflowRunning)
	wantTime(e, "CreatedAt", wi.CreatedAt, Epoch)
	if len(wi.Tasks) != 3 || wi.Tasks[0].ID != "a" || wi.Tasks[2].ID != "c" {
		e.Fatalf("workflow tasks %+v, want a, b, c in order", wi.Tasks)
	}
	c := e.wfTask(wi, "c")
	if c.Queue != "default" || c.TaskID != "w.c" || c.State != base.StateWaiting ||
		!slices.Equal(c.DependsOn, []base.Dependency{{Task: "b"}}) {
		e.Fatalf("workflow task c: %+v", c)
	}
	for _, id := range []string{"a", "b", "c"} {
		l := e.fetchID("default", "w."+id)
		if l.Msg.Workflow != "w" || l.Msg.WorkflowTask != id {
			e.Fatalf("lease of w.%s: Workflow %q, WorkflowTask %q", id, l.Msg.Workflow, l.Msg.WorkflowTask)
		}
		e.fetchNone("default")
		e.advance(time.Second)
		e.complete(l.Ref())
		e.wantOutcome("w", id, base.OutcomeSucceeded, "")
	}
	e.wantGone("default", "w.c")
	wi = e.wantWFState("w", base.WorkflowSucceeded)
	wantTime(e, "FinishedAt", wi.FinishedAt, Epoch.Add(3*time.Second))
	if s := e.wfTask(wi, "a").State; s != 0 {
		e.Fatalf("state of a task deleted at completion: %v, want 0", s)
	}
}

func testWorkflowFanIn(e *env) {
	nodes := []node{{id: "a"}}
	var mids []string
	for i := range 5 {
		id := fmt.Sprint("b", i)
		mids = append(mids, id)
		nodes = append(nodes, node{id: id, deps: []string{"a"}})
	}
	nodes = append(nodes, node{id: "c", deps: mids})
	e.enqueueWF(e.workflow("f", nodes...))
	e.complete(e.fetchID("default", "f.a").Ref())
	ls := e.fetchN("default", 10)
	if len(ls) != 5 {
		e.Fatalf("after a completed: fetched %v, want the five b tasks", leaseIDs(ls))
	}
	for i, l := range ls {
		wantDeps(e, "task "+l.Msg.ID, e.deps(l), "a=succeeded")
		e.complete(l.Ref())
		if i < len(ls)-1 {
			e.wantState("default", "f.c", base.StateWaiting)
		}
	}
	l := e.fetchID("default", "f.c")
	wantDeps(e, "task f.c", e.deps(l), "b0=succeeded", "b1=succeeded", "b2=succeeded", "b3=succeeded", "b4=succeeded")
	e.complete(l.Ref())
	e.wantWFState("f", base.WorkflowSucceeded)
}

func testWorkflowResults(e *env) {
	e.enqueueWF(e.workflow("r", node{id: "a"}, node{id: "b"}, node{id: "c", deps: []string{"a"}, run: []string{"b"}}))
	la := e.fetchID("default", "r.a")
	lb := e.fetchID("default", "r.b")
	wantNoErr(e, "WriteResult", e.b.WriteResult(e.ctx, la.Ref(), []byte("result of a")))
	e.complete(la.Ref())
	e.wantState("default", "r.c", base.StateWaiting)
	wantNoErr(e, "WriteResult", e.b.WriteResult(e.ctx, lb.Ref(), []byte("partial")))
	e.archive(lb.Ref(), "b broke")
	lc := e.fetchID("default", "r.c")
	rs := e.deps(lc)
	wantDeps(e, "task r.c", rs, "a=succeeded", "b=failed")
	a, b := rs[0], rs[1]
	if string(a.Result) != "result of a" || a.LastErr != "" || a.TaskID != "r.a" || a.Queue != "default" || a.Policy != base.CancelOnFailure {
		e.Fatalf("result of a: %+v", a)
	}
	if b.LastErr != "b broke" || b.Result != nil || b.Policy != base.RunOnFailure {
		e.Fatalf("result of failed b: %+v (a failed task's result is not kept)", b)
	}
	if got := e.wfTask(e.wfInfo("r"), "a").Result; string(got) != "result of a" {
		e.Fatalf("GetWorkflow: result of a = %q", got)
	}
	e.complete(lc.Ref())
	e.wantWFState("r", base.WorkflowFailed)
}

func testWorkflowCancelCascade(e *env) {
	e.enqueueWF(e.workflow("x",
		node{id: "a"},
		node{id: "b", deps: []string{"a"}},
		node{id: "c", deps: []string{"b"}},
		node{id: "d", run: []string{"a"}},
		node{id: "e", run: []string{"b"}},
		node{id: "f", deps: []string{"d"}}))
	l := e.fetchID("default", "x.a")
	e.advance(time.Second)
	e.archive(l.Ref(), "a failed")
	e.wantOutcome("x", "a", base.OutcomeFailed, "a failed")
	for _, c := range []struct {
		id, dep string
		o       base.Outcome
	}{{"b", "a", base.OutcomeFailed}, {"c", "b", base.OutcomeCanceled}} {
		msg := base.CanceledByDependency(c.dep, c.o)
		ti := e.wantState("default", "x."+c.id, base.StateArchived)
		wantBookkeeping(e, "canceled task x."+c.id, ti.Message, 0, msg, Epoch.Add(time.Second))
		e.wantOutcome("x", c.id, base.OutcomeCanceled, msg)
	}
	if got := base.CanceledByDependency("a", base.OutcomeFailed); got != `htq: canceled: dependency "a" failed` {
		e.Fatalf("CanceledByDependency = %q", got)
	}
	// d runs anyway after a; e runs anyway after b (canceled); f waits
	// for d.
	ids := e.drain("default")
	slices.Sort(ids)
	wantIDs(e, "released after the failure", ids, []string{"x.d", "x.e"})
	e.wantState("default", "x.f", base.StateWaiting)
	e.wantWFState("x", base.WorkflowRunning)
}

func testWorkflowRunAnyway(e *env) {
	e.enqueueWF(e.workflow("y", node{id: "a"}, node{id: "b", deps: []string{"a"}}, node{id: "c", run: []string{"b"}}))
	e.archive(e.fetchID("default", "y.a").Ref(), "boom")
	l := e.fetchID("default", "y.c")
	rs := e.deps(l)
	wantDeps(e, "task y.c", rs, "b=canceled")
	if rs[0].LastErr != base.CanceledByDependency("a", base.OutcomeFailed) {
		e.Fatalf("LastErr of canceled b = %q", rs[0].LastErr)
	}
	e.complete(l.Ref())
	wi := e.wantWFState("y", base.WorkflowFailed)
	if wi.FinishedAt.IsZero() {
		e.Fatal("FinishedAt of a finished workflow is zero")
	}
}

func testWorkflowDelete(e *env) {
	e.enqueueWF(e.workflow("d", node{id: "a"}, node{id: "b", deps: []string{"a"}}, node{id: "c", deps: []string{"b"}},
		node{id: "r", run: []string{"b"}}))
	// Deleting a waiting task cancels what depends on it.
	wantNoErr(e, "DeleteTask waiting", e.b.DeleteTask(e.ctx, "default", "d.b"))
	e.wantGone("default", "d.b")
	e.wantOutcome("d", "b", base.OutcomeDeleted, "")
	e.wantOutcome("d", "c", base.OutcomeCanceled, base.CanceledByDependency("b", base.OutcomeDeleted))
	e.wantState("default", "d.c", base.StateArchived)
	// r runs anyway; a is untouched.
	ids := e.drain("default")
	slices.Sort(ids)
	wantIDs(e, "pending after the delete", ids, []string{"d.a", "d.r"})
	if s := e.wfTask(e.wfInfo("d"), "b").State; s != 0 {
		e.Fatalf("state of the deleted task: %v, want 0", s)
	}
	// Deleting a finished task changes nothing in its workflow.
	wantNoErr(e, "DeleteTask canceled", e.b.DeleteTask(e.ctx, "default", "d.c"))
	e.wantOutcome("d", "c", base.OutcomeCanceled, base.CanceledByDependency("b", base.OutcomeDeleted))
}

func testWorkflowArchiveTask(e *env) {
	e.enqueueWF(e.workflow("t", node{id: "a"}, node{id: "b", deps: []string{"a"}}, node{id: "c", deps: []string{"b"}}))
	wantNoErr(e, "ArchiveTask pending", e.b.ArchiveTask(e.ctx, "default", "t.a"))
	e.wantOutcome("t", "a", base.OutcomeFailed, "")
	e.wantOutcome("t", "b", base.OutcomeCanceled, base.CanceledByDependency("a", base.OutcomeFailed))
	e.wantOutcome("t", "c", base.OutcomeCanceled, base.CanceledByDependency("b", base.OutcomeCanceled))
	e.wantWFState("t", base.WorkflowFailed)
	// Running the failed task by hand runs it alone.
	wantNoErr(e, "RunTask archived", e.b.RunTask(e.ctx, "default", "t.a"))
	e.complete(e.fetchID("default", "t.a").Ref())
	e.wantOutcome("t", "a", base.OutcomeFailed, "")
	e.fetchNone("default")
	e.wantState("default", "t.b", base.StateArchived)
	// A waiting task can be archived too.
	e.enqueueWF(e.workflow("u", node{id: "a"}, node{id: "b", deps: []string{"a"}}, node{id: "c", deps: []string{"b"}}))
	wantNoErr(e, "ArchiveTask waiting", e.b.ArchiveTask(e.ctx, "default", "u.b"))
	e.wantState("default", "u.b", base.StateArchived)
	e.wantOutcome("u", "b", base.OutcomeFailed, "")
	e.wantOutcome("u", "c", base.OutcomeCanceled, base.CanceledByDependency("b", base.OutcomeFailed))
	e.complete(e.fetchID("default", "u.a").Ref())
	e.fetchNone("default")
}

func testWorkflowBulk(e *env) {
	e.enqueueWF(e.workflow("b1", node{id: "a"}, node{id: "b", deps: []string{"a"}}, node{id: "c", deps: []string{"b"}}))
	e.enqueueWF(e.workflow("b2", node{id: "a"}, node{id: "b", run: []string{"a"}}))
	// b1.b and b1.c wait; deleting all waiting tasks deletes b1.b (c is
	// canceled by it, or deleted by the same call: either way it is not
	// waiting any more) and b2.b.
	n, err := e.b.DeleteAll(e.ctx, "default", base.StateWaiting, "")
	wantNoErr(e, "DeleteAll waiting", err)
	if n < 2 || n > 3 {
		e.Fatalf("DeleteAll waiting changed %d tasks, want 2 or 3", n)
	}
	e.wantOutcome("b1", "b", base.OutcomeDeleted, "")
	if o := e.wfTask(e.wfInfo("b1"), "c").Outcome; o != base.OutcomeCanceled && o != base.OutcomeDeleted {
		e.Fatalf("b1 task c: outcome %q, want canceled or deleted", o)
	}
	e.wantOutcome("b2", "b", base.OutcomeDeleted, "")
	_, err = e.b.RunAll(e.ctx, "default", base.StateWaiting, "")
	wantErrIs(e, "RunAll waiting", err, base.ErrWrongState)

	e.enqueueWF(e.workflow("b3", node{id: "a"}, node{id: "b", deps: []string{"a"}}, node{id: "r", run: []string{"a"}}))
	n, err = e.b.ArchiveAll(e.ctx, "default", base.StatePending, "")
	wantNoErr(e, "ArchiveAll pending", err)
	if n != 3 {
		e.Fatalf("ArchiveAll pending changed %d tasks, want 3 (b1.a, b2.a, b3.a)", n)
	}
	e.wantOutcome("b3", "a", base.OutcomeFailed, "")
	e.wantOutcome("b3", "b", base.OutcomeCanceled, base.CanceledByDependency("a", base.OutcomeFailed))
	wantIDs(e, "pending after ArchiveAll", e.drain("default"), []string{"b3.r"})
}

func testWorkflowCanceledLock(e *env) {
	e.enqueueWF(e.workflow("l", node{id: "a"}, node{id: "b", deps: []string{"a"}, uniq: "k"}))
	m := e.newMsg("default")
	m.UniqueKey, m.UniqueTTL = "k", time.Hour
	wantErrIs(e, "Enqueue while the waiting task holds the lock", e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: m}), base.ErrDuplicateTask)
	e.archive(e.fetchID("default", "l.a").Ref(), "no")
	e.wantState("default", "l.b", base.StateArchived)
	e.enqueue(m)
}

func testWorkflowValidation(e *env) {
	check := func(what string, w *base.Workflow, target error, tasks ...string) {
		e.Helper()
		err := e.b.EnqueueWorkflow(e.ctx, w)
		wantErrIs(e, what, err, target)
		wantErrIs(e, what, err, base.ErrInvalidArgument)
		var we *base.WorkflowError
		if len(tasks) > 0 && (!errors.As(err, &we) || !slices.Equal(we.Tasks, tasks)) {
			e.Fatalf("%s: error %v names tasks %v, want %v", what, err, we, tasks)
		}
	}
	check("cycle", e.workflow("v1", node{id: "a", deps: []string{"c"}}, node{id: "b", deps: []string{"a"}}, node{id: "c", deps: []string{"b"}}),
		base.ErrWorkflowCycle, "a", "c", "b")
	check("self", e.workflow("v2", node{id: "a", deps: []string{"a"}}), base.ErrWorkflowCycle, "a")
	check("missing", e.workflow("v3", node{id: "a"}, node{id: "b", deps: []string{"zz"}}), base.ErrDependencyNotFound, "b", "zz")
	check("duplicate", e.workflow("v4", node{id: "a"}, node{id: "a"}), base.ErrDuplicateWorkflowTask, "a")
	check("empty", &base.Workflow{ID: "v5"}, base.ErrInvalidArgument)
	w := e.workflow("v6", node{id: "a"})
	w.Tasks[0].Msg.GroupKey = "g"
	check("group", w, base.ErrInvalidArgument, "a")
	w = e.workflow("v9", node{id: "a"}, node{id: "b"})
	w.Tasks[1].Msg.Priority, w.Tasks[1].Msg.Key = 2, "tenant"
	check("priority and key", w, base.ErrInvalidArgument, "b")
	w = e.workflow("v10", node{id: "a"})
	w.Tasks[0].Msg.Priority = base.MaxPriority + 1
	check("priority out of range", w, base.ErrInvalidArgument, "a")
	w = e.workflow("v7", node{id: "a"}, node{id: "b"})
	w.Tasks[1].Msg.ID = w.Tasks[0].Msg.ID
	check("same task ID", w, base.ErrDuplicateWorkflowTask, "a", "b")
	w = e.workflow("v8", node{id: "a"})
	w.Tasks[0].Msg.Workflow = "other"
	check("message of another workflow", w, base.ErrInvalidArgument, "a")
	check("bad ID", e.workflow("", node{id: "a"}), base.ErrInvalidArgument)
	if qs := e.queues(); len(qs) != 0 {
		e.Fatalf("refused workflows registered queues %v", qs)
	}
	for _, id := range []string{"v1", "v3", "v6"} {
		_, err := e.b.GetWorkflow(e.ctx, id)
		wantErrIs(e, "GetWorkflow of a refused workflow", err, base.ErrWorkflowNotFound)
	}
}

func testWorkflowAllOrNothing(e *env) {
	other := sameSlot("default")
	taken := e.newMsg(other)
	taken.ID = "n.b"
	e.enqueue(taken)
	w := e.workflow("n", node{id: "a"}, node{id: "b", queue: other}, node{id: "c", deps: []string{"a", "b"}})
	err := e.b.EnqueueWorkflow(e.ctx, w)
	wantErrIs(e, "EnqueueWorkflow with a taken task ID", err, base.ErrTaskIDConflict)
	var we *base.WorkflowError
	if !errors.As(err, &we) || !slices.Equal(we.Tasks, []string{"b"}) {
		e.Fatalf("error %v does not name task b", err)
	}
	e.wantGone("default", "n.a")
	e.wantGone("default", "n.c")
	_, err = e.b.GetWorkflow(e.ctx, "n")
	wantErrIs(e, "GetWorkflow after a refused enqueue", err, base.ErrWorkflowNotFound)
	if qs := e.queues(); !slices.Equal(qs, []string{other}) {
		e.Fatalf("Queues = %v, want [%s]", qs, other)
	}

	lock := e.newMsg("default")
	lock.UniqueKey, lock.UniqueTTL = "u", time.Hour
	e.enqueue(lock)
	err = e.b.EnqueueWorkflow(e.ctx, e.workflow("m", node{id: "a"}, node{id: "b", uniq: "u", deps: []string{"a"}}))
	wantErrIs(e, "EnqueueWorkflow with a locked unique key", err, base.ErrDuplicateTask)
	if !errors.As(err, &we) || !slices.Equal(we.Tasks, []string{"b"}) {
		e.Fatalf("error %v does not name task b", err)
	}
	e.wantGone("default", "m.a")
	// Once refused for a reason that went away, the same ID is free.
	wantNoErr(e, "DeleteTask", e.b.DeleteTask(e.ctx, "default", lock.ID))
	e.enqueueWF(e.workflow("m", node{id: "a"}, node{id: "b", uniq: "u", deps: []string{"a"}}))
	e.wantState("default", "m.b", base.StateWaiting)
}

func testWorkflowIdempotent(e *env) {
	w := e.workflow("i", node{id: "a"}, node{id: "b", deps: []string{"a"}})
	e.enqueueWF(w)
	e.enqueueWF(e.workflow("i", node{id: "a"}, node{id: "b", deps: []string{"a"}}))
	wantIDs(e, "pending", e.drain("default"), []string{"i.a"})
	// Also once the first attempt's tasks moved on.
	e.enqueueWF(e.workflow("i", node{id: "a"}, node{id: "b", deps: []string{"a"}}))
	e.fetchNone("default")
	err := e.b.EnqueueWorkflow(e.ctx, e.workflow("i", node{id: "a"}, node{id: "b", run: []string{"a"}}))
	wantErrIs(e, "EnqueueWorkflow of other content under a stored ID", err, base.ErrWorkflowIDConflict)
	e.wantState("default", "i.b", base.StateWaiting)
}

func testWorkflowQueues(e *env) {
	q1 := uniqueQueue("wfa")
	q2 := sameSlot(q1)
	ch := e.subscribe()
	e.enqueueWF(e.workflow("q", node{id: "a", queue: q1}, node{id: "b", queue: q2, deps: []string{"a"}},
		node{id: "c", queue: q1, deps: []string{"b"}}))
	e.wantState(q2, "q.b", base.StateWaiting)
	e.complete(e.fetchID(q1, "q.a").Ref())
	e.waitEvent(ch, broker.EventReady, q2)
	l := e.fetchID(q2, "q.b")
	wantDeps(e, "task q.b", e.deps(l), "a=succeeded")
	e.complete(l.Ref())
	e.waitEvent(ch, broker.EventReady, q1)
	e.complete(e.fetchID(q1, "q.c").Ref())
	wi := e.wantWFState("q", base.WorkflowSucceeded)
	if b := e.wfTask(wi, "b"); b.Queue != q2 || b.TaskID != "q.b" {
		e.Fatalf("task b: %+v", b)
	}
	qs := e.queues()
	if !slices.Contains(qs, q1) || !slices.Contains(qs, q2) {
		e.Fatalf("Queues = %v, want %s and %s", qs, q1, q2)
	}
}

func testWorkflowProcessAt(e *env) {
	at := Epoch.Add(time.Hour)
	e.enqueueWF(e.workflow("p", node{id: "a"}, node{id: "s", at: Epoch.Add(time.Minute)},
		node{id: "b", deps: []string{"a"}, at: at}, node{id: "c", deps: []string{"a"}, at: Epoch.Add(-time.Hour)}))
	e.wantState("default", "p.s", base.StateScheduled)
	e.complete(e.fetchID("default", "p.a").Ref())
	ti := e.wantState("default", "p.b", base.StateScheduled)
	wantTime(e, "NextProcessAt of the released task", ti.NextProcessAt, at)
	wantIDs(e, "pending", e.drain("default"), []string{"p.c"})
	e.advance(time.Hour)
	e.forward("default")
	ids := e.drain("default")
	slices.Sort(ids)
	wantIDs(e, "pending after the hour", ids, []string{"p.b", "p.s"})
}

func testWorkflowCancel(e *env) {
	ch := e.subscribe()
	e.enqueueWF(e.workflow("k", node{id: "a"}, node{id: "a2"}, node{id: "r"}, node{id: "s", at: Epoch.Add(time.Hour)},
		node{id: "b", deps: []string{"a"}}, node{id: "c", run: []string{"b"}}, node{id: "done"}))
	e.complete(e.fetchID("default", "k.a").Ref()) // fetched first: the oldest
	la2 := e.fetchID("default", "k.a2")
	e.retry(e.fetchID("default", "k.r").Ref(), time.Hour, "again")
	ld := e.fetchID("default", "k.done")
	e.complete(ld.Ref())
	// Now: a, done succeeded; a2 active; r retry; s scheduled; b pending;
	// c waiting.
	n, err := e.b.CancelWorkflow(e.ctx, "k")
	wantNoErr(e, "CancelWorkflow", err)
	if n != 4 {
		e.Fatalf("CancelWorkflow canceled %d tasks, want 4 (r, s, b, c)", n)
	}
	for _, id := range []string{"r", "s", "b", "c"} {
		e.wantState("default", "k."+id, base.StateArchived)
		e.wantOutcome("k", id, base.OutcomeCanceled, base.CanceledByWorkflow())
	}
	e.wantOutcome("k", "a", base.OutcomeSucceeded, "")
	e.wantState("default", "k.a2", base.StateActive)
	e.waitCancel(ch, "k.a2")
	wi := e.wantWFState("k", base.WorkflowCanceled)
	if !wi.Canceled || !wi.FinishedAt.IsZero() {
		e.Fatalf("canceled workflow with a running task: Canceled %v, FinishedAt %v", wi.Canceled, fmtTime(wi.FinishedAt))
	}
	e.complete(la2.Ref())
	e.wantOutcome("k", "a2", base.OutcomeSucceeded, "")
	wi = e.wantWFState("k", base.WorkflowCanceled)
	if wi.FinishedAt.IsZero() {
		e.Fatal("FinishedAt is zero once every task finished")
	}
	e.fetchNone("default")
	n, err = e.b.CancelWorkflow(e.ctx, "k")
	wantNoErr(e, "CancelWorkflow again", err)
	if n != 0 {
		e.Fatalf("second CancelWorkflow canceled %d tasks", n)
	}
	_, err = e.b.CancelWorkflow(e.ctx, "nope")
	wantErrIs(e, "CancelWorkflow of an unknown ID", err, base.ErrWorkflowNotFound)
}

// waitCancel waits in real time for an EventCancel of task id.
func (e *env) waitCancel(ch <-chan broker.Event, id string) {
	e.Helper()
	timer := time.NewTimer(eventTimeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				e.Fatalf("event channel closed while waiting for the cancel of %s", id)
			}
			if ev.Kind == broker.EventCancel && ev.TaskID == id {
				return
			}
		case <-timer.C:
			e.Fatalf("no EventCancel of %s within %v", id, eventTimeout)
		}
	}
}

func testWorkflowCanceledRetry(e *env) {
	e.enqueueWF(e.workflow("z", node{id: "a"}, node{id: "b", run: []string{"a"}}))
	l := e.fetchID("default", "z.a")
	_, err := e.b.CancelWorkflow(e.ctx, "z")
	wantNoErr(e, "CancelWorkflow", err)
	e.retry(l.Ref(), time.Second, "interrupted")
	ti := e.wantState("default", "z.a", base.StateArchived)
	if ti.Message.LastErr != "interrupted" {
		e.Fatalf("LastErr = %q", ti.Message.LastErr)
	}
	e.wantOutcome("z", "a", base.OutcomeFailed, "interrupted")
	e.wantOutcome("z", "b", base.OutcomeCanceled, base.CanceledByWorkflow())
	e.advance(time.Hour)
	e.forward("default")
	e.fetchNone("default")
}

func testWorkflowRetention(e *env) {
	w := e.workflow("old", node{id: "a"}, node{id: "b", deps: []string{"a"}})
	w.Retention = time.Hour
	e.enqueueWF(w)
	e.complete(e.fetchID("default", "old.a").Ref())
	e.advance(time.Minute)
	e.complete(e.fetchID("default", "old.b").Ref())
	e.enqueueWF(e.workflow("young", node{id: "a"}))
	wi := e.wfInfo("old")
	if wi.Retention != time.Hour {
		e.Fatalf("Retention = %v, want 1h", wi.Retention)
	}
	wantTime(e, "FinishedAt", wi.FinishedAt, Epoch.Add(time.Minute))
	e.advance(time.Hour - time.Second)
	n, err := e.b.DeleteExpiredWorkflows(e.ctx, "default", 10)
	wantNoErr(e, "DeleteExpiredWorkflows", err)
	if n != 0 {
		e.Fatalf("DeleteExpiredWorkflows deleted %d before the retention ran out", n)
	}
	e.advance(time.Second)
	n, err = e.b.DeleteExpiredWorkflows(e.ctx, "default", 10)
	wantNoErr(e, "DeleteExpiredWorkflows", err)
	if n != 1 {
		e.Fatalf("DeleteExpiredWorkflows deleted %d, want 1", n)
	}
	_, err = e.b.GetWorkflow(e.ctx, "old")
	wantErrIs(e, "GetWorkflow after its retention", err, base.ErrWorkflowNotFound)
	if wi := e.wantWFState("young", base.WorkflowRunning); wi.Retention != base.DefaultWorkflowRetention {
		e.Fatalf("default Retention = %v", wi.Retention)
	}
	_, err = e.b.DeleteExpiredWorkflows(e.ctx, "default", 0)
	wantErrIs(e, "DeleteExpiredWorkflows limit 0", err, base.ErrInvalidArgument)
	// Its ID is free again.
	e.enqueueWF(e.workflow("old", node{id: "x"}))
}

func testWorkflowWaitingState(e *env) {
	e.enqueueWF(e.workflow("s", node{id: "a"}, node{id: "b", deps: []string{"a"}}))
	e.advance(time.Second)
	e.enqueueWF(e.workflow("t", node{id: "a"}, node{id: "b", deps: []string{"a"}}))
	infos, err := e.b.ListTasks(e.ctx, broker.ListParams{Queue: "default", State: base.StateWaiting, Limit: 10})
	wantNoErr(e, "ListTasks waiting", err)
	got := make([]string, len(infos))
	for i, ti := range infos {
		got[i] = ti.Message.ID
		if ti.State != base.StateWaiting {
			e.Fatalf("listed waiting task %s in state %v", ti.Message.ID, ti.State)
		}
	}
	wantIDs(e, "waiting tasks", got, []string{"s.b", "t.b"})
	st, err := e.b.QueueStats(e.ctx, "default")
	wantNoErr(e, "QueueStats", err)
	if st.Waiting != 2 || st.Pending != 2 {
		e.Fatalf("QueueStats: Waiting %d, Pending %d; want 2, 2", st.Waiting, st.Pending)
	}
	wantErrIs(e, "RunTask waiting", e.b.RunTask(e.ctx, "default", "s.b"), base.ErrWrongState)
	e.wantState("default", "s.b", base.StateWaiting)
	if base.StateWaiting.String() != "waiting" {
		e.Fatalf("StateWaiting.String() = %q", base.StateWaiting)
	}
}

func testWorkflowPlainEnqueue(e *env) {
	m := e.newMsg("default")
	m.Workflow, m.WorkflowTask = "w", "a"
	wantErrIs(e, "Enqueue of a workflow message", e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: m}), base.ErrInvalidArgument)
	errs := e.b.EnqueueBatch(e.ctx, []broker.EnqueueParams{{Msg: m}})
	wantErrIs(e, "EnqueueBatch of a workflow message", errs[0], base.ErrInvalidArgument)
	e.wantGone("default", m.ID)
}

func testWorkflowDepsLease(e *env) {
	plain := e.add("default")
	l := e.fetchID("default", plain.ID)
	if rs := e.deps(l); len(rs) != 0 {
		e.Fatalf("dependencies of a plain task: %v", rs)
	}
	e.enqueueWF(e.workflow("g", node{id: "a"}, node{id: "b", deps: []string{"a"}}))
	la := e.fetchID("default", "g.a")
	if rs := e.deps(la); len(rs) != 0 {
		e.Fatalf("dependencies of a task without any: %v", rs)
	}
	stale := la.Ref()
	stale.Token = "not-the-token"
	_, err := e.b.DependencyResults(e.ctx, stale)
	wantErrIs(e, "DependencyResults with another token", err, base.ErrLeaseLost)
	e.complete(la.Ref())
	_, err = e.b.DependencyResults(e.ctx, la.Ref())
	wantErrIs(e, "DependencyResults after Complete", err, base.ErrLeaseLost)
}

func testWorkflowRecovered(e *env) {
	w := e.workflow("rc", node{id: "a"}, node{id: "b", deps: []string{"a"}})
	w.Tasks[0].Msg.MaxRetry = 0
	e.enqueueWF(w)
	l := e.fetchID("default", "rc.a")
	e.advance(leaseFor)
	wantNoErr(e, "Archive (recoverer)", e.b.Archive(e.ctx, broker.ArchiveParams{Lease: l.Ref(), ErrMsg: "lease expired", RequireExpired: true}))
	e.wantOutcome("rc", "a", base.OutcomeFailed, "lease expired")
	e.wantOutcome("rc", "b", base.OutcomeCanceled, base.CanceledByDependency("a", base.OutcomeFailed))
}

// testWorkflowConcurrent completes the last two dependencies of a task at
// the same moment from two goroutines, many times over: each dependent is
// released exactly once.
func testWorkflowConcurrent(e *env) {
	const rounds = 40
	var ws []string
	for i := range rounds {
		id := fmt.Sprint("cc", i)
		ws = append(ws, id)
		e.enqueueWF(e.workflow(id, node{id: "a1"}, node{id: "a2"}, node{id: "b", deps: []string{"a1"}, run: []string{"a2"}}))
	}
	for _, id := range ws {
		l1, l2 := e.fetchID("default", id+".a1"), e.fetchID("default", id+".a2")
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 2)
		for i, l := range []*broker.Lease{l1, l2} {
			wg.Go(func() {
				<-start
				errs[i] = e.b.Complete(e.ctx, []broker.LeaseRef{l.Ref()})[0]
			})
		}
		close(start)
		wg.Wait()
		wantNoErr(e, "Complete a1", errs[0])
		wantNoErr(e, "Complete a2", errs[1])
	}
	got := e.drain("default")
	slices.Sort(got)
	var want []string
	for _, id := range ws {
		want = append(want, id+".b")
	}
	slices.Sort(want)
	wantIDs(e, "released tasks", got, want)
}

// sameSlot returns a queue name other than q whose Redis Cluster hash
// slot (the CRC16 of the name, the hash tag of the queue's keys) is q's.
func sameSlot(q string) string {
	want := crc16(q) % 16384
	for i := 0; ; i++ {
		name := fmt.Sprintf("%s-%d", q, i)
		if crc16(name)%16384 == want {
			return name
		}
	}
}

// crc16 is the CRC-16/XMODEM of s, the checksum of Redis Cluster slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// testWorkflowReleasedAmongKeys releases a workflow task (which has no
// fair-sharing key) in a queue whose lane of a key holds tasks: it waits in
// the lane without a key and takes its turn in the rotation, as a task
// enqueued then would.
func testWorkflowReleasedAmongKeys(e *env) {
	keyed := e.addKeys("default", "t1", 6)
	e.enqueueWF(e.workflow("fk", node{id: "a"}, node{id: "b", deps: []string{"a"}}))
	var la *broker.Lease
	fetched := map[string]bool{}
	for range 3 {
		l := e.fetchOne("default")
		fetched[l.Msg.ID] = true
		if l.Msg.ID == "fk.a" {
			la = l
			break
		}
	}
	if la == nil {
		e.Fatalf("fk.a was not among the first 3 tasks fetched (%v): the lane without a key lost its turn", fetched)
	}
	e.complete(la.Ref())
	e.wantState("default", "fk.b", base.StatePending)
	rest := e.fetchEach("default")
	i := slices.Index(rest, "fk.b")
	if i < 0 || i > 1 {
		e.Fatalf("after the release, fetches gave %v: want fk.b among the first two, in its turn with key t1", rest)
	}
	for _, m := range keyed {
		if !fetched[m.ID] && !slices.Contains(rest, m.ID) {
			e.Fatalf("task %s of key t1 was never fetched (fetches: %v then %v)", m.ID, fetched, rest)
		}
	}
}

// testWorkflowCanceledAmongKeys cancels pending workflow tasks that wait in
// the lane without a key while a key's lane holds tasks: the lane they
// leave empty leaves the rotation (the invariants, checked right then,
// say so), and the key's tasks are still served.
func testWorkflowCanceledAmongKeys(e *env) {
	keyed := e.addKeys("default", "t1", 3)
	e.enqueueWF(e.workflow("fc", node{id: "x"}, node{id: "y"}, node{id: "z", deps: []string{"x"}}))
	first := e.fetchOne("default") // the rotation now holds both lanes
	n, err := e.b.CancelWorkflow(e.ctx, "fc")
	wantNoErr(e, "CancelWorkflow", err)
	want := 3
	if first.Msg.Workflow != "" {
		want = 2 // x is running: y and z are canceled
	}
	if n != want {
		e.Fatalf("CancelWorkflow canceled %d tasks, want %d (first fetched: %s)", n, want, first.Msg.ID)
	}
	e.wantState("default", "fc.y", base.StateArchived)
	e.checkInvariants() // now: a fetch would tidy the rotation up
	rest := e.fetchEach("default")
	var ids []string
	for _, m := range keyed {
		if m.ID != first.Msg.ID {
			ids = append(ids, m.ID)
		}
	}
	if !slices.Equal(rest, ids) {
		e.Fatalf("fetches after the cancellation gave %v, want the key's tasks %v", rest, ids)
	}
}

// testWorkflowPrioritiesAndKeys gives workflow tasks priorities and
// fair-sharing keys: a task pending at once waits in its lane (the highest
// priority is fetched first), and so does a task released when its
// dependency succeeds or when its ProcessAt comes; the fetched messages
// keep both fields.
func testWorkflowPrioritiesAndKeys(e *env) {
	plain := e.add("default")
	e.enqueueWF(e.workflow("wp",
		node{id: "a"},
		node{id: "top", prio: 9},
		node{id: "b", prio: 5, deps: []string{"a"}},
		node{id: "c", key: "k1", deps: []string{"a"}},
		node{id: "d", prio: 7, deps: []string{"a"}, at: e.now().Add(time.Minute)}))
	e.wantState("default", "wp.b", base.StateWaiting)
	first := e.fetchOne("default")
	if first.Msg.ID != "wp.top" || first.Msg.Priority != 9 {
		e.Fatalf("first fetch gave %s (priority %d), want wp.top of priority 9", first.Msg.ID, first.Msg.Priority)
	}
	e.complete(first.Ref())
	var la *broker.Lease
	for _, l := range e.fetchN("default", 2) {
		if l.Msg.ID == "wp.a" {
			la = l
		} else if l.Msg.ID != plain.ID {
			e.Fatalf("fetched %s before the workflow's dependencies finished", l.Msg.ID)
		} else {
			e.complete(l.Ref())
		}
	}
	if la == nil {
		e.Fatalf("wp.a was not fetched")
	}
	e.complete(la.Ref())
	e.wantState("default", "wp.b", base.StatePending)
	e.wantState("default", "wp.c", base.StatePending)
	e.wantState("default", "wp.d", base.StateScheduled)
	e.checkInvariants()
	later := e.add("default")
	lb := e.fetchOne("default")
	if lb.Msg.ID != "wp.b" || lb.Msg.Priority != 5 {
		e.Fatalf("after the release the first fetch gave %s (priority %d), want wp.b of priority 5", lb.Msg.ID, lb.Msg.Priority)
	}
	e.complete(lb.Ref())
	e.advance(time.Minute)
	e.wantForward(e.forward("default"), 1, false, 0)
	ld := e.fetchOne("default")
	if ld.Msg.ID != "wp.d" || ld.Msg.Priority != 7 {
		e.Fatalf("after its ProcessAt the first fetch gave %s (priority %d), want wp.d of priority 7", ld.Msg.ID, ld.Msg.Priority)
	}
	e.complete(ld.Ref())
	var keyed *broker.Lease
	var rest []string
	for ls := e.fetchN("default", 1); len(ls) == 1; ls = e.fetchN("default", 1) {
		rest = append(rest, ls[0].Msg.ID)
		if ls[0].Msg.ID == "wp.c" {
			keyed = ls[0]
		}
		e.complete(ls[0].Ref())
	}
	if keyed == nil || keyed.Msg.Key != "k1" || len(rest) != 2 || !slices.Contains(rest, later.ID) {
		e.Fatalf("the last fetch gave %v, want wp.c (key k1) and %s", rest, later.ID)
	}
	e.checkInvariants()
	info, err := e.b.GetWorkflow(e.ctx, "wp")
	wantNoErr(e, "GetWorkflow", err)
	if info.State() != base.WorkflowSucceeded {
		e.Fatalf("workflow state %v, want succeeded", info.State())
	}
}

// testWorkflowCanceledInLanes cancels a workflow whose pending tasks wait
// in the lanes of a priority and of a key: they leave their lanes (the
// invariants say so) and the queue serves its other tasks.
func testWorkflowCanceledInLanes(e *env) {
	other := e.addKey("default", "k2")
	e.enqueueWF(e.workflow("wl",
		node{id: "p", prio: 3},
		node{id: "k", key: "k1"},
		node{id: "w", prio: 4, deps: []string{"p"}}))
	n, err := e.b.CancelWorkflow(e.ctx, "wl")
	wantNoErr(e, "CancelWorkflow", err)
	if n != 3 {
		e.Fatalf("CancelWorkflow canceled %d tasks, want 3", n)
	}
	e.wantState("default", "wl.p", base.StateArchived)
	e.wantState("default", "wl.k", base.StateArchived)
	e.checkInvariants()
	if got := e.fetchEach("default"); !slices.Equal(got, []string{other.ID}) {
		e.Fatalf("fetches after the cancellation gave %v, want only %s", got, other.ID)
	}
}
