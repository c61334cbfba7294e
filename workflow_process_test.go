package htq

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/redistest"
)

// TestKilledWorkerReleasesOnce: workers run fan-in workflows (a1, a2 → b)
// and are killed with SIGKILL the moment one of them prints that a
// dependency's handler returned, that is while its completion, and the
// release of b that comes with it, is being written or about to be. After
// each kill a new worker recovers the expired leases. In the end every
// workflow succeeded, no b ran before both its dependencies had succeeded,
// and every task ran once more than the kills that interrupted it, never
// more: a release made twice would run b one time too many.
func TestKilledWorkerReleasesOnce(t *testing.T) {
	t.Run("redis", func(t *testing.T) { testKilledWorkflowWorker(t, redistest.URL(t)) })
	t.Run("file", func(t *testing.T) { testKilledWorkflowWorker(t, "file:"+t.TempDir()) })
}

func testKilledWorkflowWorker(t *testing.T, url string) {
	embedded := strings.HasPrefix(url, "file:")
	st, err := Open(url)
	if err != nil {
		t.Fatal(err)
	}
	const n, rounds = 24, 4
	c := NewClient(st)
	for i := range n {
		wf := NewWorkflow(WorkflowID(fmt.Sprint("k", i)))
		wf.Add("a1", NewTask("work", nil), Queue("wfkill"))
		wf.Add("a2", NewTask("work", nil), Queue("wfkill"))
		wf.Add("b", NewTask("work", nil), Queue("wfkill"), DependsOn("a1", "a2"))
		if _, err := c.EnqueueWorkflow(t.Context(), wf); err != nil {
			t.Fatal(err)
		}
	}
	if embedded {
		st.Close() // one process owns the directory: hand it to the workers
	}
	starts := map[string]int{}      // task ID → handler starts, over every worker
	interrupted := map[string]int{} // task ID → kills while its handler ran or its outcome was unwritten
	args := []string{"-storage", url, "-queue", "wfkill", "-concurrency", "4", "-lease", "1s", "-work", "30ms", "-retry-delay", "0s"}
	count := func(w *worker, killed bool) {
		done := map[string]bool{}
		for _, id := range w.linesWith("done ") {
			done[id] = true
		}
		for _, id := range w.linesWith("start ") {
			starts[id]++
			if killed && !done[id] {
				interrupted[id]++
			}
		}
		if killed {
			// A task whose handler returned may not have had its outcome
			// written: it may run again. Count it as interrupted too; the
			// store says below whether it was.
			for id := range done {
				interrupted[id]++
			}
		}
		if bad := w.linesWith("baddeps "); len(bad) > 0 {
			t.Fatalf("a task ran before its dependencies succeeded: %v", bad)
		}
	}
	for r := range rounds {
		w := startWorker(t, args...)
		// Kill at the (r+2)-th return of a dependency's handler.
		deadline := time.After(30 * time.Second)
		for seen := 0; seen < r+2; {
			select {
			case line := <-w.lines:
				if strings.HasPrefix(line, "done ") && !strings.HasSuffix(line, ".b") {
					seen++
				}
			case <-deadline:
				t.Fatalf("round %d: no dependency finished: %v", r, w.all())
			}
		}
		if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		w.wait(t, 10*time.Second)
		count(w, true)
	}
	w := startWorker(t, args...)
	waitFor(t, 60*time.Second, "every b ran to the end", func() bool {
		done := map[string]bool{}
		for _, id := range w.linesWith("done ") {
			done[id] = true
		}
		for i := range n {
			if !done[fmt.Sprintf("k%d.b", i)] {
				return false
			}
		}
		return true
	})
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	w.wait(t, 20*time.Second)
	count(w, false)

	if embedded {
		if st, err = Open(url); err != nil {
			t.Fatal(err)
		}
	}
	defer st.Close()
	ins := NewInspector(st)
	again := 0
	for i := range n {
		wi, err := ins.GetWorkflow(fmt.Sprint("k", i))
		if err != nil {
			t.Fatal(err)
		}
		if wi.State != WorkflowSucceeded {
			t.Errorf("workflow %s is %s", wi.ID, wi.State)
		}
		for _, task := range wi.Tasks {
			id := task.TaskID
			switch s := starts[id]; {
			case s < 1:
				t.Errorf("task %s never started", id)
			case s > 1+interrupted[id]:
				t.Errorf("task %s started %d times with %d interruptions: released more than once", id, s, interrupted[id])
			case s > 1:
				again++
			}
		}
	}
	t.Logf("%d kills; %d tasks ran again after one", rounds, again)
	if err := storageCheck(st); err != nil {
		t.Fatal(err)
	}
}

// storageCheck runs the storage's own consistency check, where it has one.
func storageCheck(st *Storage) error {
	ic, ok := brokerOf(st).(interface{ CheckInvariants(context.Context) error })
	if !ok {
		return nil
	}
	return ic.CheckInvariants(context.Background())
}

// TestTwoWorkersReleaseOnce: two worker processes share fan-in workflows
// (a1, a2 → b) on Redis, so that the last two dependencies of a b are
// often finished by two servers at the same moment: every task runs
// exactly once, b only after a1 and a2 succeeded.
func TestTwoWorkersReleaseOnce(t *testing.T) {
	url := redistest.URL(t)
	st, err := Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 60
	c := NewClient(st)
	for i := range n {
		wf := NewWorkflow(WorkflowID(fmt.Sprint("two", i)))
		wf.Add("a1", NewTask("work", nil), Queue("wftwo"))
		wf.Add("a2", NewTask("work", nil), Queue("wftwo"))
		wf.Add("b", NewTask("work", nil), Queue("wftwo"), DependsOn("a1", "a2"))
		if _, err := c.EnqueueWorkflow(t.Context(), wf); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"-storage", url, "-queue", "wftwo", "-concurrency", "4", "-work", "5ms"}
	w1, w2 := startWorker(t, args...), startWorker(t, args...)
	doneB := func() int {
		k := 0
		for _, w := range []*worker{w1, w2} {
			for _, id := range w.linesWith("done ") {
				if strings.HasSuffix(id, ".b") {
					k++
				}
			}
		}
		return k
	}
	waitFor(t, 60*time.Second, "every b done", func() bool { return doneB() >= n })
	for _, w := range []*worker{w1, w2} {
		if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		w.wait(t, 20*time.Second)
	}
	starts := map[string]int{}
	byWorker := [2]int{}
	for i, w := range []*worker{w1, w2} {
		if bad := w.linesWith("baddeps "); len(bad) > 0 {
			t.Fatalf("a task ran before its dependencies succeeded: %v", bad)
		}
		for _, id := range w.linesWith("start ") {
			starts[id]++
			byWorker[i]++
		}
	}
	if len(starts) != 3*n {
		t.Fatalf("%d tasks started, want %d", len(starts), 3*n)
	}
	for id, k := range starts {
		if k != 1 {
			t.Errorf("task %s started %d times", id, k)
		}
	}
	t.Logf("tasks run by each worker: %v", byWorker)
	if err := storageCheck(st); err != nil {
		t.Fatal(err)
	}
}
