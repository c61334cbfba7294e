package htq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// forEachStorage runs f on Redis and on the embedded store.
func forEachStorage(t *testing.T, f func(t *testing.T, st *Storage)) {
	t.Run("redis", func(t *testing.T) { f(t, openTestStorage(t)) })
	t.Run("file", func(t *testing.T) {
		st, err := Open("file:" + t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		f(t, st)
	})
}

// TestWorkflowOnServer runs a workflow on a Server: results flow from
// each task to the ones that depend on it, a failure cancels what depends
// on it by default and lets a RunAnyway task run and see it, and the
// Inspector reports each task.
func TestWorkflowOnServer(t *testing.T) {
	forEachStorage(t, func(t *testing.T, st *Storage) {
		var mu sync.Mutex
		var order []string
		seen := map[string][]*DependencyResult{}
		report := make(chan struct{}, 1)
		h := HandlerFunc(func(ctx context.Context, task *Task) error {
			wf, id, ok := GetWorkflowID(ctx)
			if !ok || wf != "order-7" {
				return fmt.Errorf("GetWorkflowID = %q, %q, %v", wf, id, ok)
			}
			deps, err := Dependencies(ctx)
			if err != nil {
				return err
			}
			mu.Lock()
			order = append(order, id)
			seen[id] = deps
			mu.Unlock()
			switch task.Type() {
			case "fail":
				return fmt.Errorf("card declined: %w", SkipRetry)
			case "report":
				report <- struct{}{}
			}
			_, err = task.ResultWriter().Write([]byte("result of " + id))
			return err
		})
		startServer(t, st, quietConfig(Config{Concurrency: 4, Queues: map[string]int{"wf": 1}}), h)

		wf := NewWorkflow(WorkflowID("order-7"), WorkflowRetention(time.Hour))
		wf.Add("fetch", NewTask("step", nil), Queue("wf"))
		wf.Add("resize", NewTask("step", nil), Queue("wf"), DependsOn("fetch"))
		wf.Add("charge", NewTask("fail", nil), Queue("wf"), DependsOn("fetch"))
		wf.Add("ship", NewTask("step", nil), Queue("wf"), DependsOn("charge", "resize"))
		wf.Add("report", NewTask("report", nil), Queue("wf"), DependsOn("resize", "ship"), OnDependencyFailure(RunAnyway, "ship"))
		info, err := NewClient(st).EnqueueWorkflow(t.Context(), wf)
		if err != nil {
			t.Fatal(err)
		}
		if info.ID != "order-7" || len(info.Tasks) != 5 || info.Tasks[0].State != TaskStatePending ||
			info.Tasks[1].State != TaskStateWaiting || info.Tasks[1].TaskID != "order-7.resize" {
			t.Fatalf("EnqueueWorkflow returned %+v", info)
		}
		recv(t, report, 30*time.Second, "the report task")
		ins := NewInspector(st)
		var wi *WorkflowInfo
		waitFor(t, 10*time.Second, "the workflow to finish", func() bool {
			wi, err = ins.GetWorkflow("order-7")
			return err == nil && wi.State != WorkflowRunning
		})
		if wi.State != WorkflowFailed {
			t.Fatalf("workflow state %s, want failed", wi.State)
		}
		want := map[string]Outcome{"fetch": OutcomeSucceeded, "resize": OutcomeSucceeded, "charge": OutcomeFailed,
			"ship": OutcomeCanceled, "report": OutcomeSucceeded}
		for _, task := range wi.Tasks {
			if task.Outcome != want[task.ID] {
				t.Errorf("task %s: outcome %v, want %v", task.ID, task.Outcome, want[task.ID])
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if slices.Contains(order, "ship") || order[0] != "fetch" || order[len(order)-1] != "report" {
			t.Fatalf("handlers ran in order %v", order)
		}
		r := seen["report"]
		if len(r) != 2 || r[0].ID != "resize" || string(r[0].Result) != "result of resize" || r[0].Outcome != OutcomeSucceeded ||
			r[1].ID != "ship" || r[1].Outcome != OutcomeCanceled || r[1].OnFailure != RunAnyway ||
			!strings.Contains(r[1].LastErr, `dependency "charge" failed`) {
			t.Fatalf("report saw %+v %+v", r[0], r[1])
		}
		ship := taskInfo(t, st, "wf", "order-7.ship")
		if ship.State != TaskStateArchived || ship.Workflow != "order-7" || ship.WorkflowTask != "ship" {
			t.Fatalf("canceled task: %+v", ship)
		}
	})
}

// The workflow options describe themselves as the calls that made them,
// as every Option does.
func TestWorkflowOptionString(t *testing.T) {
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{DependsOn("a", "b"), `DependsOn(["a" "b"])`},
		{OnDependencyFailure(RunAnyway), `OnDependencyFailure(run, [])`},
		{OnDependencyFailure(CancelDependents, "a"), `OnDependencyFailure(cancel, ["a"])`},
	} {
		if got := tc.opt.String(); got != tc.want {
			t.Errorf("String() = %s, want %s", got, tc.want)
		}
	}
}

// TestEnqueueWorkflowErrors: every refusal names the tasks at fault and
// writes nothing.
func TestEnqueueWorkflowErrors(t *testing.T) {
	st, err := Open("mem:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := NewClient(st)
	cases := []struct {
		name  string
		build func(*Workflow)
		is    error
		tasks []string
	}{
		{"cycle", func(w *Workflow) {
			w.Add("a", NewTask("t", nil), DependsOn("b"))
			w.Add("b", NewTask("t", nil), DependsOn("a"))
		}, ErrWorkflowCycle, []string{"a", "b"}},
		{"missing", func(w *Workflow) { w.Add("a", NewTask("t", nil), DependsOn("nope")) }, ErrDependencyNotFound, []string{"a", "nope"}},
		{"duplicate", func(w *Workflow) {
			w.Add("a", NewTask("t", nil))
			w.Add("a", NewTask("t", nil))
		}, ErrDuplicateWorkflowTask, []string{"a"}},
		{"bad option", func(w *Workflow) { w.Add("a", NewTask("t", nil), MaxRetry(-1)) }, ErrInvalidArgument, []string{"a"}},
		{"group", func(w *Workflow) { w.Add("a", NewTask("t", nil), Group("g")) }, ErrInvalidArgument, []string{"a"}},
		{"priority and key", func(w *Workflow) { w.Add("a", NewTask("t", nil), Priority(3), Key("tenant")) }, ErrInvalidArgument, []string{"a"}},
		{"priority out of range", func(w *Workflow) { w.Add("a", NewTask("t", nil), Priority(10)) }, ErrInvalidArgument, []string{"a"}},
		{"policy of a stranger", func(w *Workflow) {
			w.Add("a", NewTask("t", nil))
			w.Add("b", NewTask("t", nil), DependsOn("a"), OnDependencyFailure(RunAnyway, "c"))
		}, ErrInvalidArgument, []string{"b"}},
		{"empty", func(w *Workflow) {}, ErrInvalidArgument, nil},
		{"nil task", func(w *Workflow) { w.Add("a", nil) }, ErrInvalidArgument, nil},
	}
	for _, tc := range cases {
		w := NewWorkflow()
		tc.build(w)
		_, err := c.EnqueueWorkflow(t.Context(), w)
		if !errors.Is(err, tc.is) || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.is)
			continue
		}
		var we *WorkflowError
		if tc.tasks != nil && (!errors.As(err, &we) || !slices.Equal(we.Tasks, tc.tasks)) {
			t.Errorf("%s: %v names %v, want %v", tc.name, err, we, tc.tasks)
		}
	}
	if qs, err := NewInspector(st).Queues(); err != nil || len(qs) != 0 {
		t.Fatalf("refused workflows left queues %v (%v)", qs, err)
	}
	if _, err := c.Enqueue(NewTask("t", nil), DependsOn("a")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Enqueue with DependsOn: %v", err)
	}
	if _, err := NewInspector(st).GetWorkflow("nope"); !errors.Is(err, ErrWorkflowNotFound) {
		t.Fatalf("GetWorkflow of an unknown ID: %v", err)
	}
	if _, err := c.EnqueueWorkflow(t.Context(), NewWorkflow(WorkflowID(""))); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("WorkflowID(\"\"): %v", err)
	}
	// The same workflow again is stored once; other content under its
	// ID is a conflict.
	build := func(typ string) *Workflow {
		w := NewWorkflow(WorkflowID("same"))
		w.Add("a", NewTask(typ, nil))
		return w
	}
	for range 2 {
		if _, err := c.EnqueueWorkflow(t.Context(), build("t")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.EnqueueWorkflow(t.Context(), build("other")); !errors.Is(err, ErrWorkflowIDConflict) {
		t.Fatalf("other content under a stored ID: %v", err)
	}
}

// TestCancelWorkflowStopsRunningTask: canceling a workflow archives its
// waiting tasks and cancels the handler of the running one, which is then
// not retried.
func TestCancelWorkflowStopsRunningTask(t *testing.T) {
	st := openTestStorage(t)
	started := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		close(started)
		<-ctx.Done()
		return context.Cause(ctx)
	})
	startServer(t, st, quietConfig(Config{Queues: map[string]int{"cancel": 1}}), h)
	wf := NewWorkflow(WorkflowID("long"))
	wf.Add("a", NewTask("slow", nil), Queue("cancel"), MaxRetry(5))
	wf.Add("b", NewTask("next", nil), Queue("cancel"), DependsOn("a"))
	if _, err := NewClient(st).EnqueueWorkflow(t.Context(), wf); err != nil {
		t.Fatal(err)
	}
	recv(t, started, 30*time.Second, "the first task")
	ins := NewInspector(st)
	n, err := ins.CancelWorkflow("long")
	if err != nil || n != 1 {
		t.Fatalf("CancelWorkflow = %d, %v; want 1 (b)", n, err)
	}
	waitFor(t, 10*time.Second, "the running task archived", func() bool {
		return taskInfo(t, st, "cancel", "long.a").State == TaskStateArchived
	})
	wi, err := ins.GetWorkflow("long")
	if err != nil || wi.State != WorkflowCanceled || wi.FinishedAt.IsZero() {
		t.Fatalf("GetWorkflow after cancel: %+v, %v", wi, err)
	}
	if a := wi.Tasks[0]; a.Outcome != OutcomeFailed || !strings.Contains(a.LastErr, ErrTaskCanceled.Error()) {
		t.Fatalf("canceled running task: %+v", a)
	}
}

// TestWorkflowTraced: every task of a workflow continues the trace of the
// context EnqueueWorkflow was called with.
func TestWorkflowTraced(t *testing.T) {
	forEachStorage(t, func(t *testing.T, st *Storage) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		prop := propagation.TraceContext{}
		seen := make(chan trace.SpanContext, 2)
		startServer(t, st, quietConfig(Config{TracerProvider: tp, Propagator: prop, Queues: map[string]int{"tr": 1}}),
			HandlerFunc(func(ctx context.Context, task *Task) error {
				seen <- trace.SpanContextFromContext(ctx)
				return nil
			}))
		ctx, app := tp.Tracer("app").Start(context.Background(), "app")
		wf := NewWorkflow()
		wf.Add("a", NewTask("a", nil), Queue("tr"))
		wf.Add("b", NewTask("b", nil), Queue("tr"), DependsOn("a"))
		c := NewClientWithOptions(st, ClientOptions{TracerProvider: tp, Propagator: prop})
		if _, err := c.EnqueueWorkflow(ctx, wf); err != nil {
			t.Fatal(err)
		}
		app.End()
		for range 2 {
			if sc := recv(t, seen, 30*time.Second, "a traced task"); sc.TraceID() != app.SpanContext().TraceID() {
				t.Fatalf("handler's trace %v, want the enqueuer's %v", sc.TraceID(), app.SpanContext().TraceID())
			}
		}
	})
}
