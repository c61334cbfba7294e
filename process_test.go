package htq

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/redistest"
)

// worker is a testworker process (internal/testworker) and the lines it
// printed.
type worker struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
	mu    sync.Mutex
	seen  []string
}

var (
	buildOnce   sync.Once
	workerPath  string
	workerBuild error
)

// buildWorker compiles internal/testworker once per test binary.
func buildWorker(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := osMkdirTemp()
		if err != nil {
			workerBuild = err
			return
		}
		workerPath = filepath.Join(dir, "testworker")
		out, err := exec.Command("go", "build", "-race", "-o", workerPath, "github.com/htqueue/htq/internal/testworker").CombinedOutput()
		if err != nil {
			workerBuild = fmt.Errorf("go build testworker: %v\n%s", err, out)
		}
	})
	if workerBuild != nil {
		t.Fatal(workerBuild)
	}
	return workerPath
}

func startWorker(t *testing.T, args ...string) *worker {
	t.Helper()
	cmd := exec.Command(buildWorker(t), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if testing.Verbose() {
		cmd.Stderr = &testLogWriter{t: t}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &worker{cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			w.mu.Lock()
			w.seen = append(w.seen, sc.Text())
			w.mu.Unlock()
			w.lines <- sc.Text()
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.done
	})
	return w
}

// waitLines waits until n lines starting with prefix have been printed.
func (w *worker) waitLines(t *testing.T, prefix string, n int, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		if len(w.linesWith(prefix)) >= n {
			return
		}
		select {
		case <-w.lines:
		case <-w.done:
			if len(w.linesWith(prefix)) >= n {
				return
			}
			t.Fatalf("worker exited after %v; waiting for %d %q lines", w.all(), n, prefix)
		case <-deadline:
			t.Fatalf("timed out waiting for %d %q lines; have %v", n, prefix, w.all())
		}
	}
}

func (w *worker) linesWith(prefix string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, l := range w.seen {
		if strings.HasPrefix(l, prefix) {
			out = append(out, strings.TrimSpace(strings.TrimPrefix(l, prefix)))
		}
	}
	return out
}

func (w *worker) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}

func (w *worker) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(d):
		t.Fatalf("worker did not exit within %v", d)
	}
}

type testLogWriter struct{ t *testing.T }

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestKilledWorkerLosesNothing: a worker process is killed with SIGKILL
// while it runs tasks; once their leases run out another server recovers
// them, and every task ends completed.
func TestKilledWorkerLosesNothing(t *testing.T) {
	t.Run("redis", func(t *testing.T) { testKilledWorker(t, redistest.URL(t)) })
	t.Run("file", func(t *testing.T) { testKilledWorker(t, "file:"+t.TempDir()) })
}

// enqueueForWorker enqueues n tasks of type "work" with opts into st and
// returns their IDs; on the embedded store it then closes st, as one
// process owns the directory and the worker about to start takes it.
func enqueueForWorker(t *testing.T, st *Storage, embedded bool, n int, opts ...Option) []string {
	t.Helper()
	c := NewClient(st)
	ids := make([]string, n)
	for i := range ids {
		info, err := c.Enqueue(NewTask("work", nil), opts...)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = info.ID
	}
	if embedded {
		st.Close()
	}
	return ids
}

func testKilledWorker(t *testing.T, url string) {
	embedded := strings.HasPrefix(url, "file:")
	st, err := Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { st.Close() }()
	ids := enqueueForWorker(t, st, embedded, 20, Queue("kill"), Retention(time.Hour))
	w := startWorker(t, "-storage", url, "-queue", "kill", "-concurrency", "4", "-lease", "1s", "-work", "200ms")
	w.waitLines(t, "start ", 6, 30*time.Second)
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w.wait(t, 10*time.Second)
	doneBeforeKill := map[string]bool{}
	for _, id := range w.linesWith("done ") {
		doneBeforeKill[id] = true
	}
	var inFlight []string
	for _, id := range w.linesWith("start ") {
		if !doneBeforeKill[id] {
			inFlight = append(inFlight, id)
		}
	}
	if len(inFlight) == 0 {
		t.Fatal("the kill found no task in flight; the test proves nothing")
	}
	t.Logf("killed with %d tasks done, %d in flight", len(doneBeforeKill), len(inFlight))
	if embedded {
		if st, err = Open(url); err != nil {
			t.Fatalf("reopen after the kill: %v", err)
		}
	}

	startServer(t, st, quietConfig(Config{Concurrency: 4, Queues: map[string]int{"kill": 1}, LeaseDuration: time.Second,
		RetryDelayFunc: func(int, error, *Task) time.Duration { return 0 }}),
		HandlerFunc(func(context.Context, *Task) error { return nil }))
	waitFor(t, 30*time.Second, "every task completed", func() bool {
		for _, id := range ids {
			if taskInfo(t, st, "kill", id).State != TaskStateCompleted {
				return false
			}
		}
		return true
	})
	for _, id := range inFlight {
		got := taskInfo(t, st, "kill", id)
		if embedded && got.Retried == 0 && got.LastErr == "" {
			// The embedded store does not sync a fetch (a crash undoes it
			// harmlessly): the task was simply pending again after the kill.
			continue
		}
		if got.Retried != 1 || got.LastErr != ErrLeaseExpired.Error() {
			t.Errorf("task %s in flight at the kill: Retried %d LastErr %q; want one retry for an expired lease", id, got.Retried, got.LastErr)
		}
	}
}

// TestSIGTERMDrains: on SIGTERM a worker fetches nothing more and lets its
// running tasks finish within ShutdownTimeout.
func TestSIGTERMDrains(t *testing.T) {
	url := redistest.URL(t)
	st, err := Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := NewClient(st)
	var ids []string
	for i := 0; i < 6; i++ {
		info, _ := c.Enqueue(NewTask("work", nil), Queue("term"), Retention(time.Hour))
		ids = append(ids, info.ID)
	}
	w := startWorker(t, "-storage", url, "-queue", "term", "-concurrency", "2", "-work", "500ms", "-shutdown-timeout", "5s")
	w.waitLines(t, "start ", 2, 30*time.Second)
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	w.wait(t, 10*time.Second)
	started, done := w.linesWith("start "), w.linesWith("done ")
	if len(started) != 2 || len(done) != 2 || len(w.linesWith("exit")) != 1 {
		t.Fatalf("after SIGTERM: %v", w.all())
	}
	states := map[TaskState]int{}
	for _, id := range ids {
		states[taskInfo(t, st, "term", id).State]++
	}
	if states[TaskStateCompleted] != 2 || states[TaskStatePending] != 4 {
		t.Fatalf("states after drain: %v, want 2 completed and 4 pending", states)
	}
}

// TestSIGTERMRequeuesPastTimeout: tasks still running when ShutdownTimeout
// runs out go back to pending, with no attempt counted.
func TestSIGTERMRequeuesPastTimeout(t *testing.T) {
	url := redistest.URL(t)
	st, err := Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := NewClient(st)
	var ids []string
	for i := 0; i < 2; i++ {
		info, _ := c.Enqueue(NewTask("work", nil), Queue("term2"))
		ids = append(ids, info.ID)
	}
	w := startWorker(t, "-storage", url, "-queue", "term2", "-concurrency", "2", "-work", "1m", "-shutdown-timeout", "300ms")
	w.waitLines(t, "start ", 2, 30*time.Second)
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	w.wait(t, 10*time.Second)
	for _, id := range ids {
		if got := taskInfo(t, st, "term2", id); got.State != TaskStatePending || got.Retried != 0 {
			t.Errorf("task %s: %v retried %d, want pending, 0", id, got.State, got.Retried)
		}
	}
}

// TestKilledWorkerReleasesKeySlots kills a worker while it runs tasks of a
// fair-sharing key held to two at a time: the slots its tasks held come
// free when their leases run out and they are recovered, so a new server
// finishes every task of the key (with the slots lost for good, the key
// would stay held back and nothing more would run).
func TestKilledWorkerReleasesKeySlots(t *testing.T) {
	t.Run("redis", func(t *testing.T) { testKilledWorkerKeySlots(t, redistest.URL(t)) })
	t.Run("file", func(t *testing.T) { testKilledWorkerKeySlots(t, "file:"+t.TempDir()) })
}

func testKilledWorkerKeySlots(t *testing.T, url string) {
	embedded := strings.HasPrefix(url, "file:")
	st, err := Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { st.Close() }()
	if err := NewInspector(st).SetQueueSettings("killkey", QueueSettings{KeyMaxConcurrency: 2}); err != nil {
		t.Fatal(err)
	}
	ids := enqueueForWorker(t, st, embedded, 8, Queue("killkey"), Key("tenant"), Retention(time.Hour))
	w := startWorker(t, "-storage", url, "-queue", "killkey", "-concurrency", "4", "-lease", "1s", "-work", "5s")
	w.waitLines(t, "start ", 2, 30*time.Second)
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w.wait(t, 10*time.Second)
	if started := len(w.linesWith("start ")); started != 2 {
		t.Fatalf("the worker ran %d tasks of the key at once, the bound is 2", started)
	}
	if embedded {
		if st, err = Open(url); err != nil {
			t.Fatalf("reopen after the kill: %v", err)
		}
	}
	var mu sync.Mutex
	running, most := 0, 0
	startServer(t, st, quietConfig(Config{Concurrency: 4, Queues: map[string]int{"killkey": 1}, LeaseDuration: time.Second,
		RetryDelayFunc: func(int, error, *Task) time.Duration { return 0 }}),
		HandlerFunc(func(context.Context, *Task) error {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) // overlap, so that the bound is tested
			mu.Lock()
			running--
			mu.Unlock()
			return nil
		}))
	waitFor(t, 30*time.Second, "every task of the key completed", func() bool {
		for _, id := range ids {
			if taskInfo(t, st, "killkey", id).State != TaskStateCompleted {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	if most > 2 {
		t.Errorf("%d tasks of the key ran at once after the kill, the bound is 2", most)
	}
}
