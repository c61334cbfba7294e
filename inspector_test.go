package htq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestInspectorQueueInfoAndLists(t *testing.T) {
	st := openTestStorage(t)
	c := NewClient(st)
	insp := NewInspector(st)
	for i := 0; i < 5; i++ {
		if _, err := c.Enqueue(NewTask("p", []byte(fmt.Sprint(i))), Queue("q"), TaskID(fmt.Sprintf("p%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		if _, err := c.Enqueue(NewTask("s", nil), Queue("q"), ProcessIn(time.Duration(i+1)*time.Hour), TaskID(fmt.Sprintf("s%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Enqueue(NewTask("g", nil), Queue("q"), Group("grp")); err != nil {
		t.Fatal(err)
	}
	qi, err := insp.GetQueueInfo("q")
	if err != nil {
		t.Fatal(err)
	}
	if qi.Pending != 5 || qi.Scheduled != 3 || qi.Aggregating != 1 || qi.Size != 9 || qi.Groups != 1 || qi.Paused {
		t.Fatalf("queue info: %+v", qi)
	}
	if _, err := insp.GetQueueInfo("nope"); !errors.Is(err, ErrQueueNotFound) {
		t.Fatalf("unknown queue: %v", err)
	}
	page, err := insp.ListPendingTasks("q", PageSize(2), Page(2))
	if err != nil || len(page) != 2 || page[0].ID != "p2" || page[1].ID != "p3" {
		t.Fatalf("page 2 of pending: %v %v", ids(page), err)
	}
	sched, err := insp.ListScheduledTasks("q")
	if err != nil || len(sched) != 3 || sched[0].ID != "s0" {
		t.Fatalf("scheduled: %v %v", ids(sched), err)
	}
	agg, err := insp.ListAggregatingTasks("q", "grp")
	if err != nil || len(agg) != 1 {
		t.Fatalf("aggregating: %v %v", ids(agg), err)
	}
	groups, err := insp.Groups("q")
	if err != nil || len(groups) != 1 || groups[0].Group != "grp" || groups[0].Size != 1 {
		t.Fatalf("groups: %v %v", groups, err)
	}
	if _, err := insp.ListPendingTasks("q", PageSize(0)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("PageSize(0): %v", err)
	}

	// Single-task operations.
	if err := insp.RunTask("q", "s2"); err != nil {
		t.Fatal(err)
	}
	if err := insp.ArchiveTask("q", "p0"); err != nil {
		t.Fatal(err)
	}
	if err := insp.RunTask("q", "p1"); !errors.Is(err, ErrWrongState) {
		t.Fatalf("RunTask of a pending task: %v", err)
	}
	if err := insp.DeleteTask("q", "nope"); !errors.Is(err, ErrTaskNotFound) {
		t.Fatalf("DeleteTask of a missing task: %v", err)
	}
	qi, _ = insp.GetQueueInfo("q")
	if qi.Pending != 5 || qi.Scheduled != 2 || qi.Archived != 1 {
		t.Fatalf("after run+archive: %+v", qi)
	}

	// Bulk operations.
	if n, err := insp.RunAllScheduledTasks("q"); err != nil || n != 2 {
		t.Fatalf("RunAllScheduledTasks = %d, %v", n, err)
	}
	if n, err := insp.ArchiveAllPendingTasks("q"); err != nil || n != 7 {
		t.Fatalf("ArchiveAllPendingTasks = %d, %v", n, err)
	}
	if n, err := insp.DeleteAllArchivedTasks("q"); err != nil || n != 8 {
		t.Fatalf("DeleteAllArchivedTasks = %d, %v", n, err)
	}
	if n, err := insp.DeleteAllAggregatingTasks("q", "grp"); err != nil || n != 1 {
		t.Fatalf("DeleteAllAggregatingTasks = %d, %v", n, err)
	}
	qi, _ = insp.GetQueueInfo("q")
	if qi.Size != 0 {
		t.Fatalf("queue not empty after bulk deletes: %+v", qi)
	}
	if err := insp.DeleteQueue("q", false); err != nil {
		t.Fatal(err)
	}
	if qs, _ := insp.Queues(); len(qs) != 0 {
		t.Fatalf("queues after delete: %v", qs)
	}
}

func ids(tis []*TaskInfo) []string {
	out := make([]string, len(tis))
	for i, ti := range tis {
		out[i] = ti.ID
	}
	return out
}

func TestInspectorCountersAndServers(t *testing.T) {
	st := openTestStorage(t)
	insp := NewInspector(st)
	var wg sync.WaitGroup
	wg.Add(4)
	srv := startServer(t, st, quietConfig(Config{Concurrency: 2, Queues: map[string]int{"c": 1}}), HandlerFunc(func(ctx context.Context, task *Task) error {
		defer wg.Done()
		if task.Type() == "bad" {
			return SkipRetry
		}
		return nil
	}))
	c := NewClient(st)
	for _, typ := range []string{"ok", "ok", "ok", "bad"} {
		if _, err := c.Enqueue(NewTask(typ, nil), Queue("c")); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	waitFor(t, 5*time.Second, "counters", func() bool {
		qi, err := insp.GetQueueInfo("c")
		return err == nil && qi.Processed == 4 && qi.Failed == 1 && qi.ProcessedTotal == 4 && qi.FailedTotal == 1
	})
	hist, err := insp.History("c", 3)
	if err != nil || len(hist) != 3 || hist[0].Processed != 4 || hist[0].Failed != 1 || hist[1].Processed != 0 {
		t.Fatalf("history: %+v %v", hist, err)
	}
	servers, err := insp.Servers()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range servers {
		if s.ID == srv.ID() && s.Concurrency == 2 && s.Queues["c"] == 1 {
			found = true
		}
	}
	if !found {
		t.Fatalf("server %s not listed: %+v", srv.ID(), servers)
	}
	srv.Shutdown()
	servers, _ = insp.Servers()
	for _, s := range servers {
		if s.ID == srv.ID() {
			t.Fatal("a shut-down server is still listed")
		}
	}
}

func TestPauseQueue(t *testing.T) {
	st := openTestStorage(t)
	insp := NewInspector(st)
	if err := insp.PauseQueue("paused"); err != nil { // no task yet: allowed
		t.Fatal(err)
	}
	ran := make(chan struct{}, 1)
	startServer(t, st, quietConfig(Config{Queues: map[string]int{"paused": 1}}), HandlerFunc(func(context.Context, *Task) error {
		ran <- struct{}{}
		return nil
	}))
	if _, err := NewClient(st).Enqueue(NewTask("x", nil), Queue("paused")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
		t.Fatal("a task of a paused queue ran")
	case <-time.After(300 * time.Millisecond): // nothing may happen: wait a little
	}
	qi, _ := insp.GetQueueInfo("paused")
	if !qi.Paused || qi.Pending != 1 {
		t.Fatalf("paused queue: %+v", qi)
	}
	if err := insp.UnpauseQueue("paused"); err != nil {
		t.Fatal(err)
	}
	recv(t, ran, 5*time.Second, "task after unpause")
}

func TestCancelProcessing(t *testing.T) {
	st := openTestStorage(t)
	started := make(chan string, 1)
	causes := make(chan error, 1)
	startServer(t, st, quietConfig(Config{}), HandlerFunc(func(ctx context.Context, task *Task) error {
		id, _ := GetTaskID(ctx)
		started <- id
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	}))
	info, _ := NewClient(st).Enqueue(NewTask("long", nil), MaxRetry(0))
	recv(t, started, 5*time.Second, "start")
	if err := NewInspector(st).CancelProcessing(info.ID); err != nil {
		t.Fatal(err)
	}
	if cause := recv(t, causes, 5*time.Second, "cancel"); !errors.Is(cause, ErrTaskCanceled) {
		t.Fatalf("cause %v", cause)
	}
}

func TestWaitForResult(t *testing.T) {
	st := openTestStorage(t)
	release := make(chan struct{})
	startServer(t, st, quietConfig(Config{}), HandlerFunc(func(ctx context.Context, task *Task) error {
		<-release
		_, err := task.ResultWriter().Write([]byte("42"))
		return err
	}))
	info, _ := NewClient(st).Enqueue(NewTask("answer", nil)) // no retention
	insp := NewInspector(st)
	watching := make(chan struct{})
	insp.watching = func() { close(watching) }
	type result struct {
		ti  *TaskInfo
		err error
	}
	done := make(chan result, 1)
	go func() {
		ti, err := insp.WaitForResult(context.Background(), "default", info.ID)
		done <- result{ti, err}
	}()
	recv(t, watching, 10*time.Second, "waiter watching")
	close(release)
	r := recv(t, done, 10*time.Second, "WaitForResult")
	if r.err != nil || r.ti.State != TaskStateCompleted || string(r.ti.Result) != "42" {
		t.Fatalf("WaitForResult = %+v, %v", r.ti, r.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	later, _ := NewClient(st).Enqueue(NewTask("never", nil), ProcessIn(time.Hour))
	if _, err := NewInspector(st).WaitForResult(ctx, "default", later.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForResult past ctx: %v", err)
	}
}
